// Tag writes shared by TagsService and the OCI layout import.
import { sql } from "drizzle-orm";
import type { Db } from "../db/client.js";
import { tags } from "../db/schema/index.js";
import { newChildUid } from "../kernel/uidp.js";
import { tagKindOf } from "./tag-kind.js";

export type TagRow = typeof tags.$inferSelect;

export interface TagWrite {
  repoUid: string;
  name: string;
  /** Must already be validated (isValidDigest). */
  digest: string;
  deprecated?: boolean;
  bundles?: string[];
}

/**
 * Creates the tag, or updates the existing tag of that name in the repo (create is an upsert on (repo, name)).
 * update_time moves only when something changed. Race-safe: concurrent upserts of one name yield one tag.
 */
export async function upsertTag(db: Db, t: TagWrite): Promise<TagRow> {
  const [row] = await db
    .insert(tags)
    .values({
      uid: newChildUid(t.repoUid),
      repoUid: t.repoUid,
      name: t.name,
      digest: t.digest,
      deprecated: t.deprecated ?? false,
      bundles: t.bundles ?? [],
      kind: tagKindOf(t.name),
    })
    .onConflictDoUpdate({
      target: [tags.repoUid, tags.name],
      set: {
        digest: sql`excluded.digest`,
        deprecated: sql`excluded.deprecated`,
        bundles: sql`excluded.bundles`,
        updateTime: sql`now()`,
      },
      setWhere: sql`(${tags.digest}, ${tags.deprecated}, ${tags.bundles}) is distinct from (excluded.digest, excluded.deprecated, excluded.bundles)`,
    })
    .returning();
  if (row) return row;
  // Nothing changed: return the tag as it is.
  const [same] = await db.select().from(tags).where(sql`${tags.repoUid} = ${t.repoUid} and ${tags.name} = ${t.name}`);
  return same!;
}
