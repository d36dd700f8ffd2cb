// The SCIM 2.0 endpoint as an identity provider drives it (Okta and Entra ID request shapes): create a user,
// find it by filter, deactivate it (its next API call is refused on every protocol), reactivate it, change its
// emails, replace it, delete it; paging; SCIM errors; and the SCIM token rules (live, expired, revoked, the
// previous one within and after its overlap, SCIM disabled, another provider's token). Providers are rows
// written straight into identity_providers with their token hashes.
import { Code } from "@connectrpc/connect";
import { and, asc, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { identities, identityProviders, outboxEvents, roleBindings } from "../../src/db/schema/index.js";
import { createIdentityDirectory } from "../../src/iam/directory.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { newScimToken, scimTokenHash } from "../../src/iam/scim-token.js";
import { addLogTap } from "../../src/kernel/log.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { call, detail, protocols } from "./harness.js";

const USER = "urn:ietf:params:scim:schemas:core:2.0:User";
const PATCH = "urn:ietf:params:scim:api:messages:2.0:PatchOp";
const ERROR = "urn:ietf:params:scim:api:messages:2.0:Error";
const LIST = "urn:ietf:params:scim:api:messages:2.0:ListResponse";
const ISSUER = "https://idp.example.com";
const HOUR = 3600_000;

let server: TestServer;
let world: World;

interface ProviderRow {
  uid: string;
  token: string;
}

async function insertProvider(
  group: string,
  name: string,
  scim: { enabled?: boolean; expire?: Date | null; previous?: { token: string; expire: Date } } = {},
): Promise<ProviderRow> {
  const uid = newChildUid(group);
  const token = newScimToken();
  await server.database.db.insert(identityProviders).values({
    uid,
    groupUid: group,
    name,
    defaultRoleUid: managedRole("viewer").uid,
    oidcIssuer: ISSUER,
    oidcClientId: "client",
    oidcPkceEnabled: true,
    scimEnabled: scim.enabled ?? true,
    scimTokenHash: scimTokenHash(token),
    scimTokenExpireTime: scim.expire === undefined ? new Date(Date.now() + 365 * 24 * HOUR) : scim.expire,
    scimPreviousTokenHash: scim.previous ? scimTokenHash(scim.previous.token) : null,
    scimPreviousTokenExpireTime: scim.previous?.expire ?? null,
  });
  return { uid, token };
}

interface ScimAnswer {
  status: number;
  contentType: string | null;
  location: string | null;
  wwwAuthenticate: string | null;
  body: Record<string, unknown> | undefined;
}

/** One SCIM request to a provider's endpoint, as a provisioning client sends it. */
async function scim(provider: string, verb: string, path: string, token: string | undefined, body?: unknown): Promise<ScimAnswer> {
  const headers: Record<string, string> = { accept: "application/scim+json" };
  if (token !== undefined) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers["content-type"] = "application/scim+json";
  const res = await fetch(`${server.baseUrl}/scim/v2/${provider}${path}`, {
    method: verb,
    headers,
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  return {
    status: res.status,
    contentType: res.headers.get("content-type"),
    location: res.headers.get("location"),
    wwwAuthenticate: res.headers.get("www-authenticate"),
    body: text === "" ? undefined : (JSON.parse(text) as Record<string, unknown>),
  };
}

const user = (userName: string, externalId: string, extra: Record<string, unknown> = {}) => ({
  schemas: [USER],
  userName,
  externalId,
  name: { givenName: "Alice", familyName: "Liddell" },
  emails: [{ value: userName.toLowerCase(), type: "work", primary: true }],
  active: true,
  ...extra,
});

function expectScimError(answer: ScimAnswer, status: number, scimType?: string): void {
  expect(answer.status).toBe(status);
  expect(answer.contentType).toMatch(/^application\/scim\+json/);
  expect(answer.body).toMatchObject({ schemas: [ERROR], status: String(status), detail: expect.any(String) });
  if (scimType) expect(answer.body!.scimType).toBe(scimType);
  else expect(answer.body!.scimType).toBeUndefined();
}

const ids = (answer: ScimAnswer) => (answer.body!.Resources as Array<{ id: string }>).map((r) => r.id);

/** GetGroup on the provider's organization, as the identity, over every protocol: the codes in order. */
async function apiCodes(identityUid: string): Promise<Array<Code | "OK">> {
  const token = await server.token(identityUid);
  const out: Array<Code | "OK"> = [];
  for (const p of protocols) {
    const res = await call(p, server.baseUrl, GroupsService.method.getGroup, { uid: world.org }, { authorization: `Bearer ${token}` });
    out.push(res.error ? res.error.code : "OK");
  }
  return out;
}

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "scim-org");
});

afterAll(async () => {
  await server?.close();
});

describe("SCIM Users, as an identity provider drives it", () => {
  let provider: ProviderRow;
  let id = "";
  let identityUid = "";

  beforeAll(async () => {
    provider = await insertProvider(world.org, "okta");
  });

  it("creates a user: an identity under the provider's group, bound to its default role", async () => {
    const created = await scim(provider.uid, "POST", "/Users", provider.token, user("Alice@Example.com", "00u1alice"));
    expect(created.status).toBe(201);
    expect(created.contentType).toMatch(/^application\/scim\+json/);
    const body = created.body!;
    id = body.id as string;
    expect(id).toMatch(/^[0-9a-f]{16}$/);
    expect(body).toMatchObject({
      schemas: [USER],
      userName: "Alice@Example.com",
      externalId: "00u1alice",
      active: true,
      name: { givenName: "Alice", familyName: "Liddell" },
      emails: [{ value: "alice@example.com", type: "work", primary: true }],
      meta: { resourceType: "User", location: `${server.baseUrl}/scim/v2/${provider.uid}/Users/${id}` },
    });
    expect(created.location).toBe((body.meta as { location: string }).location);

    identityUid = `${world.org}/${id}`;
    const [row] = await server.database.db.select().from(identities).where(eq(identities.uid, identityUid));
    expect(row).toMatchObject({
      parentUid: world.org,
      identityProviderUid: provider.uid,
      externalId: "00u1alice",
      active: true,
      email: "alice@example.com",
      name: "alice-example.com",
      issuer: ISSUER,
      subject: "00u1alice",
      relationship: { claimMatch: { issuer: ISSUER, subject: "00u1alice" } },
    });
    expect(row!.scim).toMatchObject({ userName: "Alice@Example.com", name: { givenName: "Alice" } });
    expect(row!.scim).not.toHaveProperty("externalId");
    const bindings = await server.database.db.select().from(roleBindings).where(eq(roleBindings.identityUid, identityUid));
    expect(bindings).toEqual([expect.objectContaining({ groupUid: world.org, roleUid: managedRole("viewer").uid, mappingUid: null })]);

    const got = await scim(provider.uid, "GET", `/Users/${id}`, provider.token);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(body);
  });

  it("finds the user by userName (case-insensitively) and by externalId", async () => {
    for (const filter of ['userName eq "alice@example.com"', 'userName eq "ALICE@EXAMPLE.COM"', 'externalId eq "00u1alice"', `id eq "${id}" and active eq true`]) {
      const found = await scim(provider.uid, "GET", `/Users?filter=${encodeURIComponent(filter)}`, provider.token);
      expect(found.status, filter).toBe(200);
      expect(found.body, filter).toMatchObject({ schemas: [LIST], totalResults: 1, startIndex: 1, itemsPerPage: 1 });
      expect(ids(found), filter).toEqual([id]);
    }
    for (const filter of ['userName eq "bob@example.com"', 'externalId eq "00U1ALICE"']) {
      const none = await scim(provider.uid, "GET", `/Users?filter=${encodeURIComponent(filter)}`, provider.token);
      expect(none.body, filter).toMatchObject({ totalResults: 0, Resources: [] });
    }
  });

  it("the user calls the API with its default role", async () => {
    expect(await apiCodes(identityUid)).toEqual(protocols.map(() => "OK"));
  });

  it("deactivation (Okta: replace with a value object) refuses the identity's next call on every protocol", async () => {
    const patched = await scim(provider.uid, "PATCH", `/Users/${id}`, provider.token, {
      schemas: [PATCH],
      Operations: [{ op: "replace", value: { active: false } }],
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ id, active: false, userName: "Alice@Example.com" });
    const [row] = await server.database.db.select({ active: identities.active }).from(identities).where(eq(identities.uid, identityUid));
    expect(row!.active).toBe(false);

    // The grants remembered by the previous test's calls are forgotten before the PATCH answered.
    expect(await apiCodes(identityUid)).toEqual(protocols.map(() => Code.Unauthenticated));
    const token = await server.token(identityUid);
    const res = await call("rest", server.baseUrl, GroupsService.method.listGroups, {}, { authorization: `Bearer ${token}` });
    expect(res.error?.code).toBe(Code.Unauthenticated);
    expect(res.error?.httpStatus).toBe(401);
    expect(detail(res.error!, ErrorInfoSchema)?.reason).toBe("IDENTITY_INACTIVE");

    // Nor is it assumed by an external token (direct calls, the token exchange) while inactive.
    const directory = createIdentityDirectory(server.database.db);
    expect(await directory.assumable(identityUid)).toBeUndefined();
    expect(await directory.withIssuerAndSubject(ISSUER, "00u1alice", 10)).toEqual([]);
    expect(await directory.grants(identityUid)).toEqual({ homeGroup: world.org, bindings: [], inactive: true });

    const inactive = await scim(provider.uid, "GET", `/Users?filter=${encodeURIComponent("active eq false")}`, provider.token);
    expect(ids(inactive)).toEqual([id]);
  });

  it("reactivation (Entra ID: path active, string value) restores access", async () => {
    const patched = await scim(provider.uid, "PATCH", `/Users/${id}`, provider.token, {
      schemas: [PATCH],
      Operations: [{ op: "Replace", path: "active", value: "True" }],
    });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ active: true });
    expect(await apiCodes(identityUid)).toEqual(protocols.map(() => "OK"));
    const directory = createIdentityDirectory(server.database.db);
    expect((await directory.assumable(identityUid))?.uid).toBe(identityUid);
  });

  it("PATCH changes emails: a filtered value path, an add, and a remove; the identity's email follows the primary", async () => {
    const replaced = await scim(provider.uid, "PATCH", `/Users/${id}`, provider.token, {
      schemas: [PATCH],
      Operations: [{ op: "replace", path: 'emails[type eq "work"].value', value: "alice@wonderland.example" }],
    });
    expect(replaced.status).toBe(200);
    expect(replaced.body!.emails).toEqual([{ value: "alice@wonderland.example", type: "work", primary: true }]);

    const added = await scim(provider.uid, "PATCH", `/Users/${id}`, provider.token, {
      schemas: [PATCH],
      Operations: [
        { op: "add", path: "emails", value: [{ value: "alice@home.example", type: "home" }] },
        { op: "replace", path: "name.givenName", value: "Alicia" },
      ],
    });
    expect(added.body!.emails).toEqual([
      { value: "alice@wonderland.example", type: "work", primary: true },
      { value: "alice@home.example", type: "home" },
    ]);
    expect(added.body!.name).toEqual({ givenName: "Alicia", familyName: "Liddell" });
    let [row] = await server.database.db.select({ email: identities.email }).from(identities).where(eq(identities.uid, identityUid));
    expect(row!.email).toBe("alice@wonderland.example");

    const removed = await scim(provider.uid, "PATCH", `/Users/${id}`, provider.token, {
      schemas: [PATCH],
      Operations: [{ op: "remove", path: 'emails[type eq "work"]' }],
    });
    expect(removed.body!.emails).toEqual([{ value: "alice@home.example", type: "home" }]);
    [row] = await server.database.db.select({ email: identities.email }).from(identities).where(eq(identities.uid, identityUid));
    expect(row!.email).toBe("alice@home.example");

    // An add through a filter that matches nothing creates the element (Entra ID's way of adding an email).
    const entra = await scim(provider.uid, "PATCH", `/Users/${id}`, provider.token, {
      schemas: [PATCH],
      Operations: [{ op: "add", path: 'emails[type eq "work"].value', value: "alice@work.example" }],
    });
    expect(entra.body!.emails).toEqual([
      { value: "alice@home.example", type: "home" },
      { value: "alice@work.example", type: "work" },
    ]);
  });

  it("PUT replaces the user's attributes; active left out keeps its state", async () => {
    const put = await scim(provider.uid, "PUT", `/Users/${id}`, provider.token, {
      schemas: [USER],
      userName: "alice@example.com",
      externalId: "00u1alice",
      displayName: "Alice L.",
      emails: [{ value: "alice@example.com", primary: true }],
    });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ id, userName: "alice@example.com", displayName: "Alice L.", active: true });
    expect(put.body).not.toHaveProperty("name");
    const [row] = await server.database.db.select().from(identities).where(eq(identities.uid, identityUid));
    expect(row).toMatchObject({ email: "alice@example.com", active: true, subject: "00u1alice" });
  });

  it("deletes the user: its identity and bindings go, its calls are refused, and it is 404 afterwards", async () => {
    const deleted = await scim(provider.uid, "DELETE", `/Users/${id}`, provider.token);
    expect(deleted.status).toBe(204);
    expect(deleted.body).toBeUndefined();
    expect(await server.database.db.select().from(identities).where(eq(identities.uid, identityUid))).toEqual([]);
    expect(await server.database.db.select().from(roleBindings).where(eq(roleBindings.identityUid, identityUid))).toEqual([]);
    expect(await apiCodes(identityUid)).toEqual(protocols.map(() => Code.Unauthenticated));
    expectScimError(await scim(provider.uid, "GET", `/Users/${id}`, provider.token), 404);
    expectScimError(await scim(provider.uid, "DELETE", `/Users/${id}`, provider.token), 404);
    const found = await scim(provider.uid, "GET", `/Users?filter=${encodeURIComponent('externalId eq "00u1alice"')}`, provider.token);
    expect(found.body).toMatchObject({ totalResults: 0 });
  });

  it("every write recorded its identity event, with the provider as actor and the SCIM endpoint as method", async () => {
    const events = await server.database.db
      .select()
      .from(outboxEvents)
      .where(eq(outboxEvents.subject, identityUid))
      .orderBy(asc(outboxEvents.createTime), asc(outboxEvents.id));
    const type = (what: string) => `dev.chainguard.api.iam.identity.${what}.v1`;
    // create; deactivate, reactivate, four email PATCHes, PUT; delete (the failed requests recorded nothing).
    expect(events.map((e) => e.type)).toEqual([type("created"), ...Array<string>(7).fill(type("updated")), type("deleted")]);
    for (const e of events) {
      expect(e).toMatchObject({ groupUid: world.org, actor: provider.uid, method: `/scim/v2/${provider.uid}/Users` });
    }
    expect(events[0]!.body).toMatchObject({ uid: identityUid, name: "alice-example.com", email: "alice@example.com" });
    expect(events.at(-1)!.body).toEqual({ uid: identityUid });
  });
});

describe("SCIM errors", () => {
  let provider: ProviderRow;
  let id = "";

  beforeAll(async () => {
    provider = await insertProvider(world.org, "errors");
    const created = await scim(provider.uid, "POST", "/Users", provider.token, user("taken@example.com", "ext-taken"));
    expect(created.status).toBe(201);
    id = created.body!.id as string;
  });

  it("userName and externalId are unique per provider: 409 uniqueness", async () => {
    expectScimError(await scim(provider.uid, "POST", "/Users", provider.token, user("TAKEN@example.com", "ext-other")), 409, "uniqueness");
    expectScimError(await scim(provider.uid, "POST", "/Users", provider.token, user("free@example.com", "ext-taken")), 409, "uniqueness");
    const other = await scim(provider.uid, "POST", "/Users", provider.token, user("second@example.com", "ext-second"));
    expect(other.status).toBe(201);
    expectScimError(await scim(provider.uid, "PUT", `/Users/${other.body!.id as string}`, provider.token, user("taken@example.com", "ext-second")), 409, "uniqueness");
    const patch = { schemas: [PATCH], Operations: [{ op: "replace", path: "externalId", value: "ext-taken" }] };
    expectScimError(await scim(provider.uid, "PATCH", `/Users/${other.body!.id as string}`, provider.token, patch), 409, "uniqueness");
    // Another provider may have the same ones.
    const elsewhere = await insertProvider(world.org, "errors-elsewhere");
    expect((await scim(elsewhere.uid, "POST", "/Users", elsewhere.token, user("taken@example.com", "ext-taken"))).status).toBe(201);
  });

  it("a write that leaves userName as it is never fails on it: deprovisioning one of two login-made users sharing a display name succeeds", async () => {
    // Made at logins (no SCIM attributes): both derive the userName "pat smith" from their name.
    const twins = [newChildUid(world.org), newChildUid(world.org)];
    await server.database.db.insert(identities).values(
      twins.map((uid, i) => ({
        uid,
        parentUid: world.org,
        name: "pat smith",
        relationship: { claimMatch: { issuer: ISSUER, subject: `pat-${i}` } },
        relationshipType: 1,
        issuer: ISSUER,
        subject: `pat-${i}`,
        identityProviderUid: provider.uid,
        externalId: `pat-${i}`,
      })),
    );
    const [first, second] = twins.map((uid) => uid.slice(uid.lastIndexOf("/") + 1)) as [string, string];
    const off = await scim(provider.uid, "PATCH", `/Users/${first}`, provider.token, { schemas: [PATCH], Operations: [{ op: "replace", path: "active", value: false }] });
    expect(off.status, JSON.stringify(off.body)).toBe(200);
    expect(off.body).toMatchObject({ id: first, userName: "pat smith", active: false });
    // Okta deprovisions with a PUT of the user as it has it.
    const current = (await scim(provider.uid, "GET", `/Users/${second}`, provider.token)).body!;
    const put = await scim(provider.uid, "PUT", `/Users/${second}`, provider.token, { ...current, active: false });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const rows = await server.database.db.select({ active: identities.active }).from(identities).where(eq(identities.name, "pat smith"));
    expect(rows.map((r) => r.active)).toEqual([false, false]);
    // Changing it onto a userName another user has is still refused.
    const rename = { schemas: [PATCH], Operations: [{ op: "replace", path: "userName", value: "Taken@example.com" }] };
    expectScimError(await scim(provider.uid, "PATCH", `/Users/${first}`, provider.token, rename), 409, "uniqueness");
  });

  it("filters this server cannot evaluate are 400 invalidFilter", async () => {
    for (const filter of ['userName co "a"', "userName eq", 'nickName eq "a"', 'userName eq "a" and', 'not (userName eq "a")', '(userName eq "a"', "userName eq a", 'userName eq "a', "active eq \"yes\""]) {
      expectScimError(await scim(provider.uid, "GET", `/Users?filter=${encodeURIComponent(filter)}`, provider.token), 400, "invalidFilter");
    }
  });

  it("unknown ids are 404", async () => {
    for (const unknown of ["ffffffffffffffff", "not-an-id"]) {
      expectScimError(await scim(provider.uid, "GET", `/Users/${unknown}`, provider.token), 404);
      expectScimError(await scim(provider.uid, "PUT", `/Users/${unknown}`, provider.token, user("x@example.com", "ext-x")), 404);
      expectScimError(await scim(provider.uid, "PATCH", `/Users/${unknown}`, provider.token, { schemas: [PATCH], Operations: [{ op: "replace", path: "active", value: false }] }), 404);
      expectScimError(await scim(provider.uid, "DELETE", `/Users/${unknown}`, provider.token), 404);
    }
    expectScimError(await scim(provider.uid, "GET", "/Groups", provider.token), 404);
  });

  it("invalid bodies and patches are 400 with their scimType; nothing changes", async () => {
    expectScimError(await scim(provider.uid, "POST", "/Users", provider.token, "{not json"), 400, "invalidSyntax");
    expectScimError(await scim(provider.uid, "POST", "/Users", provider.token, { schemas: [USER], externalId: "e" }), 400, "invalidValue");
    expectScimError(await scim(provider.uid, "POST", "/Users", provider.token, { schemas: [USER], userName: "u@example.com" }), 400, "invalidValue");
    expectScimError(await scim(provider.uid, "POST", "/Users", provider.token, user("v@example.com", "ext-v", { active: "maybe" })), 400, "invalidValue");
    expectScimError(await scim(provider.uid, "POST", "/Users", provider.token, user("w@example.com", "ext-w", { emails: "w@example.com" })), 400, "invalidValue");
    const patch = (ops: unknown[]) => ({ schemas: [PATCH], Operations: ops });
    expectScimError(await scim(provider.uid, "PATCH", `/Users/${id}`, provider.token, patch([{ op: "replace", path: "id", value: "x" }])), 400, "mutability");
    expectScimError(await scim(provider.uid, "PATCH", `/Users/${id}`, provider.token, patch([{ op: "remove" }])), 400, "noTarget");
    expectScimError(await scim(provider.uid, "PATCH", `/Users/${id}`, provider.token, patch([{ op: "replace", path: 'emails[type eq "home"].value', value: "h@example.com" }])), 400, "noTarget");
    expectScimError(await scim(provider.uid, "PATCH", `/Users/${id}`, provider.token, patch([{ op: "replace", path: "emails[type co \"w\"]", value: {} }])), 400, "invalidPath");
    expectScimError(await scim(provider.uid, "PATCH", `/Users/${id}`, provider.token, patch([{ op: "move", path: "active", value: false }])), 400, "invalidValue");
    expectScimError(await scim(provider.uid, "PATCH", `/Users/${id}`, provider.token, { Operations: [{ op: "replace", path: "active", value: false }] }), 400, "invalidValue");
    // The PATCH is atomic: a valid first operation is not applied when a later one fails.
    const atomic = patch([{ op: "replace", path: "active", value: false }, { op: "replace", path: "meta", value: {} }]);
    expectScimError(await scim(provider.uid, "PATCH", `/Users/${id}`, provider.token, atomic), 400, "mutability");
    const got = await scim(provider.uid, "GET", `/Users/${id}`, provider.token);
    expect(got.body).toMatchObject({ active: true, userName: "taken@example.com" });
  });

  it("text the database cannot hold and JSON nested too deep are 400 invalidValue, never a 500 or an error log line", async () => {
    const lines: string[] = [];
    const untap = addLogTap((line) => lines.push(line));
    try {
      const nested = (depth: number) => `{"schemas":["${USER}"],"userName":"deep@example.com","externalId":"ext-deep","x":${"[".repeat(depth)}${"]".repeat(depth)}}`;
      const bad: Array<[string, () => Promise<ScimAnswer>]> = [
        ["NUL in a filter value", () => scim(provider.uid, "GET", `/Users?filter=${encodeURIComponent('userName eq "a\\u0000b"')}`, provider.token)],
        ["NUL in an externalId filter", () => scim(provider.uid, "GET", `/Users?filter=${encodeURIComponent('externalId eq "a\\u0000b"')}`, provider.token)],
        ["a lone surrogate in a filter", () => scim(provider.uid, "GET", `/Users?filter=${encodeURIComponent('userName eq "\\ud800"')}`, provider.token)],
        ["NUL in userName", () => scim(provider.uid, "POST", "/Users", provider.token, user("nul\u0000@example.com", "ext-nul-1"))],
        ["NUL in externalId", () => scim(provider.uid, "POST", "/Users", provider.token, user("nul3@example.com", "ext-\u0000"))],
        ["NUL in an attribute key", () => scim(provider.uid, "POST", "/Users", provider.token, user("nul4@example.com", "ext-nul-4", { "nick\u0000Name": "x" }))],
        ["NUL in a PATCH value", () => scim(provider.uid, "PATCH", `/Users/${id}`, provider.token, { schemas: [PATCH], Operations: [{ op: "replace", path: "nickName", value: "a\u0000" }] })],
        ["a lone surrogate", () => scim(provider.uid, "POST", "/Users", provider.token, `{"schemas":["${USER}"],"userName":"s\\ud800@example.com","externalId":"ext-sur"}`)],
        ["a lone surrogate in a key", () => scim(provider.uid, "POST", "/Users", provider.token, `{"schemas":["${USER}"],"userName":"k@example.com","externalId":"ext-sur-k","\\udc00":1}`)],
        ["JSON nested 5,000 deep", () => scim(provider.uid, "POST", "/Users", provider.token, nested(5000))],
        ["a PATCH nested 5,000 deep", () => scim(provider.uid, "PATCH", `/Users/${id}`, provider.token, `{"schemas":["${PATCH}"],"Operations":[{"op":"add","path":"x","value":${"[".repeat(5000)}${"]".repeat(5000)}}]}`)],
      ];
      for (const [what, send] of bad) {
        const answer = await send();
        expect(answer.status, `${what}: ${JSON.stringify(answer.body)}`).toBe(400);
        expectScimError(answer, 400, "invalidValue");
      }
      // What providers send stays accepted: nested a few levels, non-ASCII, astral characters.
      const fine = await scim(provider.uid, "POST", "/Users", provider.token, user("zoë😀@example.com", "ext-fine", { name: { givenName: "Zoë", honorificPrefix: "😀" } }));
      expect(fine.status).toBe(201);
      expect(lines.filter((l) => /"level":"error"|"level":50/.test(l))).toEqual([]);
    } finally {
      untap();
    }
    const got = await scim(provider.uid, "GET", `/Users/${id}`, provider.token);
    expect(got.body).toMatchObject({ active: true, userName: "taken@example.com" });
    expect(got.body).not.toHaveProperty("nickName");
  });

  it("access lines give each answer's code: OK for 200, 201 and 204, and the error's code otherwise", async () => {
    const lines: Array<Record<string, unknown>> = [];
    const untap = addLogTap((line) => lines.push(JSON.parse(line) as Record<string, unknown>));
    const send = async (requestId: string, verb: string, path: string, body?: unknown, token = provider.token) => {
      const res = await fetch(`${server.baseUrl}/scim/v2/${provider.uid}${path}`, {
        method: verb,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/scim+json", "x-request-id": requestId },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      await res.arrayBuffer();
      return res.status;
    };
    try {
      const created = await send("scim-201", "POST", "/Users", user("logged@example.com", "ext-logged"));
      const got = await fetch(`${server.baseUrl}/scim/v2/${provider.uid}/Users?filter=${encodeURIComponent('externalId eq "ext-logged"')}`, { headers: { authorization: `Bearer ${provider.token}` } });
      const loggedId = ((await got.json()) as { Resources: Array<{ id: string }> }).Resources[0]!.id;
      const statuses = [
        created,
        await send("scim-200", "GET", `/Users/${loggedId}`),
        await send("scim-204", "DELETE", `/Users/${loggedId}`),
        await send("scim-400", "POST", "/Users", { schemas: [USER] }),
        await send("scim-401", "GET", "/Users", undefined, "cgscim_wrong"),
        await send("scim-404", "GET", "/Users/ffffffffffffffff"),
        await send("scim-405", "DELETE", "/Users"),
        await send("scim-409", "POST", "/Users", user("taken@example.com", "ext-another")),
      ];
      expect(statuses).toEqual([201, 200, 204, 400, 401, 404, 405, 409]);
      await new Promise((r) => setTimeout(r, 100));
      const codeOf = (id: string) => lines.find((l) => l.msg === "request" && l.requestId === id)?.code;
      expect(["scim-201", "scim-200", "scim-204", "scim-400", "scim-401", "scim-404", "scim-405", "scim-409"].map(codeOf)).toEqual([
        "OK",
        "OK",
        "OK",
        "INVALID_ARGUMENT",
        "UNAUTHENTICATED",
        "NOT_FOUND",
        "UNIMPLEMENTED",
        "ALREADY_EXISTS",
      ]);
    } finally {
      untap();
    }
  });

  // PGlite runs one transaction at a time: only PostgreSQL can race these.
  it.skipIf(!process.env.DATABASE_URL)("concurrent creates of one userName: one wins, the others are 409 (PostgreSQL)", async () => {
    const racing = await insertProvider(world.org, "errors-racing");
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) => scim(racing.uid, "POST", "/Users", racing.token, user("racer@example.com", `ext-racer-${i}`))),
    );
    expect(answers.map((a) => a.status).sort()).toEqual([201, 409, 409, 409, 409, 409]);
    const listed = await scim(racing.uid, "GET", "/Users", racing.token);
    expect(listed.body).toMatchObject({ totalResults: 1 });
  });

  it("ServiceProviderConfig says what this endpoint supports", async () => {
    const config = await scim(provider.uid, "GET", "/ServiceProviderConfig", provider.token);
    expect(config.status).toBe(200);
    expect(config.body).toMatchObject({ patch: { supported: true }, filter: { supported: true, maxResults: 200 }, bulk: { supported: false } });
    expectScimError(await scim(provider.uid, "GET", "/ServiceProviderConfig", undefined), 401);
  });

  it("methods a resource does not have are 405", async () => {
    expectScimError(await scim(provider.uid, "DELETE", "/Users", provider.token), 405);
    expectScimError(await scim(provider.uid, "POST", `/Users/${id}`, provider.token, user("p@example.com", "ext-p")), 405);
  });
});

describe("SCIM paging", () => {
  let provider: ProviderRow;
  const created: string[] = [];

  beforeAll(async () => {
    provider = await insertProvider(world.org, "paging");
    for (let i = 0; i < 5; i++) {
      const res = await scim(provider.uid, "POST", "/Users", provider.token, user(`user${i}@example.com`, `ext-${i}`));
      expect(res.status).toBe(201);
      created.push(res.body!.id as string);
    }
  });

  it("startIndex and count page through totalResults", async () => {
    const seen: string[] = [];
    for (let start = 1; start <= 5; start += 2) {
      const page = await scim(provider.uid, "GET", `/Users?startIndex=${start}&count=2`, provider.token);
      expect(page.status).toBe(200);
      expect(page.body).toMatchObject({ schemas: [LIST], totalResults: 5, startIndex: start, itemsPerPage: start === 5 ? 1 : 2 });
      seen.push(...ids(page));
    }
    expect(seen.sort()).toEqual([...created].sort());

    const none = await scim(provider.uid, "GET", "/Users?count=0", provider.token);
    expect(none.body).toMatchObject({ totalResults: 5, itemsPerPage: 0, Resources: [] });
    const past = await scim(provider.uid, "GET", "/Users?startIndex=9", provider.token);
    expect(past.body).toMatchObject({ totalResults: 5, startIndex: 9, itemsPerPage: 0 });
    // Below 1 is read as 1 (RFC 7644 3.4.2.4).
    const low = await scim(provider.uid, "GET", "/Users?startIndex=0&count=1", provider.token);
    expect(low.body).toMatchObject({ startIndex: 1, itemsPerPage: 1 });
    expectScimError(await scim(provider.uid, "GET", "/Users?count=many", provider.token), 400, "invalidValue");
  });
});

describe("SCIM tokens", () => {
  const refused = async (provider: string, token: string | undefined, verb = "GET", path = "/Users") => {
    const answer = await scim(provider, verb, path, token, verb === "POST" ? user("t@example.com", "ext-t") : undefined);
    expectScimError(answer, 401);
    expect(answer.wwwAuthenticate).toMatch(/^Bearer/);
  };

  it("no token, a malformed one, or an unknown provider: 401", async () => {
    const provider = await insertProvider(world.org, "tokens-basic");
    expect((await scim(provider.uid, "GET", "/Users", provider.token)).status).toBe(200);
    await refused(provider.uid, undefined);
    await refused(provider.uid, "cgscim_wrong");
    await refused(`${world.org}/ffffffffffffffff`, provider.token);
    await refused("not a uid", provider.token);
  });

  it("an expired token, a revoked one, or SCIM disabled: 401", async () => {
    const expired = await insertProvider(world.org, "tokens-expired", { expire: new Date(Date.now() - 1000) });
    await refused(expired.uid, expired.token);
    const never = await insertProvider(world.org, "tokens-never", { expire: null });
    expect((await scim(never.uid, "GET", "/Users", never.token)).status).toBe(200);

    const revoked = await insertProvider(world.org, "tokens-revoked");
    expect((await scim(revoked.uid, "GET", "/Users", revoked.token)).status).toBe(200);
    await server.database.db
      .update(identityProviders)
      .set({ scimTokenHash: null, scimTokenExpireTime: null, scimPreviousTokenHash: null, scimPreviousTokenExpireTime: null, scimRevokeTime: new Date() })
      .where(eq(identityProviders.uid, revoked.uid));
    await refused(revoked.uid, revoked.token);
    await refused(revoked.uid, revoked.token, "POST");

    const disabled = await insertProvider(world.org, "tokens-disabled", { enabled: false });
    await refused(disabled.uid, disabled.token);
  });

  it("the previous token works within its overlap, and is 401 after it", async () => {
    const previous = newScimToken();
    const provider = await insertProvider(world.org, "tokens-rotating", { previous: { token: previous, expire: new Date(Date.now() + HOUR) } });
    expect((await scim(provider.uid, "GET", "/Users", provider.token)).status).toBe(200);
    const created = await scim(provider.uid, "POST", "/Users", previous, user("rotating@example.com", "ext-rotating"));
    expect(created.status).toBe(201);
    // The overlap ends.
    await server.database.db
      .update(identityProviders)
      .set({ scimPreviousTokenExpireTime: new Date(Date.now() - 1000) })
      .where(eq(identityProviders.uid, provider.uid));
    await refused(provider.uid, previous);
    await refused(provider.uid, previous, "DELETE", `/Users/${created.body!.id as string}`);
    expect((await scim(provider.uid, "GET", `/Users/${created.body!.id as string}`, provider.token)).status).toBe(200);
  });

  it("a token of another provider cannot touch this provider's users", async () => {
    const mine = await insertProvider(world.org, "tokens-mine");
    const theirs = await insertProvider(world.team, "tokens-theirs");
    const created = await scim(mine.uid, "POST", "/Users", mine.token, user("mine@example.com", "ext-mine"));
    expect(created.status).toBe(201);
    const id = created.body!.id as string;
    await refused(mine.uid, theirs.token);
    await refused(mine.uid, theirs.token, "GET", `/Users/${id}`);
    await refused(mine.uid, theirs.token, "DELETE", `/Users/${id}`);
    await refused(mine.uid, theirs.token, "POST");
    // Under its own endpoint, the other provider does not see this one's users.
    expectScimError(await scim(theirs.uid, "GET", `/Users/${id}`, theirs.token), 404);
    expectScimError(await scim(theirs.uid, "DELETE", `/Users/${id}`, theirs.token), 404);
    const listed = await scim(theirs.uid, "GET", "/Users", theirs.token);
    expect(listed.body).toMatchObject({ totalResults: 0 });
    const [row] = await server.database.db
      .select({ uid: identities.uid })
      .from(identities)
      .where(and(eq(identities.identityProviderUid, mine.uid), eq(identities.externalId, "ext-mine")));
    expect(row?.uid).toBe(`${world.org}/${id}`);
  });
});
