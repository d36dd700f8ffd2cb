// Repos in the database. A repo references its group (ON DELETE RESTRICT): a group holding repos cannot be
// deleted, and a repo created under a group being deleted ends as NOT_FOUND. Its tags, tag counts and
// manifests go with it (ON DELETE CASCADE). The readme (up to 1 MiB) is read only by the readme methods:
// every other read selects the repo columns without it.
import { and, eq, getTableColumns, sql } from "drizzle-orm";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import type { Db } from "../db/client.js";
import { repos } from "../db/schema/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { alreadyExists, isUniqueViolation, notFound, underParent } from "../kernel/errors/index.js";
import {
  countExpression,
  keysetPage,
  pageColumns,
  type ListPage,
  type ListPlan,
} from "../kernel/list/index.js";
import { newChildUid, uidpPredicate } from "../kernel/uidp.js";
import { GROUP_TYPE } from "../iam/groups.store.js";

/** Resource types named in NOT_FOUND / ALREADY_EXISTS errors. */
export const REPO_TYPE = "chainguard.platform.registry.v2.Repo";


// Every column but the readme.
const { readme: _readme, ...repoColumns } = getTableColumns(repos);

export type RepoRow = Omit<typeof repos.$inferSelect, "readme">;
export interface ReadmeRow {
  uid: string;
  readme: string;
}

/** The fields a client writes. */
export interface RepoFields {
  name: string;
  description: string;
  catalogTier: number;
  bundles: string[];
  aliases: string[];
  activeTags: string[];
  syncConfig: Record<string, unknown> | null;
  customOverlay: Record<string, unknown> | null;
}

export interface RepoListFilter {
  /** The caller's visible scopes: only repos beneath one of them are listed and counted. */
  scopes: readonly string[];
  uidp: UIDPFilter | undefined;
  /** Exact name; empty for any. */
  name: string;
}

export const repoOrderColumns = {
  uid: repos.uid,
  name: repos.name,
  create_time: repos.createTime,
  update_time: repos.updateTime,
} as const;

export function createRepoStore(db: Db) {
  const get = async (uid: string): Promise<RepoRow | undefined> => {
    const [row] = await db.select(repoColumns).from(repos).where(eq(repos.uid, uid));
    return row;
  };

  /** ALREADY_EXISTS naming the repo that holds `name` in `group` (looked up only on this error path). */
  const nameTaken = async (group: string, name: string) => {
    const [other] = await db
      .select({ uid: repos.uid })
      .from(repos)
      .where(and(eq(repos.groupUid, group), eq(repos.name, name)));
    return alreadyExists(REPO_TYPE, other?.uid ?? `${group}/${name}`, `A repo named ${JSON.stringify(name)} already exists in group ${group}`);
  };

  return {
    get,

    /** The repo, or NOT_FOUND. */
    async require(uid: string): Promise<RepoRow> {
      const row = await get(uid);
      if (!row) throw notFound(REPO_TYPE, uid);
      return row;
    },

    /**
     * Creates a repo under the group `parent`. NOT_FOUND (naming the group) when the group does not exist,
     * also when it is deleted concurrently; ALREADY_EXISTS when the group has a repo of that name (the unique
     * index decides, so concurrent creates of one name yield one repo).
     */
    async create(parent: string, fields: RepoFields): Promise<RepoRow> {
      try {
        const [row] = await underParent(GROUP_TYPE, parent, () =>
          db
            .insert(repos)
            .values({ uid: newChildUid(parent), groupUid: parent, ...fields })
            .returning(repoColumns),
        );
        return row!;
      } catch (err) {
        if (isUniqueViolation(err)) throw await nameTaken(parent, fields.name);
        throw err;
      }
    },

    /**
     * Changes a repo under a row lock: `change` sees the current row and returns the new field values, or
     * undefined for no change (then nothing is written and update_time stays). NOT_FOUND when missing;
     * ALREADY_EXISTS when a rename takes a name used in the group.
     */
    async update(uid: string, change: (current: RepoRow) => RepoFields | undefined): Promise<RepoRow> {
      let target: RepoFields | undefined;
      let group = "";
      try {
        return await db.transaction(async (tx) => {
          const [current] = await tx.select(repoColumns).from(repos).where(eq(repos.uid, uid)).for("update");
          if (!current) throw notFound(REPO_TYPE, uid);
          group = current.groupUid;
          target = change(current);
          if (!target) return current;
          const [row] = await tx
            .update(repos)
            .set({ ...target, updateTime: sql`now()` })
            .where(eq(repos.uid, uid))
            .returning(repoColumns);
          return row!;
        });
      } catch (err) {
        if (isUniqueViolation(err) && target) throw await nameTaken(group, target.name);
        throw err;
      }
    },

    /** Deletes a repo with its tags and manifests. NOT_FOUND when missing. */
    async delete(uid: string): Promise<void> {
      const deleted = await db.delete(repos).where(eq(repos.uid, uid)).returning({ uid: repos.uid });
      if (deleted.length === 0) throw notFound(REPO_TYPE, uid);
    },

    /** A page of repos within the caller's scopes, filtered. The readme is not read. */
    async list(plan: ListPlan, filter: RepoListFilter): Promise<ListPage<RepoRow>> {
      const where = and(
        scopePredicate(repos.uid, filter.scopes),
        uidpPredicate(filter.uidp, { uid: repos.uid, parent: repos.groupUid }),
        filter.name ? eq(repos.name, filter.name) : undefined,
      );
      const total = countExpression(repos, where);
      const query = db.select({ row: repoColumns, ...pageColumns(plan, repoOrderColumns, total) }).from(repos).$dynamic();
      return keysetPage(db, query, { plan, orderColumns: repoOrderColumns, where, total });
    },

    /** The repo's readme, or NOT_FOUND. */
    async readme(uid: string): Promise<ReadmeRow> {
      const [row] = await db.select({ uid: repos.uid, readme: repos.readme }).from(repos).where(eq(repos.uid, uid));
      if (!row) throw notFound(REPO_TYPE, uid);
      return row;
    },

    /**
     * Changes the readme under a row lock: `change` returns the new content, or undefined for no change. A
     * change moves the repo's update_time. NOT_FOUND when the repo is missing.
     */
    async updateReadme(uid: string, change: (current: ReadmeRow) => string | undefined): Promise<ReadmeRow> {
      return db.transaction(async (tx) => {
        const [current] = await tx.select({ uid: repos.uid, readme: repos.readme }).from(repos).where(eq(repos.uid, uid)).for("update");
        if (!current) throw notFound(REPO_TYPE, uid);
        const content = change(current);
        if (content === undefined) return current;
        await tx.update(repos).set({ readme: content, updateTime: sql`now()` }).where(eq(repos.uid, uid));
        return { uid, readme: content };
      });
    },
  };
}

export type RepoStore = ReturnType<typeof createRepoStore>;
