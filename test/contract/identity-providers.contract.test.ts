// IdentityProvidersService over every protocol: create (name, default role, OIDC rules, no escalation),
// get, list (visibility, name filter, uidp, order), update (PATCH rules, the write-only client secret kept,
// replaced or cleared, correlation_rule immutable), delete (mappings go with the provider), and the SCIM
// credential: generate, regenerate with an overlap, revoke, the credential states, the etag, and the
// two-owners rule of SetScimEnabled. The client secret is never in a response, an event body or a log
// line, and is stored only sealed; SCIM tokens are stored only as hashes and never reach an event. A
// server without a secret key (production without IDP_SECRET_KEY) stores no client secret.
import { toJson, type DescMessage, type DescMethodUnary, type MessageInitShape, type MessageShape } from "@bufbuild/protobuf";
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import {
  IdentityProvider_OIDC_CorrelationRule as CorrelationRule,
  IdentityProvider_SCIM_CredentialState as CredentialState,
  IdentityProvidersService,
  type IdentityProvider,
  type IdentityProvider_OIDCSchema,
  type IdentityProviderSchema,
  type IdentityProvider_OIDC,
} from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { BadRequestSchema, ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { ensureSecret } from "../../src/db/secrets.js";
import { externalGroupRoleMappings, identities, identityProviders, outboxEvents, roleBindings, roles } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { scimTokenHash } from "../../src/iam/scim-token.js";
import { createSecretBox, type SecretBox } from "../../src/iam/secret-box.js";
import { registry } from "../../src/kernel/descriptors.js";
import { addLogTap } from "../../src/kernel/log.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { assertError, call, contractCase, protocols, runContractCases, type Protocol } from "./harness.js";
import { sinkPolicyFor } from "../../src/events/sinks.js";
import type { Resolver } from "../../src/kernel/outbound.js";
import { listVisibilityCases } from "./list-visibility.js";

const IDP = "chainguard.platform.iam.v2.IdentityProvider";
const GROUP = "chainguard.platform.iam.v2.Group";
const HEX16 = /^[0-9a-f]{16}$/;
const DAY = 86_400_000;
const S = IdentityProvidersService.method;

let server: TestServer;
/** Providers are created, changed and deleted in this one. */
let world: World;
/** Nothing is created here after beforeAll: list results are exact. */
let quiet: World;
/** An organization with a single owner (the two-owners rule). */
let solo: World;
/** A caller holding the provider capabilities (and ROLE_BINDINGS_CREATE) on world.org through a custom role, but no managed role. */
let idpAdmin: Record<string, string>;
/** The box the test server seals client secrets with (its development key, kept in the database). */
let box: SecretBox;
const fx = {
  /** world.org: a provider whose name is taken; a provider in team. */
  taken: "",
  teamProvider: "",
  /** Custom roles: on world.org holding only IDENTITY_PROVIDERS_LIST; on world.other; on quiet.org. */
  tinyRole: "",
  siblingRole: "",
  foreignRole: "",
  /** quiet: org/alpha, org/beta, team/gamma, team/shared, other/shared */
  q: {} as Record<string, string>,
};

let seq = 0;
const unique = (prefix: string) => `${prefix}-${++seq}`;
const base = () => server.baseUrl;
const viewerRole = () => managedRole("viewer").uid;
const field = (name: string, description?: unknown) => ({
  schema: BadRequestSchema,
  value: { fieldViolations: [description === undefined ? { field: name } : { field: name, description }] },
});
const ms = (t: Timestamp | undefined) => timestampDate(t!).getTime();
const lazy = (get: () => unknown) => ({
  asymmetricMatch: (actual: unknown) => actual === get(),
  toString: () => "lazy value",
  toAsymmetricMatcher: () => `lazy(${String(get())})`,
});
const oidcOf = (p: IdentityProvider): IdentityProvider_OIDC => {
  expect(p.configuration.case).toBe("oidc");
  return p.configuration.value as IdentityProvider_OIDC;
};

type OidcInit = MessageInitShape<typeof IdentityProvider_OIDCSchema>;
const oidc = (o: OidcInit) => ({ case: "oidc" as const, value: o });
const ISSUER = "https://idp.example.com";
/** A provider as a client sends it: a confidential client by default. */
const providerInit = (over: Record<string, unknown> = {}, o: OidcInit = {}) => ({
  name: unique("idp"),
  defaultRole: viewerRole(),
  configuration: oidc({ issuer: ISSUER, clientId: "client-1", clientSecret: "initial-secret", ...o }),
  ...over,
});

/** Calls as a caller over a protocol; fails the test on an error. */
async function ok<I extends DescMessage, O extends DescMessage>(
  protocol: Protocol,
  method: DescMethodUnary<I, O>,
  request: MessageInitShape<I>,
  headers: Record<string, string> = world.auth("owner"),
): Promise<MessageShape<O>> {
  const out = await call(protocol, base(), method, request, headers);
  expect(out.error, out.error?.message).toBeUndefined();
  return out.message!;
}

/** Calls and expects an error; returns it. */
async function refused<I extends DescMessage, O extends DescMessage>(
  protocol: Protocol,
  method: DescMethodUnary<I, O>,
  request: MessageInitShape<I>,
  code: Code,
  headers: Record<string, string> = world.auth("owner"),
) {
  const out = await call(protocol, base(), method, request, headers);
  expect(out.error, "expected an error, got a response").toBeDefined();
  expect(Code[out.error!.code], out.error!.message).toBe(Code[code]);
  return out.error!;
}

const rowOf = async (uid: string) => (await server.database.db.select().from(identityProviders).where(eq(identityProviders.uid, uid)))[0]!;

async function insertProvider(group: string, name: string, extra: Partial<typeof identityProviders.$inferInsert> = {}): Promise<string> {
  const uid = newChildUid(group);
  await server.database.db.insert(identityProviders).values({
    uid,
    groupUid: group,
    name,
    defaultRoleUid: viewerRole(),
    oidcIssuer: ISSUER,
    oidcClientId: "seeded",
    oidcPkceEnabled: true,
    ...extra,
  });
  return uid;
}

async function insertRole(parent: string, name: string, capabilities: Capability[]): Promise<string> {
  const uid = newChildUid(parent);
  await server.database.db.insert(roles).values({ uid, parentUid: parent, name, capabilities });
  return uid;
}

async function insertPerson(name: string, extra: Partial<typeof identities.$inferInsert> = {}): Promise<string> {
  const uid = extra.parentUid ? newChildUid(extra.parentUid) : newRootUid();
  await server.database.db.insert(identities).values({
    uid,
    name,
    relationship: { claimMatch: { issuer: "https://issuer.test", subject: uid } },
    relationshipType: 1,
    issuer: "https://issuer.test",
    subject: uid,
    ...extra,
  });
  return uid;
}

beforeAll(async () => {
  server = await startTestServer();
  [world, quiet, solo] = [await seedWorld(server, "acme"), await seedWorld(server, "quiet"), await seedWorld(server, "solo")];
  const { db } = server.database;
  box = createSecretBox(await ensureSecret(db, "idp-secret-key"));

  fx.taken = await insertProvider(world.org, "taken");
  fx.teamProvider = await insertProvider(world.team, "team-idp");
  fx.tinyRole = await insertRole(world.org, "tiny", [Capability.CAP_IAM_IDENTITY_PROVIDERS_LIST]);
  fx.siblingRole = await insertRole(world.other, "sibling", [Capability.CAP_IAM_IDENTITY_PROVIDERS_LIST]);
  fx.foreignRole = await insertRole(quiet.org, "foreign", [Capability.CAP_IAM_IDENTITY_PROVIDERS_LIST]);
  for (const [key, group, name] of [
    ["alpha", quiet.org, "alpha"],
    ["beta", quiet.org, "beta"],
    ["gamma", quiet.team, "gamma"],
    ["teamShared", quiet.team, "shared"],
    ["otherShared", quiet.other, "shared"],
  ] as const) {
    const at = new Date(Date.UTC(2024, 0, 1) + Object.keys(fx.q).length * 1000);
    fx.q[key] = await insertProvider(group, name, { createTime: at, updateTime: at, oidcClientSecret: box.seal("quiet-secret", "x") });
  }

  // The provider administrator: every provider capability on world.org, nothing else.
  const adminRole = await insertRole(world.org, "idp-admin", [
    Capability.CAP_IAM_IDENTITY_PROVIDERS_CREATE,
    Capability.CAP_IAM_IDENTITY_PROVIDERS_UPDATE,
    Capability.CAP_IAM_IDENTITY_PROVIDERS_LIST,
    Capability.CAP_IAM_IDENTITY_PROVIDERS_DELETE,
    Capability.CAP_IAM_ROLE_BINDINGS_CREATE,
    Capability.CAP_IAM_SCIM_MANAGE,
  ]);
  const admin = await insertPerson("idp admin");
  await db.insert(roleBindings).values({ uid: newChildUid(world.org), groupUid: world.org, identityUid: admin, roleUid: adminRole });
  idpAdmin = { authorization: `Bearer ${await server.token(admin)}` };

  // solo keeps one owner: the two others of seedWorld lose their owner bindings.
  await db
    .delete(roleBindings)
    .where(sql`${roleBindings.groupUid} = ${solo.org} and ${roleBindings.identityUid} in (${solo.identity.confined}, ${solo.identity.confinedOther})`);
});

afterAll(async () => {
  await server?.close();
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("CreateIdentityProvider", base, [
  contractCase({
    name: "an owner creates a provider: every writable field round-trips, the secret is not returned, SCIM is not issued",
    method: S.createIdentityProvider,
    request: () => ({
      parent: world.org,
      identityProvider: {
        uid: "ignored",
        name: unique("okta"),
        description: "corporate Okta",
        defaultRole: viewerRole(),
        configuration: oidc({
          issuer: ISSUER,
          clientId: "client-1",
          clientSecret: "create-secret-value",
          additionalScopes: ["email", "profile"],
          groupsClaim: "roles",
          correlationRule: CorrelationRule.OID_EQUALS_EXTERNAL_ID,
        }),
        scim: { enabled: true, etag: "client-chosen" },
        createTime: { seconds: 1n },
      },
    }),
    headers: () => world.auth("owner"),
    response: (r) => {
      expect(r.uid.startsWith(world.org + "/")).toBe(true);
      expect(r.uid.slice(world.org.length + 1)).toMatch(HEX16);
      expect(r).toMatchObject({ description: "corporate Okta", defaultRole: viewerRole() });
      expect(oidcOf(r)).toMatchObject({
        issuer: ISSUER,
        clientId: "client-1",
        clientSecret: "",
        additionalScopes: ["email", "profile"],
        groupsClaim: "roles",
        correlationRule: CorrelationRule.OID_EQUALS_EXTERNAL_ID,
        pkceEnabled: false,
      });
      expect(r.scim).toMatchObject({ enabled: false, endpointUrl: `${server.baseUrl}/scim/v2/${r.uid}`, credentialState: CredentialState.NOT_ISSUED });
      expect(r.scim!.etag).not.toBe("");
      expect(r.scim!.etag).not.toBe("client-chosen");
      expect(r.scim!.tokenExpireTime).toBeUndefined();
      expect(Math.abs(ms(r.createTime) - Date.now())).toBeLessThan(60_000);
      expect(r.updateTime).toEqual(r.createTime);
    },
  }),
  contractCase({
    name: "a public client: PKCE without a secret; an unspecified correlation rule is stored as sub",
    method: S.createIdentityProvider,
    request: () => ({ parent: world.team, identityProvider: providerInit({}, { clientSecret: "", pkceEnabled: true }) }),
    headers: () => world.auth("owner"),
    response: (r) => {
      expect(r.uid.startsWith(world.team + "/")).toBe(true);
      expect(oidcOf(r)).toMatchObject({ pkceEnabled: true, clientSecret: "", correlationRule: CorrelationRule.SUB_EQUALS_EXTERNAL_ID, groupsClaim: "" });
    },
  }),
  contractCase({
    name: "a loopback issuer over plain http, on a server allowing it (development)",
    method: S.createIdentityProvider,
    request: () => ({ parent: world.org, identityProvider: providerInit({}, { issuer: "http://127.0.0.1:5556/dex" }) }),
    headers: () => world.auth("owner"),
    response: (r) => expect(oidcOf(r).issuer).toBe("http://127.0.0.1:5556/dex"),
  }),
  contractCase({
    name: "a name of 63 characters is fine",
    method: S.createIdentityProvider,
    request: () => ({ parent: world.org, identityProvider: providerInit({ name: `${unique("n")}-`.padEnd(63, "x") }) }),
    headers: () => world.auth("owner"),
    only: ["grpc"],
    response: (r) => expect(r.name).toHaveLength(63),
  }),
  contractCase({
    name: "a name already used in the group: ALREADY_EXISTS naming the provider that has it",
    method: S.createIdentityProvider,
    request: () => ({ parent: world.org, identityProvider: providerInit({ name: "taken" }) }),
    headers: () => world.auth("owner"),
    error: {
      code: Code.AlreadyExists,
      reason: "ALREADY_EXISTS",
      domain: "iam.platform.test",
      details: [{ schema: ResourceInfoSchema, value: { resourceType: IDP, resourceName: lazy(() => fx.taken) } }],
    },
  }),
  ...[
    ["", "is required"],
    ["ab", "must be 3 to 63 characters long"],
    ["x".repeat(64), "must be 3 to 63 characters long"],
    [" padded ", "must not contain control characters, nor start or end with a space"],
  ].map(([name, description]) =>
    contractCase({
      name: `name ${JSON.stringify(name!.slice(0, 10))} (${name!.length} characters): INVALID_ARGUMENT on identity_provider.name`,
      method: S.createIdentityProvider,
      request: () => ({ parent: world.org, identityProvider: providerInit({ name }) }),
      headers: () => world.auth("owner"),
      error: { code: Code.InvalidArgument, reason: "INVALID_ARGUMENT", details: [field("identity_provider.name", description)] },
    }),
  ),
  contractCase({
    name: "no default role: INVALID_ARGUMENT on identity_provider.default_role",
    method: S.createIdentityProvider,
    request: () => ({ parent: world.org, identityProvider: providerInit({ defaultRole: "" }) }),
    headers: () => world.auth("owner"),
    error: { code: Code.InvalidArgument, message: "Invalid argument: identity_provider.default_role: is required", details: [field("identity_provider.default_role")] },
  }),
  contractCase({
    name: "no OIDC configuration: INVALID_ARGUMENT on identity_provider.oidc",
    method: S.createIdentityProvider,
    request: () => ({ parent: world.org, identityProvider: { name: unique("bare"), defaultRole: viewerRole() } }),
    headers: () => world.auth("owner"),
    error: { code: Code.InvalidArgument, details: [field("identity_provider.oidc")] },
  }),
  ...[
    ["", "is required"],
    ["http://idp.example.com", /^must be an https URL .*plain http is allowed for loopback hosts only$/],
    ["https://idp.example.com?tenant=1", /no query or fragment/],
    ["https://user:pw@idp.example.com", /credentials/],
    ["idp.example.com", /not an absolute URL/],
  ].map(([issuer, description]) =>
    contractCase({
      name: `issuer ${JSON.stringify(issuer)}: INVALID_ARGUMENT on identity_provider.oidc.issuer`,
      method: S.createIdentityProvider,
      request: () => ({ parent: world.org, identityProvider: providerInit({}, { issuer: issuer as string }) }),
      headers: () => world.auth("owner"),
      error: { code: Code.InvalidArgument, details: [field("identity_provider.oidc.issuer", typeof description === "string" ? description : expect.stringMatching(description!))] },
    }),
  ),
  contractCase({
    name: "no client_id: INVALID_ARGUMENT on identity_provider.oidc.client_id",
    method: S.createIdentityProvider,
    request: () => ({ parent: world.org, identityProvider: providerInit({}, { clientId: "" }) }),
    headers: () => world.auth("owner"),
    error: { code: Code.InvalidArgument, details: [field("identity_provider.oidc.client_id", "is required")] },
  }),
  contractCase({
    name: "neither a client secret nor PKCE: INVALID_ARGUMENT on identity_provider.oidc.client_secret",
    method: S.createIdentityProvider,
    request: () => ({ parent: world.org, identityProvider: providerInit({}, { clientSecret: "", pkceEnabled: false }) }),
    headers: () => world.auth("owner"),
    error: { code: Code.InvalidArgument, details: [field("identity_provider.oidc.client_secret", "a client_secret is required unless pkce_enabled is set")] },
  }),
  contractCase({
    name: "a bad client secret is refused without being quoted",
    method: S.createIdentityProvider,
    request: () => ({ parent: world.org, identityProvider: providerInit({}, { clientSecret: "quoted-never\u0001" }) }),
    headers: () => world.auth("owner"),
    error: {
      code: Code.InvalidArgument,
      message: "Invalid argument: identity_provider.oidc.client_secret: must not contain control characters",
      details: [field("identity_provider.oidc.client_secret")],
    },
  }),
  contractCase({
    name: "an unknown correlation rule, a bad and a repeated scope: INVALID_ARGUMENT on each",
    method: S.createIdentityProvider,
    request: () => ({ parent: world.org, identityProvider: providerInit({}, { correlationRule: 7 as CorrelationRule, additionalScopes: ["email", "a b"] }) }),
    headers: () => world.auth("owner"),
    error: {
      code: Code.InvalidArgument,
      details: [
        {
          schema: BadRequestSchema,
          value: { fieldViolations: [{ field: "identity_provider.oidc.additional_scopes[1]" }, { field: "identity_provider.oidc.correlation_rule" }] },
        },
      ],
    },
  }),
  ...(
    [
      ["a custom role of a sibling group", () => fx.siblingRole, /must name a managed role or a custom role defined on/],
      ["a custom role of another organization", () => fx.foreignRole, /must name a managed role or a custom role defined on/],
      ["a role that does not exist", () => `${world.org}/ffffffffffffffff`, "does not name an existing role"],
      ["a managed role that does not exist", () => "0000000000000000000000000000000000000000", "does not name an existing role"],
      ["a malformed uid", () => "Not A Uid", "is not a valid uid"],
    ] as const
  ).map(([what, role, description]) =>
    contractCase({
      name: `default role: ${what}: INVALID_ARGUMENT on identity_provider.default_role`,
      method: S.createIdentityProvider,
      request: () => ({ parent: world.team, identityProvider: providerInit({ defaultRole: role() }) }),
      headers: () => world.auth("owner"),
      error: {
        code: Code.InvalidArgument,
        details: [field("identity_provider.default_role", typeof description === "string" ? description : expect.stringMatching(description))],
      },
    }),
  ),
  contractCase({
    name: "a custom role of an ancestor group is visible from the provider's group",
    method: S.createIdentityProvider,
    request: () => ({ parent: world.team, identityProvider: providerInit({ defaultRole: fx.tinyRole }) }),
    headers: () => world.auth("owner"),
    response: (r) => expect(r.defaultRole).toBe(fx.tinyRole),
  }),
  contractCase({
    name: "no escalation: a provider administrator cannot make viewer the default role (it does not hold viewer's capabilities)",
    method: S.createIdentityProvider,
    request: () => ({ parent: world.org, identityProvider: providerInit() }),
    headers: () => idpAdmin,
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED", message: /default role .* would grant capabilities the caller does not hold/ },
  }),
  contractCase({
    name: "a provider administrator may make a role it holds all of the default role",
    method: S.createIdentityProvider,
    request: () => ({ parent: world.org, identityProvider: providerInit({ defaultRole: fx.tinyRole }) }),
    headers: () => idpAdmin,
    response: (r) => expect(r.defaultRole).toBe(fx.tinyRole),
  }),
  ...(["editor", "viewer", "teamViewer", "stranger"] as const).map((caller) =>
    contractCase({
      name: `${caller} (no IDENTITY_PROVIDERS_CREATE on the group): PERMISSION_DENIED`,
      method: S.createIdentityProvider,
      request: () => ({ parent: world.org, identityProvider: providerInit() }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied },
    }),
  ),
  contractCase({
    name: "an owner confined to team cannot create beside it",
    method: S.createIdentityProvider,
    request: () => ({ parent: world.other, identityProvider: providerInit() }),
    headers: () => world.auth("confined"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "a missing group: NOT_FOUND naming the group",
    method: S.createIdentityProvider,
    request: () => ({ parent: `${world.org}/ffffffffffffffff`, identityProvider: providerInit() }),
    headers: () => world.auth("owner"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: GROUP, resourceName: lazy(() => `${world.org}/ffffffffffffffff`) } }] },
  }),
  contractCase({
    name: "no credentials: UNAUTHENTICATED",
    method: S.createIdentityProvider,
    request: () => ({ parent: world.org, identityProvider: providerInit() }),
    error: { code: Code.Unauthenticated },
  }),
]);

// ---------------------------------------------------------------------------------------------------------
runContractCases("GetIdentityProvider", base, [
  contractCase({
    name: "a viewer reads a provider of the organization; the secret is empty",
    method: S.getIdentityProvider,
    request: () => ({ uid: fx.q.alpha }),
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(r).toMatchObject({ uid: fx.q.alpha, name: "alpha", defaultRole: viewerRole() });
      expect(oidcOf(r)).toMatchObject({ issuer: ISSUER, clientId: "seeded", clientSecret: "" });
      expect(r.scim?.credentialState).toBe(CredentialState.NOT_ISSUED);
    },
  }),
  contractCase({
    name: "a viewer bound on team cannot read the organization's provider",
    method: S.getIdentityProvider,
    request: () => ({ uid: fx.q.alpha }),
    headers: () => quiet.auth("teamViewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "a missing provider: NOT_FOUND with ResourceInfo",
    method: S.getIdentityProvider,
    request: () => ({ uid: `${world.org}/ffffffffffffffff` }),
    headers: () => world.auth("viewer"),
    error: {
      code: Code.NotFound,
      reason: "NOT_FOUND",
      domain: "iam.platform.test",
      details: [{ schema: ResourceInfoSchema, value: { resourceType: IDP, resourceName: lazy(() => `${world.org}/ffffffffffffffff`) } }],
    },
  }),
  ...(["otherViewer", "stranger"] as const).map((caller) =>
    contractCase({
      name: `${caller}: PERMISSION_DENIED`,
      method: S.getIdentityProvider,
      request: () => ({ uid: fx.taken }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied },
    }),
  ),
]);

// ---------------------------------------------------------------------------------------------------------
const names = (ps: IdentityProvider[]) => ps.map((p) => p.name);

runContractCases("ListIdentityProviders", base, [
  contractCase({
    name: "a viewer on the organization sees every provider beneath it in name order, with the total, no secret",
    method: S.listIdentityProviders,
    request: {},
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(names(r.identityProviders)).toEqual(["alpha", "beta", "gamma", "shared", "shared"]);
      expect(r.totalCount).toBe(5n);
      expect(r.identityProviders.every((p) => oidcOf(p).clientSecret === "")).toBe(true);
    },
  }),
  ...listVisibilityCases({
    method: S.listIdentityProviders,
    noun: "providers",
    world: () => quiet,
    items: (r) => r.identityProviders,
    teamViewer: () => [fx.q.gamma!, fx.q.teamShared!],
  }),
  contractCase({
    name: "name: exact match, across groups",
    method: S.listIdentityProviders,
    request: { name: "shared" },
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(r.identityProviders.map((p) => p.uid).sort()).toEqual([fx.q.teamShared, fx.q.otherShared].sort()),
  }),
  contractCase({
    name: "name: not a prefix",
    method: S.listIdentityProviders,
    request: { name: "shar" },
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(r.totalCount).toBe(0n),
  }),
  contractCase({
    name: "name within the caller's scope: the team viewer's one provider named shared",
    method: S.listIdentityProviders,
    request: { name: "shared" },
    headers: () => quiet.auth("teamViewer"),
    response: (r) => expect(r.identityProviders.map((p) => p.uid)).toEqual([fx.q.teamShared]),
  }),
  contractCase({
    name: "uidp.children_of the organization: its own providers, not its sub-groups'",
    method: S.listIdentityProviders,
    request: () => ({ uidp: { childrenOf: quiet.org } }),
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(names(r.identityProviders)).toEqual(["alpha", "beta"]),
  }),
  contractCase({
    name: "uidp filter outside the caller's scope: nothing of it",
    method: S.listIdentityProviders,
    request: () => ({ uidp: { descendantsOf: quiet.org } }),
    headers: () => quiet.auth("otherViewer"),
    response: (r) => expect(r.identityProviders.map((p) => p.uid)).toEqual([fx.q.otherShared]),
  }),
  contractCase({
    name: "order_by create_time desc, paged",
    method: S.listIdentityProviders,
    request: { orderBy: "create_time desc", pageSize: 2 },
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(r.identityProviders.map((p) => p.uid)).toEqual([fx.q.otherShared, fx.q.teamShared]);
      expect(r.nextPageToken).not.toBe("");
      expect(r.totalCount).toBe(5n);
    },
  }),
  contractCase({
    name: "an unknown order_by field: INVALID_ARGUMENT on order_by",
    method: S.listIdentityProviders,
    request: { orderBy: "issuer" },
    headers: () => quiet.auth("viewer"),
    error: { code: Code.InvalidArgument, details: [field("order_by")] },
  }),
  contractCase({
    name: "no credentials: UNAUTHENTICATED",
    method: S.listIdentityProviders,
    request: {},
    error: { code: Code.Unauthenticated },
  }),
]);

// ---------------------------------------------------------------------------------------------------------
runContractCases("UpdateIdentityProvider / DeleteIdentityProvider refusals", base, [
  contractCase({
    name: "update of a missing provider: NOT_FOUND",
    method: S.updateIdentityProvider,
    request: () => ({ identityProvider: { uid: `${world.org}/ffffffffffffffff`, description: "x" } }),
    headers: () => world.auth("owner"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: IDP } }] },
  }),
  contractCase({
    name: "a viewer: PERMISSION_DENIED",
    method: S.updateIdentityProvider,
    request: () => ({ identityProvider: { uid: fx.taken, description: "x" } }),
    headers: () => world.auth("viewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "delete of a missing provider: NOT_FOUND",
    method: S.deleteIdentityProvider,
    request: () => ({ uid: `${world.org}/ffffffffffffffff` }),
    headers: () => world.auth("owner"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: IDP } }] },
  }),
  contractCase({
    name: "delete by an editor: PERMISSION_DENIED",
    method: S.deleteIdentityProvider,
    request: () => ({ uid: fx.taken }),
    headers: () => world.auth("editor"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "SCIM methods by an editor (no SCIM_MANAGE): PERMISSION_DENIED",
    method: S.generateScimToken,
    request: () => ({ identityProviderUid: fx.taken }),
    headers: () => world.auth("editor"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "SCIM methods on a missing provider: NOT_FOUND",
    method: S.revokeScimToken,
    request: () => ({ identityProviderUid: `${world.org}/ffffffffffffffff` }),
    headers: () => world.auth("owner"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: IDP } }] },
  }),
]);

describe.each(protocols)("UpdateIdentityProvider [%s]", (protocol) => {
  const create = (over: Record<string, unknown> = {}, o: OidcInit = {}, parent = world.org) =>
    ok(protocol, S.createIdentityProvider, { parent, identityProvider: providerInit(over, o) });
  const update = (identityProvider: MessageInitShape<typeof IdentityProviderSchema>, paths?: string[], headers?: Record<string, string>) =>
    call(protocol, base(), S.updateIdentityProvider, { identityProvider, ...(paths ? { updateMask: { paths } } : {}) }, headers ?? world.auth("owner"));

  it("changes what the body names; an empty secret keeps the stored one", async () => {
    const p = await create();
    const before = await rowOf(p.uid);
    expect(box.open(before.oidcClientSecret!, p.uid)).toBe("initial-secret");
    const out = await update({ uid: p.uid, description: "changed", configuration: oidc({ clientId: "client-2", additionalScopes: ["groups"] }) });
    expect(out.error?.message).toBeUndefined();
    expect(out.message!.description).toBe("changed");
    expect(oidcOf(out.message!)).toMatchObject({ issuer: ISSUER, clientId: "client-2", additionalScopes: ["groups"], clientSecret: "" });
    expect(ms(out.message!.updateTime)).toBeGreaterThanOrEqual(ms(p.updateTime));
    expect((await rowOf(p.uid)).oidcClientSecret).toBe(before.oidcClientSecret);
  });

  it("a mask naming the secret with an empty one clears it, so PKCE is then required", async () => {
    const p = await create();
    const err = await update({ uid: p.uid }, ["oidc.client_secret"]);
    expect(err.error?.code).toBe(Code.InvalidArgument);
    expect(err.error?.message).toBe("Invalid argument: identity_provider.oidc.client_secret: a client_secret is required unless pkce_enabled is set");
    expect(box.open((await rowOf(p.uid)).oidcClientSecret!, p.uid)).toBe("initial-secret");
    const out = await update({ uid: p.uid, configuration: oidc({ pkceEnabled: true }) }, ["oidc.client_secret", "oidc.pkce_enabled"]);
    expect(out.error?.message).toBeUndefined();
    expect(oidcOf(out.message!)).toMatchObject({ pkceEnabled: true, clientSecret: "" });
    expect((await rowOf(p.uid)).oidcClientSecret).toBeNull();
  });

  it("a new secret replaces the stored one, sealed, never returned", async () => {
    const p = await create();
    const out = await update({ uid: p.uid, configuration: oidc({ clientSecret: "rotated-secret" }) });
    expect(out.error?.message).toBeUndefined();
    expect(oidcOf(out.message!).clientSecret).toBe("");
    const stored = (await rowOf(p.uid)).oidcClientSecret!;
    expect(stored).not.toContain("rotated-secret");
    expect(box.open(stored, p.uid)).toBe("rotated-secret");
  });

  it("correlation_rule is immutable: INVALID_ARGUMENT on update_mask; the same value is no change", async () => {
    const p = await create({}, { correlationRule: CorrelationRule.SUB_EQUALS_EXTERNAL_ID });
    const out = await update({ uid: p.uid, configuration: oidc({ correlationRule: CorrelationRule.OID_EQUALS_EXTERNAL_ID }) });
    expect(out.error?.code).toBe(Code.InvalidArgument);
    expect(out.error?.message).toMatch(/^Invalid argument: update_mask: .*correlation_rule/);
    const same = await update({ uid: p.uid, configuration: oidc({ correlationRule: CorrelationRule.SUB_EQUALS_EXTERNAL_ID }) }, ["oidc.correlation_rule"]);
    expect(same.error?.message).toBeUndefined();
    expect(same.message!.updateTime).toEqual(p.updateTime);
  });

  it("a full replacement (mask *) must carry the whole provider: without it, INVALID_ARGUMENT and nothing changes", async () => {
    const p = await create();
    const out = await update({ uid: p.uid, name: p.name }, ["*"]);
    expect(out.error?.code).toBe(Code.InvalidArgument);
    expect(out.error?.message).toMatch(/identity_provider\.default_role: is required/);
    expect(out.error?.message).toMatch(/identity_provider\.oidc: is required/);
    const row = await rowOf(p.uid);
    expect([row.defaultRoleUid, row.oidcIssuer]).toEqual([viewerRole(), ISSUER]);
    expect(box.open(row.oidcClientSecret!, p.uid)).toBe("initial-secret");
  });

  it("renaming onto a taken name: ALREADY_EXISTS; too short: INVALID_ARGUMENT; a plain http issuer: INVALID_ARGUMENT", async () => {
    const p = await create();
    expect((await update({ uid: p.uid, name: "taken" })).error?.code).toBe(Code.AlreadyExists);
    expect((await update({ uid: p.uid, name: "ab" })).error?.message).toBe("Invalid argument: identity_provider.name: must be 3 to 63 characters long");
    const http = await update({ uid: p.uid, configuration: oidc({ issuer: "http://idp.example.com" }) });
    expect(http.error?.code).toBe(Code.InvalidArgument);
    expect(http.error?.message).toMatch(/identity_provider\.oidc\.issuer/);
  });

  it("no escalation: changing the default role or the OIDC configuration needs the default role's capabilities; a description does not", async () => {
    const p = await create({ defaultRole: fx.tinyRole });
    const toViewer = await update({ uid: p.uid, defaultRole: viewerRole() }, undefined, idpAdmin);
    expect(toViewer.error?.code).toBe(Code.PermissionDenied);
    const sibling = await update({ uid: p.uid, defaultRole: fx.siblingRole }, undefined, world.auth("owner"));
    expect(sibling.error?.code).toBe(Code.InvalidArgument);
    expect(sibling.error?.message).toMatch(/identity_provider\.default_role/);
    // A provider whose default role the administrator lacks: it may describe it, not repoint it.
    const q = await create();
    expect((await update({ uid: q.uid, description: "fine" }, undefined, idpAdmin)).error).toBeUndefined();
    expect((await update({ uid: q.uid, configuration: oidc({ issuer: "https://evil.example.com" }) }, undefined, idpAdmin)).error?.code).toBe(Code.PermissionDenied);
    expect((await update({ uid: p.uid, configuration: oidc({ issuer: "https://other.example.com" }) }, undefined, idpAdmin)).error).toBeUndefined();
    expect((await rowOf(q.uid)).oidcIssuer).toBe(ISSUER);
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("DeleteIdentityProvider [%s]", (protocol) => {
  it("deletes the provider and its mappings; the identities it created stay, no longer tied to it", async () => {
    const p = await ok(protocol, S.createIdentityProvider, { parent: world.org, identityProvider: providerInit() });
    const { db } = server.database;
    const mapping = newChildUid(p.uid);
    await db.insert(externalGroupRoleMappings).values({ uid: mapping, identityProviderUid: p.uid, externalGroupId: "admins", roleUid: viewerRole(), scope: world.org });
    const person = await insertPerson("provisioned", { parentUid: world.org, identityProviderUid: p.uid, externalId: unique("ext") });
    await ok(protocol, S.deleteIdentityProvider, { uid: p.uid });
    await refused(protocol, S.getIdentityProvider, { uid: p.uid }, Code.NotFound);
    expect(await db.select().from(externalGroupRoleMappings).where(eq(externalGroupRoleMappings.uid, mapping))).toEqual([]);
    const [kept] = await db.select().from(identities).where(eq(identities.uid, person));
    expect(kept?.identityProviderUid).toBeNull();
    await refused(protocol, S.deleteIdentityProvider, { uid: p.uid }, Code.NotFound);
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("the SCIM credential [%s]", (protocol) => {
  const get = (uid: string) => ok(protocol, S.getIdentityProvider, { uid });
  const newProvider = async () => (await ok(protocol, S.createIdentityProvider, { parent: world.team, identityProvider: providerInit() })).uid;

  it("generate: once, a recognisable token shown once and stored as its hash, a year by default; then LIVE", async () => {
    const uid = await newProvider();
    const e0 = (await get(uid)).scim!.etag;
    const g = await ok(protocol, S.generateScimToken, { identityProviderUid: uid });
    expect(g.token).toMatch(/^cgscim_[0-9a-f]{64}$/);
    expect(g).toMatchObject({ identityProviderUid: uid, endpointUrl: `${server.baseUrl}/scim/v2/${uid}` });
    expect(Math.abs(ms(g.expireTime) - (Date.now() + 365 * DAY))).toBeLessThan(60_000);
    expect(g.etag).not.toBe(e0);
    const row = await rowOf(uid);
    expect(row.scimTokenHash).toBe(scimTokenHash(g.token));
    expect(JSON.stringify(row)).not.toContain(g.token);
    const p = await get(uid);
    expect(p.scim).toMatchObject({ credentialState: CredentialState.LIVE, etag: g.etag });
    expect(ms(p.scim!.tokenExpireTime)).toBe(ms(g.expireTime));
    expect(p.scim!.previousTokenExpireTime).toBeUndefined();
    const again = await refused(protocol, S.generateScimToken, { identityProviderUid: uid }, Code.FailedPrecondition);
    expect(again.details).toContainEqual(expect.objectContaining({ violations: [expect.objectContaining({ type: "SCIM_TOKEN_LIVE" })] }));
  });

  it("generate: an expiry within 2 years; a past expiry, and never_expires with an expiry, are refused", async () => {
    const uid = await newProvider();
    const at = (d: number) => ({ seconds: BigInt(Math.floor((Date.now() + d) / 1000)), nanos: 0 });
    const both = await refused(protocol, S.generateScimToken, { identityProviderUid: uid, neverExpires: true, expireTime: at(DAY) }, Code.InvalidArgument);
    expect(both.message).toBe("Invalid argument: never_expires: must not be set together with expire_time");
    expect((await refused(protocol, S.generateScimToken, { identityProviderUid: uid, expireTime: at(-DAY) }, Code.InvalidArgument)).message).toBe(
      "Invalid argument: expire_time: must be in the future",
    );
    expect((await refused(protocol, S.generateScimToken, { identityProviderUid: uid, expireTime: at(3 * 365 * DAY) }, Code.InvalidArgument)).message).toMatch(
      /expire_time: must be at most 2 years/,
    );
    expect((await get(uid)).scim!.credentialState).toBe(CredentialState.NOT_ISSUED);
    const g = await ok(protocol, S.generateScimToken, { identityProviderUid: uid, expireTime: at(700 * DAY) });
    expect(Math.abs(ms(g.expireTime) - (Date.now() + 700 * DAY))).toBeLessThan(60_000);
  });

  it("regenerate: etag required and checked; the previous token overlaps as asked (default 1 hour, capped at 24); then ROTATING", async () => {
    const uid = await newProvider();
    const stale = (await get(uid)).scim!.etag;
    const first = await ok(protocol, S.generateScimToken, { identityProviderUid: uid });
    expect((await refused(protocol, S.regenerateScimToken, { identityProviderUid: uid }, Code.InvalidArgument)).message).toMatch(/^Invalid argument: etag: is required/);
    const mismatch = await refused(protocol, S.regenerateScimToken, { identityProviderUid: uid, etag: stale }, Code.FailedPrecondition);
    expect(mismatch.details).toContainEqual(expect.objectContaining({ violations: [expect.objectContaining({ type: "ETAG_MISMATCH" })] }));
    await refused(protocol, S.regenerateScimToken, { identityProviderUid: uid, etag: first.etag, overlap: { seconds: -1n } }, Code.InvalidArgument);

    const second = await ok(protocol, S.regenerateScimToken, { identityProviderUid: uid, etag: first.etag, overlap: { seconds: 7200n } });
    expect(second.token).not.toBe(first.token);
    expect(second.etag).not.toBe(first.etag);
    expect(second.requestedOverlap?.seconds).toBe(7200n);
    expect(Math.abs(ms(second.previousTokenExpireTime) - (Date.now() + 2 * 3600_000))).toBeLessThan(60_000);
    let row = await rowOf(uid);
    expect(row.scimTokenHash).toBe(scimTokenHash(second.token));
    expect(row.scimPreviousTokenHash).toBe(scimTokenHash(first.token));
    const p = await get(uid);
    expect(p.scim).toMatchObject({ credentialState: CredentialState.ROTATING, etag: second.etag });
    expect(ms(p.scim!.previousTokenExpireTime)).toBe(ms(second.previousTokenExpireTime));

    // Again, by default: an hour for the token just replaced; the first one ends now.
    const third = await ok(protocol, S.regenerateScimToken, { identityProviderUid: uid, etag: second.etag });
    expect(third.requestedOverlap?.seconds).toBe(3600n);
    expect(Math.abs(ms(third.previousTokenExpireTime) - (Date.now() + 3600_000))).toBeLessThan(60_000);
    row = await rowOf(uid);
    expect(row.scimPreviousTokenHash).toBe(scimTokenHash(second.token));
    expect([row.scimTokenHash, row.scimPreviousTokenHash]).not.toContain(scimTokenHash(first.token));

    // Longer than 24 hours: capped (the request is echoed as asked).
    const long = await ok(protocol, S.regenerateScimToken, { identityProviderUid: uid, etag: third.etag, overlap: { seconds: 48n * 3600n } });
    expect(long.requestedOverlap?.seconds).toBe(48n * 3600n);
    expect(Math.abs(ms(long.previousTokenExpireTime) - (Date.now() + 24 * 3600_000))).toBeLessThan(60_000);

    // An overlap of zero: the replaced token ends at once.
    const fourth = await ok(protocol, S.regenerateScimToken, { identityProviderUid: uid, etag: long.etag, overlap: { seconds: 0n } });
    expect(fourth.previousTokenExpireTime).toBeUndefined();
    expect((await rowOf(uid)).scimPreviousTokenHash).toBeNull();
    expect((await get(uid)).scim!.credentialState).toBe(CredentialState.LIVE);
  });

  it("regenerate on a provider that never had a token: NOT_FOUND (generate first); revoked and expired ones are re-keyed (below)", async () => {
    const uid = await newProvider();
    const e = (await get(uid)).scim!.etag;
    const none = await refused(protocol, S.regenerateScimToken, { identityProviderUid: uid, etag: e }, Code.NotFound);
    expect(none.message).toMatch(/has never had a SCIM token/);
    expect(none.details).toContainEqual(expect.objectContaining({ resourceType: "chainguard.platform.iam.v2.IdentityProvider.SCIM", resourceName: uid }));
    expect((await get(uid)).scim).toMatchObject({ credentialState: CredentialState.NOT_ISSUED, etag: e });
  });

  it("never_expires: a token with no expiry, LIVE with no token_expire_time; revoking ends it, regenerating replaces it", async () => {
    const uid = await newProvider();
    const g = await ok(protocol, S.generateScimToken, { identityProviderUid: uid, neverExpires: true });
    expect(g.expireTime).toBeUndefined();
    const row = await rowOf(uid);
    expect([row.scimTokenHash, row.scimTokenExpireTime]).toEqual([scimTokenHash(g.token), null]);
    const live = (await get(uid)).scim!;
    expect([live.credentialState, live.tokenExpireTime]).toEqual([CredentialState.LIVE, undefined]);
    // Replaced: it overlaps for the hour asked, as any live token does; the new one never expires either.
    const r = await ok(protocol, S.regenerateScimToken, { identityProviderUid: uid, etag: g.etag, neverExpires: true });
    expect(r.expireTime).toBeUndefined();
    expect(Math.abs(ms(r.previousTokenExpireTime) - (Date.now() + 3600_000))).toBeLessThan(60_000);
    const rotating = (await get(uid)).scim!;
    expect([rotating.credentialState, rotating.tokenExpireTime]).toEqual([CredentialState.ROTATING, undefined]);
    const revoked = await ok(protocol, S.revokeScimToken, { identityProviderUid: uid });
    expect((await get(uid)).scim).toMatchObject({ credentialState: CredentialState.REVOKED, etag: revoked.etag });
    expect([(await rowOf(uid)).scimTokenHash, (await rowOf(uid)).scimPreviousTokenHash]).toEqual([null, null]);
  });

  it("revoke ends both tokens at once; twice is no error; then REVOKED, and a new token may be generated", async () => {
    const uid = await newProvider();
    const g = await ok(protocol, S.generateScimToken, { identityProviderUid: uid });
    const r = await ok(protocol, S.regenerateScimToken, { identityProviderUid: uid, etag: g.etag });
    const revoked = await ok(protocol, S.revokeScimToken, { identityProviderUid: uid });
    expect(revoked).toMatchObject({ identityProviderUid: uid, enabled: false });
    expect(revoked.etag).not.toBe(r.etag);
    expect(Math.abs(ms(revoked.revokeTime) - Date.now())).toBeLessThan(60_000);
    const row = await rowOf(uid);
    expect([row.scimTokenHash, row.scimPreviousTokenHash, row.scimTokenExpireTime, row.scimPreviousTokenExpireTime]).toEqual([null, null, null, null]);
    const p = await get(uid);
    expect(p.scim).toMatchObject({ credentialState: CredentialState.REVOKED, etag: revoked.etag });
    expect(p.scim!.tokenExpireTime).toBeUndefined();
    expect(p.scim!.previousTokenExpireTime).toBeUndefined();
    const twice = await ok(protocol, S.revokeScimToken, { identityProviderUid: uid });
    expect(twice.etag).toBe(revoked.etag);
    expect(twice.revokeTime).toEqual(revoked.revokeTime);
    // Re-keyed: a new live token, the revoked ones staying dead (no overlap).
    const rekeyed = await ok(protocol, S.regenerateScimToken, { identityProviderUid: uid, etag: revoked.etag });
    expect(rekeyed.previousTokenExpireTime).toBeUndefined();
    expect(rekeyed.requestedOverlap?.seconds).toBe(3600n);
    expect((await get(uid)).scim).toMatchObject({ credentialState: CredentialState.LIVE, etag: rekeyed.etag });
    expect((await rowOf(uid)).scimPreviousTokenHash).toBeNull();
    // Generating over it is refused while it lives; after a revocation a new one may be generated too.
    await refused(protocol, S.generateScimToken, { identityProviderUid: uid }, Code.FailedPrecondition);
    await ok(protocol, S.revokeScimToken, { identityProviderUid: uid });
    const again = await ok(protocol, S.generateScimToken, { identityProviderUid: uid });
    expect((await get(uid)).scim).toMatchObject({ credentialState: CredentialState.LIVE, etag: again.etag });
  });

  it("an expired token reads EXPIRED; regenerating re-keys it with no overlap, and generating works too", async () => {
    const uid = await newProvider();
    const g = await ok(protocol, S.generateScimToken, { identityProviderUid: uid });
    await server.database.db.update(identityProviders).set({ scimTokenExpireTime: new Date(Date.now() - 1000) }).where(eq(identityProviders.uid, uid));
    expect((await get(uid)).scim!.credentialState).toBe(CredentialState.EXPIRED);
    const r = await ok(protocol, S.regenerateScimToken, { identityProviderUid: uid, etag: g.etag });
    expect(r.previousTokenExpireTime).toBeUndefined();
    expect(await rowOf(uid)).toMatchObject({ scimTokenHash: scimTokenHash(r.token), scimPreviousTokenHash: null });
    await server.database.db.update(identityProviders).set({ scimTokenExpireTime: new Date(Date.now() - 1000) }).where(eq(identityProviders.uid, uid));
    const fresh = await ok(protocol, S.generateScimToken, { identityProviderUid: uid });
    expect((await rowOf(uid)).scimTokenHash).toBe(scimTokenHash(fresh.token));
  });

  it("set enabled: etag required and checked; on with the organization's three owners, off again; the same state changes nothing", async () => {
    const uid = await newProvider();
    const e0 = (await get(uid)).scim!.etag;
    await refused(protocol, S.setScimEnabled, { identityProviderUid: uid, enabled: true }, Code.InvalidArgument);
    await refused(protocol, S.setScimEnabled, { identityProviderUid: uid, enabled: true, etag: "stale" }, Code.FailedPrecondition);
    const on = await ok(protocol, S.setScimEnabled, { identityProviderUid: uid, enabled: true, etag: e0 });
    expect(on).toMatchObject({ identityProviderUid: uid, enabled: true });
    expect(on.etag).not.toBe(e0);
    expect((await get(uid)).scim).toMatchObject({ enabled: true, etag: on.etag });
    await refused(protocol, S.setScimEnabled, { identityProviderUid: uid, enabled: false, etag: e0 }, Code.FailedPrecondition);
    const same = await ok(protocol, S.setScimEnabled, { identityProviderUid: uid, enabled: true, etag: on.etag });
    expect(same.etag).toBe(on.etag);
    const off = await ok(protocol, S.setScimEnabled, { identityProviderUid: uid, enabled: false, etag: on.etag });
    expect(off.enabled).toBe(false);
    expect((await get(uid)).scim!.enabled).toBe(false);
    // Revoking leaves SCIM as it is.
    const on2 = await ok(protocol, S.setScimEnabled, { identityProviderUid: uid, enabled: true, etag: off.etag });
    expect((await ok(protocol, S.revokeScimToken, { identityProviderUid: uid })).enabled).toBe(true);
    expect((await get(uid)).scim!.enabled).toBe(true);
    expect(on2.enabled).toBe(true);
  });

  it("set enabled on an organization with a single owner: FAILED_PRECONDITION TOO_FEW_OWNERS; turning it off is always allowed", async () => {
    const p = await ok(protocol, S.createIdentityProvider, { parent: solo.team, identityProvider: providerInit() }, solo.auth("owner"));
    const err = await refused(protocol, S.setScimEnabled, { identityProviderUid: p.uid, enabled: true, etag: p.scim!.etag }, Code.FailedPrecondition, solo.auth("owner"));
    expect(err.message).toMatch(/at least 2 identities bound to the owner role .* it has 1$/);
    expect(err.details).toContainEqual(expect.objectContaining({ violations: [expect.objectContaining({ type: "TOO_FEW_OWNERS", subject: solo.org })] }));
    const off = await ok(protocol, S.setScimEnabled, { identityProviderUid: p.uid, enabled: false, etag: p.scim!.etag }, solo.auth("owner"));
    expect(off.etag).toBe(p.scim!.etag);
  });
});

describe("the two-owners rule counts active owners on the organization itself, not those the provider made", () => {
  it("a second owner on a sub-group, an inactive one, or one the provider created does not count; a second active owner on the organization does", async () => {
    const protocol: Protocol = "connect-json";
    const { db } = server.database;
    const owner = managedRole("owner").uid;
    const p = await ok(protocol, S.createIdentityProvider, { parent: solo.org, identityProvider: providerInit() }, solo.auth("owner"));
    const tryOn = () => call(protocol, base(), S.setScimEnabled, { identityProviderUid: p.uid, enabled: true, etag: p.scim!.etag }, solo.auth("owner"));
    const bindOwner = async (identityUid: string, group = solo.org) => {
      const uid = newChildUid(group);
      await db.insert(roleBindings).values({ uid, groupUid: group, identityUid, roleUid: owner });
      return uid;
    };
    const made: string[] = [];
    made.push(await bindOwner(solo.identity.editor, solo.team));
    expect((await tryOn()).error?.code).toBe(Code.FailedPrecondition);
    const inactive = await insertPerson("inactive owner", { active: false });
    made.push(await bindOwner(inactive));
    expect((await tryOn()).error?.code).toBe(Code.FailedPrecondition);
    const provisioned = await insertPerson("provisioned owner", { parentUid: solo.org, identityProviderUid: p.uid, externalId: "ext-owner" });
    made.push(await bindOwner(provisioned));
    expect((await tryOn()).error?.code).toBe(Code.FailedPrecondition);
    made.push(await bindOwner(solo.identity.viewer));
    const on = await tryOn();
    expect(on.error?.message).toBeUndefined();
    expect(on.message!.enabled).toBe(true);
    for (const uid of made) await db.delete(roleBindings).where(eq(roleBindings.uid, uid));
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("the client secret is write-only [%s]", (protocol) => {
  it("is in no response, no event body and no log line; it is stored only sealed", async () => {
    const secret = `write-only-${protocol}-${unique("s")}`;
    const newSecret = `${secret}-rotated`;
    // Every log line, at debug level, read where the logger writes it (not echoed to the test run's output).
    const lines: string[] = [];
    const untap = addLogTap((line) => lines.push(line));
    const responses: string[] = [];
    const json = (schema: DescMessage, m: MessageShape<DescMessage>) => responses.push(JSON.stringify(toJson(schema, m, { registry })));
    let uid = "";
    try {
      const p = await ok(protocol, S.createIdentityProvider, { parent: world.org, identityProvider: providerInit({}, { clientSecret: secret }) });
      uid = p.uid;
      json(S.createIdentityProvider.output, p);
      json(S.getIdentityProvider.output, await ok(protocol, S.getIdentityProvider, { uid }));
      json(S.listIdentityProviders.output, await ok(protocol, S.listIdentityProviders, { uidp: { ids: [uid] } }));
      json(S.updateIdentityProvider.output, await ok(protocol, S.updateIdentityProvider, { identityProvider: { uid, configuration: oidc({ clientSecret: newSecret }) } }));
      json(S.updateIdentityProvider.output, await ok(protocol, S.updateIdentityProvider, { identityProvider: { uid, description: "after" } }));
      // Refused with the secret in the request: the error does not quote it either.
      const bad = await refused(protocol, S.createIdentityProvider, { parent: world.org, identityProvider: providerInit({ name: "x" }, { clientSecret: secret }) }, Code.InvalidArgument);
      responses.push(bad.message);
      const raw = await fetch(`${server.baseUrl}/iam/v2/identityProviders/${uid}`, { headers: world.auth("owner") });
      responses.push(await raw.text());
    } finally {
      untap();
    }
    expect(lines.some((l) => l.includes("CreateIdentityProvider"))).toBe(true);
    for (const text of [...responses, ...lines]) {
      expect(text).not.toContain(secret);
    }
    expect(responses.length).toBe(7);
    const events = await server.database.db.select({ body: outboxEvents.body }).from(outboxEvents).where(eq(outboxEvents.subject, uid));
    expect(events.length).toBe(3);
    for (const e of events) expect(JSON.stringify(e.body)).not.toContain(secret);
    const stored = (await rowOf(uid)).oidcClientSecret!;
    expect(stored).not.toContain(secret);
    expect(box.open(stored, uid)).toBe(newSecret);
    // Sealed for this provider: the same value does not open as another's.
    expect(() => box.open(stored, fx.taken)).toThrow();
  });
});

describe("no SCIM token reaches an event", () => {
  it("the outbox holds none of the tokens issued in this file", async () => {
    const uid = (await ok("grpc", S.createIdentityProvider, { parent: world.org, identityProvider: providerInit() })).uid;
    const g = await ok("grpc", S.generateScimToken, { identityProviderUid: uid });
    const r = await ok("grpc", S.regenerateScimToken, { identityProviderUid: uid, etag: g.etag });
    const rows = await server.database.db
      .select({ type: outboxEvents.type, body: outboxEvents.body })
      .from(outboxEvents)
      .where(eq(outboxEvents.subject, uid));
    expect(rows.map((x) => x.type).sort()).toEqual([
      "dev.chainguard.api.iam.identity_providers.created.v1",
      "dev.chainguard.api.iam.identity_providers.scim_token.generated.v1",
      "dev.chainguard.api.iam.identity_providers.scim_token.regenerated.v1",
    ]);
    const generated = rows.find((x) => x.type.endsWith("generated.v1") && !x.type.endsWith("regenerated.v1"))!;
    expect(generated.body).toMatchObject({ identityProviderUid: uid, etag: g.etag });
    expect(generated.body).not.toHaveProperty("token");
    const [leaks] = await server.database.db
      .select({ n: sql<number>`count(*)::int` })
      .from(outboxEvents)
      .where(sql`${outboxEvents.body}::text like '%cgscim\\_%'`);
    expect(leaks!.n).toBe(0);
    expect(JSON.stringify(rows)).not.toContain(r.token);
  });
});

// ---------------------------------------------------------------------------------------------------------
describe("a server without a secret key (production without IDP_SECRET_KEY) and without insecure loopback issuers", () => {
  let prod: TestServer;
  let w: World;
  /** The fake DNS of this server, which dials public addresses only (production, ALLOW_PRIVATE_OUTBOUND unset). */
  const zone: Record<string, string[]> = {
    "idp.example.com": ["93.184.215.14"],
    "idp.corp.test": ["10.1.2.3"],
    "half.corp.test": ["93.184.215.14", "fd00::7"],
    localhost: ["127.0.0.1", "::1"],
  };
  const resolver: Resolver = async (hostname) => {
    const addresses = zone[hostname];
    if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
    return addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
  };
  beforeAll(async () => {
    prod = await startTestServer({ idpSecretKey: undefined, externalOptions: { allowInsecureLoopback: false }, sinks: sinkPolicyFor("production", resolver) });
    w = await seedWorld(prod, "prod");
  });
  afterAll(async () => {
    await prod?.close();
  });

  it.each(protocols)("refuses a client secret with FAILED_PRECONDITION NO_SECRET_KEY, takes a PKCE provider, refuses a plain http issuer [%s]", async (protocol) => {
    const create = (o: OidcInit) => call(protocol, prod.baseUrl, S.createIdentityProvider, { parent: w.org, identityProvider: providerInit({}, o) }, w.auth("owner"));
    const secret = await create({ clientSecret: "cannot-store" });
    expect(secret.error?.code).toBe(Code.FailedPrecondition);
    expect(secret.error?.message).toMatch(/IDP_SECRET_KEY/);
    expect(secret.error?.message).not.toContain("cannot-store");
    const pkce = await create({ clientSecret: "", pkceEnabled: true });
    expect(pkce.error?.message).toBeUndefined();
    const http = await create({ clientSecret: "", pkceEnabled: true, issuer: "http://127.0.0.1:5556" });
    expect(http.error?.code).toBe(Code.InvalidArgument);
    expect(http.error?.message).toMatch(/identity_provider\.oidc\.issuer: .*plain http is allowed only in development/);
  });

  it.each(protocols)("refuses, when named, an issuer on a loopback, private or link-local address, however written [%s]", async (protocol) => {
    const create = (issuer: string) =>
      call(protocol, prod.baseUrl, S.createIdentityProvider, { parent: w.org, identityProvider: providerInit({}, { clientSecret: "", pkceEnabled: true, issuer }) }, w.auth("owner"));
    for (const [issuer, reason] of [
      ["https://169.254.169.254", "169.254.169.254 is a linkLocal address"],
      ["https://10.0.0.1/realms/corp", "10.0.0.1 is a private address"],
      ["https://[::1]:8443", "::1 is a loopback address"],
      ["https://[::ffff:a9fe:a9fe]", "is a linkLocal address"],
      // IPv4-compatible IPv6 (::/96): the IPv4 address in its last 32 bits, here the metadata and loopback ones.
      ["https://[::a9fe:a9fe]", "::a9fe:a9fe is a ipv4Compatible address"],
      ["https://[::127.0.0.1]", "::7f00:1 is a ipv4Compatible address"],
      ["https://[64:ff9b::a9fe:a9fe]", "64:ff9b::a9fe:a9fe is a linkLocal (NAT64 of 169.254.169.254) address"],
      ["https://localhost:8443", "localhost resolves to 127.0.0.1, a loopback address"],
      ["https://idp.corp.test", "idp.corp.test resolves to 10.1.2.3, a private address"],
      ["https://half.corp.test", "half.corp.test resolves to fd00::7, a uniqueLocal address"],
    ] as const) {
      const out = await create(issuer);
      expect(out.error?.code, issuer).toBe(Code.InvalidArgument);
      assertError(protocol, out.error!, {
        code: Code.InvalidArgument,
        details: [field("identity_provider.oidc.issuer", expect.stringMatching(new RegExp(`^must reach a public address: .*${reason.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`)))],
      });
    }
    // A public one is taken; changing it to a private one is refused as creating it would be.
    const pkce = await create(ISSUER);
    expect(pkce.error?.message).toBeUndefined();
    const moved = await call(
      protocol,
      prod.baseUrl,
      S.updateIdentityProvider,
      { identityProvider: { uid: pkce.message!.uid, configuration: oidc({ issuer: "https://idp.corp.test", clientId: "client-1", pkceEnabled: true }) }, updateMask: { paths: ["oidc.issuer"] } },
      w.auth("owner"),
    );
    expect(moved.error?.code).toBe(Code.InvalidArgument);
    expect(moved.error?.message).toMatch(/identity_provider\.oidc\.issuer: must reach a public address: idp\.corp\.test resolves to 10\.1\.2\.3/);
  });
});
