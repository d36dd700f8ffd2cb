// The queries of the SCIM endpoint (scim.routes.ts): which provider a SCIM token authenticates, and the
// identities that provider provisions (its Users).
//
// Uniqueness of userName and externalId per provider: externalId has its unique index (identities_provider_
// external_idx); userName lives in the scim column, so every write first locks the provider's row (FOR NO KEY
// UPDATE: logins inserting identities that reference it are not blocked) and checks under that lock. The same
// query re-checks the token, so a write never commits after its token was revoked. Each write records its
// identity event in the outbox, in its unit of work (see recordEvent).
import { create } from "@bufbuild/protobuf";
import { and, asc, count, eq, gt, inArray, isNotNull, isNull, ne, notInArray, or, sql, type SQL } from "drizzle-orm";
import {
  CreateIdentityRequestSchema,
  DeleteIdentityRequestSchema,
  IdentitiesService,
  RelationshipType,
  UpdateIdentityRequestSchema,
} from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import type { Db } from "../db/client.js";
import { externalGroupRoleMappings, identities, identityProviders, roleBindings, type IdentityProviderRow, type IdentityRow } from "../db/schema/index.js";
import { unstorableText } from "../kernel/stored-json.js";
import type { EventedChange, UnitOfWork } from "../kernel/unit-of-work.js";
import { newChildUid } from "../kernel/uidp.js";
import { toIdentity } from "./identities.mapper.js";
import { createIdentityStore } from "./identities.store.js";
import type { ScimFilter } from "./scim.filter.js";
import { ScimError, userOf, type ScimUserFields } from "./scim.mapper.js";

/** The provider columns the endpoint uses. */
export type ScimProvider = Pick<IdentityProviderRow, "uid" | "groupUid" | "defaultRoleUid" | "oidcIssuer">;

const providerColumns = {
  uid: identityProviders.uid,
  groupUid: identityProviders.groupUid,
  defaultRoleUid: identityProviders.defaultRoleUid,
  oidcIssuer: identityProviders.oidcIssuer,
};

/**
 * The provider's row when `tokenHash` is its live SCIM token (unexpired) or its previous one within the
 * overlap, and SCIM is enabled. Revoking clears both hashes, so a revoked token matches nothing.
 */
function tokenMatches(providerUid: string, tokenHash: string): SQL {
  const p = identityProviders;
  return and(
    eq(p.uid, providerUid),
    eq(p.scimEnabled, true),
    or(
      and(eq(p.scimTokenHash, tokenHash), or(isNull(p.scimTokenExpireTime), gt(p.scimTokenExpireTime, sql`now()`))),
      and(eq(p.scimPreviousTokenHash, tokenHash), gt(p.scimPreviousTokenExpireTime, sql`now()`)),
    ),
  )!;
}

/** The identity columns a User's fields give. */
function userColumns(fields: ScimUserFields) {
  return { name: fields.name, email: fields.email, externalId: fields.externalId, scim: fields.attributes };
}

/**
 * How logins find the identity: a claim match on the provider's issuer with the user's id there (its
 * externalId) as subject. Set on create, and again when the externalId changes; otherwise left as the
 * identity has it (a login may have made it).
 */
function relationshipColumns(provider: ScimProvider, fields: ScimUserFields) {
  return {
    relationship: { claimMatch: { issuer: provider.oidcIssuer, subject: fields.externalId } },
    relationshipType: RelationshipType.CLAIM_MATCH,
    issuer: provider.oidcIssuer,
    subject: fields.externalId,
  };
}

// SCIM writes record the identity events of the IdentitiesService methods they stand for (created, updated,
// deleted: their types, audience and group from those methods' event options), in the write's unit of work.
// The event's method is the SCIM endpoint, and its actor the provider: no identity made the call.
function recordEvent(unit: UnitOfWork, provider: ScimProvider, change: EventedChange): void {
  unit.record([change], { actor: provider.uid, source: `/scim/v2/${provider.uid}/Users` });
}

/** The unit of work's transaction, as the store's queries take it. */
const txOf = (unit: UnitOfWork) => unit.tx as unknown as Db;

const USER_NAME = sql`lower(coalesce(${identities.scim}->>'userName', nullif(${identities.email}, ''), ${identities.name}))`;

/** The SQL condition of a parsed filter over a provider's identities. */
export function filterCondition(filter: ScimFilter, groupUid: string): SQL {
  if (filter.kind !== "compare") {
    const left = filterCondition(filter.left, groupUid);
    const right = filterCondition(filter.right, groupUid);
    return (filter.kind === "and" ? and(left, right) : or(left, right))!;
  }
  const text = (what: string) => {
    if (typeof filter.value !== "string") throw new ScimError(400, `${what} compares with a string`, "invalidFilter");
    const unstorable = unstorableText(filter.value);
    if (unstorable) throw new ScimError(400, `the value ${what} is compared with holds ${unstorable}`, "invalidValue");
    return filter.value;
  };
  switch (filter.attr) {
    case "username":
      return sql`${USER_NAME} = lower(${text("userName")})`;
    case "externalid":
      return eq(identities.externalId, text("externalId"));
    case "id":
      return eq(identities.uid, `${groupUid}/${text("id")}`);
    case "active":
      if (typeof filter.value !== "boolean") throw new ScimError(400, "active compares with true or false", "invalidFilter");
      return eq(identities.active, filter.value);
    default:
      throw new ScimError(400, `filtering on ${filter.attr} is not supported (userName, externalId, id, active)`, "invalidFilter");
  }
}

export function createScimStore(db: Db) {
  const ofProvider = (provider: ScimProvider) => eq(identities.identityProviderUid, provider.uid);
  const byId = (provider: ScimProvider, id: string) => and(ofProvider(provider), eq(identities.uid, `${provider.groupUid}/${id}`));

  /**
   * 409 uniqueness when another identity of the provider has this userName or externalId. On a change of
   * `current`, only a value that changes is checked: users made at logins derive their userName from a
   * display name, which two people may share, and that must never block deprovisioning one of them.
   */
  const checkUnique = async (tx: Db, provider: ScimProvider, fields: ScimUserFields, current?: IdentityRow) => {
    const externalIdChanges = current === undefined || fields.externalId !== current.externalId;
    const userNameChanges = current === undefined || fields.userName.toLowerCase() !== String(userOf(current).userName ?? "").toLowerCase();
    if (!externalIdChanges && !userNameChanges) return;
    const [taken] = await tx
      .select({ externalId: identities.externalId, userName: USER_NAME })
      .from(identities)
      .where(
        and(
          ofProvider(provider),
          or(
            externalIdChanges ? eq(identities.externalId, fields.externalId) : undefined,
            userNameChanges ? sql`${USER_NAME} = lower(${fields.userName})` : undefined,
          ),
          current ? sql`${identities.uid} <> ${current.uid}` : undefined,
        ),
      )
      .limit(1);
    if (!taken) return;
    const which = externalIdChanges && taken.externalId === fields.externalId ? `externalId ${JSON.stringify(fields.externalId)}` : `userName ${JSON.stringify(fields.userName)}`;
    throw new ScimError(409, `another user of this provider has the ${which}`, "uniqueness");
  };

  /** The uids of the provider's mappings, as a subquery. */
  const mappingsOf = (tx: Db, provider: ScimProvider) =>
    tx.select({ uid: externalGroupRoleMappings.uid }).from(externalGroupRoleMappings).where(eq(externalGroupRoleMappings.identityProviderUid, provider.uid));

  /**
   * A change of externalId hands the identity to another person at the provider. Refused (400 mutability)
   * while the identity carries a binding the provider did not make (one made by hand, beyond its default
   * role on its group): the provider's SCIM client must not pass on what an owner granted one person.
   * Otherwise the bindings its mappings made for the previous person go (the next login makes the new
   * person's).
   */
  const repoint = async (tx: Db, provider: ScimProvider, current: IdentityRow) => {
    const [foreign] = await tx
      .select({ uid: roleBindings.uid })
      .from(roleBindings)
      .where(
        and(
          eq(roleBindings.identityUid, current.uid),
          or(
            and(isNull(roleBindings.mappingUid), or(ne(roleBindings.groupUid, provider.groupUid), ne(roleBindings.roleUid, provider.defaultRoleUid))),
            and(isNotNull(roleBindings.mappingUid), notInArray(roleBindings.mappingUid, mappingsOf(tx, provider))),
          ),
        ),
      )
      .limit(1);
    if (foreign) {
      throw new ScimError(
        400,
        "externalId cannot change: the user holds role bindings this identity provider did not make; an administrator must remove them first (or delete the user and create a new one)",
        "mutability",
      );
    }
    await tx.delete(roleBindings).where(and(eq(roleBindings.identityUid, current.uid), inArray(roleBindings.mappingUid, mappingsOf(tx, provider))));
  };

  return {
    /** The provider the token authenticates for, or undefined (unknown provider, wrong, expired or revoked token, SCIM disabled). */
    async authenticate(providerUid: string, tokenHash: string): Promise<ScimProvider | undefined> {
      const [row] = await db.select(providerColumns).from(identityProviders).where(tokenMatches(providerUid, tokenHash)).limit(1);
      return row;
    },

    /**
     * Locks the provider's row for a write's unit of work, checking the token again under that lock (401 when
     * it is no longer valid).
     */
    async lockProvider(unit: UnitOfWork, providerUid: string, tokenHash: string): Promise<ScimProvider> {
      const [provider] = await txOf(unit).select(providerColumns).from(identityProviders).where(tokenMatches(providerUid, tokenHash)).for("no key update");
      if (!provider) throw new ScimError(401, "the SCIM token is not valid for this endpoint");
      return provider;
    },

    async get(provider: ScimProvider, id: string): Promise<IdentityRow | undefined> {
      const [row] = await db.select().from(identities).where(byId(provider, id)).limit(1);
      return row;
    },

    /** A page of the provider's users matching `where` (oldest first), and how many match in all. */
    async list(provider: ScimProvider, where: SQL | undefined, offset: number, limit: number): Promise<{ rows: IdentityRow[]; total: number }> {
      const condition = and(ofProvider(provider), where);
      const [counted, rows] = await Promise.all([
        db.select({ total: count() }).from(identities).where(condition),
        limit === 0
          ? Promise.resolve([])
          : db.select().from(identities).where(condition).orderBy(asc(identities.createTime), asc(identities.uid)).offset(offset).limit(limit),
      ]);
      return { rows, total: Number(counted[0]?.total ?? 0) };
    },

    /** Creates the identity under the provider's group, bound to its default role there (a binding made by hand). */
    async create(unit: UnitOfWork, provider: ScimProvider, fields: ScimUserFields): Promise<IdentityRow> {
      const tx = txOf(unit);
      await checkUnique(tx, provider, fields);
      const { created: row } = await createIdentityStore(tx).findOrCreateBound({
        insert: async () => {
          const values = { parentUid: provider.groupUid, identityProviderUid: provider.uid, active: fields.active ?? true, ...userColumns(fields), ...relationshipColumns(provider, fields) };
          const [inserted] = await tx.insert(identities).values({ uid: newChildUid(provider.groupUid), ...values }).returning();
          return inserted;
        },
        group: provider.groupUid,
        role: provider.defaultRoleUid,
        bindFound: false,
      });
      const identity = toIdentity(row!);
      recordEvent(unit, provider, { method: IdentitiesService.method.createIdentity, request: create(CreateIdentityRequestSchema, { parent: provider.groupUid, identity }), response: identity });
      return row!;
    },

    /** The user locked for a change, or undefined. */
    async lock(unit: UnitOfWork, provider: ScimProvider, id: string): Promise<IdentityRow | undefined> {
      const [row] = await txOf(unit).select().from(identities).where(byId(provider, id)).for("update");
      return row;
    },

    /** Replaces what the User sets; `active` left undefined keeps the identity's state. */
    async replace(unit: UnitOfWork, provider: ScimProvider, current: IdentityRow, fields: ScimUserFields): Promise<IdentityRow> {
      const tx = txOf(unit);
      await checkUnique(tx, provider, fields, current);
      if (fields.externalId !== current.externalId) await repoint(tx, provider, current);
      const [row] = await tx
        .update(identities)
        .set({
          ...userColumns(fields),
          ...(fields.externalId !== current.externalId ? relationshipColumns(provider, fields) : {}),
          active: fields.active ?? current.active,
          updateTime: sql`now()`,
        })
        .where(eq(identities.uid, current.uid))
        .returning();
      const identity = toIdentity(row!);
      recordEvent(unit, provider, { method: IdentitiesService.method.updateIdentity, request: create(UpdateIdentityRequestSchema, { identity }), response: identity });
      return row!;
    },

    /** Deletes the user (its role bindings go with it); false when it did not exist. */
    async delete(unit: UnitOfWork, provider: ScimProvider, id: string): Promise<boolean> {
      const [deleted] = await txOf(unit).delete(identities).where(byId(provider, id)).returning({ uid: identities.uid });
      if (!deleted) return false;
      recordEvent(unit, provider, { method: IdentitiesService.method.deleteIdentity, request: create(DeleteIdentityRequestSchema, { uid: deleted.uid }) });
      return true;
    },
  };
}

export type ScimStore = ReturnType<typeof createScimStore>;
