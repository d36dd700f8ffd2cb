// Tag reads (get, list with its total) and delete for TagsService. Writes that create or change a tag go
// through upsertTag (tags.store.ts), shared with the OCI layout import.
//
// List shape and its indexes: the common query is `uidp.children_of=<repo>` with the default kinds, which is
// `repo_uid = $1 AND kind IN (...)` ordered by (name|update_time|uid, uid): served by the (repo_uid, kind, K,
// uid) indexes, a single range scan when one kind is listed (the default). The total of such a query (no
// name, digest or updated_since filter) is the sum of the maintained per-(repo, kind) counters in tag_counts:
// a primary-key read, whatever the repo's size. Any other filter counts once, on the first page, and the
// kernel carries that total in the page token.
import { and, eq, inArray, sql, type SQL } from "drizzle-orm";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import type { Db } from "../db/client.js";
import { tagCounts, tags } from "../db/schema/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { notFound } from "../kernel/errors/index.js";
import { listPage, type ListPage, type ListPlan } from "../kernel/list/index.js";
import { isWithin, uidpPredicate } from "../kernel/uidp.js";
import { TAG_TYPE } from "./tags.mapper.js";
import type { TagRow } from "./tags.store.js";

export interface TagListFilter {
  /** The caller's visible scopes: only tags beneath one of them are listed and counted. */
  scopes: readonly string[];
  uidp: UIDPFilter | undefined;
  /** Exact name; empty for any. */
  name: string;
  /** Exact digest; empty for any. */
  digest: string;
  /** update_time >= this instant (timestamptz text, microseconds kept), when set. */
  updatedSince: string | undefined;
  /** The tag kinds listed (TagKind values), never empty. */
  kinds: readonly number[];
}

export const tagOrderColumns = {
  uid: tags.uid,
  name: tags.name,
  create_time: tags.createTime,
  update_time: tags.updateTime,
} as const;

/** The repo whose tag counters give the total of this filter, or undefined when they cannot. */
function countedRepo(filter: TagListFilter): string | undefined {
  const u = filter.uidp;
  if (!u || !u.childrenOf || u.descendantsOf || u.ancestorsOf || u.inRoot || u.ids.length > 0) return undefined;
  if (filter.name || filter.digest || filter.updatedSince) return undefined;
  return u.childrenOf;
}

export async function getTag(db: Db, uid: string): Promise<TagRow | undefined> {
  const [row] = await db.select().from(tags).where(eq(tags.uid, uid));
  return row;
}

/** The tag, or NOT_FOUND. */
export async function requireTag(db: Db, uid: string): Promise<TagRow> {
  const row = await getTag(db, uid);
  if (!row) throw notFound(TAG_TYPE, uid);
  return row;
}

/** Deletes a tag. NOT_FOUND when missing. */
export async function deleteTag(db: Db, uid: string): Promise<void> {
  const deleted = await db.delete(tags).where(eq(tags.uid, uid)).returning({ uid: tags.uid });
  if (deleted.length === 0) throw notFound(TAG_TYPE, uid);
}

/** The number of tags of these kinds in the repo, from the maintained counters (a scalar subquery). */
export function tagCountExpression(repoUid: string, kinds: readonly number[]): SQL {
  const kind = kinds.length === 1 ? eq(tagCounts.kind, kinds[0]!) : inArray(tagCounts.kind, [...kinds]);
  return sql`(select coalesce(sum(${tagCounts.count}), 0) from ${tagCounts} where ${and(eq(tagCounts.repoUid, repoUid), kind)})`;
}

/** A page of tags within the caller's scopes, filtered. */
export async function listTags(db: Db, plan: ListPlan, filter: TagListFilter): Promise<ListPage<TagRow>> {
  const kinds = [...filter.kinds];
  const where = and(
    scopePredicate(tags.uid, filter.scopes),
    uidpPredicate(filter.uidp, { uid: tags.uid, parent: tags.repoUid }),
    kinds.length === 1 ? eq(tags.kind, kinds[0]!) : inArray(tags.kind, kinds),
    filter.name ? eq(tags.name, filter.name) : undefined,
    filter.digest ? eq(tags.digest, filter.digest) : undefined,
    filter.updatedSince ? sql`${tags.updateTime} >= ${filter.updatedSince}::timestamptz` : undefined,
  );
  const repo = countedRepo(filter);
  const total = repo === undefined ? undefined : filter.scopes.some((s) => isWithin(repo, s)) ? tagCountExpression(repo, kinds) : sql`0`;
  return listPage(db, { table: tags, where, orderColumns: tagOrderColumns, plan, ...(total ? { total } : {}) });
}
