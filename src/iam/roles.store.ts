// Roles in the database. Managed roles have no parent (uid without '/') and are never written through the
// API; custom roles live under a group (parent_uid, uid `<group>/<16 hex>`). Rows only: no generated message
// types here.
import { and, eq, inArray, isNull, not, or } from "drizzle-orm";
import { GroupSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { RoleSchema } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { roles, type RoleRow } from "../db/schema/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { listPage, type ListPage, type ListPlan, type OrderColumns } from "../kernel/list/index.js";
import { resourceStore, type Executor } from "../kernel/store.js";
import { uidpPredicate } from "../kernel/uidp.js";

/** The order_by keys of ListRoles mapped to columns. */
const roleOrderColumns: OrderColumns = {
  name: roles.name,
  create_time: roles.createTime,
  update_time: roles.updateTime,
  uid: roles.uid,
};

export interface RoleListFilter {
  uidp: UIDPFilter | undefined;
  name: string;
  /** The caller's visible scopes for CAP_IAM_ROLES_LIST: custom roles beneath them are listed. */
  scopes: readonly string[];
}

export function createRoleStore(db: Executor) {
  const base = resourceStore(db, {
    table: roles,
    type: RoleSchema.typeName,
    parentType: GroupSchema.typeName,
    parentColumn: "parentUid",
    // Only custom roles are locked, written and deleted: a managed role reads as not found there.
    writable: not(roles.managed),
    // A role still bound fails in the database (the bindings' foreign key, SQLSTATE 23503 or 23001).
    stillReferenced: (uid) => ({
      type: "RESOURCE_IN_USE",
      subject: uid,
      description: `the role ${JSON.stringify(uid)} is still bound; delete its role bindings first`,
    }),
  });

  return {
    ...base,

    /** Several roles by uid, in one query, share-locked against a concurrent change of their capabilities. */
    async findShared(uids: readonly string[]): Promise<RoleRow[]> {
      if (uids.length === 0) return [];
      return db
        .select()
        .from(roles)
        .where(inArray(roles.uid, [...new Set(uids)]))
        .for("share");
    },

    /** Managed roles, plus custom roles inside the caller's scopes, filtered; rows, pages and totals alike. */
    list(plan: ListPlan, filter: RoleListFilter): Promise<ListPage<RoleRow>> {
      const where = and(
        or(isNull(roles.parentUid), scopePredicate(roles.uid, filter.scopes)),
        uidpPredicate(filter.uidp, { uid: roles.uid, parent: roles.parentUid }),
        filter.name ? eq(roles.name, filter.name) : undefined,
      );
      return listPage(db, { table: roles, where, orderColumns: roleOrderColumns, plan });
    },
  };
}
