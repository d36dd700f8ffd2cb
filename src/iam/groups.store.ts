// Groups in the database. Integrity is the schema's: every row beneath a group references it with
// ON DELETE RESTRICT, so a delete racing a create under the same group ends one way or the other, never with
// an orphan (the insert's foreign-key check takes a KEY SHARE lock on the parent row; the delete needs the
// row exclusively, and its RESTRICT check sees children committed before it got the row).
import { and, asc, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client.js";
import { groups, roleBindings } from "../db/schema/index.js";
import { failedPrecondition, isStillReferenced, notFound, underParent } from "../kernel/errors/index.js";
import { listPage, type ListPage, type ListPlan } from "../kernel/list/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { newChildUid, newRootUid, uidpPredicate } from "../kernel/uidp.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { managedRole } from "./managed-roles.js";

export type GroupRow = typeof groups.$inferSelect;

/** The fields a client writes. */
export interface GroupFields {
  name: string;
  description: string;
  verified: boolean;
  kind: number;
}

/** Resource type named in NOT_FOUND errors. */
export const GROUP_TYPE = "chainguard.platform.iam.v2.Group";


/** What the referencing rows are, in the API's words, from the error's table field (never its message). */
const KINDS: Readonly<Record<string, string>> = {
  groups: "sub-groups",
  identities: "identities",
  roles: "custom roles",
  role_bindings: "role bindings",
};
function blockingKind(err: unknown): string {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { table, table_name } = e as { table?: unknown; table_name?: unknown };
    const name = typeof table === "string" ? table : typeof table_name === "string" ? table_name : undefined;
    if (name) return KINDS[name] ?? "resources";
  }
  return "resources";
}

export interface GroupListFilter {
  /** The caller's visible scopes: only groups at or beneath one of them are listed and counted. */
  scopes: readonly string[];
  uidp: UIDPFilter | undefined;
  name: string;
}

export const groupOrderColumns = {
  uid: groups.uid,
  name: groups.name,
  create_time: groups.createTime,
  update_time: groups.updateTime,
} as const;

export function createGroupStore(db: Db) {
  const get = async (uid: string): Promise<GroupRow | undefined> => {
    const [row] = await db.select().from(groups).where(eq(groups.uid, uid));
    return row;
  };

  return {
    get,

    /** The group, or NOT_FOUND. */
    async require(uid: string): Promise<GroupRow> {
      const row = await get(uid);
      if (!row) throw notFound(GROUP_TYPE, uid);
      return row;
    },

    /** Creates a group under `parent`; NOT_FOUND (naming the parent) when it does not exist, also when it is deleted concurrently. */
    async createChild(parent: string, fields: GroupFields): Promise<GroupRow> {
      const [row] = await underParent(GROUP_TYPE, parent, () =>
        db
          .insert(groups)
          .values({ uid: newChildUid(parent), parentUid: parent, ...fields })
          .returning(),
      );
      return row!;
    },

    /** Creates an organization (root group) and binds `owner` to it with the managed owner role, in one transaction. */
    async createOrganization(fields: GroupFields, owner: string): Promise<GroupRow> {
      const role = managedRole("owner").uid;
      return db.transaction(async (tx) => {
        const uid = newRootUid();
        const [row] = await tx
          .insert(groups)
          .values({ uid, parentUid: null, ...fields })
          .returning();
        await tx.insert(roleBindings).values({ uid: newChildUid(uid), groupUid: uid, identityUid: owner, roleUid: role });
        return row!;
      });
    },

    /**
     * Changes a group under a row lock: `change` sees the current row and returns the new field values, or
     * undefined for no change (then nothing is written and update_time stays). NOT_FOUND when missing.
     */
    async update(uid: string, change: (current: GroupRow) => GroupFields | undefined): Promise<GroupRow> {
      return db.transaction(async (tx) => {
        const [current] = await tx.select().from(groups).where(eq(groups.uid, uid)).for("update");
        if (!current) throw notFound(GROUP_TYPE, uid);
        const fields = change(current);
        if (!fields) return current;
        const [row] = await tx
          .update(groups)
          .set({ ...fields, updateTime: sql`now()` })
          .where(eq(groups.uid, uid))
          .returning();
        return row!;
      });
    },

    /**
     * Deletes an empty group. FAILED_PRECONDITION (RESOURCE_NOT_EMPTY) while anything references it (the
     * database refuses the delete; no child is looked up first, so no race slips between check and delete):
     * sub-groups, identities, roles, role bindings, or rows of any table added later that references groups.
     * Nothing is changed then. NOT_FOUND when missing.
     */
    async delete(uid: string): Promise<void> {
      let deleted: { uid: string }[];
      try {
        deleted = await db.delete(groups).where(eq(groups.uid, uid)).returning({ uid: groups.uid });
      } catch (err) {
        if (isStillReferenced(err)) {
          throw failedPrecondition({
            type: "RESOURCE_NOT_EMPTY",
            subject: uid,
            description: `group ${uid} still contains ${blockingKind(err)}; delete what it contains first`,
          });
        }
        throw err;
      }
      if (deleted.length === 0) throw notFound(GROUP_TYPE, uid);
    },

    /** A page of groups within the caller's scopes, filtered. */
    async list(plan: ListPlan, filter: GroupListFilter): Promise<ListPage<GroupRow>> {
      const where = and(
        scopePredicate(groups.uid, filter.scopes),
        uidpPredicate(filter.uidp, { uid: groups.uid, parent: groups.parentUid }),
        filter.name ? eq(groups.name, filter.name) : undefined,
      );
      return listPage(db, { table: groups, where, orderColumns: groupOrderColumns, plan });
    },

    /** The group of the identity's oldest role binding, or undefined when it has none. */
    async oldestBindingGroup(identityUid: string): Promise<string | undefined> {
      const [row] = await db
        .select({ groupUid: roleBindings.groupUid })
        .from(roleBindings)
        .where(eq(roleBindings.identityUid, identityUid))
        .orderBy(asc(roleBindings.createTime), asc(roleBindings.uid))
        .limit(1);
      return row?.groupUid;
    },
  };
}

export type GroupStore = ReturnType<typeof createGroupStore>;
