// Authentication over every protocol, against a protected method (GroupsService.GetGroup on the world's
// organization). Every token that must fail authentication gets UNAUTHENTICATED (HTTP 401 on REST) with
// ErrorInfo, whatever is wrong with it; tokens that authenticate (this server's own, and an external token
// from an OIDC issuer matching an identity's claimMatch exactly, Authentication rule 5) get past
// authentication. Only the authentication outcome is asserted here.
import { randomBytes } from "node:crypto";
import { Code } from "@connectrpc/connect";
import { base64url, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { RelationshipType } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { PreconditionFailureSchema } from "../../gen/google/rpc/error_details_pb.js";
import { identities, roleBindings } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { MAX_TOKEN_BYTES, mintToken } from "../../src/kernel/auth/index.js";
import { MAX_CANDIDATE_IDENTITIES } from "../../src/kernel/auth/external.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { startFakeIssuer, type FakeIssuer } from "../support/fake-issuer.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { insertClaimMatches, seedWorld, type World } from "../support/world.js";
import { assertError, call, contractCase, detail, protocols, runContractCases, type Protocol } from "./harness.js";

let server: TestServer;
let world: World;
let idp: FakeIssuer; // referenced by the identity below
let stranger: FakeIssuer; // referenced by no identity
let external: { uid: string; subject: string };
// Cross-tenant: another organization (B) gave an identity to the same issuer and subject as one of the
// world's organization's: the token keeps working in the world's organization, and acts as B's in B.
let orgB: World;
let shared: { subject: string; home: string; foreign: string };
// Squatting: another organization made MAX_CANDIDATE_IDENTITIES identities for a guessable subject before
// the world's organization made its own (`late`), or after it (`early`).
const squat = { late: "", early: "", squatters: [] as string[] };
const t: Record<string, string> = {};

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server);
  idp = await startFakeIssuer({ audience: server.baseUrl });
  stranger = await startFakeIssuer({ audience: server.baseUrl });

  // An identity assumed by the fake issuer's tokens (exact issuer and subject), viewer on the organization.
  external = { uid: newChildUid(world.org), subject: `repo:acme/app:ref:refs/heads/main` };
  await server.database.db.insert(identities).values({
    uid: external.uid,
    parentUid: world.org,
    name: "ci",
    relationship: { claimMatch: { issuer: idp.url, subject: external.subject } },
    relationshipType: RelationshipType.CLAIM_MATCH,
    issuer: idp.url,
    subject: external.subject,
  });
  await server.database.db
    .insert(roleBindings)
    .values({ uid: newChildUid(world.org), groupUid: world.org, identityUid: external.uid, roleUid: managedRole("viewer").uid });

  orgB = await seedWorld(server, "globex");
  shared = { subject: "repo:acme/shared:ref:refs/heads/main", home: newChildUid(world.org), foreign: newChildUid(orgB.org) };
  for (const [uid, org] of [[shared.home, world.org], [shared.foreign, orgB.org]] as const) {
    await server.database.db.insert(identities).values({
      uid,
      parentUid: org,
      name: "shared",
      relationship: { claimMatch: { issuer: idp.url, subject: shared.subject } },
      relationshipType: RelationshipType.CLAIM_MATCH,
      issuer: idp.url,
      subject: shared.subject,
    });
    await server.database.db.insert(roleBindings).values({ uid: newChildUid(org), groupUid: org, identityUid: uid, roleUid: managedRole("viewer").uid });
  }
  t.shared = await idp.mint({ sub: shared.subject });

  const squatter = (await seedWorld(server, "squatter")).org;
  const before = new Date(Date.now() - 3_600_000);
  const squatted = { issuer: idp.url, parent: squatter, count: MAX_CANDIDATE_IDENTITIES };
  squat.squatters.push(...(await insertClaimMatches(server, { ...squatted, subject: "repo:acme/late:ref:refs/heads/main", createTime: before })));
  squat.late = (await insertClaimMatches(server, { issuer: idp.url, subject: "repo:acme/late:ref:refs/heads/main", parent: world.org, bindOn: world.org }))[0]!;
  squat.early = (await insertClaimMatches(server, {
    issuer: idp.url,
    subject: "repo:acme/early:ref:refs/heads/main",
    parent: world.org,
    bindOn: world.org,
    createTime: new Date(before.getTime() - 60_000),
  }))[0]!;
  squat.squatters.push(...(await insertClaimMatches(server, { ...squatted, subject: "repo:acme/early:ref:refs/heads/main", createTime: before })));
  t.late = await idp.mint({ sub: "repo:acme/late:ref:refs/heads/main" });
  t.early = await idp.mint({ sub: "repo:acme/early:ref:refs/heads/main" });

  const now = Math.floor(Date.now() / 1000);
  const { privateKey: strayKey } = await generateKeyPair("ES256");
  const { kid: currentKid } = await server.keys.signingKey();
  const own = (kid: string) =>
    new SignJWT({}).setProtectedHeader({ alg: "ES256", kid }).setIssuer(server.baseUrl).setSubject(world.identity.owner).setAudience(server.baseUrl).setIssuedAt().setExpirationTime("10m");
  t.own = world.token.owner;
  t.expired = await server.token(world.identity.owner, { ttlSeconds: -600 });
  t.strayKid = await own("not-a-published-kid").sign(strayKey);
  t.strayKeyPublishedKid = await own(currentKid).sign(strayKey);
  t.unsigned = `${base64url.encode(JSON.stringify({ alg: "none", typ: "JWT" }))}.${base64url.encode(JSON.stringify({ iss: server.baseUrl, sub: world.identity.owner, aud: server.baseUrl, iat: now, exp: now + 600 }))}.`;
  t.noSuchIdentity = await server.token(newRootUid());
  t.unknownIssuer = await stranger.mint({ sub: external.subject });
  t.unmatchedSubject = await idp.mint({ sub: "repo:acme/other:ref:refs/heads/main" });
  t.externalExpired = await idp.mint({ sub: external.subject }, { ttlSeconds: -600 });
  t.externalUnpublishedKey = await idp.mint({ sub: external.subject }, { unpublishedKey: true });
  t.externalRs256 = await idp.mint({ sub: external.subject }, { alg: "RS256" });
  t.externalEs256 = await idp.mint({ sub: external.subject }, { alg: "ES256" });
  // The identity names no audience: the token must be meant for this server (RFC 8725 3.9).
  t.externalOtherAudience = await idp.mint({ sub: external.subject, aud: "https://other-app.example" });
  t.externalNoAudience = await idp.mint({ sub: external.subject, aud: undefined });
  // Signed with the server's real key, but for another audience.
  t.wrongAudience = (
    await mintToken(server.keys, { issuer: server.baseUrl, subject: world.identity.owner, audience: "https://elsewhere.example", ttlSeconds: 600 })
  ).token;
  // Larger than the authenticator's cap, but a well-formed JWT of the fake issuer otherwise.
  t.oversized = await idp.mint({ sub: external.subject, padding: "x".repeat(MAX_TOKEN_BYTES) });
});
afterAll(async () => {
  await server?.close();
  await idp?.close();
  await stranger?.close();
});

const bearer = (name: string) => () => ({ authorization: `Bearer ${t[name]}` });
const getOrg = () => ({ uid: world.org });
const refused = (reason?: string) => ({ code: Code.Unauthenticated, ...(reason ? { reason } : {}) });
const malformed = (message: RegExp) => ({ code: Code.Unauthenticated, reason: "AUTHORIZATION_MALFORMED", message });

runContractCases("Authentication refused", () => server.baseUrl, [
  contractCase({ name: "no token", method: GroupsService.method.getGroup, request: getOrg, error: refused("TOKEN_MISSING") }),
  // A header that is there but holds no usable bearer token is not a missing one: the answer says what is wrong.
  contractCase({
    name: "an Authorization header that is not a bearer token",
    method: GroupsService.method.getGroup,
    request: getOrg,
    headers: () => ({ authorization: `Basic ${Buffer.from("user:pass").toString("base64")}` }),
    error: malformed(/is not a bearer token/),
  }),
  contractCase({
    name: "a valid token sent as \"Bearer Bearer <token>\" (pasted with its scheme into /docs' Authorize)",
    method: GroupsService.method.getGroup,
    request: getOrg,
    headers: () => ({ authorization: `Bearer Bearer ${t.own}` }),
    error: malformed(/says "Bearer" twice.*paste the token without "Bearer "/),
  }),
  contractCase({
    name: "a valid token with no scheme",
    method: GroupsService.method.getGroup,
    request: getOrg,
    headers: () => ({ authorization: t.own! }),
    error: malformed(/has no scheme before the token/),
  }),
  contractCase({ name: "\"Bearer\" and no token", method: GroupsService.method.getGroup, request: getOrg, headers: { authorization: "Bearer " }, error: malformed(/has no token after "Bearer"/) }),
  contractCase({
    name: "two words after \"Bearer\"",
    method: GroupsService.method.getGroup,
    request: getOrg,
    headers: () => ({ authorization: `Bearer ${t.own} x` }),
    error: malformed(/more than one word after "Bearer"/),
  }),
  contractCase({
    name: "malformed token (JWT-shaped, undecodable)",
    method: GroupsService.method.getGroup,
    request: getOrg,
    headers: { authorization: "Bearer eyJhbGciOiJFUzI1NiJ9.bm90LWpzb24.c2lnbmF0dXJl" },
    error: refused("TOKEN_INVALID"),
  }),
  contractCase({
    name: "garbage bearer",
    method: GroupsService.method.getGroup,
    request: getOrg,
    headers: () => ({ authorization: `Bearer ${randomBytes(48).toString("base64url")}` }),
    error: refused("TOKEN_INVALID"),
  }),
  contractCase({ name: "expired token", method: GroupsService.method.getGroup, request: getOrg, headers: bearer("expired"), error: refused("TOKEN_EXPIRED") }),
  contractCase({
    name: "this issuer, signed by a key not in its JWKS (unknown kid)",
    method: GroupsService.method.getGroup,
    request: getOrg,
    headers: bearer("strayKid"),
    error: refused("TOKEN_INVALID"),
  }),
  contractCase({
    name: "this issuer, signed by a key not in its JWKS (published kid, other key)",
    method: GroupsService.method.getGroup,
    request: getOrg,
    headers: bearer("strayKeyPublishedKid"),
    error: refused("TOKEN_INVALID"),
  }),
  contractCase({ name: "unsigned token (alg none)", method: GroupsService.method.getGroup, request: getOrg, headers: bearer("unsigned"), error: refused() }),
  contractCase({ name: "this issuer, another audience", method: GroupsService.method.getGroup, request: getOrg, headers: bearer("wrongAudience"), error: refused() }),
  contractCase({ name: "this issuer, an identity that does not exist", method: GroupsService.method.getGroup, request: getOrg, headers: bearer("noSuchIdentity"), error: refused() }),
  contractCase({ name: "a token from an issuer no identity references", method: GroupsService.method.getGroup, request: getOrg, headers: bearer("unknownIssuer"), error: refused() }),
  contractCase({
    name: "an external token whose subject matches no identity",
    method: GroupsService.method.getGroup,
    request: getOrg,
    headers: bearer("unmatchedSubject"),
    error: refused(),
  }),
  contractCase({
    name: "an external token meant for another application (audience)",
    method: GroupsService.method.getGroup,
    request: getOrg,
    headers: bearer("externalOtherAudience"),
    error: refused(),
  }),
  contractCase({ name: "an external token with no audience", method: GroupsService.method.getGroup, request: getOrg, headers: bearer("externalNoAudience"), error: refused() }),
  contractCase({ name: "an expired external token", method: GroupsService.method.getGroup, request: getOrg, headers: bearer("externalExpired"), error: refused("TOKEN_EXPIRED") }),
  contractCase({
    name: "an external token signed by a key its issuer does not publish",
    method: GroupsService.method.getGroup,
    request: getOrg,
    headers: bearer("externalUnpublishedKey"),
    error: refused(),
  }),
  contractCase({
    name: "oversized token",
    method: GroupsService.method.getGroup,
    request: getOrg,
    headers: bearer("oversized"),
    error: refused("TOKEN_INVALID"),
    // HTTP/1.1 transports: see the test below.
    only: ["grpc", "connect-binary-h2"],
  }),
]);

describe.each(protocols)("Authentication accepted [%s]", (protocol: Protocol) => {
  const passes = async (name: string) => {
    const out = await call(protocol, server.baseUrl, GroupsService.method.getGroup, getOrg(), bearer(name)());
    if (out.error) {
      expect(Code[out.error.code], out.error.message).not.toBe(Code[Code.Unauthenticated]);
      expect(out.error.httpStatus ?? 0).not.toBe(401);
    } else {
      expect(out.message.uid).toBe(world.org);
    }
  };
  it("this server's own token", () => passes("own"));
  it("an external RS256 token from an issuer matching an identity's claimMatch exactly", () => passes("externalRs256"));
  it("an external ES256 token from the same issuer", () => passes("externalEs256"));
});

describe.each(protocols)("Authentication with a token two organizations gave an identity to [%s]", (protocol: Protocol) => {
  it("acts in each organization as that organization's identity", async () => {
    for (const org of [world.org, orgB.org]) {
      const out = await call(protocol, server.baseUrl, GroupsService.method.getGroup, { uid: org }, bearer("shared")());
      expect(out.error, out.error?.message).toBeUndefined();
      expect(out.message!.uid).toBe(org);
    }
  });

  it("lists what either identity may list", async () => {
    const out = await call(protocol, server.baseUrl, GroupsService.method.listGroups, {}, bearer("shared")());
    expect(out.error, out.error?.message).toBeUndefined();
    expect(out.message!.groups.map((g) => g.uid)).toEqual(expect.arrayContaining([world.org, orgB.org]));
  });

  it("asks which identity for a call that names no scope, listing the identities the token may act as", async () => {
    const out = await call(protocol, server.baseUrl, GroupsService.method.lookupGroup, {}, bearer("shared")());
    assertError(protocol, out.error!, { code: Code.FailedPrecondition, reason: "IDENTITY_AMBIGUOUS" });
    const subjects = detail(out.error!, PreconditionFailureSchema)!.violations.map((v) => v.subject);
    expect(subjects.sort()).toEqual([shared.home, shared.foreign].sort());
  });
});

describe.each(protocols)("Authentication with a token another organization made many identities for [%s]", (protocol: Protocol) => {
  it("acts in the organization as its own identity, however many others match and whenever they were made", async () => {
    for (const token of ["late", "early"]) {
      for (const uid of [world.org, world.team]) {
        const out = await call(protocol, server.baseUrl, GroupsService.method.getGroup, { uid }, bearer(token)());
        expect(out.error, `${token} ${uid}: ${out.error?.message}`).toBeUndefined();
        expect(out.message!.uid).toBe(uid);
      }
    }
  });

  it("for a call that names no scope, takes the only identity its holder could see, and never names the others", async () => {
    // Acts as the organization's identity: confined to the organization, it is no person with a verified
    // email, so LookupGroup finds nothing for it (NOT_FOUND) rather than asking which identity.
    const early = await call(protocol, server.baseUrl, GroupsService.method.lookupGroup, {}, bearer("early")());
    assertError(protocol, early.error!, { code: Code.NotFound });
    const late = await call(protocol, server.baseUrl, GroupsService.method.lookupGroup, {}, bearer("late")());
    assertError(protocol, late.error!, { code: Code.FailedPrecondition, reason: "IDENTITY_AMBIGUOUS" });
    const named = detail(late.error!, PreconditionFailureSchema)!.violations.map((v) => v.subject);
    expect(named.filter((uid) => squat.squatters.includes(uid))).toEqual([]);
    expect(late.error!.message).not.toMatch(new RegExp(squat.squatters[0]!));
  });
});

describe("Authentication: what the listener and the verifier never do", () => {
  it("an oversized token over HTTP/1.1 transports never authenticates", async () => {
    // The HTTP/1.1 server's header limit (Node's default, 16 KiB in all) is at or below the token cap, so
    // such a request is cut by the listener before it reaches the authenticator.
    for (const protocol of ["grpc-web", "connect-json", "rest"] as const) {
      const out = await call(protocol, server.baseUrl, GroupsService.method.getGroup, getOrg(), bearer("oversized")()).catch((err: unknown) => ({
        error: { code: Code.Unavailable, message: String(err), details: [] },
      }));
      expect(out.error, protocol).toBeDefined();
      if (out.error!.code === Code.Unauthenticated) assertError(protocol, out.error!, refused("TOKEN_INVALID"));
      else expect([Code.Unavailable, Code.Aborted, Code.Internal, Code.Unknown], protocol).toContain(out.error!.code);
    }
  });

  it("fetched nothing from the issuer no identity references", () => {
    expect(stranger.requests).toEqual({ discovery: 0, jwks: 0 });
  });

  it("fetched the referenced issuer's discovery document and keys once for all those calls", () => {
    expect(idp.requests).toEqual({ discovery: 1, jwks: 1 });
  });
});
