// The authorization matrix of every service the server implements (IAM, registry, events, the token
// exchange, ping), generated from the descriptors: each method, over REST and gRPC, called by eight kinds of caller.
// What each caller may do follows from the method's `auth` option (its capabilities) and the capabilities
// the caller's bindings grant on the target group, so the expected code is computed, not written by hand;
// the table only says how to build a request aimed at the target group and what an authorized caller gets.
// A guard finds the implemented services in the domain modules (src/modules.ts) and fails
// when a method of one of them is missing from the table, so a new service cannot skip the matrix.
import type { DescMethod, DescMethodUnary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { SignJWT, generateKeyPair } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { accountAssociations, externalGroupRoleMappings, groupInvites, identityProviders, repos, subscriptions, tags } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { ruleOf } from "../../src/kernel/auth/index.js";
import { servedMethods } from "../../src/kernel/descriptors.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { tagKindOf } from "../../src/registry/tag-kind.js";
import { implementedServices } from "../support/domains.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { call, type Protocol } from "./harness.js";

type Caller =
  | "no token"
  | "expired token"
  | "unknown issuer"
  | "viewer of a sibling group"
  | "viewer of the group"
  | "editor"
  | "owner"
  | "identity created under a sibling subgroup";
const callers: readonly Caller[] = [
  "no token",
  "expired token",
  "unknown issuer",
  "viewer of a sibling group",
  "viewer of the group",
  "editor",
  "owner",
  "identity created under a sibling subgroup",
];

/** Capabilities each authenticated caller holds on the target group (world.team), from the managed roles. */
function capabilitiesOnTarget(caller: Caller): ReadonlySet<Capability> {
  switch (caller) {
    case "viewer of the group":
      return new Set(managedRole("viewer").capabilities);
    case "editor":
      return new Set(managedRole("editor").capabilities);
    case "owner":
      return new Set(managedRole("owner").capabilities);
    default:
      return new Set(); // the sibling viewer and the identity confined to the sibling subgroup hold nothing here
  }
}

/** The world, and registry and events resources in the target group T (world.team). */
interface Target extends World {
  /** A repo in T, and a tag of it. */
  repo: string;
  tag: string;
  /** An event subscription in T. */
  subscription: string;
  /** An identity provider in T (PKCE, no token issued), and a mapping of it. */
  identityProvider: string;
  mapping: string;
  /** A group invite in T. */
  invite: string;
}

interface Row {
  /** A request aimed at the target group T (or at a resource under it). */
  request: (t: Target) => object;
  /** What an authorized caller gets (several when it depends on earlier calls, e.g. create twice). */
  allowed: Code | "OK" | ReadonlyArray<Code | "OK">;
  /**
   * Capabilities needed on T, for unscoped methods whose handler checks them itself (scoped methods take
   * theirs from the descriptor).
   */
  needs?: readonly Capability[];
}

/** A uid under `parent` that names nothing. */
const absentUnder = (parent: string) => `${parent}/ffffffffffffffff`;
const bogus = (w: World) => absentUnder(w.team);
/** A well-formed digest no repo holds. */
const absentDigest = `sha256:${"0".repeat(64)}`;
const C = Capability;

const table: Record<string, Row> = {
  "GroupsService.GetGroup": { request: (w) => ({ uid: w.team }), allowed: "OK" },
  "GroupsService.DeleteGroup": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },
  "GroupsService.ListGroups": { request: (w) => ({ uidp: { descendantsOf: w.team } }), allowed: "OK" },
  "GroupsService.CreateGroup": {
    request: (w) => ({ parent: w.team, group: { name: "matrix" } }),
    allowed: "OK",
    needs: [C.CAP_IAM_GROUPS_CREATE],
  },
  "GroupsService.UpdateGroup": {
    request: (w) => ({ group: { uid: w.team, description: "matrix" }, updateMask: { paths: ["description"] } }),
    allowed: "OK",
  },
  "GroupsService.LookupGroup": { request: () => ({}), allowed: ["OK", Code.NotFound] },
  // Unscoped: any authenticated caller may ask. For a group that does not exist: NOT_FOUND for an eligible
  // (root-level) caller, PERMISSION_DENIED (NOT_ELIGIBLE) for the identity confined to a sibling subgroup.
  "GroupsService.RequestGroupAccess": { request: (w) => ({ groupUid: bogus(w) }), allowed: [Code.NotFound, Code.PermissionDenied] },
  "GroupsService.CheckEligibility": { request: () => ({}), allowed: "OK" },

  "IdentitiesService.CreateIdentity": {
    request: (w) => ({ parent: w.team, identity: { name: "matrix", relationship: { case: "claimMatch", value: { iss: { case: "issuer", value: "https://issuer.test" }, sub: { case: "subject", value: "matrix" } } } } }),
    allowed: "OK",
  },
  "IdentitiesService.GetIdentity": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },
  "IdentitiesService.DeleteIdentity": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },
  "IdentitiesService.UpdateIdentity": {
    request: (w) => ({ identity: { uid: bogus(w), description: "x" }, updateMask: { paths: ["description"] } }),
    allowed: Code.NotFound,
  },
  "IdentitiesService.ListIdentities": { request: (w) => ({ uidp: { descendantsOf: w.team } }), allowed: "OK" },
  "IdentitiesService.LookupIdentity": { request: () => ({ issuer: "https://issuer.test", subject: "nobody" }), allowed: "OK" },
  "IdentitiesService.UpdateIdentityMetadata": {
    request: () => ({ identityMetadata: { company: "matrix" }, updateMask: { paths: ["company"] } }),
    allowed: "OK",
  },

  "RolesService.GetRole": { request: () => ({ uid: managedRole("viewer").uid }), allowed: "OK" },
  "RolesService.ListRoles": { request: () => ({}), allowed: "OK" },
  "RolesService.CreateRole": {
    request: (w) => ({ parent: w.team, role: { name: "matrix", capabilities: [C.CAP_IAM_GROUPS_LIST] } }),
    allowed: "OK",
  },
  "RolesService.UpdateRole": {
    request: (w) => ({ role: { uid: bogus(w), description: "x" }, updateMask: { paths: ["description"] } }),
    allowed: Code.NotFound,
  },
  "RolesService.DeleteRole": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },

  "RoleBindingsService.GetRoleBinding": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },
  "RoleBindingsService.CreateRoleBinding": {
    request: (w) => ({ parent: w.team, roleBinding: { identityUid: w.identity.stranger, roleUid: managedRole("viewer").uid } }),
    allowed: ["OK", Code.AlreadyExists],
  },
  "RoleBindingsService.DeleteRoleBinding": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },
  "RoleBindingsService.ListRoleBindings": { request: (w) => ({ uidp: { descendantsOf: w.team } }), allowed: "OK" },
  "RoleBindingsService.BatchCreateRoleBindings": {
    request: (w) => ({
      parent: w.team,
      requests: [{ parent: w.team, roleBinding: { identityUid: w.identity.stranger, roleUid: managedRole("registry.pull").uid } }],
    }),
    allowed: ["OK", Code.AlreadyExists],
  },
  "RoleBindingsService.UpdateRoleBinding": {
    request: (w) => ({ roleBinding: { uid: bogus(w), roleUid: managedRole("viewer").uid }, updateMask: { paths: ["role_uid"] } }),
    allowed: Code.NotFound,
  },

  "IdentityProvidersService.GetIdentityProvider": { request: (t) => ({ uid: t.identityProvider }), allowed: "OK" },
  "IdentityProvidersService.ListIdentityProviders": { request: (w) => ({ uidp: { descendantsOf: w.team } }), allowed: "OK" },
  "IdentityProvidersService.CreateIdentityProvider": {
    request: (w) => ({
      parent: w.team,
      identityProvider: {
        name: "matrix",
        defaultRole: managedRole("viewer").uid,
        configuration: { case: "oidc", value: { issuer: "https://idp.invalid", clientId: "matrix", pkceEnabled: true } },
      },
    }),
    allowed: ["OK", Code.AlreadyExists],
  },
  "IdentityProvidersService.UpdateIdentityProvider": {
    request: (t) => ({ identityProvider: { uid: t.identityProvider, description: "matrix" }, updateMask: { paths: ["description"] } }),
    allowed: "OK",
  },
  "IdentityProvidersService.DeleteIdentityProvider": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },
  "IdentityProvidersService.GenerateScimToken": { request: (w) => ({ identityProviderUid: bogus(w) }), allowed: Code.NotFound },
  "IdentityProvidersService.RegenerateScimToken": { request: (t) => ({ identityProviderUid: t.identityProvider, etag: "stale" }), allowed: Code.FailedPrecondition },
  // Nothing to revoke: the state as it is.
  "IdentityProvidersService.RevokeScimToken": { request: (t) => ({ identityProviderUid: t.identityProvider }), allowed: "OK" },
  "IdentityProvidersService.SetScimEnabled": {
    request: (t) => ({ identityProviderUid: t.identityProvider, enabled: true, etag: "stale" }),
    allowed: Code.FailedPrecondition,
  },

  // One association per group, its uid the group's: T has one (seeded); the sibling group has none.
  "AccountAssociationsService.GetAccountAssociation": { request: (t) => ({ uid: t.team }), allowed: "OK" },
  "AccountAssociationsService.ListAccountAssociations": { request: (w) => ({ uidp: { descendantsOf: w.team } }), allowed: "OK" },
  "AccountAssociationsService.CreateAccountAssociation": { request: (t) => ({ parent: t.team, accountAssociation: { name: "matrix" } }), allowed: Code.AlreadyExists },
  "AccountAssociationsService.UpdateAccountAssociation": {
    request: (t) => ({ accountAssociation: { uid: t.team, description: "matrix" }, updateMask: { paths: ["description"] } }),
    allowed: "OK",
  },
  "AccountAssociationsService.DeleteAccountAssociation": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },
  "AccountAssociationsService.CheckAccountAssociation": { request: (t) => ({ uid: t.team, providerType: 2 }), allowed: "OK" },

  "ReposService.GetRepo": { request: (t) => ({ uid: t.repo }), allowed: "OK" },
  "ReposService.CreateRepo": { request: (t) => ({ parent: t.team, repo: { name: "matrix" } }), allowed: ["OK", Code.AlreadyExists] },
  "ReposService.UpdateRepo": {
    request: (t) => ({ repo: { uid: t.repo, description: "matrix" }, updateMask: { paths: ["description"] } }),
    allowed: "OK",
  },
  "ReposService.DeleteRepo": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },
  "ReposService.ListRepos": { request: (w) => ({ uidp: { descendantsOf: w.team } }), allowed: "OK" },
  "ReposService.GetRepoReadme": { request: (t) => ({ uid: t.repo }), allowed: "OK" },
  // Also needs CAP_REPO_INTERNAL_ADMIN, which no managed role grants: every caller here is refused.
  "ReposService.UpdateRepoReadme": {
    request: (t) => ({ repoReadme: { uid: t.repo, content: "# matrix" }, updateMask: { paths: ["content"] } }),
    allowed: "OK",
  },

  "TagsService.GetTag": { request: (t) => ({ uid: t.tag }), allowed: "OK" },
  "TagsService.ListTags": { request: (w) => ({ uidp: { descendantsOf: w.team } }), allowed: "OK" },
  // An upsert on (repo, name): creating it again moves it.
  "TagsService.CreateTag": { request: (t) => ({ parent: t.repo, tag: { name: "matrix", digest: absentDigest } }), allowed: "OK" },
  "TagsService.DeleteTag": { request: (t) => ({ uid: absentUnder(t.repo) }), allowed: Code.NotFound },

  "ImagesService.GetArchitectures": { request: (t) => ({ repoUid: t.repo, digest: absentDigest }), allowed: Code.NotFound },
  "ImagesService.GetSize": { request: (t) => ({ repoUid: t.repo, digest: absentDigest }), allowed: Code.NotFound },

  "SubscriptionsService.GetSubscription": { request: (t) => ({ uid: t.subscription }), allowed: "OK" },
  "SubscriptionsService.CreateSubscription": {
    request: (t) => ({ parent: t.team, subscription: { sink: "https://hooks.invalid/matrix" } }),
    allowed: ["OK", Code.AlreadyExists],
  },
  "SubscriptionsService.ListSubscriptions": { request: (w) => ({ uidp: { descendantsOf: w.team } }), allowed: "OK" },
  "SubscriptionsService.DeleteSubscription": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },

  // Global data (unscoped rules): the capability held on any group suffices, and every authenticated caller
  // here holds it somewhere (the caller holding it nowhere is in artifacts.contract.test.ts).
  "ArtifactsService.ListArtifacts": { request: () => ({ ecosystems: [1] }), allowed: "OK" },
  "ArtifactsService.ListArtifactVersions": { request: () => ({ artifactId: "pypi/absent-matrix" }), allowed: Code.NotFound },
  "ArtifactsService.GetArtifactCount": { request: () => ({ ecosystems: [1, 2] }), allowed: "OK" },
  // GetAdvisory's rule names its uid as the scope, but an advisory belongs to no group (global data): the
  // capability anywhere suffices here too (the caller holding it nowhere is in advisories.contract.test.ts).
  "AdvisoriesService.GetAdvisory": { request: () => ({ uid: "matrix:CGA-absent" }), allowed: Code.NotFound },
  "AdvisoriesService.ListAdvisories": { request: () => ({}), allowed: "OK" },
  // No authentication (the rule is `disabled`): everyone, with any token or none, is answered.
  "SecurityAdvisoryService.ListDocuments": { request: () => ({ id: "absent-matrix" }), allowed: "OK" },
  "SecurityAdvisoryService.ListVulnerabilityMetadata": { request: () => ({ ids: ["ABSENT-MATRIX"] }), allowed: "OK" },
  // The four capabilities on any group; the request names no image ref, so a caller who passes the check is
  // told image_refs is required (the check of the request comes after the capability check).
  "SecurityAdvisoryService.ListResolvedVulnsReports": {
    request: () => ({ startTime: { seconds: 1725148800n }, endTime: { seconds: 1725235200n } }),
    allowed: Code.InvalidArgument,
  },

  "ExternalGroupRoleMappingsService.GetExternalGroupRoleMapping": { request: (t) => ({ uid: t.mapping }), allowed: "OK" },
  // Also needs every capability of the role on the organization, which only the owner (bound there) holds.
  "ExternalGroupRoleMappingsService.CreateExternalGroupRoleMapping": {
    request: (t) => ({ parent: t.identityProvider, externalGroupRoleMapping: { externalGroupId: "matrix", roleUid: managedRole("registry.pull").uid } }),
    allowed: ["OK", Code.AlreadyExists],
  },
  "ExternalGroupRoleMappingsService.DeleteExternalGroupRoleMapping": { request: (t) => ({ uid: absentUnder(t.identityProvider) }), allowed: Code.NotFound },
  // Unknown names are skipped.
  "ExternalGroupRoleMappingsService.BatchDeleteExternalGroupRoleMappings": {
    request: (t) => ({ parent: t.identityProvider, names: [absentUnder(t.identityProvider)] }),
    allowed: "OK",
  },
  "ExternalGroupRoleMappingsService.ListExternalGroupRoleMappings": { request: (w) => ({ uidp: { descendantsOf: w.team } }), allowed: "OK" },

  "GroupInvitesService.CreateGroupInvite": {
    request: (w) => ({ parent: w.team, groupInvite: { roleUid: managedRole("viewer").uid, ttl: { seconds: 600n } } }),
    allowed: "OK",
  },
  "GroupInvitesService.GetGroupInvite": { request: (t) => ({ uid: t.invite }), allowed: "OK" },
  "GroupInvitesService.DeleteGroupInvite": { request: (w) => ({ uid: bogus(w) }), allowed: Code.NotFound },
  "GroupInvitesService.ListGroupInvites": { request: (w) => ({ uidp: { descendantsOf: w.team } }), allowed: "OK" },
  // Any verified token may present a code (identity_optional: the unknown issuer's token too, which assumes
  // no identity); a code that names no invite is refused alike for everyone.
  "GroupInviteAcceptanceService.AcceptGroupInvite": { request: () => ({ code: "cginv_0000000000000000.none" }), allowed: Code.PermissionDenied },

  // The token exchange decides by the presented token alone (its rule is `disabled`): none of the matrix's
  // tokens (this server's own, a foreign issuer's, none) is one the owner's claim match accepts, so every
  // caller is refused, the owner and those granted everything on T included.
  "SecurityTokenService.Exchange": { request: (t) => ({ identity: t.identity.owner }), allowed: Code.Unauthenticated },
  // Its bearer must be a refresh token (opaque, issued by Exchange): none of the matrix's tokens is one.
  "SecurityTokenService.ExchangeRefreshToken": { request: () => ({}), allowed: Code.Unauthenticated },

  "PingService.Ping": { request: () => ({}), allowed: "OK" },

  // Terms and group access requests (issue 12, parts 3 and 4). AcceptTerms on a sub-group also needs
  // TERMS_ACCEPT on its organization: only the owner (bound there) holds it, and the owner is the only
  // caller holding it on T.
  "TermsService.AcceptTerms": { request: (t) => ({ group: t.team, documentIds: ["terms-of-service"] }), allowed: "OK" },
  "TermsService.ListTermsAcceptances": { request: (t) => ({ group: t.team }), allowed: "OK" },
  "GroupAccessRequestsService.ListGroupAccessRequests": { request: (t) => ({ group: t.team }), allowed: "OK" },
};

const keyOf = (m: DescMethod) => `${m.parent.name}.${m.name}`;
const isUnary = (m: DescMethod | undefined): m is DescMethodUnary => m?.methodKind === "unary";
/** The methods of the table, found in the served descriptors (a row naming no method fails here). */
const methods = Object.keys(table).map((key) => {
  const method = servedMethods.find((m) => keyOf(m) === key);
  if (!isUnary(method)) throw new Error(`the matrix row ${key} names no unary API method`);
  return method;
});

/** The expected outcome for one caller, from the method's rule. */
function expected(method: DescMethodUnary, caller: Caller): ReadonlyArray<Code | "OK"> {
  const row = table[keyOf(method)]!;
  const allowed = Array.isArray(row.allowed) ? row.allowed : [row.allowed as Code | "OK"];
  const rule = ruleOf(method);
  if (rule.kind === "disabled") return allowed;
  if (caller === "no token" || caller === "expired token") return [Code.Unauthenticated];
  // A well-formed token of another issuer that assumes no identity passes an identity_optional rule.
  if (caller === "unknown issuer") return rule.kind === "unscoped" && rule.identityOptional ? allowed : [Code.Unauthenticated];
  const needs = rule.kind === "scoped" ? rule.capabilities : (row.needs ?? []);
  const held = capabilitiesOnTarget(caller);
  return needs.every((c) => held.has(c)) ? allowed : [Code.PermissionDenied];
}

let server: TestServer;
let target: Target;
const headers = new Map<Caller, Record<string, string>>();

beforeAll(async () => {
  server = await startTestServer();
  const world = await seedWorld(server, "matrix-org");
  const repo = newChildUid(world.team);
  const tag = newChildUid(repo);
  await server.database.db.insert(repos).values({ uid: repo, groupUid: world.team, name: "matrix-seeded" });
  await server.database.db.insert(tags).values({ uid: tag, repoUid: repo, name: "seeded", kind: tagKindOf("seeded"), digest: absentDigest });
  const subscription = newChildUid(world.team);
  await server.database.db.insert(subscriptions).values({ uid: subscription, groupUid: world.team, sink: "https://hooks.invalid/seeded" });
  const identityProvider = newChildUid(world.team);
  await server.database.db.insert(identityProviders).values({
    uid: identityProvider,
    groupUid: world.team,
    name: "matrix-seeded",
    defaultRoleUid: managedRole("viewer").uid,
    oidcIssuer: "https://idp.invalid",
    oidcClientId: "seeded",
    oidcPkceEnabled: true,
  });
  const mapping = newChildUid(identityProvider);
  await server.database.db
    .insert(externalGroupRoleMappings)
    .values({ uid: mapping, identityProviderUid: identityProvider, externalGroupId: "seeded", roleUid: managedRole("viewer").uid, scope: world.org });
  await server.database.db.insert(accountAssociations).values({ uid: world.team, name: "matrix-seeded", amazon: { account: "123456789012" } });
  const invite = newChildUid(world.team);
  await server.database.db.insert(groupInvites).values({
    uid: invite,
    groupUid: world.team,
    roleUid: managedRole("viewer").uid,
    expirationTime: new Date(Date.now() + 3_600_000),
    codeHash: "0".repeat(64),
    keyId: "0123456789abcdef",
  });
  target = { ...world, repo, tag, subscription, identityProvider, mapping, invite };
  const { privateKey } = await generateKeyPair("ES256");
  const foreign = await new SignJWT({})
    .setProtectedHeader({ alg: "ES256", kid: "k" })
    .setIssuer("https://unknown-issuer.example.com")
    .setSubject("someone")
    .setAudience(server.baseUrl)
    .setIssuedAt()
    .setExpirationTime("10m")
    .sign(privateKey);
  const bearer = (t: string) => ({ authorization: `Bearer ${t}` });
  headers.set("no token", {});
  headers.set("expired token", bearer(await server.token(target.identity.owner, { ttlSeconds: -600 })));
  headers.set("unknown issuer", bearer(foreign));
  headers.set("viewer of a sibling group", target.auth("otherViewer"));
  headers.set("viewer of the group", target.auth("teamViewer"));
  headers.set("editor", target.auth("editor"));
  headers.set("owner", target.auth("owner"));
  headers.set("identity created under a sibling subgroup", target.auth("confinedOther"));
});
afterAll(async () => {
  await server?.close();
});

describe("the matrix covers every implemented service", () => {
  it("has a row for each method of every service a domain implements, and no other", () => {
    // A domain binds a whole service (bindService checks every method is implemented, at compile time).
    const implemented = implementedServices();
    expect(implemented.length).toBeGreaterThan(0);
    const required = implemented.flatMap((service) => service.methods.map(keyOf));
    expect(Object.keys(table).sort(), "matrix rows vs the methods of the implemented services").toEqual([...new Set(required)].sort());
  });
});

describe.each(["grpc", "rest"] as const satisfies readonly Protocol[])("authorization matrix [%s]", (protocol) => {
  describe.each(methods)("$parent.name.$name", (method) => {
    it.each(callers)("%s", async (caller) => {
      const want = expected(method, caller);
      const out = await call(protocol, server.baseUrl, method, table[keyOf(method)]!.request(target) as never, headers.get(caller)!);
      const got = out.error ? out.error.code : "OK";
      const name = (c: Code | "OK") => (c === "OK" ? "OK" : Code[c]);
      expect(want.map(name), out.error?.message).toContain(name(got));
    });
  });
});
