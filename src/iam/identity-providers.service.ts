// IdentityProvidersService: an organization's own OIDC identity providers, and the SCIM credential of each.
// Scoped methods are authorized by the auth interceptor from the group in the request's uid (or parent);
// ListIdentityProviders is unscoped and filters to the caller's visible scopes.
//
// Decisions:
// - name: 3 to 63 characters, unique within the group (ALREADY_EXISTS naming the provider that has it).
// - default_role: a managed role, or a custom role of the provider's group or of one of its ancestors (as
//   for role bindings); anything else is INVALID_ARGUMENT, a role of another organization included (its
//   existence is never told). No escalation: the caller must hold every capability of the default role on
//   the provider's group (PERMISSION_DENIED), on create and on any update that changes the default role or
//   the OIDC configuration (who may log in decides who gets the role). A change of what decides who the
//   provider's people are (issuer, client id, groups claim, correlation rule) needs, beyond that, every
//   capability of every role the provider's mappings grant, on the mapping's scope; it then drops the
//   bindings those mappings made, and a new issuer or client id unties the provider's identities from it
//   (they stay, as when the provider is deleted): an identity made for one issuer's subject is never
//   handed to another issuer's subject of the same name.
// - oidc is required. issuer: https, no credentials, query or fragment; plain http only to a loopback host
//   when the server allows insecure loopback issuers (development). client_id is required, and a
//   client_secret unless pkce_enabled. An unspecified correlation_rule is stored as SUB_EQUALS_EXTERNAL_ID;
//   the rule is IMMUTABLE after create (changing it: INVALID_ARGUMENT on update_mask).
// - client_secret is write-only: sealed with AES-256-GCM (secret-box.ts) bound to the provider's uid,
//   never returned (every response carries it empty), never logged, redacted from events (debug_redact).
//   On update, an empty secret keeps the stored one unless the mask names it (`oidc.client_secret`, `oidc`
//   or `*`): then it is cleared (and pkce_enabled must be set). Without a key (production without
//   IDP_SECRET_KEY) a secret cannot be stored: FAILED_PRECONDITION with type NO_SECRET_KEY.
// - scim (output only): enabled, endpoint_url (`<issuer>/scim/v2/<provider uid>`), the token times, the
//   credential state at the time of the read, and the etag of the SCIM state, which changes with every
//   change of it (a token generated, regenerated or revoked; SCIM turned on or off).
// - GenerateScimToken and RegenerateScimToken: whoever holds the token provisions people with the default
//   role and decides whose logins land on them, so the caller must hold every capability the provider can
//   grant (its default role's, and every mapped role's on the mapping's scope): PERMISSION_DENIED otherwise.
// - GenerateScimToken: the token is returned once and stored as its sha256 (`cgscim_` and 64 hex digits).
//   expire_time defaults to a year from now and may be at most 2 years (731 days) away; never_expires asks
//   for a token with no expiry (both together: INVALID_ARGUMENT). Such a token is shown as LIVE with no
//   token_expire_time, and ends as any other does: RevokeScimToken ends it at once, RegenerateScimToken
//   replaces it. While a token is live (LIVE or ROTATING) Generate is FAILED_PRECONDITION (SCIM_TOKEN_LIVE);
//   after expiry or revocation a new one may be generated (or regenerated).
// - RegenerateScimToken: etag required (INVALID_ARGUMENT), stale: FAILED_PRECONDITION (ETAG_MISMATCH). It
//   re-keys a live, expired or revoked token; a provider that never had one is NOT_FOUND (generate first).
//   A live replaced token stays valid for `overlap` (default 1 hour; a longer one is capped at 24 hours,
//   a negative one is INVALID_ARGUMENT), never beyond its own expiry; an expired or revoked one stays dead (no previous_token_expire_time); a token still overlapping
//   from an earlier regeneration ends at once. requested_overlap echoes the overlap asked for (defaulted).
// - RevokeScimToken ends the current and the previous token at once; with no token to end it changes
//   nothing and answers the state as it is (revoking twice is not an error). SCIM stays enabled or not.
// - SetScimEnabled: etag required and checked as above. Turning it on requires at least two active
//   identities bound to the owner role on the provider's organization (its root group), not counting
//   identities this provider created (its SCIM client could deactivate them): FAILED_PRECONDITION
//   TOO_FEW_OWNERS otherwise. Setting the state it already has changes nothing (the etag stays).
// - Deleting a provider deletes its mappings (and the bindings they made); the identities it created stay.
import { create } from "@bufbuild/protobuf";
import { DurationSchema, durationFromMs, timestampDate, timestampFromDate, type Duration, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { HandlerContext, ServiceImpl } from "@connectrpc/connect";
import { randomUUID } from "node:crypto";
import {
  GenerateScimTokenResponseSchema,
  IdentityProvider_SCIM_CredentialState as CredentialState,
  IdentityProvider_SCIMSchema,
  IdentityProviderSchema,
  IdentityProvidersService,
  ListIdentityProvidersResponseSchema,
  RegenerateScimTokenResponseSchema,
  RevokeScimTokenResponseSchema,
  SetScimEnabledResponseSchema,
  type IdentityProvider,
} from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import type { IdentityProviderRow } from "../db/schema/index.js";
import { accessOf, listScopesOf } from "../kernel/auth/index.js";
import { failedPrecondition, invalidArgument, notFound, throwIfAny, under } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { updateUnderLock } from "../kernel/update.js";
import { newChildUid, parentOf } from "../kernel/uidp.js";
import { bindService, type ServiceBinding } from "../kernel/module.js";
import type { IamDeps } from "./deps.js";
import {
  credentialStateOf,
  hasLiveToken,
  identityProviderFields,
  oidcOf,
  scimEndpointUrl,
  STORED_SECRET,
  toIdentityProvider,
  toUpdatable,
} from "./identity-providers.mapper.js";
import { createIdentityProviderStore } from "./identity-providers.store.js";
import { identityProviderViolations, isRoleVisibleFrom } from "./identity-providers.validate.js";
import { managedRole } from "./managed-roles.js";
import { organizationOf } from "./role-bindings.rules.js";
import { requireNoEscalation } from "./roles.rules.js";
import { createRoleStore } from "./roles.store.js";
import { newScimToken, scimTokenHash } from "./scim-token.js";
import { NoSecretKeyError } from "./secret-box.js";

const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
export const DEFAULT_SCIM_TOKEN_LIFETIME_MS = 365 * DAY_MS;
/** Two years, one of them possibly a leap year. */
export const MAX_SCIM_TOKEN_LIFETIME_MS = 731 * DAY_MS;
export const DEFAULT_SCIM_OVERLAP_MS = HOUR_MS;
export const MAX_SCIM_OVERLAP_MS = 24 * HOUR_MS;

export const identityProviderList = defineListSpec({
  name: "iam.v2.ListIdentityProviders",
  message: IdentityProviderSchema,
  orderBy: ["name", "create_time", "update_time"],
  defaultOrder: "name",
});

/**
 * The provider as a client may write it on create: output-only fields dropped. (Not writableOf: that applies
 * the update rules, which refuse setting the IMMUTABLE correlation_rule; a create sets it.)
 */
function writable(p: IdentityProvider): IdentityProvider {
  return create(IdentityProviderSchema, {
    name: p.name,
    description: p.description,
    defaultRole: p.defaultRole,
    configuration: p.configuration,
  });
}

/** The expiry of a new SCIM token at `now`, from the request's expire_time and never_expires: null for none. */
function tokenExpiry(expireTime: Timestamp | undefined, neverExpires: boolean, now: Date): Date | null {
  if (neverExpires) {
    if (expireTime) throw invalidArgument({ field: "never_expires", description: "must not be set together with expire_time" });
    return null;
  }
  if (!expireTime) return new Date(now.getTime() + DEFAULT_SCIM_TOKEN_LIFETIME_MS);
  const at = timestampDate(expireTime);
  if (!(at.getTime() > now.getTime())) throw invalidArgument({ field: "expire_time", description: "must be in the future" });
  if (at.getTime() - now.getTime() > MAX_SCIM_TOKEN_LIFETIME_MS) {
    throw invalidArgument({ field: "expire_time", description: "must be at most 2 years (731 days) from now" });
  }
  return at;
}

/**
 * The overlap of a regeneration: as requested (the default when none was), and in effect (ms), capped at
 * 24 hours as the published contract says ("capped server-side"), so a longer request is not an error.
 */
function overlapOf(d: Duration | undefined): { requested: Duration; ms: number } {
  if (!d) return { requested: durationFromMs(DEFAULT_SCIM_OVERLAP_MS), ms: DEFAULT_SCIM_OVERLAP_MS };
  if (d.seconds < 0n || d.nanos < 0) throw invalidArgument({ field: "overlap", description: "must not be negative" });
  const ms = d.seconds > BigInt(MAX_SCIM_OVERLAP_MS / 1000) ? MAX_SCIM_OVERLAP_MS : Math.min(MAX_SCIM_OVERLAP_MS, Number(d.seconds) * 1000 + Math.trunc(d.nanos / 1e6));
  return { requested: create(DurationSchema, { seconds: d.seconds, nanos: d.nanos }), ms };
}

function requireEtag(etag: string): void {
  if (etag === "") throw invalidArgument({ field: "etag", description: "is required: the etag of the provider's SCIM state (identity_provider.scim.etag)" });
}

function checkEtag(row: IdentityProviderRow, etag: string): void {
  if (row.scimEtag !== etag) {
    throw failedPrecondition({
      type: "ETAG_MISMATCH",
      subject: row.uid,
      description: "the etag does not match the provider's current SCIM state: read the provider again and retry with its scim.etag",
    });
  }
}

export function identityProvidersBindings(deps: IamDeps): ServiceBinding[] {
  const providers = storeFactory(deps.db, createIdentityProviderStore);
  const roles = storeFactory(deps.db, createRoleStore);
  const toMessage = (row: IdentityProviderRow) => toIdentityProvider(row, deps.issuerUrl);
  // Where an issuer may be: the outbound policy of every destination a user names (ALLOW_PRIVATE_OUTBOUND).
  const issuers = { ...deps.sinks, allowInsecureLoopback: deps.allowInsecureLoopbackIssuers };

  /**
   * The default role means something on `group` and exists (share-locked against a change of its
   * capabilities until the call ends), and the caller (holding `held` on the group) holds all of them.
   */
  const checkDefaultRole = async (ctx: HandlerContext, held: ReadonlySet<number>, group: string, role: string, field: string) => {
    if (!isRoleVisibleFrom(role, group)) {
      throw invalidArgument({ field, description: `must name a managed role or a custom role defined on ${JSON.stringify(group)} or one of its ancestors` });
    }
    const [found] = await roles(ctx).findShared([role]);
    if (!found) throw invalidArgument({ field, description: "does not name an existing role" });
    requireNoEscalation(held, found.capabilities, group, `default role ${JSON.stringify(role)}`);
  };

  /**
   * The caller holds every capability the provider can grant: its default role's on its group (`held`),
   * and each mapped role's on the mapping's scope, the organization (roles share-locked until the call
   * ends). Whoever decides who the provider's people are (its OIDC identity settings, its SCIM token)
   * decides who gets all of them.
   */
  const requireAllGrantable = async (ctx: HandlerContext, held: ReadonlySet<number>, provider: { uid: string; groupUid: string; defaultRoleUid: string }, what: string) => {
    const mapped = await providers(ctx).mappedRoles(provider.uid);
    const found = new Map((await roles(ctx).findShared([provider.defaultRoleUid, ...mapped.map((m) => m.roleUid)])).map((r) => [r.uid, r]));
    requireNoEscalation(held, found.get(provider.defaultRoleUid)?.capabilities ?? [], provider.groupUid, `${what}: the default role ${JSON.stringify(provider.defaultRoleUid)}`);
    for (const m of mapped) {
      const heldThere = m.scope === provider.groupUid ? held : await accessOf(ctx).capabilitiesAt(m.scope);
      requireNoEscalation(heldThere, found.get(m.roleUid)?.capabilities ?? [], m.scope, `${what}: the mapped role ${JSON.stringify(m.roleUid)}`);
    }
  };

  /** The sealed secret for the provider `uid`, or null for none. */
  const seal = (secret: string, uid: string): string | null => {
    if (secret === "") return null;
    try {
      return deps.secretBox.seal(secret, uid);
    } catch (err) {
      if (!(err instanceof NoSecretKeyError)) throw err;
      throw failedPrecondition({
        type: "NO_SECRET_KEY",
        description: "this server has no key to encrypt client secrets (IDP_SECRET_KEY): use pkce_enabled without a client_secret",
      });
    }
  };

  const impl: ServiceImpl<typeof IdentityProvidersService> = {
    async createIdentityProvider(req, ctx) {
      // parent: checked by the interceptor (IDENTITY_PROVIDERS_CREATE and ROLE_BINDINGS_CREATE).
      const p = writable(req.identityProvider ?? create(IdentityProviderSchema));
      throwIfAny(under("identity_provider", await identityProviderViolations(p, issuers)));
      const held = await accessOf(ctx).capabilitiesAt(req.parent);
      await checkDefaultRole(ctx, held, req.parent, p.defaultRole, "identity_provider.default_role");
      const uid = newChildUid(req.parent);
      const fields = { ...identityProviderFields(p), oidcClientSecret: seal(oidcOf(p).clientSecret, uid) };
      const [row] = await providers(ctx).insert(req.parent, [{ uid, groupUid: req.parent, ...fields }]);
      return toMessage(row!);
    },

    async getIdentityProvider(req, ctx) {
      return toMessage(await providers(ctx).get(req.uid));
    },

    async listIdentityProviders(req, ctx) {
      const scopes = await listScopesOf(ctx);
      const page = await providers(ctx).list(deps.lists.plan(req, identityProviderList, scopes), { scopes, uidp: req.uidp, name: req.name });
      return create(ListIdentityProvidersResponseSchema, { identityProviders: page.rows.map(toMessage), ...pageFields(page) });
    },

    async updateIdentityProvider(req, ctx) {
      // identity_provider.uid: checked by the interceptor (IDENTITY_PROVIDERS_UPDATE and ROLE_BINDINGS_CREATE).
      const patch = req.identityProvider;
      if (!patch) throw invalidArgument({ field: "identity_provider", description: "is required" });
      const group = parentOf(patch.uid);
      if (group === undefined) throw notFound(IdentityProviderSchema.typeName, patch.uid);
      const held = await accessOf(ctx).capabilitiesAt(group);
      // What the change re-points: the people (issuer, client id) or what their groups are read from.
      let repointed: "people" | "groups" | undefined;
      const row = await updateUnderLock(providers(ctx), patch.uid, patch, req.updateMask, {
        schema: IdentityProviderSchema,
        field: "identity_provider",
        toMessage: toUpdatable,
        toFields: (next, current) => {
          const secret = oidcOf(next).clientSecret;
          return { ...identityProviderFields(next), oidcClientSecret: secret === STORED_SECRET ? current.oidcClientSecret : seal(secret, current.uid) };
        },
        check: async (next, changed, current) => {
          const violations = await identityProviderViolations(next, issuers, changed);
          if (violations.length > 0) return violations;
          if (changed.some((p) => p === "default_role" || p === "oidc" || p.startsWith("oidc."))) {
            await checkDefaultRole(ctx, held, current.groupUid, next.defaultRole, "identity_provider.default_role");
          }
          const fields = identityProviderFields(next);
          if (fields.oidcIssuer !== current.oidcIssuer || fields.oidcClientId !== current.oidcClientId) repointed = "people";
          else if (fields.oidcGroupsClaim !== current.oidcGroupsClaim || fields.oidcCorrelationRule !== current.oidcCorrelationRule) repointed = "groups";
          if (repointed) {
            await requireAllGrantable(ctx, held, { uid: current.uid, groupUid: current.groupUid, defaultRoleUid: fields.defaultRoleUid }, "changing who the provider's people are");
          }
          return [];
        },
      });
      // Nothing made under the old settings carries over: mapped bindings go (the next login brings them back
      // as the new settings say), and on a new issuer or client the identities are no longer the provider's.
      if (repointed) await providers(ctx).dropMappedBindings(row.uid);
      if (repointed === "people") await providers(ctx).detachIdentities(row.uid);
      return toMessage(row);
    },

    async deleteIdentityProvider(req, ctx) {
      await providers(ctx).remove(req.uid);
      return {};
    },

    async generateScimToken(req, ctx) {
      const now = new Date();
      const expire = tokenExpiry(req.expireTime, req.neverExpires, now);
      const uid = req.identityProviderUid;
      const row = await providers(ctx).lock(uid);
      await requireAllGrantable(ctx, await accessOf(ctx).capabilitiesAt(row.groupUid), row, "a SCIM token of this provider");
      if (hasLiveToken(row, now)) {
        throw failedPrecondition({
          type: "SCIM_TOKEN_LIVE",
          subject: uid,
          description: "the identity provider has a live SCIM token: regenerate it (RegenerateScimToken) or revoke it first",
        });
      }
      const token = newScimToken();
      const next = await providers(ctx).write(uid, {
        scimTokenHash: scimTokenHash(token),
        scimTokenExpireTime: expire,
        scimPreviousTokenHash: null,
        scimPreviousTokenExpireTime: null,
        scimRevokeTime: null,
        scimEtag: randomUUID(),
      });
      return create(GenerateScimTokenResponseSchema, {
        token,
        endpointUrl: scimEndpointUrl(deps.issuerUrl, uid),
        expireTime: expire ? timestampFromDate(expire) : undefined,
        identityProviderUid: uid,
        etag: next.scimEtag,
      });
    },

    async regenerateScimToken(req, ctx) {
      requireEtag(req.etag);
      const now = new Date();
      const expire = tokenExpiry(req.expireTime, req.neverExpires, now);
      const overlap = overlapOf(req.overlap);
      const uid = req.identityProviderUid;
      const row = await providers(ctx).lock(uid);
      await requireAllGrantable(ctx, await accessOf(ctx).capabilitiesAt(row.groupUid), row, "a SCIM token of this provider");
      checkEtag(row, req.etag);
      if (credentialStateOf(row, now) === CredentialState.NOT_ISSUED) {
        throw notFound(IdentityProvider_SCIMSchema.typeName, uid, `identity provider ${uid} has never had a SCIM token to regenerate: generate one (GenerateScimToken)`);
      }
      // A live replaced token overlaps for `overlap`, never beyond its own expiry; a dead one stays dead.
      const end = hasLiveToken(row, now) ? Math.min(now.getTime() + overlap.ms, row.scimTokenExpireTime?.getTime() ?? Infinity) : now.getTime();
      const previousExpire = end > now.getTime() ? new Date(end) : null;
      const token = newScimToken();
      const next = await providers(ctx).write(uid, {
        scimTokenHash: scimTokenHash(token),
        scimTokenExpireTime: expire,
        scimPreviousTokenHash: previousExpire ? row.scimTokenHash : null,
        scimPreviousTokenExpireTime: previousExpire,
        scimRevokeTime: null,
        scimEtag: randomUUID(),
      });
      return create(RegenerateScimTokenResponseSchema, {
        token,
        endpointUrl: scimEndpointUrl(deps.issuerUrl, uid),
        expireTime: expire ? timestampFromDate(expire) : undefined,
        identityProviderUid: uid,
        etag: next.scimEtag,
        previousTokenExpireTime: previousExpire ? timestampFromDate(previousExpire) : undefined,
        requestedOverlap: overlap.requested,
      });
    },

    async revokeScimToken(req, ctx) {
      const uid = req.identityProviderUid;
      let row = await providers(ctx).lock(uid);
      if (row.scimTokenHash !== null || row.scimPreviousTokenHash !== null) {
        row = await providers(ctx).write(uid, {
          scimTokenHash: null,
          scimTokenExpireTime: null,
          scimPreviousTokenHash: null,
          scimPreviousTokenExpireTime: null,
          scimRevokeTime: new Date(),
          scimEtag: randomUUID(),
        });
      }
      return create(RevokeScimTokenResponseSchema, {
        identityProviderUid: uid,
        etag: row.scimEtag,
        enabled: row.scimEnabled,
        revokeTime: row.scimRevokeTime ? timestampFromDate(row.scimRevokeTime) : undefined,
      });
    },

    async setScimEnabled(req, ctx) {
      requireEtag(req.etag);
      const uid = req.identityProviderUid;
      let row = await providers(ctx).lock(uid);
      checkEtag(row, req.etag);
      if (req.enabled !== row.scimEnabled) {
        if (req.enabled) {
          const org = organizationOf(row.groupUid);
          const owners = await providers(ctx).holdersOn(org, managedRole("owner").uid, uid);
          if (owners < 2) {
            throw failedPrecondition({
              type: "TOO_FEW_OWNERS",
              subject: org,
              description: `SCIM provisioning can deactivate identities: turning it on requires at least 2 identities bound to the owner role on the organization ${org} (not counting identities this provider created); it has ${owners}`,
            });
          }
        }
        row = await providers(ctx).write(uid, { scimEnabled: req.enabled, scimEtag: randomUUID() });
      }
      return create(SetScimEnabledResponseSchema, { identityProviderUid: uid, enabled: row.scimEnabled, etag: row.scimEtag });
    },
  };

  return [bindService(IdentityProvidersService, impl)];
}
