// Manifest reads for ImagesService. Manifests rows are written by the OCI layout import; this side only reads
// them, by primary key (repo_uid, digest).
import { and, eq, inArray } from "drizzle-orm";
import type { Db } from "../db/client.js";
import { manifests, repos } from "../db/schema/index.js";

export type ManifestRow = typeof manifests.$inferSelect;

/** The manifest `digest` of the repo, or undefined. */
export async function findManifest(db: Db, repoUid: string, digest: string): Promise<ManifestRow | undefined> {
  const [row] = await db
    .select()
    .from(manifests)
    .where(and(eq(manifests.repoUid, repoUid), eq(manifests.digest, digest)));
  return row;
}

/** The manifests of the repo among `digests` (those it holds), by digest. */
export async function findManifests(db: Db, repoUid: string, digests: readonly string[]): Promise<Map<string, ManifestRow>> {
  if (digests.length === 0) return new Map();
  const rows = await db
    .select()
    .from(manifests)
    .where(and(eq(manifests.repoUid, repoUid), inArray(manifests.digest, [...new Set(digests)])));
  return new Map(rows.map((r) => [r.digest, r]));
}

/** Whether the repo exists (asked only to tell a missing repo from a missing manifest). */
export async function repoExists(db: Db, uid: string): Promise<boolean> {
  const [row] = await db.select({ uid: repos.uid }).from(repos).where(eq(repos.uid, uid));
  return row !== undefined;
}
