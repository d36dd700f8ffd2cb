// Identity providers in the database. A provider references its group and its default role (RESTRICT);
// its external group role mappings go with it (CASCADE), and the identities it created stay, no longer
// tied to it (SET NULL). The client secret column holds only sealed values (secret-box.ts).
import { and, asc, countDistinct, eq, inArray, isNotNull, isNull, ne, notInArray, or, sql } from "drizzle-orm";
import { GroupSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentityProviderSchema } from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { externalGroupRoleMappings, identities, identityProviders, roleBindings, type IdentityProviderRow } from "../db/schema/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { alreadyExists } from "../kernel/errors/index.js";
import { countExpression, keysetPage, pageColumns, type ListPage, type ListPlan } from "../kernel/list/index.js";
import { resourceStore, type Executor } from "../kernel/store.js";
import { newChildUid, uidpPredicate } from "../kernel/uidp.js";

export interface IdentityProviderListFilter {
  /** The caller's visible scopes: only providers beneath one of them are listed and counted. */
  scopes: readonly string[];
  uidp: UIDPFilter | undefined;
  /** Exact name; empty for any. */
  name: string;
}

const orderColumns = {
  uid: identityProviders.uid,
  name: identityProviders.name,
  create_time: identityProviders.createTime,
  update_time: identityProviders.updateTime,
} as const;

/** What a login through a provider needs of it (sso-login.ts). */
export type LoginProvider = Pick<
  IdentityProviderRow,
  "uid" | "groupUid" | "defaultRoleUid" | "oidcIssuer" | "oidcClientId" | "oidcGroupsClaim" | "oidcCorrelationRule"
>;

export function createIdentityProviderStore(db: Executor) {
  const base = resourceStore<typeof identityProviders, IdentityProviderRow, typeof identityProviders.$inferInsert, "groupUid">(db, {
    table: identityProviders,
    type: IdentityProviderSchema.typeName,
    parentType: GroupSchema.typeName,
    parentColumn: "groupUid",
    // A name is unique within its group (the unique index decides, under concurrent creates and renames).
    unique: {
      columns: [identityProviders.groupUid, identityProviders.name],
      async taken(on, row) {
        const { groupUid, name } = row as { groupUid: string; name: string };
        const [other] = await on
          .select({ uid: identityProviders.uid })
          .from(identityProviders)
          .where(and(eq(identityProviders.groupUid, groupUid), eq(identityProviders.name, name)));
        return alreadyExists(
          IdentityProviderSchema.typeName,
          other?.uid ?? `${groupUid}/${name}`,
          `An identity provider named ${JSON.stringify(name)} already exists in group ${groupUid}`,
        );
      },
    },
  });

  return {
    ...base,

    /** A page of providers within the caller's scopes, filtered. */
    list(plan: ListPlan, filter: IdentityProviderListFilter): Promise<ListPage<IdentityProviderRow>> {
      const where = and(
        scopePredicate(identityProviders.uid, filter.scopes),
        uidpPredicate(filter.uidp, { uid: identityProviders.uid, parent: identityProviders.groupUid }),
        filter.name ? eq(identityProviders.name, filter.name) : undefined,
      );
      const total = countExpression(identityProviders, where);
      const query = db.select({ row: identityProviders, ...pageColumns(plan, orderColumns, total) }).from(identityProviders).$dynamic();
      return keysetPage(db, query, { plan, orderColumns, where, total });
    },

    /**
     * How many distinct active identities hold `role` through a binding on `group` itself, leaving out those
     * the provider `except` created (its SCIM client could deactivate them). Read in the call's transaction;
     * a concurrent change of the bindings is not locked out: the rule guards against a lock-out by mistake.
     */
    async holdersOn(group: string, role: string, except: string): Promise<number> {
      const [row] = await db
        .select({ n: countDistinct(roleBindings.identityUid) })
        .from(roleBindings)
        .innerJoin(identities, eq(identities.uid, roleBindings.identityUid))
        .where(
          and(
            eq(roleBindings.groupUid, group),
            eq(roleBindings.roleUid, role),
            eq(identities.active, true),
            or(isNull(identities.identityProviderUid), ne(identities.identityProviderUid, except)),
          ),
        );
      return Number(row?.n ?? 0);
    },

    /** The roles the provider's mappings grant, each with the scope it is granted on (distinct pairs). */
    async mappedRoles(provider: string): Promise<Array<{ roleUid: string; scope: string }>> {
      return db
        .selectDistinct({ roleUid: externalGroupRoleMappings.roleUid, scope: externalGroupRoleMappings.scope })
        .from(externalGroupRoleMappings)
        .where(eq(externalGroupRoleMappings.identityProviderUid, provider));
    },

    /** Deletes the bindings the provider's mappings made at logins (their next login makes them again). */
    async dropMappedBindings(provider: string): Promise<void> {
      const mine = db.select({ uid: externalGroupRoleMappings.uid }).from(externalGroupRoleMappings).where(eq(externalGroupRoleMappings.identityProviderUid, provider));
      await db.delete(roleBindings).where(inArray(roleBindings.mappingUid, mine));
    },

    /**
     * Unties the identities the provider created from it, as deleting the provider does: they stay, with
     * their bindings made by hand, but no login or SCIM request through the provider finds them again.
     */
    async detachIdentities(provider: string): Promise<void> {
      await db.update(identities).set({ identityProviderUid: null, updateTime: sql`now()` }).where(eq(identities.identityProviderUid, provider));
    },

    /** The provider as a login needs it, or undefined. */
    async findForLogin(uid: string): Promise<LoginProvider | undefined> {
      const p = identityProviders;
      const [row] = await db
        .select({
          uid: p.uid,
          groupUid: p.groupUid,
          defaultRoleUid: p.defaultRoleUid,
          oidcIssuer: p.oidcIssuer,
          oidcClientId: p.oidcClientId,
          oidcGroupsClaim: p.oidcGroupsClaim,
          oidcCorrelationRule: p.oidcCorrelationRule,
        })
        .from(p)
        .where(eq(p.uid, uid));
      return row;
    },

    /**
     * Brings the identity's bindings made by the provider's mappings in line with `groups` (the external
     * groups its login lists: see sso-login.ts): the uids of the bindings added and removed.
     */
    async syncMappedBindings(provider: string, identityUid: string, groups: readonly string[]): Promise<{ added: string[]; removed: string[] }> {
      const m = externalGroupRoleMappings;
      const wanted =
        groups.length === 0
          ? []
          : await db
              .select({ uid: m.uid, roleUid: m.roleUid, scope: m.scope })
              .from(m)
              .where(and(eq(m.identityProviderUid, provider), inArray(m.externalGroupId, [...new Set(groups)])))
              // Of two mappings of one role on one scope, the older makes the binding (a stable choice).
              .orderBy(asc(m.createTime), asc(m.uid));
      const keep = wanted.map((w) => w.uid);
      // Removed first: a group lost and a group kept that map the same role on the same scope leave the
      // binding made by the kept one.
      const removed = await db
        .delete(roleBindings)
        .where(and(eq(roleBindings.identityUid, identityUid), isNotNull(roleBindings.mappingUid), keep.length > 0 ? notInArray(roleBindings.mappingUid, keep) : undefined))
        .returning({ uid: roleBindings.uid });
      if (wanted.length === 0) return { added: [], removed: removed.map((r) => r.uid) };
      // One binding per group, identity and role: where one exists (by hand, or by another mapping of the
      // same role and scope) nothing is added.
      const added = await db
        .insert(roleBindings)
        .values(wanted.map((w) => ({ uid: newChildUid(w.scope), groupUid: w.scope, identityUid, roleUid: w.roleUid, mappingUid: w.uid })))
        .onConflictDoNothing({ target: [roleBindings.groupUid, roleBindings.identityUid, roleBindings.roleUid] })
        .returning({ uid: roleBindings.uid });
      return { added: added.map((r) => r.uid), removed: removed.map((r) => r.uid) };
    },
  };
}
