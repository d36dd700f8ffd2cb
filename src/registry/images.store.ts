// Manifests in the database: written by the OCI layout import (upsertMany), read by ImagesService by
// primary key (repo_uid, digest).
import { and, eq, sql } from "drizzle-orm";
import { RepoSchema } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { manifests, repos, type ManifestRow } from "../db/schema/index.js";
import { notFound } from "../kernel/errors/index.js";
import { updateWhereChanged, type Executor } from "../kernel/store.js";

/**
 * The resource type named when a repo holds no such manifest (the contract has no Manifest message: images
 * are addressed as `<repo uid>@<digest>`).
 */
export const MANIFEST_TYPE = "chainguard.platform.registry.v2.Manifest";

/** A manifest as the import records it. */
type ManifestWrite = Omit<typeof manifests.$inferInsert, "repoUid" | "createTime">;

export function createManifestStore(db: Executor) {
  return {
    /**
     * Records the repo's manifests: new ones inserted, known ones changed only where they differ (an
     * unchanged one is not written). Counts what was inserted and what was changed.
     */
    async upsertMany(repoUid: string, rows: readonly ManifestWrite[]): Promise<{ inserted: number; updated: number }> {
      const changed = await db
        .insert(manifests)
        .values(rows.map((r) => ({ repoUid, ...r })))
        .onConflictDoUpdate({
          target: [manifests.repoUid, manifests.digest],
          ...updateWhereChanged({
            mediaType: manifests.mediaType,
            isIndex: manifests.isIndex,
            platform: manifests.platform,
            size: manifests.size,
            children: manifests.children,
            manifestSize: manifests.manifestSize,
          }),
        })
        .returning({ inserted: sql<boolean>`(xmax = 0)` });
      const inserted = changed.filter((c) => c.inserted).length;
      return { inserted, updated: changed.length - inserted };
    },

    /** The manifest `digest` of the repo, or NOT_FOUND naming the repo (when it is missing) or the manifest. */
    async get(repoUid: string, digest: string): Promise<ManifestRow> {
      const [row] = await db
        .select()
        .from(manifests)
        .where(and(eq(manifests.repoUid, repoUid), eq(manifests.digest, digest)));
      if (row) return row;
      // Asked only on this error path, to tell a missing repo from a missing manifest.
      const [repo] = await db.select({ uid: repos.uid }).from(repos).where(eq(repos.uid, repoUid));
      if (!repo) throw notFound(RepoSchema.typeName, repoUid);
      throw notFound(MANIFEST_TYPE, `${repoUid}@${digest}`, `The repo ${repoUid} holds no manifest ${digest}`);
    },
  };
}
