// Single sign-on end to end, through the API only, as an organization sets it up: its owner registers the
// identity provider (an OIDC provider this test runs) and a group mapping, issues a SCIM token and turns SCIM
// on; the provider provisions a person over SCIM; the person logs in through the provider and lands on the
// provisioned identity with the default and mapped roles; deactivation over SCIM cuts the person off at
// once; deleting the provider takes its mappings and the bindings they made.
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { roleBindings } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { startFakeIssuer, type FakeIssuer } from "../support/fake-issuer.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

let server: TestServer;
let world: World;
let idp: FakeIssuer;

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "sso");
  idp = await startFakeIssuer({ audience: "platform-client" });
});
afterAll(async () => {
  await server?.close();
  await idp?.close();
});

async function api(method: string, path: string, body?: unknown, token = world.token.owner) {
  const res = await fetch(`${server.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: (await res.json()) as Record<string, any> }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

async function scim(method: string, url: string, token: string, body?: unknown) {
  const res = await fetch(url, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/scim+json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, json: res.status === 204 ? {} : ((await res.json()) as Record<string, any>) }; // eslint-disable-line @typescript-eslint/no-explicit-any
}

describe("an organization's single sign-on, set up and used through the API", () => {
  it("provider, mapping, SCIM provisioning, login, deactivation, deletion", async () => {
    // The owner registers the provider, with viewer as the default role, and maps the "eng" group to editor.
    const created = await api("POST", `/iam/v2/identityProviders/${world.org}`, {
      name: "corporate",
      defaultRole: managedRole("viewer").uid,
      oidc: { issuer: idp.url, clientId: "platform-client", pkceEnabled: true },
    });
    expect(created.status).toBe(200);
    const provider = String(created.json.uid);
    expect(created.json.scim.credentialState).toBe("CREDENTIAL_STATE_NOT_ISSUED");
    const mapping = await api("POST", `/iam/v2/externalGroupRoleMappings/${provider}`, { externalGroupId: "eng", roleUid: managedRole("editor").uid });
    expect(mapping.status).toBe(200);

    // A SCIM token, shown once, and SCIM turned on.
    const issued = await api("POST", `/iam/v2/identityProviders/${provider}:generateScimToken`, {});
    expect(issued.status).toBe(200);
    const scimToken = String(issued.json.token);
    const endpoint = String(issued.json.endpointUrl);
    expect(endpoint).toBe(`${server.baseUrl}/scim/v2/${provider}`);
    const enabled = await api("POST", `/iam/v2/identityProviders/${provider}:setScimEnabled`, { enabled: true, etag: issued.json.etag });
    expect(enabled.status).toBe(200);
    expect((await api("GET", `/iam/v2/identityProviders/${provider}`)).json.scim).toMatchObject({ enabled: true, credentialState: "CREDENTIAL_STATE_LIVE" });

    // The provider provisions Alice.
    const user = await scim("POST", `${endpoint}/Users`, scimToken, {
      schemas: ["urn:ietf:params:scim:schemas:core:2.0:User"],
      userName: "alice@sso.example",
      externalId: "alice-sub",
      active: true,
      emails: [{ value: "alice@sso.example", primary: true }],
    });
    expect(user.status).toBe(201);
    const found = await scim("GET", `${endpoint}/Users?filter=${encodeURIComponent('userName eq "alice@sso.example"')}`, scimToken);
    expect(found.json.totalResults).toBe(1);

    // Alice logs in through the provider: the provisioned identity, with the default and the mapped role.
    const idToken = await idp.mint({ sub: "alice-sub", email: "alice@sso.example", email_verified: true, groups: ["eng"] });
    const exchanged = await fetch(`${server.baseUrl}/sts/exchange?identity_provider=${encodeURIComponent(provider)}`, {
      method: "POST",
      headers: { authorization: `Bearer ${idToken}` },
    });
    expect(exchanged.status).toBe(200);
    const aliceToken = String(((await exchanged.json()) as { token: string }).token);
    const identities = await api("GET", `/iam/v2/identities?uidp.childrenOf=${world.org}`);
    const alice = (identities.json.identities as { uid: string; name: string }[]).find((i) => i.uid.endsWith(`/${user.json.id}`));
    expect(alice).toBeDefined();
    const bindings = await server.database.db.select().from(roleBindings).where(eq(roleBindings.identityUid, alice!.uid));
    expect(bindings.map((b) => [b.roleUid, b.mappingUid]).sort()).toEqual(
      [
        [managedRole("viewer").uid, null],
        [managedRole("editor").uid, mapping.json.uid],
      ].sort(),
    );
    // As an editor she may create a repo in the organization.
    expect((await api("POST", `/registry/v2/repos/${world.org}`, { name: "alices-repo" }, aliceToken)).status).toBe(200);

    // Deactivated over SCIM: her next call is refused, and so is her next login.
    const off = await scim("PATCH", `${endpoint}/Users/${user.json.id}`, scimToken, {
      schemas: ["urn:ietf:params:scim:api:messages:2.0:PatchOp"],
      Operations: [{ op: "replace", path: "active", value: false }],
    });
    expect(off.status).toBe(200);
    const refused = await api("GET", `/iam/v2/groups/${world.org}`, undefined, aliceToken);
    expect(refused.status).toBe(401);
    expect(refused.json.details.find((d: { reason?: string }) => d.reason)?.reason).toBe("IDENTITY_INACTIVE");
    const relogin = await fetch(`${server.baseUrl}/sts/exchange?identity_provider=${encodeURIComponent(provider)}`, { method: "POST", headers: { authorization: `Bearer ${idToken}` } });
    expect(relogin.status).toBe(401);

    // Deleting the provider deletes its mapping and the binding that mapping made; the identity stays.
    expect((await api("DELETE", `/iam/v2/identityProviders/${provider}`)).status).toBe(200);
    expect((await api("GET", `/iam/v2/externalGroupRoleMappings/${String(mapping.json.uid)}`)).status).toBe(404);
    const left = await server.database.db.select().from(roleBindings).where(eq(roleBindings.identityUid, alice!.uid));
    expect(left.map((b) => b.roleUid)).toEqual([managedRole("viewer").uid]);
  });
});
