// Identities in the database. An identity under a group references it (ON DELETE RESTRICT), so it cannot
// outlive its group, and creating one under a group being deleted ends as NOT_FOUND. Its role bindings go
// with it (ON DELETE CASCADE).
import { and, desc, eq, isNotNull, sql } from "drizzle-orm";
import { GroupSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentitySchema, RelationshipType } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { identities, type IdentityRow } from "../db/schema/index.js";
import { newChildUid } from "../kernel/uidp.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { listPage, type ListPage, type ListPlan } from "../kernel/list/index.js";
import { resourceStore, type Executor } from "../kernel/store.js";
import { uidpPredicate } from "../kernel/uidp.js";
import type { identityFromToken } from "./identities.mapper.js";
import { createRoleBindingStore } from "./role-bindings.store.js";

export interface IdentityListFilter {
  /** The caller's visible scopes: only identities beneath one of them are listed and counted. */
  scopes: readonly string[];
  uidp: UIDPFilter | undefined;
  name: string;
  /** 0: any. */
  relationshipType: number;
}

const identityOrderColumns = {
  uid: identities.uid,
  name: identities.name,
  create_time: identities.createTime,
  update_time: identities.updateTime,
} as const;

/** An identity found (locked) or created, and the binding ensured for it. */
export interface BoundIdentity {
  uid: string;
  active: boolean;
  /** The row, when this call created it. */
  created: IdentityRow | undefined;
  /** The binding to the role (created when missing); undefined when none was ensured (see findOrCreateBound). */
  binding: { uid: string; created: boolean } | undefined;
}

export function createIdentityStore(db: Executor) {
  const base = resourceStore(db, {
    table: identities,
    type: IdentitySchema.typeName,
    parentType: GroupSchema.typeName,
    parentColumn: "parentUid",
    // Tables added later may reference identities with RESTRICT or NO ACTION.
    stillReferenced: (uid) => ({ type: "RESOURCE_NOT_EMPTY", subject: uid, description: `identity ${uid} is still referenced; remove those references first` }),
  });

  return {
    ...base,

    /** A page of identities within the caller's scopes, filtered. */
    async list(plan: ListPlan, filter: IdentityListFilter): Promise<ListPage<IdentityRow>> {
      const where = and(
        scopePredicate(identities.uid, filter.scopes),
        uidpPredicate(filter.uidp, { uid: identities.uid, parent: identities.parentUid }),
        filter.name ? eq(identities.name, filter.name) : undefined,
        filter.relationshipType ? eq(identities.relationshipType, filter.relationshipType) : undefined,
      );
      return listPage(db, { table: identities, where, orderColumns: identityOrderColumns, plan });
    },

    /** The identity of `externalId` at an identity provider, locked for the rest of the transaction. */
    async lockByProvider(providerUid: string, externalId: string): Promise<{ uid: string; active: boolean } | undefined> {
      const [row] = await db
        .select({ uid: identities.uid, active: identities.active })
        .from(identities)
        .where(and(eq(identities.identityProviderUid, providerUid), eq(identities.externalId, externalId)))
        .for("update");
      return row;
    },

    /** The oldest claim-match identity directly in `group` on exactly this issuer and subject, locked. */
    async lockClaimMatchIn(group: string, issuer: string, subject: string): Promise<{ uid: string; active: boolean } | undefined> {
      const [row] = await db
        .select({ uid: identities.uid, active: identities.active })
        .from(identities)
        .where(
          and(
            eq(identities.parentUid, group),
            eq(identities.issuer, issuer),
            eq(identities.subject, subject),
            eq(identities.relationshipType, RelationshipType.CLAIM_MATCH),
            isNotNull(identities.issuer),
          ),
        )
        .orderBy(identities.createTime, identities.uid)
        .limit(1)
        .for("update");
      return row;
    },

    /**
     * Creates an identity for a token's person under `group` (columns from identityFromToken). With a
     * provider, the identity is tied to its external id there, and an identity the provider already has for
     * that id wins (a concurrent first login committed it): undefined is returned then, nothing written.
     */
    async insertForToken(
      group: string,
      columns: ReturnType<typeof identityFromToken>,
      provider?: { uid: string; externalId: string },
    ): Promise<IdentityRow | undefined> {
      const insert = db
        .insert(identities)
        .values({
          uid: newChildUid(group),
          parentUid: group,
          ...columns,
          ...(provider ? { identityProviderUid: provider.uid, externalId: provider.externalId } : {}),
        });
      const [row] = provider
        ? await insert.onConflictDoNothing({ target: [identities.identityProviderUid, identities.externalId] }).returning()
        : await insert.returning();
      return row;
    },

    /**
     * The uid of a claim-match identity with exactly this issuer and subject that the caller may see, in this
     * order: the caller itself, the person (the root-level identity: anyone may resolve a person), one within
     * `scopes`. Undefined otherwise.
     */
    async lookup(issuer: string, subject: string, visibleTo: { scopes: readonly string[]; self: string }): Promise<string | undefined> {
      const isSelf = sql`${identities.uid} = ${visibleTo.self}`;
      const isPerson = sql`${identities.parentUid} is null`;
      const [row] = await db
        .select({ uid: identities.uid })
        .from(identities)
        .where(
          and(
            eq(identities.issuer, issuer),
            eq(identities.subject, subject),
            eq(identities.relationshipType, RelationshipType.CLAIM_MATCH),
            sql`(${isSelf} or ${isPerson} or ${scopePredicate(identities.uid, visibleTo.scopes)})`,
          ),
        )
        .orderBy(desc(isSelf), desc(isPerson), identities.uid)
        .limit(1);
      return row?.uid;
    },

    /**
     * Finds or creates a person's identity, then ensures its binding to `role` on `group`: what a login
     * through a provider, an accepted invite and a SCIM create share. `find` locks the identity (none: every
     * call creates); `insert` creates it, or answers undefined when a concurrent write made it first (its
     * insert yields to a unique index), and `find` reads that one. A created identity is always bound; a
     * found one only when `bindFound` is set and it is active.
     */
    async findOrCreateBound(how: {
      find?: () => Promise<{ uid: string; active: boolean } | undefined>;
      insert: () => Promise<IdentityRow | undefined>;
      group: string;
      role: string;
      bindFound: boolean;
    }): Promise<BoundIdentity> {
      let found = await how.find?.();
      let created: IdentityRow | undefined;
      if (!found) {
        created = await how.insert();
        found = created ?? (await how.find?.());
        if (!found) throw new Error(`an identity under ${how.group} was neither inserted nor found`);
      }
      const bind = created !== undefined || (how.bindFound && found.active);
      const binding = bind ? await createRoleBindingStore(db).ensure(how.group, found.uid, how.role) : undefined;
      return { uid: found.uid, active: found.active, created, binding };
    },
  };
}
