// Single sign-on: an organization's identity providers (OIDC), the role mappings of their groups, and the
// SCIM credential of each provider.
//
// A provider belongs to a group (RESTRICT) and names a default role (RESTRICT: a role in use as a default
// cannot be deleted). Its OIDC client secret is stored encrypted (never in clear, never returned). A mapping
// belongs to a provider and goes with it (CASCADE); bindings a mapping made go with the mapping. Identities a
// provider created (first login, SCIM) carry the provider and their external id (the token's sub or oid, the
// SCIM externalId): unique per provider, which is how a repeat login or a SCIM update finds them.
import { sql } from "drizzle-orm";
import { boolean, index, integer, pgTable, text, uniqueIndex } from "drizzle-orm/pg-core";
import { instant, uidText } from "./columns.js";
import { groups, roles } from "./iam.js";

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
