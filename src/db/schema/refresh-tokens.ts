// Refresh tokens of the token exchange (sts/refresh-tokens.store.ts): opaque, stored only as their sha256,
// bound to an identity, to the audience of the access token they were issued with, and to what that token was
// restricted to (the exchange's scopes and cap).
//
// Every exchange that asks for one starts a chain; each use marks the token used and issues its successor
// in the same chain. Used tokens are kept (until they expire) so that presenting one again is recognised as
// reuse, which revokes the whole chain. Deleting the identity deletes its tokens (CASCADE); deleting its last
// role binding deletes them too (the trigger of the refresh_tokens_end migration). A chain ends at a fixed
// time after the exchange that started it (not_after), however often it is used.
import { index, integer, pgTable, text, uniqueIndex, uuid } from "drizzle-orm/pg-core";
import { instant, uidText } from "./columns.js";
import { identities } from "./iam.js";

export const refreshTokens = pgTable(
  "refresh_tokens",
  {
    id: uuid("id").primaryKey().defaultRandom(),
    /** The id of the chain's first token (issued by Exchange): what a reuse revokes. */
    chainId: uuid("chain_id").notNull(),
    identityUid: uidText("identity_uid")
      .notNull()
      .references(() => identities.uid, { onDelete: "cascade" }),
    /** The access tokens' `aud` as the exchange asked for it; empty: this server's issuer URL, as a string. */
    audience: text("audience").array().notNull(),
    /** The exchanged token's issuer and subject: the `act` of every access token of the chain. */
    upstreamIssuer: text("upstream_issuer").notNull(),
    upstreamSubject: text("upstream_subject").notNull(),
    /** A down-scoped chain: the groups its access tokens are restricted to; null: no restriction by group. */
    scopes: text("scopes").array(),
    /** A down-scoped chain: the capabilities (enum numbers) its access tokens are restricted to; null: none. */
    capabilities: integer("capabilities").array(),
    /**
     * Nothing of the chain outlives this: the refresh token lifetime after the exchange that started it, or a
     * StaticKeys identity's expiration_time when sooner. Null only on chains started before it was always set.
     */
    notAfter: instant("not_after"),
    /**
     * For a chain started by a login through an identity provider: the identity's bindings made by the
     * provider's group mappings at that login ("<role uid>@<group uid>", sorted). The chain ends when they
     * differ (a later login, or a change of the mappings); null for other chains.
     */
    mappedRoles: text("mapped_roles").array(),
    /** sha256 (hex) of the token. */
    tokenHash: text("token_hash").notNull(),
    createTime: instant("create_time").notNull().defaultNow(),
    expireTime: instant("expire_time").notNull(),
    /** When it was exchanged for its successor; presenting it again after that is reuse. */
    usedTime: instant("used_time"),
    /** When its chain was revoked (a reuse). */
    revokeTime: instant("revoke_time"),
  },
  (t) => [
    uniqueIndex("refresh_tokens_hash_idx").on(t.tokenHash),
    index("refresh_tokens_chain_idx").on(t.chainId),
    index("refresh_tokens_identity_idx").on(t.identityUid),
    index("refresh_tokens_expire_time_idx").on(t.expireTime),
  ],
);
