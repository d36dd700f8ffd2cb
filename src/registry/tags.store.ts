// Tags in the database: the store of TagsService and of the OCI layout import.
//
// List shape and its indexes: the common query is `uidp.children_of=<repo>` with the default kinds, which is
// `repo_uid = $1 AND kind IN (...)` ordered by (name|update_time|uid, uid): served by the (repo_uid, kind, K,
// uid) indexes, a single range scan when one kind is listed (the default). The total of such a query (no
// name, digest or updated_since filter) is the sum of the maintained per-(repo, kind) counters in tag_counts:
// a primary-key read, whatever the repo's size. Any other filter counts once, on the first page, and the
// kernel carries that total in the page token. A repo's list carries no scope predicate when the repo is
// visible (tagListQuery): its plan stays a range scan of the repo's index under any plan PostgreSQL chooses.
import { and, eq, getTableColumns, inArray, sql, type SQL } from "drizzle-orm";
import type { AnyPgColumn } from "drizzle-orm/pg-core";
import { RepoSchema } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { TagSchema } from "../../gen/chainguard/platform/registry/v2/tags_pb.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { tagCounts, tags, type TagRow, type TagWrite } from "../db/schema/index.js";
import { scopePredicateOver, scopeValues } from "../kernel/auth/index.js";
import { boundValues, countExpression, createPreparedList, listPage, type ListPage, type ListPlan, type Param, type PreparedListQuery } from "../kernel/list/index.js";
import { resourceStore, underParent, updateWhereChanged, type Executor } from "../kernel/store.js";
import { isEmptyUidp, isWithin, newChildUid, scopesOverChildren, uidpPredicate, validateUidp } from "../kernel/uidp.js";
import { tagKindOf } from "./tag-kind.js";

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

/**
 * The columns a page of tags reads: every column but the repo (a tag's uid names it) and the kind (a filter),
 * which the Tag message does not carry: less for PostgreSQL to send and for the page to decode.
 */
const { repoUid: _repo, kind: _kind, ...tagListColumns } = getTableColumns(tags);
/** A tag as a page of them reads it (tagListColumns). */
export type TagListRow = Omit<TagRow, "repoUid" | "kind">;

const tagOrderColumns = {
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

/** Whether the filter's uidp part is empty or children_of alone (the shapes listed by prepared statements). */
function isPreparedShape(filter: TagListFilter): boolean {
  const u = filter.uidp;
  return !u || isEmptyUidp(u) || (Boolean(u.childrenOf) && !u.descendantsOf && !u.ancestorsOf && !u.inRoot && u.ids.length === 0);
}

/**
 * The list statement of a filter, over named values (kernel/list/prepared.ts). The common shapes (a repo's
 * tags, or all visible tags) are prepared once per shape; any other uidp filter is built for its one call,
 * the same predicates with its values bound in place and the uidp filter written out.
 */
function tagListQuery(filter: TagListFilter, order: ListPlan["order"]): PreparedListQuery {
  const { kinds, name, digest, updatedSince } = filter;
  const preparedShape = isPreparedShape(filter);
  const repo = (preparedShape && filter.uidp?.childrenOf) || undefined;
  const counted = countedRepo(filter);
  // A repo's tags (every tag's uid is `<repo uid>/<suffix>`, upsert below): when the repo lies within a
  // visible scope, so do all its tags and the statement carries no scope predicate (scopesOverChildren).
  // Under a generic plan the scope's uid range drove a bitmap scan and a sort of the whole repo for a page.
  const over = repo === undefined ? filter.scopes : scopesOverChildren(repo, filter.scopes);
  const repoVisible = over === undefined;
  const scopes = over ?? [];
  // In uid order, the repo's tags are also said as the uid range they occupy, `<repo>/` <= uid < `<repo>0`
  // (redundant with repo_uid): a plan reading the primary key in uid order (which PostgreSQL may choose
  // when the repo holds most of the table, estimating its tags spread evenly in uid order) then starts at
  // the repo's first tag instead of walking every tag of the repos before it (20,000 rows removed by its
  // filter for a page of 50 in test/integration/list-plans.test.ts). The other orders are served by the
  // (repo, kind, K, uid) indexes.
  const repoRange = repo !== undefined && order[0]?.key === "uid";
  // The total: the repo's counters when they give it and the repo is visible, 0 when it is not, else a count.
  const totalKind = counted === undefined ? "count" : filter.scopes.some((s) => isWithin(counted, s)) ? "counters" : "zero";
  const kindIn = (column: AnyPgColumn, p: Param) =>
    kinds.length === 1 ? sql`${column} = ${p("kind_0")}` : sql`${column} in (${sql.join(kinds.map((_, i) => p(`kind_${i}`)), sql`, `)})`;
  const where = (p: Param) =>
    and(
      repoVisible ? undefined : scopePredicateOver(tags.uid, scopes.length, p),
      repo ? sql`${tags.repoUid} = ${p("repo")}` : preparedShape ? undefined : uidpPredicate(filter.uidp, { uid: tags.uid, parent: tags.repoUid }),
      repoRange ? sql`${tags.uid} >= ${p("repo_lo")} and ${tags.uid} < ${p("repo_hi")}` : undefined,
      kindIn(tags.kind, p),
      name ? sql`${tags.name} = ${p("name")}` : undefined,
      digest ? sql`${tags.digest} = ${p("digest")}` : undefined,
      updatedSince ? sql`${tags.updateTime} >= ${p("updated_since")}::timestamptz` : undefined,
    );
  const total = (p: Param): SQL => {
    if (totalKind === "zero") return sql`0`;
    if (totalKind === "counters") {
      return sql`(select coalesce(sum(${tagCounts.count}), 0) from ${tagCounts} where (${tagCounts.repoUid} = ${p("repo")} and ${kindIn(tagCounts.kind, p)}))`;
    }
    return countExpression(tags, where(p));
  };
  const values: Record<string, unknown> = { ...scopeValues(scopes), repo, name, digest, updated_since: updatedSince };
  if (repoRange) Object.assign(values, { repo_lo: `${repo}/`, repo_hi: `${repo}0` });
  kinds.forEach((k, i) => (values[`kind_${i}`] = k));
  const shape = `scopes=${repoVisible ? "repo" : scopes.length};kinds=${kinds.length};${repo ? (repoRange ? "repo-range;" : "repo;") : ""}${name ? "name;" : ""}${digest ? "digest;" : ""}${updatedSince ? "since;" : ""}${totalKind}`;
  return { shape, where, total, values };
}

export function createTagStore(db: Executor) {
  const base = resourceStore(db, { table: tags, type: TagSchema.typeName, parentType: RepoSchema.typeName });
  // The common lists (a repo's tags, or all visible tags, with the optional filters) run prepared statements.
  const prepared = createPreparedList<typeof tags, TagListRow>(db, { name: "tags", table: tags, orderColumns: tagOrderColumns, columns: tagListColumns });

  return {
    ...base,

    /**
     * Creates the tag, or moves the existing tag of that name in the repo (an upsert on (repo, name)); NOT_FOUND
     * naming the repo when it does not exist. update_time moves only when something changed. Race-safe:
     * concurrent upserts of one name yield one tag.
     */
    async upsert(t: TagWrite): Promise<TagRow> {
      const [row] = await underParent(RepoSchema.typeName, t.repoUid, () =>
        db
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
            ...updateWhereChanged({ digest: tags.digest, deprecated: tags.deprecated, bundles: tags.bundles }, { updateTime: sql`now()` }),
          })
          .returning(),
      );
      if (row) return row;
      // Nothing changed: the tag as it is.
      const [same] = await db.select().from(tags).where(and(eq(tags.repoUid, t.repoUid), eq(tags.name, t.name)));
      return same!;
    },

    /** The repo's tags among `names`. */
    byNames(repoUid: string, names: readonly string[]): Promise<TagRow[]> {
      return db
        .select()
        .from(tags)
        .where(and(eq(tags.repoUid, repoUid), inArray(tags.name, [...names])));
    },

    /** A page of tags within the caller's scopes, filtered. */
    list(plan: ListPlan, filter: TagListFilter): Promise<ListPage<TagListRow>> {
      validateUidp(filter.uidp);
      const q = tagListQuery(filter, plan.order);
      if (isPreparedShape(filter)) return prepared.page(plan, q);
      const bound = boundValues(q.values);
      return listPage(db, { table: tags, where: q.where(bound), orderColumns: tagOrderColumns, plan, total: q.total(bound) });
    },
  };
}
