// Repos in the database. A repo references its group (ON DELETE RESTRICT): a group holding repos cannot be
// deleted, and a repo created under a group being deleted ends as NOT_FOUND. Its tags, tag counts and
// manifests go with it (ON DELETE CASCADE). The readme (up to 1 MiB) is read only by the readme methods:
// every other read selects the repo columns without it.
import { and, eq, getTableColumns } from "drizzle-orm";
import { GroupSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { RepoSchema } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { repos, type ReadmeRow, type RepoRow } from "../db/schema/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { alreadyExists } from "../kernel/errors/index.js";
import { countExpression, keysetPage, pageColumns, type ListPage, type ListPlan } from "../kernel/list/index.js";
import { resourceStore, type Executor } from "../kernel/store.js";
import { scopesOverChildren, uidpPredicate } from "../kernel/uidp.js";

// Every column but the readme.
const { readme: _readme, ...repoColumns } = getTableColumns(repos);

interface RepoListFilter {
  /** The caller's visible scopes: only repos beneath one of them are listed and counted. */
  scopes: readonly string[];
  uidp: UIDPFilter | undefined;
  /** Exact name; empty for any. */
  name: string;
}

const repoOrderColumns = {
  uid: repos.uid,
  name: repos.name,
  create_time: repos.createTime,
  update_time: repos.updateTime,
} as const;

/** The store of the repos and of their readmes (a second resource on the same rows: the readme column). */
export function createRepoStore(db: Executor) {
  const base = resourceStore<typeof repos, RepoRow, typeof repos.$inferInsert, "groupUid">(db, {
    table: repos,
    type: RepoSchema.typeName,
    parentType: GroupSchema.typeName,
    parentColumn: "groupUid",
    columns: repoColumns,
    // A name is unique within its group (the unique index decides, so concurrent creates of one name yield
    // one repo, and a rename onto a taken name fails): ALREADY_EXISTS naming the repo that has it.
    unique: {
      columns: [repos.groupUid, repos.name],
      async taken(on, row) {
        const { groupUid, name } = row as { groupUid: string; name: string };
        const [other] = await on
          .select({ uid: repos.uid })
          .from(repos)
          .where(and(eq(repos.groupUid, groupUid), eq(repos.name, name)));
        return alreadyExists(RepoSchema.typeName, other?.uid ?? `${groupUid}/${name}`, `A repo named ${JSON.stringify(name)} already exists in group ${groupUid}`);
      },
    },
  });
  const readmes = resourceStore<typeof repos, ReadmeRow>(db, {
    table: repos,
    type: RepoSchema.typeName,
    columns: { uid: repos.uid, readme: repos.readme },
  });

  return {
    ...base,

    /** A page of repos within the caller's scopes, filtered. The readme is not read. */
    list(plan: ListPlan, filter: RepoListFilter): Promise<ListPage<RepoRow>> {
      // A group's repos within a visible scope are all visible: no scope predicate (scopesOverChildren).
      const scopes = filter.uidp?.childrenOf ? scopesOverChildren(filter.uidp.childrenOf, filter.scopes) : filter.scopes;
      const where = and(
        scopes === undefined ? undefined : scopePredicate(repos.uid, scopes),
        uidpPredicate(filter.uidp, { uid: repos.uid, parent: repos.groupUid }),
        filter.name ? eq(repos.name, filter.name) : undefined,
      );
      const total = countExpression(repos, where);
      const query = db.select({ row: repoColumns, ...pageColumns(plan, repoOrderColumns, total) }).from(repos).$dynamic();
      return keysetPage(db, query, { plan, orderColumns: repoOrderColumns, where, total });
    },

    /** The readmes of the repos: get (NOT_FOUND naming the repo), lock and write (a change moves the repo's update_time). */
    readmes: { get: readmes.get, lock: readmes.lock, write: (uid: string, readme: string) => readmes.write(uid, { readme }) },
  };
}
