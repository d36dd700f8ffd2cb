// Login through an organization's identity provider (the kernel's ProviderLogin, which the token exchange
// calls with `identity_provider`): the ID token is verified against the provider's issuer and client id
// (kernel/auth/external.ts fetches and caches its discovery document and keys), correlated to an identity
// by the provider's rule, and the identity is created on first login. Every login then brings the bindings
// the provider's group mappings made in line with the token's groups claim. One transaction does it all.
//
//   correlation      SUB (the default) or OID: identities.external_id is the token's `sub` or its `oid` claim
//                    (Entra ID's object id, the same for every application, as SCIM's externalId is), unique
//                    per provider. Concurrent first logins of one person create one identity: the insert
//                    yields to the unique index (ON CONFLICT DO NOTHING) and reads the winner's row.
//   first login      an identity under the provider's group, named from the token (name, preferred_username
//                    or email, made to fit the identity name pattern), its email when the provider says it is
//                    verified (else as unverified), relationship claim_match {issuer: the provider's issuer,
//                    subject: the token's sub} (OID providers add the claim {oid: <oid>}, so it stays tied to
//                    the object id); bound to the provider's default role on the provider's group (a binding
//                    made by hand: mapping_uid null, never touched by sync).
//   groups sync      the groups claim (oidc_groups_claim, default "groups": a list of strings; one string is
//                    taken as a list of one, anything else or no claim as no groups, so a provider that omits
//                    the claim takes the mapped roles away rather than leaving stale ones): a binding (on the
//                    mapping's scope, for its role, mapping_uid set) for each mapping whose external group the
//                    token lists; bindings made by a mapping whose group it no longer lists are deleted.
//                    Bindings with mapping_uid null are never touched; where one already binds the same
//                    role on the same group, no mapped binding is added beside it (one binding per group,
//                    identity and role).
//   deactivated      an identity a SCIM client deactivated (active = false) is refused, and nothing changes.
//
// Events: what a login changes is recorded in the outbox in its transaction, as the methods that make the
// same changes record it (identity created, role binding created or deleted: their types, bodies and
// groups), with the identity logging in as the actor and the token exchange as the method that emitted it.
//
// The login is a unit of work (kernel/unit-of-work.ts): one transaction, rolled back when the exchange's
// call was aborted meanwhile. Role binding writes fire the grants NOTIFY trigger (other replicas forget);
// this replica's own cache is told at once through `grantsChanged`, after the commit and before the exchange
// answers, when the login created or changed anything.
import { create } from "@bufbuild/protobuf";
import { IdentityProvider_OIDC_CorrelationRule as CorrelationRule } from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { IdentitiesService } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { SecurityTokenService } from "../../gen/platform/oidc/v1/oidc.platform_pb.js";
import type { Db } from "../db/client.js";
import type { IdentityRow } from "../db/schema/index.js";
import { ExternalTokenError, type ExternalTokenVerifier } from "../kernel/auth/external.js";
import type { ProviderLogin } from "../kernel/auth/provider-login.js";
import { registry } from "../kernel/descriptors.js";
import { unauthenticated } from "../kernel/errors/index.js";
import { log } from "../kernel/log.js";
import type { Executor } from "../kernel/store.js";
import { runUnitOfWork, type EventedChange } from "../kernel/unit-of-work.js";
import { isValidUid } from "../kernel/uidp.js";
import { identityFromToken, toIdentity } from "./identities.mapper.js";
import { createIdentityStore } from "./identities.store.js";
import { createIdentityProviderStore, type LoginProvider } from "./identity-providers.store.js";
import { toRoleBinding } from "./role-bindings.mapper.js";
import { createRoleBindingStore } from "./role-bindings.store.js";

export interface ProviderLoginOptions {
  db: Db;
  /** Verifies the provider's ID tokens (the server's external verifier). */
  verifier: Pick<ExternalTokenVerifier, "verifyIdToken">;
  /** Makes this replica forget the grants it remembered (bindings changed). */
  grantsChanged?: (() => void) | undefined;
}

/** The groups claim when the provider names none. */
export const DEFAULT_GROUPS_CLAIM = "groups";

/** The most groups of a token looked at (a token is at most 64 KiB anyway). */
const MAX_GROUPS = 1000;

const notAccepted = (why: string) => new ExternalTokenError("NOT_ACCEPTED", why);

/** The token's groups (see the file comment). */
export function groupsOf(claims: Record<string, unknown>, claim: string): string[] {
  const value = claims[claim || DEFAULT_GROUPS_CLAIM];
  if (typeof value === "string") return [value];
  if (!Array.isArray(value)) return [];
  return value.filter((g): g is string => typeof g === "string").slice(0, MAX_GROUPS);
}

/** The token's id at the provider, by the provider's correlation rule. */
function externalIdOf(rule: number, claims: Record<string, unknown>, sub: string): string {
  if (rule !== CorrelationRule.OID_EQUALS_EXTERNAL_ID) return sub;
  const oid = claims.oid;
  if (typeof oid !== "string" || oid === "") throw notAccepted("the token has no oid claim, which the provider's correlation rule needs");
  return oid;
}

const EXCHANGE_PATH = `/${SecurityTokenService.typeName}/${SecurityTokenService.method.exchange.name}`;

/** What one login changed, as the methods making the same changes describe it (for their events). */
async function loginChanges(tx: Executor, change: { created?: IdentityRow | undefined; added: string[]; removed: string[] }): Promise<EventedChange[]> {
  const changes: EventedChange[] = [];
  if (change.created) changes.push({ method: IdentitiesService.method.createIdentity, response: toIdentity(change.created) });
  for (const b of await createRoleBindingStore(tx).findHydratedMany(change.added)) {
    changes.push({ method: RoleBindingsService.method.createRoleBinding, response: toRoleBinding(b) });
  }
  for (const uid of change.removed) {
    changes.push({ method: RoleBindingsService.method.deleteRoleBinding, request: create(RoleBindingsService.method.deleteRoleBinding.input, { uid }) });
  }
  return changes;
}

export function createProviderLogin(opts: ProviderLoginOptions): ProviderLogin {
  const { db } = opts;

  return {
    async login(providerUid, token, signal) {
      let provider: LoginProvider | undefined;
      const verified = await opts.verifier.verifyIdToken(token, async () => {
        if (!isValidUid(providerUid)) return undefined;
        provider = await createIdentityProviderStore(db).findForLogin(providerUid);
        return provider && { issuer: provider.oidcIssuer, clientId: provider.oidcClientId };
      });
      const p = provider!;
      const claims = verified.claims as Record<string, unknown>;
      const externalId = externalIdOf(p.oidcCorrelationRule, claims, verified.subject);
      const groups = groupsOf(claims, p.oidcGroupsClaim);

      const outcome = await runUnitOfWork({ db, registry, signal, grantsChanged: opts.grantsChanged }, async (unit) => {
        const { tx } = unit;
        const identityStore = createIdentityStore(tx);
        const columns = () =>
          identityFromToken({
            issuer: p.oidcIssuer,
            subject: verified.subject,
            claims,
            ...(p.oidcCorrelationRule === CorrelationRule.OID_EQUALS_EXTERNAL_ID ? { matchClaims: { oid: externalId } } : {}),
          });
        // Not inserted: a concurrent first login of the same person committed it first (its insert held ours
        // until then); it is read then. Only a first login binds the default role.
        const row = await identityStore.findOrCreateBound({
          find: () => identityStore.lockByProvider(p.uid, externalId),
          insert: () => identityStore.insertForToken(p.groupUid, columns(), { uid: p.uid, externalId }),
          group: p.groupUid,
          role: p.defaultRoleUid,
          bindFound: false,
        });
        const { created } = row;
        const defaultBinding = row.binding?.created ? [row.binding.uid] : [];
        if (!row.active) {
          unit.keepGrants();
          return { uid: row.uid, active: false, created: false };
        }
        const { added, removed } = await createIdentityProviderStore(tx).syncMappedBindings(p.uid, row.uid, groups);
        unit.record(await loginChanges(tx, { created, added: [...defaultBinding, ...added], removed }), { actor: row.uid, source: EXCHANGE_PATH });
        if (created === undefined && added.length === 0 && removed.length === 0) unit.keepGrants();
        return { uid: row.uid, active: true, created: created !== undefined };
      });

      if (!outcome.active) {
        throw unauthenticated(`Identity ${outcome.uid} has been deactivated by its identity provider`, "IDENTITY_INACTIVE");
      }
      if (outcome.created) log.info("identity created at first login", { identity: outcome.uid, provider: p.uid });
      return { identityUid: outcome.uid, issuer: verified.issuer, subject: verified.subject, expiresAt: verified.expiresAt, homeGroup: p.groupUid };
    },
  };
}
