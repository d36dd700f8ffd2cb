// Login through an organization's identity provider, end to end: POST /sts/exchange with
// `identity_provider` and an ID token of an OIDC provider this test runs (test/support/fake-issuer.ts: its
// own discovery and JWKS). The providers and their group mappings are rows written straight to the tables.
//
//   first login      creates the identity under the provider's group, named from the token, bound to the
//                    default role; the token it gets works on API calls; repeat logins reuse it
//   groups sync      each login adds the bindings of the mappings whose group the token lists and removes
//                    those of groups it no longer lists; bindings made by hand stay; the next API call sees it
//   refusals         another issuer, another audience (client), another organization's provider, an unknown
//                    provider, an expired token: UNAUTHENTICATED with ErrorInfo; a deactivated identity too
//   correlation      by `oid`: the same person with another `sub` is the same identity
//   concurrency      simultaneous first logins of one person create one identity (meaningful on PostgreSQL)
//   refresh tokens   a login asking for offline_access gets one; it outlives the ID token and logins that leave
//                    the mapped bindings as they were, and ends when the mapped bindings change (a later login
//                    with other groups, or a mapped binding deleted)
import { Code } from "@connectrpc/connect";
import { and, eq } from "drizzle-orm";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentityProvider_OIDC_CorrelationRule as CorrelationRule } from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { BadRequestSchema, RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { SecurityTokenService } from "../../gen/platform/oidc/v1/oidc.platform_pb.js";
import { externalGroupRoleMappings, identities, identityProviders, refreshTokens, roleBindings } from "../../src/db/schema/index.js";
import { outboxEvents } from "../../src/db/schema/outbox.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { identityNameFrom } from "../../src/iam/identities.mapper.js";
import { groupsOf } from "../../src/iam/sso-login.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { assertError, call, contractCase, detail, protocols, runContractCases, type Protocol } from "../contract/harness.js";
import { startFakeIssuer, type FakeIssuer } from "../support/fake-issuer.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

const exchange = SecurityTokenService.method.exchange;

let server: TestServer;
let acme: World;
let globex: World;
let idp: FakeIssuer; // acme's provider (and globex's second one)
let idpB: FakeIssuer; // globex's own
const provider = { acme: "", oid: "", globex: "", globexSameIssuer: "" };
const mapping = { eng: "", admins: "", eng2: "" };
const t: Record<string, string> = {};

async function insertProvider(org: string, name: string, over: Partial<typeof identityProviders.$inferInsert>): Promise<string> {
  const uid = newChildUid(org);
  await server.database.db.insert(identityProviders).values({
    uid,
    groupUid: org,
    name,
    defaultRoleUid: managedRole("viewer").uid,
    oidcIssuer: idp.url,
    oidcClientId: "client-a",
    oidcPkceEnabled: true,
    oidcCorrelationRule: CorrelationRule.SUB_EQUALS_EXTERNAL_ID,
    ...over,
  });
  return uid;
}

async function insertMapping(providerUid: string, externalGroupId: string, role: string, scope: string): Promise<string> {
  const uid = newChildUid(providerUid);
  await server.database.db
    .insert(externalGroupRoleMappings)
    .values({ uid, identityProviderUid: providerUid, externalGroupId, roleUid: managedRole(role).uid, scope });
  return uid;
}

beforeAll(async () => {
  server = await startTestServer();
  acme = await seedWorld(server, "acme");
  globex = await seedWorld(server, "globex");
  idp = await startFakeIssuer({ audience: "client-a" });
  idpB = await startFakeIssuer({ path: "/b", audience: "client-b" });
  provider.acme = await insertProvider(acme.org, "okta", {});
  provider.oid = await insertProvider(acme.org, "entra", { oidcClientId: "client-oid", oidcCorrelationRule: CorrelationRule.OID_EQUALS_EXTERNAL_ID, oidcGroupsClaim: "roles" });
  provider.globex = await insertProvider(globex.org, "keycloak", { oidcIssuer: idpB.url, oidcClientId: "client-b" });
  provider.globexSameIssuer = await insertProvider(globex.org, "okta", { oidcClientId: "client-g" });
  mapping.eng = await insertMapping(provider.acme, "eng", "editor", acme.org);
  mapping.admins = await insertMapping(provider.acme, "admins", "owner", acme.org);
  // A second group mapping the same role on the same scope as "eng".
  mapping.eng2 = await insertMapping(provider.acme, "eng-contractors", "editor", acme.org);
  await insertMapping(provider.oid, "readers", "viewer", acme.team);
  await insertMapping(provider.globexSameIssuer, "eng", "owner", globex.org);

  t.otherIssuer = await idpB.mint({ sub: "mallory", groups: ["eng"] });
  t.otherAudience = await idp.mint({ sub: "mallory", aud: "another-app" });
  t.otherParty = await idp.mint({ sub: "mallory", aud: ["client-a", "another-app"], azp: "another-app" });
  t.globexClient = await idp.mint({ sub: "mallory", aud: "client-g", groups: ["eng"] });
  t.expired = await idp.mint({ sub: "mallory" }, { ttlSeconds: -600 });
  t.forged = await idp.mint({ sub: "mallory" }, { unpublishedKey: true });
  t.valid = await idp.mint({ sub: "mallory" });
});
afterAll(async () => {
  await server?.close();
  await idp?.close();
  await idpB?.close();
});

async function exchangeWith(protocol: Protocol, providerUid: string, token: string, extra: { identity?: string } = {}) {
  return call(protocol, server.baseUrl, exchange, { identityProvider: providerUid, ...extra }, { authorization: `Bearer ${token}` });
}

/** Logs in and returns this server's token, failing the test on an error. */
async function login(protocol: Protocol, providerUid: string, token: string): Promise<string> {
  const out = await exchangeWith(protocol, providerUid, token);
  expect(out.error, out.error ? `${Code[out.error.code]}: ${out.error.message}` : "").toBeUndefined();
  return out.message!.token;
}

const identityOf = async (providerUid: string, externalId: string) =>
  (await server.database.db
    .select()
    .from(identities)
    .where(and(eq(identities.identityProviderUid, providerUid), eq(identities.externalId, externalId))))[0];

/** The identity's bindings as "<role name>@<group>[ by <mapping>]", sorted. */
async function bindingsOf(identityUid: string): Promise<string[]> {
  const rows = await server.database.db.select().from(roleBindings).where(eq(roleBindings.identityUid, identityUid));
  const roleName = (uid: string) => ["viewer", "editor", "owner"].find((r) => managedRole(r).uid === uid) ?? uid;
  return rows.map((r) => `${roleName(r.roleUid)}@${r.groupUid}${r.mappingUid ? ` by ${r.mappingUid}` : ""}`).sort();
}

/** The events a login recorded with this identity as the actor, as "<type> <subject> in <group>". */
async function eventsOf(identityUid: string): Promise<string[]> {
  const rows = await server.database.db.select().from(outboxEvents).where(eq(outboxEvents.actor, identityUid));
  for (const r of rows) expect(r.method).toBe("/chainguard.platform.oidc.SecurityTokenService/Exchange");
  return rows.map((r) => `${r.type} ${r.subject} in ${r.groupUid}`).sort();
}

const createGroup = (token: string, name: string) =>
  call("connect-json", server.baseUrl, GroupsService.method.createGroup, { parent: acme.org, group: { name } }, { authorization: `Bearer ${token}` });

describe.each(protocols)("first login through a provider [%s]", (protocol) => {
  it("creates the identity under the provider's group with the default role and the mapped ones; its token works; a repeat login reuses it", async () => {
    const sub = `alice-${protocol}`;
    const idToken = await idp.mint({ sub, name: "Alice Ångström", email: `alice-${protocol}@acme.example`, email_verified: true, groups: ["eng", "unmapped"] });
    const token = await login(protocol, provider.acme, idToken);

    const row = await identityOf(provider.acme, sub);
    expect(row).toMatchObject({ parentUid: acme.org, name: "alice angstrom", email: `alice-${protocol}@acme.example`, emailUnverified: "", active: true });
    expect(row!.relationship).toEqual({ claimMatch: { issuer: idp.url, subject: sub } });
    expect(decodeJwt(token)).toMatchObject({ iss: server.baseUrl, sub: row!.uid, aud: server.baseUrl, act: { iss: idp.url, sub } });
    expect(decodeJwt(token).exp).toBeLessThanOrEqual(decodeJwt(idToken).exp!);
    expect(await bindingsOf(row!.uid)).toEqual([`editor@${acme.org} by ${mapping.eng}`, `viewer@${acme.org}`].sort());
    const bindingUids = (await server.database.db.select().from(roleBindings).where(eq(roleBindings.identityUid, row!.uid))).map((b) => b.uid);
    expect(await eventsOf(row!.uid)).toEqual(
      [
        `dev.chainguard.api.iam.identity.created.v1 ${row!.uid} in ${acme.org}`,
        ...bindingUids.map((b) => `dev.chainguard.api.iam.rolebindings.created.v1 ${b} in ${acme.org}`),
      ].sort(),
    );

    const got = await call(protocol, server.baseUrl, GroupsService.method.getGroup, { uid: acme.org }, { authorization: `Bearer ${token}` });
    expect(got.error?.message).toBeUndefined();
    expect(got.message!.uid).toBe(acme.org);

    const again = await login(protocol, provider.acme, await idp.mint({ sub, name: "Someone Else", groups: ["eng"] }));
    expect(decodeJwt(again).sub).toBe(row!.uid);
    expect(await server.database.db.select().from(identities).where(eq(identities.externalId, sub))).toHaveLength(1);
    expect((await identityOf(provider.acme, sub))!.name).toBe("alice angstrom");
  });
});

describe("groups claim sync at each login", () => {
  it("adds and removes mapped bindings as the groups change, never touches hand-made ones, and API calls see it at once", async () => {
    const sub = "bob";
    const token1 = await login("rest", provider.acme, await idp.mint({ sub, preferred_username: "Bob.Builder", email: "bob@acme.example", groups: ["eng"] }));
    const bob = (await identityOf(provider.acme, sub))!;
    expect(bob).toMatchObject({ name: "bob.builder", email: "", emailUnverified: "bob@acme.example" });
    expect((await createGroup(token1, "by-editor")).error?.code).toBe(Code.PermissionDenied);

    // Made by hand (mapping_uid null): one of a role a mapping also grants, and one elsewhere.
    await server.database.db.insert(roleBindings).values([
      { uid: newChildUid(acme.team), groupUid: acme.team, identityUid: bob.uid, roleUid: managedRole("editor").uid },
      { uid: newChildUid(acme.org), groupUid: acme.org, identityUid: bob.uid, roleUid: managedRole("owner").uid },
    ]);
    const handMade = [`editor@${acme.team}`, `owner@${acme.org}`, `viewer@${acme.org}`];
    // The hand-made owner binding already binds what "admins" maps: nothing is added beside it.
    await login("rest", provider.acme, await idp.mint({ sub, groups: ["admins", "eng"] }));
    expect(await bindingsOf(bob.uid)).toEqual([...handMade, `editor@${acme.org} by ${mapping.eng}`].sort());

    await server.database.db.delete(roleBindings).where(and(eq(roleBindings.identityUid, bob.uid), eq(roleBindings.groupUid, acme.org), eq(roleBindings.roleUid, managedRole("owner").uid)));
    const [engBinding] = await server.database.db.select().from(roleBindings).where(and(eq(roleBindings.identityUid, bob.uid), eq(roleBindings.mappingUid, mapping.eng)));
    const token2 = await login("rest", provider.acme, await idp.mint({ sub, groups: ["admins"] }));
    expect(await bindingsOf(bob.uid)).toEqual([`editor@${acme.team}`, `viewer@${acme.org}`, `owner@${acme.org} by ${mapping.admins}`].sort());
    const [adminsBinding] = await server.database.db.select().from(roleBindings).where(and(eq(roleBindings.identityUid, bob.uid), eq(roleBindings.mappingUid, mapping.admins)));
    expect(await eventsOf(bob.uid)).toEqual(
      expect.arrayContaining([
        `dev.chainguard.api.iam.rolebindings.deleted.v1 ${engBinding!.uid} in ${acme.org}`,
        `dev.chainguard.api.iam.rolebindings.created.v1 ${adminsBinding!.uid} in ${acme.org}`,
      ]),
    );
    // The grants this replica remembered for bob are forgotten: owner now, at once.
    const created = await createGroup(token2, "by-owner");
    expect(created.error?.message).toBeUndefined();

    // Losing "eng" while keeping "eng-contractors" (the same role on the same scope) keeps an editor binding.
    await login("rest", provider.acme, await idp.mint({ sub, groups: ["eng", "eng-contractors"] }));
    expect(await bindingsOf(bob.uid)).toContain(`editor@${acme.org} by ${mapping.eng}`);
    await login("rest", provider.acme, await idp.mint({ sub, groups: ["eng-contractors"] }));
    expect(await bindingsOf(bob.uid)).toEqual([`editor@${acme.team}`, `viewer@${acme.org}`, `editor@${acme.org} by ${mapping.eng2}`].sort());

    // No groups claim at all: every mapped binding goes, the hand-made ones stay.
    const token3 = await login("rest", provider.acme, await idp.mint({ sub }));
    expect(await bindingsOf(bob.uid)).toEqual([`editor@${acme.team}`, `viewer@${acme.org}`].sort());
    expect((await createGroup(token3, "by-viewer")).error?.code).toBe(Code.PermissionDenied);
  });

  it("reads the provider's own groups claim, and binds on the mapping's scope", async () => {
    const token = await login("connect-json", provider.oid, await idp.mint({ sub: "s-carol", oid: "oid-carol", aud: "client-oid", roles: ["readers"], groups: ["eng"] }));
    const carol = (await identityOf(provider.oid, "oid-carol"))!;
    expect(decodeJwt(token).sub).toBe(carol.uid);
    expect(await bindingsOf(carol.uid)).toEqual([`viewer@${acme.org}`, `viewer@${acme.team} by ${(await bindingMappingOf(carol.uid, acme.team))!}`].sort());
  });
});

async function bindingMappingOf(identityUid: string, group: string) {
  const [row] = await server.database.db.select().from(roleBindings).where(and(eq(roleBindings.identityUid, identityUid), eq(roleBindings.groupUid, group)));
  return row?.mappingUid;
}

describe("refresh tokens of a login through a provider", () => {
  const refresh = (token: string) =>
    call("connect-json", server.baseUrl, SecurityTokenService.method.exchangeRefreshToken, {}, { authorization: `Bearer ${token}` });

  const offlineLogin = async (sub: string, groups: string[], ttlSeconds = 600) => {
    const out = await call("rest", server.baseUrl, exchange, { identityProvider: provider.acme, scope: "offline_access" }, {
      authorization: `Bearer ${await idp.mint({ sub, groups }, { ttlSeconds })}`,
    });
    expect(out.error?.message).toBeUndefined();
    return out.message!;
  };
  const invalid = { code: Code.Unauthenticated, reason: "REFRESH_TOKEN_INVALID" };

  it("outlive the ID token and logins that leave the mapped bindings as they were", async () => {
    const sub = "dora";
    const out = await offlineLogin(sub, ["eng"], 120);
    const dora = (await identityOf(provider.acme, sub))!;
    expect(decodeJwt(out.token).exp).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 120);

    const first = await refresh(out.refreshToken);
    expect(first.error?.message).toBeUndefined();
    const access = decodeJwt(first.message!.token!.token);
    expect(access).toMatchObject({ sub: dora.uid, act: { iss: idp.url, sub } });
    expect(access.exp! - access.iat!).toBe(3600); // not capped at the ID token's expiry

    // Another login with the same groups changes nothing: the chain lives on.
    await login("connect-json", provider.acme, await idp.mint({ sub, groups: ["eng"] }));
    expect((await refresh(first.message!.refreshToken!.token)).error?.message).toBeUndefined();
  });

  it("end when a later login finds the person out of a mapped group: the removal takes effect on every device", async () => {
    const sub = "erin";
    const out = await offlineLogin(sub, ["eng"]);
    const erin = (await identityOf(provider.acme, sub))!;
    const first = await refresh(out.refreshToken);
    expect(first.error?.message).toBeUndefined();
    // Removed from "eng" at the provider; a login elsewhere brings the bindings in line (the default stays).
    await login("connect-json", provider.acme, await idp.mint({ sub, groups: [] }));
    expect(await bindingsOf(erin.uid)).toEqual([`viewer@${acme.org}`]);
    assertError("connect-json", (await refresh(first.message!.refreshToken!.token)).error!, invalid);
    // Ended for good: the chain is revoked.
    const rows = await server.database.db.select().from(refreshTokens).where(eq(refreshTokens.identityUid, erin.uid));
    expect(rows.length).toBeGreaterThan(0);
    for (const r of rows) expect(r.revokeTime).not.toBeNull();
  });

  it("end when a mapped binding is deleted or added, and when the identity's last binding goes", async () => {
    const sub = "fay";
    const out = await offlineLogin(sub, ["eng"]);
    const fay = (await identityOf(provider.acme, sub))!;
    await server.database.db.delete(roleBindings).where(and(eq(roleBindings.identityUid, fay.uid), eq(roleBindings.mappingUid, mapping.eng)));
    assertError("connect-json", (await refresh(out.refreshToken)).error!, invalid);

    // A login with more groups than the chain's login (another device) ends it too.
    const again = await offlineLogin(sub, ["eng"]);
    await login("connect-json", provider.acme, await idp.mint({ sub, groups: ["eng", "admins"] }));
    assertError("connect-json", (await refresh(again.refreshToken)).error!, invalid);

    // With the default binding gone by hand, the login that drops the mapped one removes the last binding.
    const last = await offlineLogin(sub, ["eng"]);
    await server.database.db.delete(roleBindings).where(and(eq(roleBindings.identityUid, fay.uid), eq(roleBindings.roleUid, managedRole("viewer").uid)));
    await login("connect-json", provider.acme, await idp.mint({ sub, groups: [] }));
    expect(await bindingsOf(fay.uid)).toEqual([]);
    expect(await server.database.db.select().from(refreshTokens).where(eq(refreshTokens.identityUid, fay.uid))).toEqual([]);
    assertError("connect-json", (await refresh(last.refreshToken)).error!, invalid);
  });
});

describe("correlation by oid", () => {
  it("finds the same identity by its oid whatever its sub, records the oid in its relationship, and refuses a token without oid", async () => {
    const first = await login("rest", provider.oid, await idp.mint({ sub: "pairwise-1", oid: "oid-dave", aud: "client-oid", name: "Dave" }));
    const dave = (await identityOf(provider.oid, "oid-dave"))!;
    expect(decodeJwt(first).sub).toBe(dave.uid);
    expect(dave.relationship).toEqual({ claimMatch: { issuer: idp.url, subject: "pairwise-1", claims: { oid: "oid-dave" } } });
    const second = await login("rest", provider.oid, await idp.mint({ sub: "pairwise-2", oid: "oid-dave", aud: "client-oid" }));
    expect(decodeJwt(second).sub).toBe(dave.uid);
    expect(await server.database.db.select().from(identities).where(eq(identities.identityProviderUid, provider.oid))).toHaveLength(2); // carol and dave

    const out = await exchangeWith("rest", provider.oid, await idp.mint({ sub: "pairwise-1", aud: "client-oid" }));
    assertError("rest", out.error!, { code: Code.Unauthenticated, reason: "TOKEN_NOT_ACCEPTED" });
  });
});

describe("a deactivated identity", () => {
  it("is refused, and its bindings stay as they were", async () => {
    await login("rest", provider.acme, await idp.mint({ sub: "erin", groups: ["eng"] }));
    const erin = (await identityOf(provider.acme, "erin"))!;
    await server.database.db.update(identities).set({ active: false }).where(eq(identities.uid, erin.uid));
    const before = await bindingsOf(erin.uid);
    for (const protocol of protocols) {
      const out = await exchangeWith(protocol, provider.acme, await idp.mint({ sub: "erin", groups: ["admins"] }));
      assertError(protocol, out.error!, { code: Code.Unauthenticated, reason: "IDENTITY_INACTIVE" });
    }
    expect(await bindingsOf(erin.uid)).toEqual(before);
    await server.database.db.update(identities).set({ active: true }).where(eq(identities.uid, erin.uid));
    await login("rest", provider.acme, await idp.mint({ sub: "erin", groups: ["admins"] }));
    expect(await bindingsOf(erin.uid)).toContain(`owner@${acme.org} by ${mapping.admins}`);
  });
});

const notAccepted = { code: Code.Unauthenticated, reason: "TOKEN_NOT_ACCEPTED", domain: "oidc.platform.test", message: /not accepted by identity provider/ };
const bearer = (name: string) => () => ({ authorization: `Bearer ${t[name]}` });
const via = (name: keyof typeof provider) => () => ({ identityProvider: provider[name] });

describe("refused logins", () => {
  it("contacts no issuer but the provider's", async () => {
    const before = { ...idpB.requests };
    for (const protocol of protocols) assertError(protocol, (await exchangeWith(protocol, provider.acme, t.otherIssuer!)).error!, notAccepted);
    expect(idpB.requests).toEqual(before);
    expect(await identityOf(provider.acme, "mallory")).toBeUndefined();
  });

  it("an organization's provider takes its own tokens, not another organization's", async () => {
    expect(decodeJwt(await login("rest", provider.globexSameIssuer, t.globexClient!)).sub).toMatch(new RegExp(`^${globex.org}/`));
    expect(decodeJwt(await login("rest", provider.globex, await idpB.mint({ sub: "mallory" }))).sub).toMatch(new RegExp(`^${globex.org}/`));
    expect(await identityOf(provider.acme, "mallory")).toBeUndefined();
  });
});

runContractCases("Exchange through an identity provider refused", () => server.baseUrl, [
  contractCase({ name: "a token of another issuer", method: exchange, request: via("acme"), headers: bearer("otherIssuer"), error: notAccepted }),
  contractCase({ name: "a token for another client (audience)", method: exchange, request: via("acme"), headers: bearer("otherAudience"), error: notAccepted }),
  contractCase({ name: "a token authorized for another party (azp)", method: exchange, request: via("acme"), headers: bearer("otherParty"), error: notAccepted }),
  contractCase({ name: "a token for another organization's provider (same issuer)", method: exchange, request: via("acme"), headers: bearer("globexClient"), error: notAccepted }),
  contractCase({ name: "a token of this provider for another organization's provider", method: exchange, request: via("globexSameIssuer"), headers: bearer("valid"), error: notAccepted }),
  contractCase({ name: "a token not signed by the provider's keys", method: exchange, request: via("acme"), headers: bearer("forged"), error: notAccepted }),
  contractCase({ name: "an expired token", method: exchange, request: via("acme"), headers: bearer("expired"), error: { code: Code.Unauthenticated, reason: "TOKEN_EXPIRED" } }),
  contractCase({ name: "a garbage token", method: exchange, request: via("acme"), headers: { authorization: "Bearer garbage" }, error: { code: Code.Unauthenticated, reason: "TOKEN_INVALID" } }),
  contractCase({
    name: "an unknown provider answers as a token it does not accept",
    method: exchange,
    request: () => ({ identityProvider: `${acme.org}/0123456789abcdef` }),
    headers: bearer("valid"),
    error: notAccepted,
  }),
  contractCase({
    name: "identity_provider is not a uid",
    method: exchange,
    request: { identityProvider: "not a uid" },
    headers: bearer("valid"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "identity_provider" }] } }] },
  }),
  contractCase({
    name: "identity together with identity_provider",
    method: exchange,
    request: () => ({ identityProvider: provider.acme, identity: acme.identity.owner }),
    headers: bearer("valid"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "identity" }] } }] },
  }),
]);

describe("refused logins are rate-limited", () => {
  let limited: TestServer;
  beforeAll(async () => {
    limited = await startTestServer({ rateLimits: { exchangeFailures: { bySubject: { burst: 2, perMinute: 1 }, byAddress: { burst: 1000, perMinute: 1000 } } } });
  });
  afterAll(async () => {
    await limited?.close();
  });

  let send: (token: string) => ReturnType<typeof call>;
  beforeAll(async () => {
    const org = (await seedWorld(limited, "limited")).org;
    const uid = newChildUid(org);
    await limited.database.db
      .insert(identityProviders)
      .values({ uid, groupUid: org, name: "okta", defaultRoleUid: managedRole("viewer").uid, oidcIssuer: idp.url, oidcClientId: "client-a", oidcPkceEnabled: true });
    send = async (token: string) => call("connect-json", limited.baseUrl, exchange, { identityProvider: uid }, { authorization: `Bearer ${token}` });
  });

  it("by the token's issuer and subject once its signature verified, as every refused exchange", async () => {
    // Signed by the provider, refused after the signature verified: issued to another party.
    const otherParty = () => idp.mint({ sub: "frank", aud: ["client-a", "another-app"], azp: "another-app", jti: crypto.randomUUID() });
    for (let i = 0; i < 2; i++) assertError("connect-json", (await send(await otherParty())).error!, notAccepted);
    const out = await send(await idp.mint({ sub: "frank" }));
    assertError("connect-json", out.error!, { code: Code.ResourceExhausted, reason: "TOO_MANY_FAILURES" });
    expect(detail(out.error!, RetryInfoSchema)?.retryDelay).toBeDefined();
    expect((await send(await idp.mint({ sub: "grace" }))).error).toBeUndefined();
  });

  it("never by the subject a token signed with another key claims: the person's logins go on", async () => {
    for (let i = 0; i < 5; i++) assertError("connect-json", (await send(await idp.mint({ sub: "heidi", jti: crypto.randomUUID() }, { unpublishedKey: true }))).error!, notAccepted);
    for (let i = 0; i < 5; i++) assertError("connect-json", (await send(await idp.mint({ sub: "heidi", aud: "elsewhere", jti: crypto.randomUUID() }))).error!, notAccepted);
    const out = await send(await idp.mint({ sub: "heidi" }));
    expect(out.error, out.error?.message).toBeUndefined();
  });
});

describe("concurrent first logins of one person", () => {
  it("create one identity with one default binding", async () => {
    const sub = "heidi";
    const tokens = await Promise.all(Array.from({ length: 8 }, (_, i) => idp.mint({ sub, jti: String(i), groups: ["eng", "admins"] })));
    const minted = await Promise.all(tokens.map((tok, i) => login(protocols[i % protocols.length]!, provider.acme, tok)));
    const heidi = await server.database.db.select().from(identities).where(and(eq(identities.identityProviderUid, provider.acme), eq(identities.externalId, sub)));
    expect(heidi).toHaveLength(1);
    expect(new Set(minted.map((m) => decodeJwt(m).sub))).toEqual(new Set([heidi[0]!.uid]));
    expect(await bindingsOf(heidi[0]!.uid)).toEqual(
      [`viewer@${acme.org}`, `editor@${acme.org} by ${mapping.eng}`, `owner@${acme.org} by ${mapping.admins}`].sort(),
    );
  });
});

describe("what a token says, made to fit", () => {
  it("names identities by the pattern, from name, preferred_username or email", () => {
    expect(identityNameFrom({ name: "José Pérez" })).toBe("jose perez");
    expect(identityNameFrom({ name: "  ", preferred_username: "Ana_B@Example.COM" })).toBe("ana_b-example.com");
    expect(identityNameFrom({ name: "李雷", email: "li.lei@example.com" })).toBe("li.lei-example.com");
    expect(identityNameFrom({ name: 42 })).toBe("user");
    expect(identityNameFrom({ name: "x".repeat(300) })).toHaveLength(256);
    for (const n of ["José Pérez", "--a--", "a\tb\nc", "Ωmega (admin)"]) expect(identityNameFrom({ name: n })).toMatch(/^[a-z0-9 ._-]{1,}$/);
  });

  it("reads the groups claim as a list of strings", () => {
    expect(groupsOf({ groups: ["a", 1, "b"] }, "")).toEqual(["a", "b"]);
    expect(groupsOf({ roles: "solo" }, "roles")).toEqual(["solo"]);
    expect(groupsOf({ groups: { a: 1 } }, "")).toEqual([]);
    expect(groupsOf({}, "groups")).toEqual([]);
  });
});
