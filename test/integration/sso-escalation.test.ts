// Privilege escalation through an organization's identity provider, as the attacks were made: a custom role
// holding only the capabilities named, then the API call, then a login through the provider (POST
// /sts/exchange with an ID token of an OIDC provider this test runs) or a SCIM request.
//
//   re-pointing      who may update providers and create bindings, but holds no owner capability, cannot
//                    change the issuer, client id or groups claim of a provider whose mapping grants owner;
//                    an owner can, and nothing made under the old settings carries over (mapped bindings
//                    go; on a new issuer or client the identities are no longer the provider's)
//   SCIM token       who holds only SCIM management and provider listing cannot issue or regenerate a token
//                    of a provider whose default or mapped roles it lacks
//   SCIM re-point    a SCIM client cannot move an identity carrying bindings the provider did not make (an
//                    owner binding made by hand) to another person by changing its externalId
import { Code } from "@connectrpc/connect";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { IdentityProvidersService } from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { identities, identityProviders, roleBindings, roles } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { call, protocols } from "../contract/harness.js";
import { startFakeIssuer, type FakeIssuer } from "../support/fake-issuer.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { insertPerson, seedWorld, type World } from "../support/world.js";

const S = IdentityProvidersService.method;
const CLIENT = "platform-client";
const OWNER = () => managedRole("owner").uid;

let server: TestServer;
let world: World;
/** The organization's real provider, and one the attacker runs (same client id). */
let idp: FakeIssuer;
let evil: FakeIssuer;
/** A harmless custom role, the default role of the providers made here. */
let memberRole: string;

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "escalation");
  idp = await startFakeIssuer({ audience: CLIENT });
  evil = await startFakeIssuer({ path: "/evil", audience: CLIENT });
  memberRole = await insertRole("member", [Capability.CAP_IAM_IDENTITY_PROVIDERS_LIST]);
});
afterAll(async () => {
  await server?.close();
  await idp?.close();
  await evil?.close();
});

async function insertRole(name: string, capabilities: Capability[]): Promise<string> {
  const uid = newChildUid(world.org);
  await server.database.db.insert(roles).values({ uid, parentUid: world.org, name, capabilities });
  return uid;
}

/** A person bound on the organization to a custom role holding exactly `capabilities`; its Authorization header. */
async function personWith(name: string, capabilities: Capability[]): Promise<Record<string, string>> {
  const role = await insertRole(name, capabilities);
  const person = await insertPerson(server, name);
  await server.database.db.insert(roleBindings).values({ uid: newChildUid(world.org), groupUid: world.org, identityUid: person.uid, roleUid: role });
  return person.auth;
}

async function api(method: string, path: string, body?: unknown, auth = world.auth("owner")) {
  const res = await fetch(`${server.baseUrl}${path}`, { method, headers: { ...auth, "content-type": "application/json" }, body: body === undefined ? undefined : JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** The owner registers a provider (the member role by default) and maps its "admins" group to owner. */
async function ownerProvider(defaultRole = memberRole): Promise<{ uid: string; mapping: string }> {
  const created = await api("POST", `/iam/v2/identityProviders/${world.org}`, {
    name: `idp-${Math.random().toString(16).slice(2, 10)}`,
    defaultRole,
    oidc: { issuer: idp.url, clientId: CLIENT, pkceEnabled: true },
  });
  expect(created.status, JSON.stringify(created.json)).toBe(200);
  const mapping = await api("POST", `/iam/v2/externalGroupRoleMappings/${created.json.uid}`, { externalGroupId: "admins", roleUid: OWNER() });
  expect(mapping.status, JSON.stringify(mapping.json)).toBe(200);
  return { uid: String(created.json.uid), mapping: String(mapping.json.uid) };
}

/** Logs in through the provider with an ID token; the identity it landed on, or the HTTP status of a refusal. */
async function login(provider: string, idToken: string): Promise<{ status: number; identity?: string }> {
  const res = await fetch(`${server.baseUrl}/sts/exchange?identity_provider=${encodeURIComponent(provider)}`, { method: "POST", headers: { authorization: `Bearer ${idToken}` } });
  const body = (await res.json()) as { token?: string };
  if (res.status !== 200) return { status: res.status };
  const sub = JSON.parse(Buffer.from(body.token!.split(".")[1]!, "base64url").toString()) as { sub: string };
  return { status: 200, identity: sub.sub };
}

const ownerBindingsOf = async (identityUid: string) =>
  server.database.db.select().from(roleBindings).where(and(eq(roleBindings.identityUid, identityUid), eq(roleBindings.roleUid, OWNER())));
const providerRow = async (uid: string) => (await server.database.db.select().from(identityProviders).where(eq(identityProviders.uid, uid)))[0]!;

describe("changing what decides who a provider's people are", () => {
  let attacker: Record<string, string>;
  beforeAll(async () => {
    // May update providers and create bindings, and holds the default role's capabilities: no owner capability.
    attacker = await personWith("idp-editor", [
      Capability.CAP_IAM_IDENTITY_PROVIDERS_UPDATE,
      Capability.CAP_IAM_IDENTITY_PROVIDERS_LIST,
      Capability.CAP_IAM_ROLE_BINDINGS_CREATE,
    ]);
  });

  it.each(protocols)("re-pointing the issuer, client id or groups claim needs the mapped role's capabilities too [%s]", async (protocol) => {
    const p = await ownerProvider();
    const update = (oidc: Record<string, unknown>) =>
      call(protocol, server.baseUrl, S.updateIdentityProvider, { identityProvider: { uid: p.uid, configuration: { case: "oidc", value: oidc } } }, attacker);
    for (const oidc of [{ issuer: evil.url }, { groupsClaim: "name" }, { clientId: "another-client" }]) {
      const out = await update(oidc);
      expect(out.error?.code, JSON.stringify(oidc)).toBe(Code.PermissionDenied);
      expect(out.error?.message).toMatch(/mapped role .* would grant capabilities the caller does not hold/);
    }
    expect(await providerRow(p.uid)).toMatchObject({ oidcIssuer: idp.url, oidcClientId: CLIENT, oidcGroupsClaim: "" });
    // What the attacker would have done next: neither token makes anyone an owner.
    expect((await login(p.uid, await evil.mint({ sub: `mallory-${protocol}`, groups: ["admins"] }))).status).toBe(401);
    const named = await login(p.uid, await idp.mint({ sub: `named-admins-${protocol}`, name: "admins" }));
    expect(named.status).toBe(200);
    expect(await ownerBindingsOf(named.identity!)).toEqual([]);
    // A change that decides nothing about people stays the attacker's to make.
    const described = await call(protocol, server.baseUrl, S.updateIdentityProvider, { identityProvider: { uid: p.uid, description: "fine" } }, attacker);
    expect(described.error?.message).toBeUndefined();
  });

  it("an owner may re-point the issuer: the identities made under the old one are no longer the provider's, and lose their mapped bindings", async () => {
    const p = await ownerProvider();
    const boss = await login(p.uid, await idp.mint({ sub: "boss", groups: ["admins"] }));
    expect(boss.status).toBe(200);
    const handMade = newChildUid(world.team);
    await server.database.db.insert(roleBindings).values({ uid: handMade, groupUid: world.team, identityUid: boss.identity!, roleUid: OWNER() });
    expect((await ownerBindingsOf(boss.identity!)).map((b) => b.mappingUid)).toEqual(expect.arrayContaining([p.mapping, null]));

    const out = await api("PATCH", `/iam/v2/identityProviders/${p.uid}`, { oidc: { issuer: evil.url } });
    expect(out.status, JSON.stringify(out.json)).toBe(200);
    const [row] = await server.database.db.select().from(identities).where(eq(identities.uid, boss.identity!));
    expect(row).toMatchObject({ identityProviderUid: null, externalId: "boss" });
    expect((await ownerBindingsOf(boss.identity!)).map((b) => b.uid)).toEqual([handMade]);
    // The new issuer's "boss" is someone else: a new identity, with what the token's groups map.
    const other = await login(p.uid, await evil.mint({ sub: "boss", groups: [] }));
    expect(other.status).toBe(200);
    expect(other.identity).not.toBe(boss.identity);
    expect(await ownerBindingsOf(other.identity!)).toEqual([]);
  });

  it("an owner may change the groups claim: mapped bindings go until the next login reads the new claim; identities stay", async () => {
    const p = await ownerProvider();
    const ann = await login(p.uid, await idp.mint({ sub: "ann", groups: ["admins"], roles: ["admins"] }));
    expect((await ownerBindingsOf(ann.identity!)).map((b) => b.mappingUid)).toEqual([p.mapping]);
    const out = await api("PATCH", `/iam/v2/identityProviders/${p.uid}`, { oidc: { groupsClaim: "roles" } });
    expect(out.status, JSON.stringify(out.json)).toBe(200);
    expect(await ownerBindingsOf(ann.identity!)).toEqual([]);
    const again = await login(p.uid, await idp.mint({ sub: "ann", groups: [], roles: ["admins"] }));
    expect(again.identity).toBe(ann.identity);
    expect((await ownerBindingsOf(ann.identity!)).map((b) => b.mappingUid)).toEqual([p.mapping]);
  });
});

/** One SCIM request with the provider's token. */
async function scim(method: string, provider: string, path: string, token: string, body?: unknown) {
  const res = await fetch(`${server.baseUrl}/scim/v2/${provider}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/scim+json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: (text === "" ? {} : JSON.parse(text)) as Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

/** The owner issues the provider's SCIM token and turns SCIM on; the token. */
async function ownerScimToken(provider: string): Promise<string> {
  const issued = await api("POST", `/iam/v2/identityProviders/${provider}:generateScimToken`, {});
  expect(issued.status, JSON.stringify(issued.json)).toBe(200);
  const on = await api("POST", `/iam/v2/identityProviders/${provider}:setScimEnabled`, { enabled: true, etag: issued.json.etag });
  expect(on.status, JSON.stringify(on.json)).toBe(200);
  return String(issued.json.token);
}

describe("a SCIM token is issued only to who holds every role the provider can grant", () => {
  let scimManager: Record<string, string>;
  beforeAll(async () => {
    scimManager = await personWith("scim-manager", [Capability.CAP_IAM_SCIM_MANAGE, Capability.CAP_IAM_IDENTITY_PROVIDERS_LIST]);
  });

  it.each(protocols)("generate and regenerate without the default role's or a mapped role's capabilities: PERMISSION_DENIED, nothing changes [%s]", async (protocol) => {
    // The default role (member) is one the manager holds; the "admins" mapping grants owner.
    const mapped = await ownerProvider();
    const generated = await call(protocol, server.baseUrl, S.generateScimToken, { identityProviderUid: mapped.uid }, scimManager);
    expect(generated.error?.code).toBe(Code.PermissionDenied);
    expect(generated.error?.message).toMatch(/mapped role .* would grant capabilities the caller does not hold/);
    expect((await providerRow(mapped.uid)).scimTokenHash).toBeNull();

    // The default role (viewer) is one the manager lacks; the owner's token is live.
    const viewerDefault = await ownerProvider(managedRole("viewer").uid);
    const token = await ownerScimToken(viewerDefault.uid);
    const before = await providerRow(viewerDefault.uid);
    const regenerated = await call(protocol, server.baseUrl, S.regenerateScimToken, { identityProviderUid: viewerDefault.uid, etag: before.scimEtag }, scimManager);
    expect(regenerated.error?.code).toBe(Code.PermissionDenied);
    expect(regenerated.error?.message).toMatch(/default role .* would grant capabilities the caller does not hold/);
    expect(await providerRow(viewerDefault.uid)).toMatchObject({ scimTokenHash: before.scimTokenHash, scimEtag: before.scimEtag });
    expect((await scim("GET", viewerDefault.uid, "/Users", token)).status).toBe(200);
  });
});

describe("SCIM never hands an identity carrying bindings the provider did not make to another person", () => {
  const patchExternalId = (value: string) => ({
    schemas: ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
    Operations: [{ op: "replace", path: "externalId", value }],
  });

  it("an SSO-made user an owner bound as owner by hand keeps its externalId (PATCH and PUT: 400 mutability); the attacker's login lands elsewhere", async () => {
    const p = await ownerProvider();
    const token = await ownerScimToken(p.uid);
    const boss = await login(p.uid, await idp.mint({ sub: "boss-b", email: "boss@escalation.example", email_verified: true }));
    await server.database.db.insert(roleBindings).values({ uid: newChildUid(world.org), groupUid: world.org, identityUid: boss.identity!, roleUid: OWNER() });
    const id = boss.identity!.slice(boss.identity!.lastIndexOf("/") + 1);

    const patched = await scim("PATCH", p.uid, `/Users/${id}`, token, patchExternalId("mallory-b"));
    expect(patched.status, JSON.stringify(patched.json)).toBe(400);
    expect(patched.json.scimType).toBe("mutability");
    const current = await scim("GET", p.uid, `/Users/${id}`, token);
    const replaced = await scim("PUT", p.uid, `/Users/${id}`, token, { ...current.json, externalId: "mallory-b" });
    expect(replaced.status).toBe(400);
    expect(replaced.json.scimType).toBe("mutability");
    expect((await server.database.db.select().from(identities).where(eq(identities.uid, boss.identity!)))[0]!.externalId).toBe("boss-b");

    const mallory = await login(p.uid, await idp.mint({ sub: "mallory-b" }));
    expect(mallory.status).toBe(200);
    expect(mallory.identity).not.toBe(boss.identity);
    expect(await ownerBindingsOf(mallory.identity!)).toEqual([]);
    // Deactivating the owner-bound user is still the provider's to do.
    const off = await scim("PATCH", p.uid, `/Users/${id}`, token, { schemas: ["urn:ietf:params:scim:api:messages:2.0:PatchOp"], Operations: [{ op: "replace", path: "active", value: false }] });
    expect(off.status).toBe(200);
  });

  it("a user holding only what the provider gave it may be re-pointed: its mapped bindings go, its default role stays", async () => {
    const p = await ownerProvider();
    const token = await ownerScimToken(p.uid);
    const carl = await login(p.uid, await idp.mint({ sub: "carl", groups: ["admins"] }));
    expect((await ownerBindingsOf(carl.identity!)).map((b) => b.mappingUid)).toEqual([p.mapping]);
    const id = carl.identity!.slice(carl.identity!.lastIndexOf("/") + 1);
    const patched = await scim("PATCH", p.uid, `/Users/${id}`, token, patchExternalId("carl-2"));
    expect(patched.status, JSON.stringify(patched.json)).toBe(200);
    expect(await ownerBindingsOf(carl.identity!)).toEqual([]);
    const left = await server.database.db.select().from(roleBindings).where(eq(roleBindings.identityUid, carl.identity!));
    expect(left.map((b) => [b.roleUid, b.mappingUid])).toEqual([[memberRole, null]]);
    expect((await login(p.uid, await idp.mint({ sub: "carl-2" }))).identity).toBe(carl.identity);
  });
});
