// Role bindings in the database. A binding is read hydrated, in one query joining its identity, group and
// role (the foreign keys make the inner joins total).
//
// The list's common shapes (no uidp filter, or children_of / descendants_of, with the optional identity,
// group and role filters) run statements prepared once per shape (kernel/list/prepared.ts): the statement
// is built once, runs named on PostgreSQL, and its hydrated rows are mapped by the compiled mapper. Other
// uidp filters (ancestors_of, in_root, ids) build their statement for the one call.
import { and, eq, inArray, isNull, or, sql, type SQL } from "drizzle-orm";
import type { PgSelect } from "drizzle-orm/pg-core";
import { GroupSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { RoleBindingSchema } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { groups, identities, roleBindings, roles, type HydratedRoleBindingRow } from "../db/schema/index.js";
import { scopePredicate, scopePredicateOver, scopeValues } from "../kernel/auth/index.js";
import { alreadyExists, notFound } from "../kernel/errors/index.js";
import { countExpression, createPreparedList, keysetPage, pageColumns, type ListPage, type ListPlan, type OrderColumns, type Param, type PreparedListQuery } from "../kernel/list/index.js";
import { isTransaction, resourceStore, type Executor } from "../kernel/store.js";
import { newChildUid, uidpPredicate, validateUidp } from "../kernel/uidp.js";

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

/** The order_by keys of ListRoleBindings mapped to columns. */
const bindingOrderColumns: OrderColumns = {
  create_time: roleBindings.createTime,
  update_time: roleBindings.updateTime,
  uid: roleBindings.uid,
};

export interface BindingListFilter {
  uidp: UIDPFilter | undefined;
  identity: string;
  group: string;
  role: string;
  /** The caller's visible scopes for CAP_IAM_ROLE_BINDINGS_LIST. */
  scopes: readonly string[];
}

/** Inner joins of a binding's identity, group and role (total: every binding names existing ones). */
function hydrating(q: PgSelect): PgSelect {
  return q
    .innerJoin(identities, eq(identities.uid, roleBindings.identityUid))
    .innerJoin(groups, eq(groups.uid, roleBindings.groupUid))
    .innerJoin(roles, eq(roles.uid, roleBindings.roleUid));
}

/**
 * The prepared statement's query of a filter (over named values), or undefined for the uidp filters it does
 * not take (ancestors_of, in_root, ids). descendants_of is the uid range [<group>/, <group>0): the rows whose
 * uid begins with "<group>/" (uids are text COLLATE "C", where '0' follows '/'), an index range in any plan,
 * where a LIKE over a parameter is not.
 */
function preparedQuery(filter: BindingListFilter): PreparedListQuery | undefined {
  const u = filter.uidp;
  if (u && (u.ancestorsOf || u.inRoot || u.ids.length > 0)) return undefined;
  const { scopes, identity, group, role } = filter;
  const under = u?.descendantsOf ?? "";
  const parent = u?.childrenOf ?? "";
  const where = (p: Param): SQL | undefined =>
    and(
      scopePredicateOver(roleBindings.groupUid, scopes.length, p),
      under ? sql`${roleBindings.uid} >= ${p("under_lo")} and ${roleBindings.uid} < ${p("under_hi")}` : undefined,
      parent ? sql`${roleBindings.groupUid} = ${p("parent")}` : undefined,
      identity ? sql`${roleBindings.identityUid} = ${p("identity")}` : undefined,
      group ? sql`${roleBindings.groupUid} = ${p("group")}` : undefined,
      role ? sql`${roleBindings.roleUid} = ${p("role")}` : undefined,
    );
  const values: Record<string, unknown> = { ...scopeValues(scopes), under_lo: `${under}/`, under_hi: `${under}0`, parent, identity, group, role };
  const shape = `scopes=${scopes.length};${under ? "under;" : ""}${parent ? "parent;" : ""}${identity ? "identity;" : ""}${group ? "group;" : ""}${role ? "role;" : ""}`;
  return { shape, where, total: (p) => countExpression(roleBindings, where(p)), values };
}

export function createRoleBindingStore(db: Executor) {
  /** Bindings with their identity, group and role. */
  const hydrated = () =>
    db
      .select(hydratedFields)
      .from(roleBindings)
      .innerJoin(identities, eq(identities.uid, roleBindings.identityUid))
      .innerJoin(groups, eq(groups.uid, roleBindings.groupUid))
      .innerJoin(roles, eq(roles.uid, roleBindings.roleUid));

  const pages = createPreparedList<typeof roleBindings, HydratedRoleBindingRow>(db, {
    name: "role_bindings",
    table: roleBindings,
    orderColumns: bindingOrderColumns,
    columns: hydratedFields,
    joins: hydrating,
  });

  const base = resourceStore(db, {
    table: roleBindings,
    type: RoleBindingSchema.typeName,
    parentType: GroupSchema.typeName,
    parentColumn: "groupUid",
    // (group, identity, role) is unique: a second binding of it names the first. The text stays short.
    unique: {
      columns: [roleBindings.groupUid, roleBindings.identityUid, roleBindings.roleUid],
      async taken(on, row) {
        const b = row as { groupUid: string; identityUid: string; roleUid: string };
        const [existing] = await on
          .select({ uid: roleBindings.uid })
          .from(roleBindings)
          .where(and(eq(roleBindings.groupUid, b.groupUid), eq(roleBindings.identityUid, b.identityUid), eq(roleBindings.roleUid, b.roleUid)));
        return alreadyExists(RoleBindingSchema.typeName, existing?.uid ?? "", "a role binding of this identity to this role on this group already exists");
      },
    },
  });

  return {
    ...base,

    /**
     * The binding of `identity` to `role` on `group`: created, or the one that already exists, whoever made
     * it (a concurrent insert of the same binding waits for the first and then finds it).
     */
    async ensure(group: string, identity: string, role: string): Promise<{ uid: string; created: boolean }> {
      const [inserted] = await db
        .insert(roleBindings)
        .values({ uid: newChildUid(group), groupUid: group, identityUid: identity, roleUid: role })
        .onConflictDoNothing({ target: [roleBindings.groupUid, roleBindings.identityUid, roleBindings.roleUid] })
        .returning({ uid: roleBindings.uid });
      if (inserted) return { uid: inserted.uid, created: true };
      const [existing] = await db
        .select({ uid: roleBindings.uid })
        .from(roleBindings)
        .where(and(eq(roleBindings.groupUid, group), eq(roleBindings.identityUid, identity), eq(roleBindings.roleUid, role)));
      return { uid: existing!.uid, created: false };
    },

    /** The binding with its identity, group and role, or NOT_FOUND. */
    async getHydrated(uid: string): Promise<HydratedRoleBindingRow> {
      const [row] = await hydrated().where(eq(roleBindings.uid, uid));
      if (!row) throw notFound(RoleBindingSchema.typeName, uid);
      return row;
    },

    /** Hydrated bindings by uid, in the order of `uids`. */
    async findHydratedMany(uids: readonly string[]): Promise<HydratedRoleBindingRow[]> {
      if (uids.length === 0) return [];
      const rows = await hydrated().where(inArray(roleBindings.uid, [...uids]));
      const byUid = new Map(rows.map((r) => [r.uid, r]));
      return uids.map((u) => byUid.get(u)).filter((r): r is HydratedRoleBindingRow => r !== undefined);
    },

    /**
     * Which of `uids` name an identity the caller may bind (one query): a root-level identity, or one within
     * `scopes` (the caller's scopes for listing identities). In a transaction the rows found are KEY SHARE
     * locked until it ends, as the insert's foreign key would lock them: a concurrent DeleteIdentity then
     * waits and removes the new binding with the identity, instead of failing this insert on a key the read
     * had just seen.
     */
    async bindableIdentities(uids: readonly string[], scopes: readonly string[]): Promise<Set<string>> {
      if (uids.length === 0) return new Set();
      const query = db
        .select({ uid: identities.uid })
        .from(identities)
        .where(and(inArray(identities.uid, [...new Set(uids)]), or(isNull(identities.parentUid), scopePredicate(identities.uid, scopes))));
      const rows = await (isTransaction(db) ? query.for("key share") : query);
      return new Set(rows.map((r) => r.uid));
    },

    /** One keyset query with the joins for the page; its count (first page only, a subquery) needs no join. */
    list(plan: ListPlan, filter: BindingListFilter): Promise<ListPage<HydratedRoleBindingRow>> {
      validateUidp(filter.uidp);
      const q = preparedQuery(filter);
      if (q) return pages.page(plan, q);
      const where = and(
        scopePredicate(roleBindings.groupUid, filter.scopes),
        uidpPredicate(filter.uidp, { uid: roleBindings.uid, parent: roleBindings.groupUid }),
        filter.identity ? eq(roleBindings.identityUid, filter.identity) : undefined,
        filter.group ? eq(roleBindings.groupUid, filter.group) : undefined,
        filter.role ? eq(roleBindings.roleUid, filter.role) : undefined,
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
    },
  };
}
