// Identities in the database. An identity under a group references it (ON DELETE RESTRICT), so it cannot
// outlive its group, and creating one under a group being deleted ends as NOT_FOUND. Its role bindings go
// with it (ON DELETE CASCADE).
import { and, desc, eq, sql } from "drizzle-orm";
import type { Db } from "../db/client.js";
import { identities } from "../db/schema/index.js";
import { failedPrecondition, isStillReferenced, notFound, underParent } from "../kernel/errors/index.js";
import { listPage, type ListPage, type ListPlan } from "../kernel/list/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { newChildUid, uidpPredicate } from "../kernel/uidp.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { GROUP_TYPE } from "./groups.store.js";

export type IdentityRow = typeof identities.$inferSelect;

/** The relationship columns: the oneof as proto3 JSON, its type, and exact issuer/subject when it has them. */
export interface RelationshipColumns {
  relationship: Record<string, unknown>;
  relationshipType: number;
  issuer: string | null;
  subject: string | null;
}

/** The fields a client writes. */
export interface IdentityFields extends RelationshipColumns {
  name: string;
  description: string;
  company: string;
}

/** What UpdateIdentityMetadata writes: the company column and the rest of the metadata. */
export interface IdentityMetadataFields {
  company: string;
  metadata: Record<string, unknown>;
}

/** Resource type named in NOT_FOUND errors. */
export const IDENTITY_TYPE = "chainguard.platform.iam.v2.Identity";

/** RelationshipType.CLAIM_MATCH. */
const CLAIM_MATCH = 1;

export interface IdentityListFilter {
  /** The caller's visible scopes: only identities beneath one of them are listed and counted. */
  scopes: readonly string[];
  uidp: UIDPFilter | undefined;
  name: string;
  /** 0: any. */
  relationshipType: number;
}

export const identityOrderColumns = {
  uid: identities.uid,
  name: identities.name,
  create_time: identities.createTime,
  update_time: identities.updateTime,
} as const;

export function createIdentityStore(db: Db) {
  const get = async (uid: string): Promise<IdentityRow | undefined> => {
    const [row] = await db.select().from(identities).where(eq(identities.uid, uid));
    return row;
  };

  /** Runs `change` on the locked row and writes what it returns (undefined: nothing to write). */
  const updateWith = async <F extends object>(uid: string, change: (current: IdentityRow) => F | undefined): Promise<IdentityRow> =>
    db.transaction(async (tx) => {
      const [current] = await tx.select().from(identities).where(eq(identities.uid, uid)).for("update");
      if (!current) throw notFound(IDENTITY_TYPE, uid);
      const fields = change(current);
      if (!fields) return current;
      const [row] = await tx
        .update(identities)
        .set({ ...fields, updateTime: sql`now()` })
        .where(eq(identities.uid, uid))
        .returning();
      return row!;
    });

  return {
    get,

    /** The identity, or NOT_FOUND. */
    async require(uid: string): Promise<IdentityRow> {
      const row = await get(uid);
      if (!row) throw notFound(IDENTITY_TYPE, uid);
      return row;
    },

    /** Creates an identity under `parent`; NOT_FOUND (naming the group) when the group does not exist. */
    async create(parent: string, fields: IdentityFields): Promise<IdentityRow> {
      const [row] = await underParent(GROUP_TYPE, parent, () =>
        db
          .insert(identities)
          .values({ uid: newChildUid(parent), parentUid: parent, ...fields })
          .returning(),
      );
      return row!;
    },

    /** Changes an identity under a row lock; `change` returns the new field values, or undefined for none. */
    update: (uid: string, change: (current: IdentityRow) => IdentityFields | undefined) => updateWith(uid, change),

    /** Changes an identity's metadata under a row lock. */
    updateMetadata: (uid: string, change: (current: IdentityRow) => IdentityMetadataFields | undefined) => updateWith(uid, change),

    /** Deletes an identity and (cascade) its role bindings. NOT_FOUND when missing. */
    async delete(uid: string): Promise<void> {
      let deleted: { uid: string }[];
      try {
        deleted = await db.delete(identities).where(eq(identities.uid, uid)).returning({ uid: identities.uid });
      } catch (err) {
        // Tables added later may reference identities with RESTRICT or NO ACTION.
        if (isStillReferenced(err)) {
          throw failedPrecondition({ type: "RESOURCE_NOT_EMPTY", subject: uid, description: `identity ${uid} is still referenced; remove those references first` });
        }
        throw err;
      }
      if (deleted.length === 0) throw notFound(IDENTITY_TYPE, uid);
    },

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

    /**
     * The uid of a claim-match identity with exactly this issuer and subject that the caller may see: one
     * within `scopes`, or the caller itself (preferred when several match). Undefined otherwise.
     */
    async lookup(issuer: string, subject: string, visibleTo: { scopes: readonly string[]; self: string }): Promise<string | undefined> {
      const isSelf = sql`${identities.uid} = ${visibleTo.self}`;
      const [row] = await db
        .select({ uid: identities.uid })
        .from(identities)
        .where(
          and(
            eq(identities.issuer, issuer),
            eq(identities.subject, subject),
            eq(identities.relationshipType, CLAIM_MATCH),
            sql`(${isSelf} or ${scopePredicate(identities.uid, visibleTo.scopes)})`,
          ),
        )
        .orderBy(desc(isSelf), identities.uid)
        .limit(1);
      return row?.uid;
    },
  };
}

export type IdentityStore = ReturnType<typeof createIdentityStore>;
