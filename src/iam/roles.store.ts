// Role queries. Managed roles have no parent (uid without '/'); custom roles live under a group
// (parent_uid, uid `<group>/<16 hex>`). Rows only: no generated message types here.
import { and, eq, isNull, not, or, sql, type SQL } from "drizzle-orm";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { roles } from "../db/schema/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { failedPrecondition, isStillReferenced, underParent } from "../kernel/errors/index.js";
import { listPage, type AnyPgDatabase, type ListPage, type ListPlan, type OrderColumns } from "../kernel/list/index.js";
import { uidpPredicate } from "../kernel/uidp.js";
import { GROUP_TYPE } from "./groups.store.js";

export type RoleRow = typeof roles.$inferSelect;



/** The order_by keys of ListRoles mapped to columns. */
export const roleOrderColumns: OrderColumns = {
  name: roles.name,
  create_time: roles.createTime,
  update_time: roles.updateTime,
  uid: roles.uid,
};

export async function findRole(db: AnyPgDatabase, uid: string, lock?: "update" | "share"): Promise<RoleRow | undefined> {
  const query = db.select().from(roles).where(eq(roles.uid, uid));
  const [row] = lock ? await query.for(lock) : await query;
  return row;
}

/** Several roles by uid, in one query. */
export async function findRoles(db: AnyPgDatabase, uids: readonly string[], lock?: "share"): Promise<RoleRow[]> {
  if (uids.length === 0) return [];
  const query = db
    .select()
    .from(roles)
    .where(sql`${roles.uid} in (${sql.join([...new Set(uids)].map((u) => sql`${u}`), sql`, `)})`);
  return lock ? query.for(lock) : query;
}

export interface RoleListFilters {
  uidp: UIDPFilter | undefined;
  name: string;
  /** The caller's visible scopes for CAP_IAM_ROLES_LIST: custom roles beneath them are listed. */
  scopes: readonly string[];
}

/** Managed roles, plus custom roles inside the caller's scopes, filtered; rows, pages and totals alike. */
export function listRoles(db: AnyPgDatabase, plan: ListPlan, f: RoleListFilters): Promise<ListPage<RoleRow>> {
  const parts: (SQL | undefined)[] = [
    or(isNull(roles.parentUid), scopePredicate(roles.uid, f.scopes)),
    uidpPredicate(f.uidp, { uid: roles.uid, parent: roles.parentUid }),
    f.name ? eq(roles.name, f.name) : undefined,
  ];
  return listPage(db, { table: roles, where: and(...parts), orderColumns: roleOrderColumns, plan });
}

export interface NewRole {
  uid: string;
  parentUid: string;
  name: string;
  description: string;
  capabilities: number[];
}

/** Inserts a custom role; NOT_FOUND when its parent is not a group (the foreign key decides). */
export async function insertRole(db: AnyPgDatabase, role: NewRole): Promise<RoleRow> {
  const [row] = await underParent(GROUP_TYPE, role.parentUid, () => db.insert(roles).values({ ...role, managed: false }).returning());
  return row!;
}

export interface RoleChanges {
  name: string;
  description: string;
  capabilities: number[];
}

/** Writes a custom role's fields and bumps update_time. */
export async function updateRole(db: AnyPgDatabase, uid: string, changes: RoleChanges): Promise<RoleRow> {
  const [row] = await db
    .update(roles)
    .set({ ...changes, updateTime: sql`now()` })
    .where(and(eq(roles.uid, uid), not(roles.managed)))
    .returning();
  return row!;
}

/**
 * Deletes a custom role. False when there is none with that uid. A role still bound fails in the database
 * (the bindings' foreign key, SQLSTATE 23503 or 23001): FAILED_PRECONDITION, RESOURCE_IN_USE.
 */
export async function deleteRole(db: AnyPgDatabase, uid: string): Promise<boolean> {
  try {
    const deleted = await db
      .delete(roles)
      .where(and(eq(roles.uid, uid), not(roles.managed)))
      .returning({ uid: roles.uid });
    return deleted.length > 0;
  } catch (err) {
    if (isStillReferenced(err)) {
      throw failedPrecondition({
        type: "RESOURCE_IN_USE",
        subject: uid,
        description: `the role ${JSON.stringify(uid)} is still bound; delete its role bindings first`,
      });
    }
    throw err;
  }
}
