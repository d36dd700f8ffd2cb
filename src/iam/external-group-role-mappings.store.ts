// External group role mappings in the database. A mapping lives under its identity provider (uid
// `<provider uid>/<16 hex>`, ON DELETE CASCADE: it goes with the provider), and the bindings a login made
// from it reference it (role_bindings.mapping_uid, ON DELETE CASCADE: they go with the mapping). A mapping
// is never changed once made: the table has no update_time.
import { and, eq, inArray } from "drizzle-orm";
import { ExternalGroupRoleMappingSchema } from "../../gen/chainguard/platform/iam/v2/external_group_role_mappings_pb.js";
import { IdentityProviderSchema } from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { externalGroupRoleMappings as mappings, identityProviders, type ExternalGroupRoleMappingRow } from "../db/schema/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { alreadyExists, notFound } from "../kernel/errors/index.js";
import { listPage, type ListPage, type ListPlan, type OrderColumns } from "../kernel/list/index.js";
import { isTransaction, resourceStore, type Executor } from "../kernel/store.js";
import { uidpPredicate } from "../kernel/uidp.js";

export interface MappingListFilter {
  /** The caller's visible scopes: only mappings beneath one of them are listed and counted. */
  scopes: readonly string[];
  uidp: UIDPFilter | undefined;
  /** Exact provider uid; empty for any. */
  identityProvider: string;
}

const mappingOrderColumns: OrderColumns = {
  uid: mappings.uid,
  create_time: mappings.createTime,
};

export function createExternalGroupRoleMappingStore(db: Executor) {
  const base = resourceStore<typeof mappings, ExternalGroupRoleMappingRow, typeof mappings.$inferInsert, "identityProviderUid">(db, {
    table: mappings,
    type: ExternalGroupRoleMappingSchema.typeName,
    parentType: IdentityProviderSchema.typeName,
    parentColumn: "identityProviderUid",
    // (provider, external group, role, scope) is unique (the index decides, so concurrent creates of one
    // mapping yield one): ALREADY_EXISTS naming the mapping that has it.
    unique: {
      columns: [mappings.identityProviderUid, mappings.externalGroupId, mappings.roleUid, mappings.scope],
      async taken(on, row) {
        const m = row as { identityProviderUid: string; externalGroupId: string; roleUid: string; scope: string };
        const [existing] = await on
          .select({ uid: mappings.uid })
          .from(mappings)
          .where(
            and(
              eq(mappings.identityProviderUid, m.identityProviderUid),
              eq(mappings.externalGroupId, m.externalGroupId),
              eq(mappings.roleUid, m.roleUid),
              eq(mappings.scope, m.scope),
            ),
          );
        return alreadyExists(
          ExternalGroupRoleMappingSchema.typeName,
          existing?.uid ?? "",
          `identity provider ${m.identityProviderUid} already maps external group ${JSON.stringify(m.externalGroupId)} to role ${m.roleUid} on ${m.scope}`,
        );
      },
    },
  });

  return {
    ...base,

    /**
     * The identity provider mappings are made under, or NOT_FOUND naming it. In a transaction its row is KEY
     * SHARE locked until the end, as the insert's foreign key would lock it: a concurrent delete of the
     * provider waits, then takes the new mapping with it.
     */
    async provider(uid: string): Promise<{ uid: string; groupUid: string }> {
      const query = db.select({ uid: identityProviders.uid, groupUid: identityProviders.groupUid }).from(identityProviders).where(eq(identityProviders.uid, uid));
      const [row] = await (isTransaction(db) ? query.for("key share") : query);
      if (!row) throw notFound(IdentityProviderSchema.typeName, uid);
      return row;
    },

    /** Deletes those of `uids` that are mappings of `provider`, in one statement; returns the deleted rows. */
    async removeMany(provider: string, uids: readonly string[]): Promise<ExternalGroupRoleMappingRow[]> {
      if (uids.length === 0) return [];
      return db
        .delete(mappings)
        .where(and(eq(mappings.identityProviderUid, provider), inArray(mappings.uid, [...uids])))
        .returning();
    },

    /** A page of mappings within the caller's scopes, filtered. */
    list(plan: ListPlan, filter: MappingListFilter): Promise<ListPage<ExternalGroupRoleMappingRow>> {
      const where = and(
        scopePredicate(mappings.uid, filter.scopes),
        uidpPredicate(filter.uidp, { uid: mappings.uid, parent: mappings.identityProviderUid }),
        filter.identityProvider ? eq(mappings.identityProviderUid, filter.identityProvider) : undefined,
      );
      return listPage(db, { table: mappings, plan, orderColumns: mappingOrderColumns, where });
    },
  };
}
