// Manifests in the database, for ImagesService. Their rows are written by the OCI layout import; this side
// only reads them, by primary key (repo_uid, digest).
import { and, eq } from "drizzle-orm";
import { RepoSchema } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { manifests, repos, type ManifestRow } from "../db/schema/index.js";
import { notFound } from "../kernel/errors/index.js";
import type { Executor } from "../kernel/store.js";

/**
 * The resource type named when a repo holds no such manifest (the contract has no Manifest message: images
 * are addressed as `<repo uid>@<digest>`).
 */
export const MANIFEST_TYPE = "chainguard.platform.registry.v2.Manifest";

export function createManifestStore(db: Executor) {
  return {
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

export type ManifestStore = ReturnType<typeof createManifestStore>;
