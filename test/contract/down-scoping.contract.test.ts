// Down-scoped tokens over every protocol: Exchange's `scopes` (and `scope`) restrict the token to groups,
// `cap` to capabilities, as the SDK's WithScope and WithCapabilities send them. A token restricted to a group
// keeps the role bindings at or above it, reaching its subtree only (the published proto's rule: a binding
// beneath it is left out); every check honours the restriction, scoped ones and the lists' visible scopes; a
// refresh keeps it; asking for what the identity does not hold gives a token that cannot act there.
import { Code } from "@connectrpc/connect";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { RelationshipType } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { SecurityTokenService } from "../../gen/platform/oidc/v1/oidc.platform_pb.js";
import { identities, repos, roleBindings } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { startFakeIssuer, type FakeIssuer } from "../support/fake-issuer.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { assertError, call, contractCase, invalidField, protocols, runContractCases, type Protocol } from "./harness.js";

const exchange = SecurityTokenService.method.exchange;
const exchangeRefresh = SecurityTokenService.method.exchangeRefreshToken;

let server: TestServer;
let world: World;
let idp: FakeIssuer;
/** Another organization, where the identity holds nothing. */
let elsewhere: string;
/** Created under the organization: viewer on it, owner on its team. */
const x = { uid: "", subject: "repo:acme/scoped", token: "" };
/** A person (root-level): owner on the organization. */
const person = { uid: "", subject: "person-scoped", token: "" };
const repo = { org: "", team: "", other: "" };
let serial = 0;

async function insertIdentity(parent: string | null, subject: string, bindings: Array<[role: string, group: string]>) {
  const uid = parent ? newChildUid(parent) : newRootUid();
  const { db } = server.database;
  await db.insert(identities).values({
    uid,
    parentUid: parent,
    name: "scoped",
    relationship: { claimMatch: { issuer: idp.url, subject } },
    relationshipType: RelationshipType.CLAIM_MATCH,
    issuer: idp.url,
    subject,
  });
  await db.insert(roleBindings).values(bindings.map(([role, group]) => ({ uid: newChildUid(group), groupUid: group, identityUid: uid, roleUid: managedRole(role).uid })));
  return uid;
}

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server);
  elsewhere = (await seedWorld(server, "globex")).org;
  idp = await startFakeIssuer({ audience: server.baseUrl });
  x.uid = await insertIdentity(world.org, x.subject, [
    ["viewer", world.org],
    ["owner", world.team],
  ]);
  x.token = await idp.mint({ sub: x.subject });
  person.uid = await insertIdentity(null, person.subject, [["owner", world.org]]);
  person.token = await idp.mint({ sub: person.subject });
  for (const g of ["org", "team", "other"] as const) {
    repo[g] = newChildUid(world[g]);
    await server.database.db.insert(repos).values({ uid: repo[g], groupUid: world[g], name: `scoped-${g}` });
  }
});
afterAll(async () => {
  await server?.close();
  await idp?.close();
});

const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** Exchanges the identity's token with these restrictions; fails the test on an error. */
async function exchangeOk(protocol: Protocol, request: { scope?: string; scopes?: string[]; cap?: string[] }, who: { uid: string; token: string } = x) {
  const out = await call(protocol, server.baseUrl, exchange, { identity: who.uid, ...request }, bearer(who.token));
  expect(out.error, out.error ? `${Code[out.error.code]}: ${out.error.message}` : "").toBeUndefined();
  return out.message!;
}

/** Calls with the token; the code of the answer (OK for a success). */
async function codeOf(protocol: Protocol, token: string, call_: (h: Record<string, string>) => Promise<{ error?: { code: Code; message: string } }>) {
  const out = await call_(bearer(token));
  return out.error ? Code[out.error.code] : "Ok";
}

const getGroup = (protocol: Protocol, uid: string) => (h: Record<string, string>) => call(protocol, server.baseUrl, GroupsService.method.getGroup, { uid }, h);
const getRepo = (protocol: Protocol, uid: string) => (h: Record<string, string>) => call(protocol, server.baseUrl, ReposService.method.getRepo, { uid }, h);
const createGroup = (protocol: Protocol, parent: string) => (h: Record<string, string>) =>
  call(protocol, server.baseUrl, GroupsService.method.createGroup, { parent, group: { name: `made-${++serial}` } }, h);

async function listedRepos(protocol: Protocol, token: string): Promise<string[]> {
  const out = await call(protocol, server.baseUrl, ReposService.method.listRepos, { pageSize: 200 }, bearer(token));
  expect(out.error, out.error?.message).toBeUndefined();
  return out.message!.repos.map((r) => r.uid).filter((u) => Object.values(repo).includes(u));
}
async function listedGroups(protocol: Protocol, token: string): Promise<string[]> {
  const out = await call(protocol, server.baseUrl, GroupsService.method.listGroups, { pageSize: 200 }, bearer(token));
  expect(out.error, out.error?.message).toBeUndefined();
  return out.message!.groups.map((g) => g.uid).filter((u) => [world.org, world.team, world.other, elsewhere].includes(u));
}

describe.each(protocols)("Exchange with scopes [%s]", (protocol) => {
  it("a token restricted to a group reads it, not its sibling nor its parent, and lists only what lies in it", async () => {
    const { token } = await exchangeOk(protocol, { scopes: [world.team] });
    expect(decodeJwt(token).scopes).toEqual([world.team]);
    expect(await codeOf(protocol, token, getGroup(protocol, world.team))).toBe("Ok");
    expect(await codeOf(protocol, token, getRepo(protocol, repo.team))).toBe("Ok");
    expect(await codeOf(protocol, token, getGroup(protocol, world.other))).toBe("PermissionDenied");
    expect(await codeOf(protocol, token, getRepo(protocol, repo.other))).toBe("PermissionDenied");
    expect(await codeOf(protocol, token, getGroup(protocol, world.org))).toBe("PermissionDenied");
    expect(await codeOf(protocol, token, getRepo(protocol, repo.org))).toBe("PermissionDenied");
    expect(await listedRepos(protocol, token)).toEqual([repo.team]);
    expect(await listedGroups(protocol, token)).toEqual([world.team]);

    // The same identity without a restriction sees all three.
    const whole = (await exchangeOk(protocol, {})).token;
    expect(decodeJwt(whole).scopes).toBeUndefined();
    expect((await listedRepos(protocol, whole)).sort()).toEqual(Object.values(repo).sort());
  });

  it("keeps the bindings at or above the group, not those beneath it, as the proto describes", async () => {
    // Owner on team is beneath org: restricted to org, the token is a viewer on team too.
    const orgOnly = (await exchangeOk(protocol, { scopes: [world.org] })).token;
    expect(await codeOf(protocol, orgOnly, getGroup(protocol, world.other))).toBe("Ok");
    expect(await codeOf(protocol, orgOnly, createGroup(protocol, world.team))).toBe("PermissionDenied");
    // Naming team as well keeps team's binding there.
    const both = (await exchangeOk(protocol, { scopes: [world.org, world.team] })).token;
    expect(await codeOf(protocol, both, createGroup(protocol, world.team))).toBe("Ok");
    expect(await codeOf(protocol, both, createGroup(protocol, world.org))).toBe("PermissionDenied");
    // Restricted to team: the viewer binding on org (its ancestor) and the owner one on team, at team only.
    const team = (await exchangeOk(protocol, { scopes: [world.team] })).token;
    expect(await codeOf(protocol, team, createGroup(protocol, world.team))).toBe("Ok");
  });

  it("counts `scope` and `scopes` together, as the SDK's WithScope sends its first group in both", async () => {
    const { token } = await exchangeOk(protocol, { scope: world.team, scopes: [world.team, world.other] });
    expect((decodeJwt(token).scopes as string[]).sort()).toEqual([world.team, world.other].sort());
    expect(await codeOf(protocol, token, getGroup(protocol, world.other))).toBe("Ok");
    expect(await codeOf(protocol, token, getGroup(protocol, world.org))).toBe("PermissionDenied");
    expect((await listedRepos(protocol, token)).sort()).toEqual([repo.team, repo.other].sort());
  });

  it("a group the identity holds nothing at gives a token that cannot act there, nor anywhere else", async () => {
    const { token } = await exchangeOk(protocol, { scopes: [elsewhere] });
    expect(await codeOf(protocol, token, getGroup(protocol, elsewhere))).toBe("PermissionDenied");
    expect(await codeOf(protocol, token, getGroup(protocol, world.team))).toBe("PermissionDenied");
    expect(await listedRepos(protocol, token)).toEqual([]);
  });
});

describe.each(protocols)("Exchange with cap [%s]", (protocol) => {
  it("a token restricted to listing repos lists them but cannot create one nor read groups", async () => {
    const { token } = await exchangeOk(protocol, { cap: ["repo.list"] });
    expect(decodeJwt(token).cap).toEqual(["CAP_REPO_LIST"]);
    expect((await listedRepos(protocol, token)).sort()).toEqual(Object.values(repo).sort());
    expect(await codeOf(protocol, token, getRepo(protocol, repo.other))).toBe("Ok");
    const create = (h: Record<string, string>) => call(protocol, server.baseUrl, ReposService.method.createRepo, { parent: world.team, repo: { name: `cap-${++serial}` } }, h);
    expect(await codeOf(protocol, token, create)).toBe("PermissionDenied");
    expect(await codeOf(protocol, token, getGroup(protocol, world.team))).toBe("PermissionDenied");
    // Without the restriction, the owner of team creates there.
    expect(await codeOf(protocol, (await exchangeOk(protocol, {})).token, create)).toBe("Ok");
  });

  it("takes the enum names too, and combines with scopes", async () => {
    const { token } = await exchangeOk(protocol, { scopes: [world.team], cap: ["CAP_IAM_GROUPS_LIST", "CAP_IAM_GROUPS_CREATE"] });
    expect(await codeOf(protocol, token, getGroup(protocol, world.team))).toBe("Ok");
    expect(await codeOf(protocol, token, createGroup(protocol, world.team))).toBe("Ok");
    expect(await codeOf(protocol, token, getRepo(protocol, repo.team))).toBe("PermissionDenied");
    expect(await codeOf(protocol, token, getGroup(protocol, world.other))).toBe("PermissionDenied");
  });

  it("a capability the identity does not hold there gives a token without it", async () => {
    // A viewer on org: groups.create only from the owner binding on team, which org leaves out.
    const { token } = await exchangeOk(protocol, { scopes: [world.org], cap: ["groups.create"] });
    expect(await codeOf(protocol, token, createGroup(protocol, world.org))).toBe("PermissionDenied");
    expect(await codeOf(protocol, token, createGroup(protocol, world.team))).toBe("PermissionDenied");
  });
});

describe.each(protocols)("A down-scoped token's refresh [%s]", (protocol) => {
  const refresh = (token: string, request: { scopes?: string[]; cap?: string[] } = {}) => call(protocol, server.baseUrl, exchangeRefresh, request, bearer(token));

  it("keeps the restriction; asking it again is accepted, asking another is refused before the token is used up", async () => {
    const first = await exchangeOk(protocol, { scopes: [world.team, "offline_access"], cap: ["groups.list"] });
    expect(first.refreshToken).not.toBe("");

    // The SDK's Refresh sends the exchange's options again.
    const again = await refresh(first.refreshToken, { scopes: [world.team, "offline_access"], cap: ["CAP_IAM_GROUPS_LIST"] });
    expect(again.error, again.error?.message).toBeUndefined();
    const access = again.message!.token!.token;
    expect(decodeJwt(access)).toMatchObject({ scopes: [world.team], cap: ["CAP_IAM_GROUPS_LIST"] });
    expect(await codeOf(protocol, access, getGroup(protocol, world.team))).toBe("Ok");
    expect(await codeOf(protocol, access, getGroup(protocol, world.other))).toBe("PermissionDenied");
    expect(await codeOf(protocol, access, getRepo(protocol, repo.team))).toBe("PermissionDenied");

    const wider = await refresh(again.message!.refreshToken!.token, { scopes: [world.org] });
    assertError(protocol, wider.error!, invalidField("scopes"));
    const otherCap = await refresh(again.message!.refreshToken!.token, { cap: ["repo.list"] });
    assertError(protocol, otherCap.error!, invalidField("cap"));

    // Nothing asked: the chain's restriction still.
    const plain = await refresh(again.message!.refreshToken!.token);
    expect(plain.error, plain.error?.message).toBeUndefined();
    const next = plain.message!.token!.token;
    expect(decodeJwt(next)).toMatchObject({ scopes: [world.team], cap: ["CAP_IAM_GROUPS_LIST"] });
    expect(await codeOf(protocol, next, getGroup(protocol, world.other))).toBe("PermissionDenied");
  });

  it("an unrestricted chain stays unrestricted, and cannot be restricted on refresh", async () => {
    const first = await exchangeOk(protocol, { scope: "offline_access" });
    const narrowed = await refresh(first.refreshToken, { scopes: [world.team] });
    assertError(protocol, narrowed.error!, invalidField("scopes"));
    const plain = await refresh(first.refreshToken);
    expect(plain.error, plain.error?.message).toBeUndefined();
    expect(decodeJwt(plain.message!.token!.token).scopes).toBeUndefined();
  });
});

// REST cannot carry CreateGroup's empty parent (the binding needs one segment).
describe.each(protocols.filter((p) => p !== "rest"))("A down-scoped token of a person [%s]", (protocol) => {
  it("cannot create an organization nor is eligible to, whatever it was restricted to", async () => {
    for (const request of [{ cap: ["groups.create", "groups.list"] }, { scopes: [world.org] }]) {
      const { token } = await exchangeOk(protocol, request, person);
      const out = await call(protocol, server.baseUrl, GroupsService.method.createGroup, { group: { name: "new org" } }, bearer(token));
      assertError(protocol, out.error!, { code: Code.PermissionDenied, reason: "TOKEN_RESTRICTED" });
      const eligible = await call(protocol, server.baseUrl, GroupsService.method.checkEligibility, {}, bearer(token));
      expect(eligible.message?.eligible).toBe(false);
    }
    const whole = (await exchangeOk(protocol, {}, person)).token;
    expect((await call(protocol, server.baseUrl, GroupsService.method.checkEligibility, {}, bearer(whole))).message?.eligible).toBe(true);
  });
});

describe("Exchange with scopes in a form-encoded body (the SDK's HTTP/1 exchanger)", () => {
  it("restricts the token as the query would", async () => {
    const form = new URLSearchParams([
      ["aud", server.baseUrl],
      ["scope", world.team],
      ["scopes", world.team],
      ["identity", x.uid],
      ["cap", "groups.list"],
    ]);
    const res = await fetch(`${server.baseUrl}/sts/exchange`, {
      method: "POST",
      headers: { ...bearer(x.token), "content-type": "application/x-www-form-urlencoded" },
      body: form.toString(),
    });
    const body = (await res.json()) as { token: string; message?: string };
    expect(res.status, body.message).toBe(200);
    expect(decodeJwt(body.token)).toMatchObject({ sub: x.uid, scopes: [world.team], cap: ["CAP_IAM_GROUPS_LIST"] });
  });
});

runContractCases("Exchange: restrictions refused", () => server.baseUrl, [
  contractCase({
    name: "a scope that is neither a group uid nor offline_access",
    method: exchange,
    request: () => ({ identity: x.uid, scopes: [world.team, "Acme/Team"] }),
    headers: () => bearer(x.token),
    error: invalidField("scopes[1]"),
  }),
  contractCase({
    name: "a space-separated scope with a word that is neither",
    method: exchange,
    request: () => ({ identity: x.uid, scope: `offline_access ${world.team} Team` }),
    headers: () => bearer(x.token),
    error: invalidField("scope"),
  }),
  contractCase({
    name: "a capability no name stands for",
    method: exchange,
    request: () => ({ identity: x.uid, cap: ["repo.list", "repos.list"] }),
    headers: () => bearer(x.token),
    error: invalidField("cap[1]"),
  }),
  contractCase({
    name: "more groups than a token may be restricted to",
    method: exchange,
    request: () => ({ identity: x.uid, scopes: Array.from({ length: 51 }, () => newRootUid()) }),
    headers: () => bearer(x.token),
    error: invalidField("scopes"),
  }),
]);
