// Group invites in the database (db/schema/invites.ts). An invite lives under its group (RESTRICT) and names
// a role (RESTRICT); its code exists only as a hash. Reads return rows; the role each invite promises is
// read beside them (rolesOf), one query per page.
import { and, eq, gt, inArray, sql } from "drizzle-orm";
import { GroupInviteSchema } from "../../gen/chainguard/platform/iam/v2/group_invites_pb.js";
import { GroupSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { groupInvites, roles, type GroupInviteRow, type RoleRow } from "../db/schema/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { listPage, type ListPage, type ListPlan, type OrderColumns } from "../kernel/list/index.js";
import { resourceStore, type Executor } from "../kernel/store.js";
import { uidpPredicate } from "../kernel/uidp.js";

export interface GroupInviteListFilter {
  /** The caller's visible scopes: only invites beneath one of them are listed and counted. */
  scopes: readonly string[];
  uidp: UIDPFilter | undefined;
  /** Exact key id; empty for any. */
  keyId: string;
}

const orderColumns: OrderColumns = {
  uid: groupInvites.uid,
  create_time: groupInvites.createTime,
  expiration_time: groupInvites.expirationTime,
};

export function createGroupInviteStore(db: Executor) {
  const base = resourceStore<typeof groupInvites, GroupInviteRow, typeof groupInvites.$inferInsert, "groupUid">(db, {
    table: groupInvites,
    type: GroupInviteSchema.typeName,
    parentType: GroupSchema.typeName,
    parentColumn: "groupUid",
  });

  return {
    ...base,

    /** The unexpired invite whose code has this hash, if any (not locked). */
    async findLive(codeHash: string): Promise<GroupInviteRow | undefined> {
      const [row] = await db
        .select()
        .from(groupInvites)
        .where(and(eq(groupInvites.codeHash, codeHash), gt(groupInvites.expirationTime, sql`now()`)));
      return row;
    },

    /**
     * Takes the invite for one acceptance, re-checked unexpired and unchanged: a single-use invite is deleted
     * (of concurrent acceptances exactly one deletes it), a multi-use one locked. False when it is gone.
     */
    async claim(invite: GroupInviteRow): Promise<boolean> {
      const live = and(eq(groupInvites.uid, invite.uid), eq(groupInvites.codeHash, invite.codeHash), gt(groupInvites.expirationTime, sql`now()`));
      const rows = invite.singleUse
        ? await db.delete(groupInvites).where(live).returning({ uid: groupInvites.uid })
        : await db.select({ uid: groupInvites.uid }).from(groupInvites).where(live).for("update");
      return rows.length > 0;
    },

    /** The roles of `rows`, by uid (one query). */
    async rolesOf(rows: readonly GroupInviteRow[]): Promise<Map<string, RoleRow>> {
      const uids = [...new Set(rows.map((r) => r.roleUid))];
      if (uids.length === 0) return new Map();
      const found = await db.select().from(roles).where(inArray(roles.uid, uids));
      return new Map(found.map((r) => [r.uid, r]));
    },

    /** A page of invites within the caller's scopes, filtered. */
    list(plan: ListPlan, filter: GroupInviteListFilter): Promise<ListPage<GroupInviteRow>> {
      const where = and(
        scopePredicate(groupInvites.uid, filter.scopes),
        uidpPredicate(filter.uidp, { uid: groupInvites.uid, parent: groupInvites.groupUid }),
        filter.keyId ? eq(groupInvites.keyId, filter.keyId) : undefined,
      );
      return listPage(db, { table: groupInvites, plan, orderColumns, where });
    },
  };
}
