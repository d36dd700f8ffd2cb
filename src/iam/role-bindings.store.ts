// Role binding queries. A binding is read hydrated, in one query joining its identity, group and role (the
// foreign keys make the inner joins total). Identities and groups are read straight from their tables.
import { and, eq, sql, type SQL } from "drizzle-orm";
import type { AnyPgColumn } from "drizzle-orm/pg-core";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { groups, identities, roleBindings, roles } from "../db/schema/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { alreadyExists, isUniqueViolation } from "../kernel/errors/index.js";
import {
  countExpression,
  keysetPage,
  pageColumns,
  type AnyPgDatabase,
  type ListPage,
  type ListPlan,
  type OrderColumns,
} from "../kernel/list/index.js";
import { uidpPredicate } from "../kernel/uidp.js";

/** The ResourceInfo type of role bindings. */
export const ROLE_BINDING_TYPE = "chainguard.platform.iam.v2.RoleBinding";

const hydratedFields = {
  uid: roleBindings.uid,
  groupUid: roleBindings.groupUid,
  identityUid: roleBindings.identityUid,
  roleUid: roleBindings.roleUid,
  createTime: roleBindings.createTime,
  updateTime: roleBindings.updateTime,
  identityName: identities.name,
  identityDescription: identities.description,
  identitySubject: identities.subject,
  identityIssuer: identities.issuer,
  identityEmail: identities.email,
  groupName: groups.name,
  groupDescription: groups.description,
  roleName: roles.name,
  roleDescription: roles.description,
};

/** A binding with the fields of its identity, group and role. */
export interface HydratedBinding {
  uid: string;
  groupUid: string;
  identityUid: string;
  roleUid: string;
  createTime: Date;
  updateTime: Date;
  identityName: string;
  identityDescription: string;
  identitySubject: string | null;
  identityIssuer: string | null;
  identityEmail: string;
  groupName: string;
  groupDescription: string;
  roleName: string;
  roleDescription: string;
}

export type BindingRow = typeof roleBindings.$inferSelect;

/** The order_by keys of ListRoleBindings mapped to columns. */
export const bindingOrderColumns: OrderColumns = {
  create_time: roleBindings.createTime,
  update_time: roleBindings.updateTime,
  uid: roleBindings.uid,
};

function hydrated(db: AnyPgDatabase) {
  return db
    .select(hydratedFields)
    .from(roleBindings)
    .innerJoin(identities, eq(identities.uid, roleBindings.identityUid))
    .innerJoin(groups, eq(groups.uid, roleBindings.groupUid))
    .innerJoin(roles, eq(roles.uid, roleBindings.roleUid));
}

function uidIn(column: AnyPgColumn, uids: readonly string[]): SQL {
  return sql`${column} in (${sql.join(uids.map((u) => sql`${u}`), sql`, `)})`;
}

export async function findHydrated(db: AnyPgDatabase, uid: string): Promise<HydratedBinding | undefined> {
  const [row] = await hydrated(db).where(eq(roleBindings.uid, uid));
  return row;
}

/** Hydrated bindings by uid, in the order of `uids`. */
export async function findHydratedMany(db: AnyPgDatabase, uids: readonly string[]): Promise<HydratedBinding[]> {
  if (uids.length === 0) return [];
  const rows = await hydrated(db).where(uidIn(roleBindings.uid, uids));
  const byUid = new Map(rows.map((r) => [r.uid, r]));
  return uids.map((u) => byUid.get(u)).filter((r): r is HydratedBinding => r !== undefined);
}

/** The plain row, locked for update. */
export async function lockBinding(db: AnyPgDatabase, uid: string): Promise<BindingRow | undefined> {
  const [row] = await db.select().from(roleBindings).where(eq(roleBindings.uid, uid)).for("update");
  return row;
}

export interface BindingListFilters {
  uidp: UIDPFilter | undefined;
  identity: string;
  group: string;
  role: string;
  /** The caller's visible scopes for CAP_IAM_ROLE_BINDINGS_LIST. */
  scopes: readonly string[];
}

/** One keyset query with the joins for the page; its count (first page only, a subquery) needs no join. */
export async function listBindings(db: AnyPgDatabase, plan: ListPlan, f: BindingListFilters): Promise<ListPage<HydratedBinding>> {
  const where = and(
    scopePredicate(roleBindings.groupUid, f.scopes),
    uidpPredicate(f.uidp, { uid: roleBindings.uid, parent: roleBindings.groupUid }),
    f.identity ? eq(roleBindings.identityUid, f.identity) : undefined,
    f.group ? eq(roleBindings.groupUid, f.group) : undefined,
    f.role ? eq(roleBindings.roleUid, f.role) : undefined,
  );
  const total = countExpression(roleBindings, where);
  const query = db
    .select({ row: hydratedFields, ...pageColumns(plan, bindingOrderColumns, total) })
    .from(roleBindings)
    .innerJoin(identities, eq(identities.uid, roleBindings.identityUid))
    .innerJoin(groups, eq(groups.uid, roleBindings.groupUid))
    .innerJoin(roles, eq(roles.uid, roleBindings.roleUid))
    .$dynamic();
  return keysetPage(db, query, { plan, orderColumns: bindingOrderColumns, where, total });
}

export async function findGroup(db: AnyPgDatabase, uid: string): Promise<{ uid: string } | undefined> {
  const [row] = await db.select({ uid: groups.uid }).from(groups).where(eq(groups.uid, uid));
  return row;
}

/** Which of `uids` name an identity (one query). */
export async function existingIdentities(db: AnyPgDatabase, uids: readonly string[]): Promise<Set<string>> {
  if (uids.length === 0) return new Set();
  const rows = await db
    .select({ uid: identities.uid })
    .from(identities)
    .where(uidIn(identities.uid, [...new Set(uids)]));
  return new Set(rows.map((r) => r.uid));
}

export interface NewBinding {
  uid: string;
  groupUid: string;
  identityUid: string;
  roleUid: string;
}

/**
 * Inserts bindings (ON CONFLICT DO NOTHING on (group, identity, role), so a concurrent duplicate cannot fail
 * the statement) and throws ALREADY_EXISTS, naming the existing binding, for the first one that already
 * existed. The caller runs this in a transaction, so one duplicate leaves nothing behind.
 */
export async function insertBindings(db: AnyPgDatabase, rows: readonly NewBinding[]): Promise<void> {
  if (rows.length === 0) return;
  const inserted = await db
    .insert(roleBindings)
    .values([...rows])
    .onConflictDoNothing({ target: [roleBindings.groupUid, roleBindings.identityUid, roleBindings.roleUid] })
    .returning({ uid: roleBindings.uid });
  if (inserted.length === rows.length) return;
  const done = new Set(inserted.map((r) => r.uid));
  const dup = rows.find((r) => !done.has(r.uid))!;
  throw await duplicateOf(db, dup);
}

async function duplicateOf(db: AnyPgDatabase, b: Omit<NewBinding, "uid">) {
  const [existing] = await db
    .select({ uid: roleBindings.uid })
    .from(roleBindings)
    .where(and(eq(roleBindings.groupUid, b.groupUid), eq(roleBindings.identityUid, b.identityUid), eq(roleBindings.roleUid, b.roleUid)));
  // The existing binding is named in ResourceInfo; the text stays short (errors are kept small).
  return alreadyExists(ROLE_BINDING_TYPE, existing?.uid ?? "", "a role binding of this identity to this role on this group already exists");
}

/** Changes a binding's identity and role; ALREADY_EXISTS when another binding has that combination. */
export async function updateBinding(db: AnyPgDatabase, current: BindingRow, next: { identityUid: string; roleUid: string }): Promise<void> {
  try {
    // A savepoint, so a unique violation can be answered with a query in the same transaction.
    await db.transaction(async (sp) => {
      await sp.update(roleBindings).set({ ...next, updateTime: sql`now()` }).where(eq(roleBindings.uid, current.uid));
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw await duplicateOf(db, { groupUid: current.groupUid, ...next });
    throw err;
  }
}

/** Deletes a binding; false when there is none with that uid. */
export async function deleteBinding(db: AnyPgDatabase, uid: string): Promise<boolean> {
  const deleted = await db.delete(roleBindings).where(eq(roleBindings.uid, uid)).returning({ uid: roleBindings.uid });
  return deleted.length > 0;
}
