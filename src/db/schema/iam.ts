// Identity and access: the group tree, identities, roles, role bindings, this server's signing keys, and single
// sign-on (further below).
//
// Integrity lives here. Every resource under a group references it with ON DELETE RESTRICT, so deleting a
// group that still has children fails in the database (SQLSTATE 23001, restrict_violation), also against a concurrent insert
// beneath it: the insert's foreign-key check locks the parent row. Domains added later reference groups
// the same way (registry repos, event subscriptions, ...).
import { sql } from "drizzle-orm";
import { type AnyPgColumn, boolean, index, integer, jsonb, pgTable, text, uniqueIndex } from "drizzle-orm/pg-core";
import { instant, uidText } from "./columns.js";

export const groups = pgTable(
  "groups",
  {
    /** Root: 40 lowercase hex. Child: <parent uid>/<16 lowercase hex>. */
    uid: uidText("uid").primaryKey(),
    /** Null for a root group (an organization). */
    parentUid: uidText("parent_uid").references((): AnyPgColumn => groups.uid, { onDelete: "restrict" }),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    verified: boolean("verified").notNull().default(false),
    /** chainguard.platform.iam.v2.OrgKind */
    kind: integer("kind").notNull().default(0),
    /** chainguard.platform.iam.v2.OrgStatus */
    status: integer("status").notNull().default(2),
    createTime: instant("create_time").notNull().defaultNow(),
    updateTime: instant("update_time").notNull().defaultNow(),
  },
  (t) => [
    index("groups_parent_idx").on(t.parentUid, t.uid),
    index("groups_name_idx").on(t.name, t.uid),
    index("groups_create_time_idx").on(t.createTime, t.uid),
  ],
);

export const identities = pgTable(
  "identities",
  {
    /** Under a group: <group uid>/<16 hex>. A root-level identity (a person, created by bootstrap): 40 hex. */
    uid: uidText("uid").primaryKey(),
    /** The group the identity was created under and is confined to; null for root-level identities. */
    parentUid: uidText("parent_uid").references(() => groups.uid, { onDelete: "restrict" }),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    email: text("email").notNull().default(""),
    emailUnverified: text("email_unverified").notNull().default(""),
    company: text("company").notNull().default(""),
    /** The relationship oneof as proto3 JSON: {"claimMatch": {...}} | {"staticKeys": {...}} | ... */
    relationship: jsonb("relationship").$type<Record<string, unknown>>().notNull(),
    /** RelationshipType of `relationship`, for filtering. */
    relationshipType: integer("relationship_type").notNull(),
    /** Exact issuer and subject when the relationship names them (claim_match.issuer/subject, static_keys). */
    issuer: text("issuer"),
    subject: text("subject"),
    lastSeenTime: instant("last_seen_time"),
    /** The identity provider that created this identity (first login or SCIM); null otherwise. */
    identityProviderUid: uidText("identity_provider_uid").references((): AnyPgColumn => identityProviders.uid, { onDelete: "set null" }),
    /** Its id at that provider: the token's sub or oid (per the provider's correlation rule), the SCIM externalId. */
    externalId: text("external_id"),
    /** False while a SCIM client has deactivated it: it is granted nothing. */
    active: boolean("active").notNull().default(true),
    /** The SCIM User resource's own attributes (userName, name, emails, ...) as the client last wrote them. */
    scim: jsonb("scim").$type<Record<string, unknown>>(),
    /**
     * The caller-maintained IdentityMetadata (UpdateIdentityMetadata) as proto3 JSON, without the fields that
     * are identity columns (uid, name, company).
     */
    metadata: jsonb("metadata").$type<Record<string, unknown>>().notNull().default({}),
    createTime: instant("create_time").notNull().defaultNow(),
    updateTime: instant("update_time").notNull().defaultNow(),
  },
  (t) => [
    index("identities_parent_idx").on(t.parentUid, t.uid),
    index("identities_issuer_subject_idx").on(t.issuer, t.subject),
    index("identities_name_idx").on(t.name, t.uid),
    uniqueIndex("identities_provider_external_idx").on(t.identityProviderUid, t.externalId),
  ],
);

export const roles = pgTable(
  "roles",
  {
    /** Managed roles: 40 hex, no '/'. Custom roles: <group uid>/<16 hex>. */
    uid: uidText("uid").primaryKey(),
    /** Null for managed roles. */
    parentUid: uidText("parent_uid").references(() => groups.uid, { onDelete: "restrict" }),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    /** chainguard.capabilities.Capability values. */
    capabilities: integer("capabilities").array().notNull(),
    managed: boolean("managed").notNull().default(false),
    createTime: instant("create_time").notNull().defaultNow(),
    updateTime: instant("update_time").notNull().defaultNow(),
  },
  (t) => [
    index("roles_parent_idx").on(t.parentUid, t.uid),
    uniqueIndex("roles_managed_name_idx").on(t.name).where(sql`managed`),
  ],
);

export const roleBindings = pgTable(
  "role_bindings",
  {
    /** <group uid>/<16 hex> */
    uid: uidText("uid").primaryKey(),
    groupUid: uidText("group_uid")
      .notNull()
      .references(() => groups.uid, { onDelete: "restrict" }),
    /** Deleting an identity deletes its bindings. */
    identityUid: uidText("identity_uid")
      .notNull()
      .references(() => identities.uid, { onDelete: "cascade" }),
    /** A role still bound cannot be deleted. */
    roleUid: uidText("role_uid")
      .notNull()
      .references(() => roles.uid, { onDelete: "restrict" }),
    /**
     * The external group role mapping that made this binding at a login (null: made by hand). Logins add and
     * remove only these; deleting the mapping deletes them.
     */
    mappingUid: uidText("mapping_uid").references((): AnyPgColumn => externalGroupRoleMappings.uid, { onDelete: "cascade" }),
    createTime: instant("create_time").notNull().defaultNow(),
    updateTime: instant("update_time").notNull().defaultNow(),
  },
  (t) => [
    index("role_bindings_mapping_idx").on(t.mappingUid),
    uniqueIndex("role_bindings_unique_idx").on(t.groupUid, t.identityUid, t.roleUid),
    index("role_bindings_identity_idx").on(t.identityUid, t.groupUid),
    index("role_bindings_group_idx").on(t.groupUid, t.uid),
    index("role_bindings_role_idx").on(t.roleUid),
    // ListRoleBindings orders by create_time or update_time (then uid): a page walks one of these in order.
    index("role_bindings_create_time_idx").on(t.createTime, t.uid),
    index("role_bindings_update_time_idx").on(t.updateTime, t.uid),
  ],
);

/** Keys this server signs its tokens with. The newest unretired key signs; all unexpired ones verify. */
export const signingKeys = pgTable("signing_keys", {
  kid: text("kid").primaryKey(),
  alg: text("alg").notNull(),
  /** Private JWK (this database is the key store: protect it accordingly). */
  privateJwk: jsonb("private_jwk").$type<Record<string, unknown>>().notNull(),
  publicJwk: jsonb("public_jwk").$type<Record<string, unknown>>().notNull(),
  createTime: instant("create_time").notNull().defaultNow(),
  /** Set when a newer key takes over signing; the key keeps verifying (and is published) until then + max token lifetime. */
  retireTime: instant("retire_time"),
});

// Single sign-on: an organization's identity providers (OIDC), the role mappings of their groups, and the
// SCIM credential of each provider.
//
// A provider belongs to a group (RESTRICT) and names a default role (RESTRICT: a role in use as a default
// cannot be deleted). Its OIDC client secret is stored encrypted (never in clear, never returned). A mapping
// belongs to a provider and goes with it (CASCADE); bindings a mapping made go with the mapping. Identities a
// provider created (first login, SCIM) carry the provider and their external id (the token's sub or oid, the
// SCIM externalId): unique per provider, which is how a repeat login or a SCIM update finds them.
export const identityProviders = pgTable(
  "identity_providers",
  {
    /** <group uid>/<16 hex> */
    uid: uidText("uid").primaryKey(),
    groupUid: uidText("group_uid")
      .notNull()
      .references(() => groups.uid, { onDelete: "restrict" }),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    defaultRoleUid: uidText("default_role_uid")
      .notNull()
      .references(() => roles.uid, { onDelete: "restrict" }),
    oidcIssuer: text("oidc_issuer").notNull(),
    oidcClientId: text("oidc_client_id").notNull(),
    /** The client secret, encrypted (iam/secret-box.ts); null when none was given (PKCE). */
    oidcClientSecret: text("oidc_client_secret"),
    oidcAdditionalScopes: text("oidc_additional_scopes").array().notNull().default([]),
    /** The claim listing the user's groups; empty means "groups". */
    oidcGroupsClaim: text("oidc_groups_claim").notNull().default(""),
    /** IdentityProvider.OIDC.CorrelationRule; immutable after create. */
    oidcCorrelationRule: integer("oidc_correlation_rule").notNull().default(0),
    oidcPkceEnabled: boolean("oidc_pkce_enabled").notNull().default(false),
    scimEnabled: boolean("scim_enabled").notNull().default(false),
    /** Changes with every change of the SCIM state (token or enabled): optimistic concurrency for its methods. */
    scimEtag: text("scim_etag").notNull().default(sql`gen_random_uuid()::text`),
    /** sha256 (hex) of the live SCIM token; null when none was issued or it was revoked. */
    scimTokenHash: text("scim_token_hash"),
    /** Null with a live token: it never expires. */
    scimTokenExpireTime: instant("scim_token_expire_time"),
    /** The token a regeneration replaced, valid until its own expire time (the overlap). */
    scimPreviousTokenHash: text("scim_previous_token_hash"),
    scimPreviousTokenExpireTime: instant("scim_previous_token_expire_time"),
    scimRevokeTime: instant("scim_revoke_time"),
    createTime: instant("create_time").notNull().defaultNow(),
    updateTime: instant("update_time").notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("identity_providers_group_name_idx").on(t.groupUid, t.name),
    index("identity_providers_name_idx").on(t.name, t.uid),
    index("identity_providers_create_time_idx").on(t.createTime, t.uid),
    index("identity_providers_update_time_idx").on(t.updateTime, t.uid),
    index("identity_providers_default_role_idx").on(t.defaultRoleUid),
    uniqueIndex("identity_providers_scim_token_idx").on(t.scimTokenHash),
    uniqueIndex("identity_providers_scim_previous_token_idx").on(t.scimPreviousTokenHash),
  ],
);

export const externalGroupRoleMappings = pgTable(
  "external_group_role_mappings",
  {
    /** <identity provider uid>/<16 hex> */
    uid: uidText("uid").primaryKey(),
    identityProviderUid: uidText("identity_provider_uid")
      .notNull()
      .references(() => identityProviders.uid, { onDelete: "cascade" }),
    /** The group's id in the provider's groups claim. */
    externalGroupId: text("external_group_id").notNull(),
    roleUid: uidText("role_uid")
      .notNull()
      .references(() => roles.uid, { onDelete: "restrict" }),
    /** Where the binding is made: the organization (root group) of the provider. */
    scope: uidText("scope")
      .notNull()
      .references(() => groups.uid, { onDelete: "restrict" }),
    createTime: instant("create_time").notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("external_group_role_mappings_unique_idx").on(t.identityProviderUid, t.externalGroupId, t.roleUid, t.scope),
    index("external_group_role_mappings_create_time_idx").on(t.createTime, t.uid),
    index("external_group_role_mappings_role_idx").on(t.roleUid),
  ],
);

export type IdentityProviderRow = typeof identityProviders.$inferSelect;
export type ExternalGroupRoleMappingRow = typeof externalGroupRoleMappings.$inferSelect;

// Row shapes the IAM stores return and its mappers read (neither imports the other).
export type GroupRow = typeof groups.$inferSelect;
export type IdentityRow = typeof identities.$inferSelect;
export type RoleRow = typeof roles.$inferSelect;
export type RoleBindingRow = typeof roleBindings.$inferSelect;

/** The group columns a client writes. */
export type GroupFields = Pick<GroupRow, "name" | "description" | "verified" | "kind">;
/** The identity columns a client writes: its texts and its relationship (see identities.mapper.ts). */
export type IdentityFields = Pick<IdentityRow, "name" | "description" | "company" | "relationship" | "relationshipType" | "issuer" | "subject">;
/** What UpdateIdentityMetadata writes: the company column and the rest of the metadata. */
export type IdentityMetadataFields = Pick<IdentityRow, "company" | "metadata">;
/** A role binding read with the fields of its identity, group and role (one query joining them). */
export interface HydratedRoleBindingRow {
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
