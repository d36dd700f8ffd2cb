// SecurityTokenService over every protocol (REST: POST /sts/exchange with the fields in the query). The
// presented token travels in the Authorization header; the caller names the identity to assume. Exchange
// mints a token of this server for that identity (which then works on API calls), capped at one hour and
// at the presented token's expiry, recording the upstream issuer and subject. Patterns are anchored;
// StaticKeys identities verify against their registered keys; an unknown identity and one the token does
// not satisfy answer alike; AWS and service-principal identities cannot be exchanged for here.
import { createHash } from "node:crypto";
import { Code } from "@connectrpc/connect";
import { create, toJson } from "@bufbuild/protobuf";
import { timestampDate, timestampFromDate } from "@bufbuild/protobuf/wkt";
import { decodeJwt, decodeProtectedHeader } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentitySchema, RelationshipType, ServicePrincipal, type Identity } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { BadRequestSchema, PreconditionFailureSchema, RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { SecurityTokenService } from "../../gen/platform/oidc/v1/oidc.platform_pb.js";
import { identities, roleBindings } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { startFakeIssuer, staticKeyPair, type FakeIssuer } from "../support/fake-issuer.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { insertClaimMatches, seedWorld, type World } from "../support/world.js";
import { MAX_CANDIDATE_IDENTITIES } from "../../src/kernel/auth/external.js";
import { assertError, call, contractCase, detail, protocols, runContractCases, type Protocol } from "./harness.js";

const exchange = SecurityTokenService.method.exchange;
const STATIC_ISSUER = "https://static.example"; // never fetched: its keys are on the identity
const EXACT_SUBJECT = "repo:acme/app:ref:refs/heads/main";

let server: TestServer;
let world: World;
let idp: FakeIssuer;
const id: Record<"exact" | "pattern" | "static" | "aws" | "sp", string> = { exact: "", pattern: "", static: "", aws: "", sp: "" };
const t: Record<string, string> = {};
let staticExpiry: Date;
// Cross-tenant: a subject to which the world's organization and another one (B) each gave an identity, and
// a person (a root-level identity, as bootstrap makes) to whom B also gave one.
const SHARED_SUBJECT = "repo:acme/shared:ref:refs/heads/main";
const PERSON_SUBJECT = "person-110169484474386276334";
const shared = { home: "", foreign: "", person: "", personInB: "" };

/** An identity with an exact issuer and subject under `parent` (none: root-level), viewer on `bindOn`. */
async function insertExact(parent: string | null, bindOn: string, subject: string) {
  return (await insertClaimMatches(server, { issuer: idp.url, subject, parent, bindOn }))[0]!;
}
// Squatting: another organization made MAX_CANDIDATE_IDENTITIES identities for a guessable subject before
// the world's organization made its own (`late`), or after it (`early`).
const LATE_SUBJECT = "repo:acme/late:ref:refs/heads/main";
const EARLY_SUBJECT = "repo:acme/early:ref:refs/heads/main";
const squat = { late: "", early: "", squatters: [] as string[] };

async function insertIdentity(relationship: Identity["relationship"], type: RelationshipType, cols: { issuer?: string; subject?: string } = {}) {
  const uid = newChildUid(world.org);
  const json = toJson(IdentitySchema, create(IdentitySchema, { relationship })) as Record<string, unknown>;
  await server.database.db
    .insert(identities)
    .values({ uid, parentUid: world.org, name: "sts", relationship: json, relationshipType: type, issuer: cols.issuer ?? null, subject: cols.subject ?? null });
  await server.database.db.insert(roleBindings).values({ uid: newChildUid(world.org), groupUid: world.org, identityUid: uid, roleUid: managedRole("viewer").uid });
  return uid;
}
const rel = <C extends NonNullable<Identity["relationship"]["case"]>>(c: C, value: unknown) =>
  create(IdentitySchema, { relationship: { case: c, value } as never }).relationship;

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server);
  idp = await startFakeIssuer({ audience: server.baseUrl });
  const keys = await staticKeyPair("ES256");
  staticExpiry = new Date(Date.now() + 20 * 60_000);

  id.exact = await insertIdentity(rel("claimMatch", { iss: { case: "issuer", value: idp.url }, sub: { case: "subject", value: EXACT_SUBJECT } }), RelationshipType.CLAIM_MATCH, {
    issuer: idp.url,
    subject: EXACT_SUBJECT,
  });
  id.pattern = await insertIdentity(
    rel("claimMatch", {
      iss: { case: "issuerPattern", value: "http://127\\.0\\.0\\.1:[0-9]+" },
      sub: { case: "subjectPattern", value: "repo:acme/.*" },
      aud: { case: "audience", value: "sts-test" },
      claims: { repository_owner: "acme" },
      claimPatterns: { ref: "refs/(heads|tags)/.*" },
    }),
    RelationshipType.CLAIM_MATCH,
  );
  id.static = await insertIdentity(
    rel("staticKeys", { issuer: STATIC_ISSUER, subject: "build-bot", issuerKeys: keys.issuerKeys, audiences: ["platform"], expirationTime: timestampFromDate(staticExpiry) }),
    RelationshipType.STATIC,
    { issuer: STATIC_ISSUER, subject: "build-bot" },
  );
  id.aws = await insertIdentity(rel("awsIdentity", { awsAccount: "123456789012", awsArn: { case: "arn", value: "arn:aws:iam::123456789012:role/ci" } }), RelationshipType.AWS_IDENTITY);
  id.sp = await insertIdentity({ case: "servicePrincipal", value: ServicePrincipal.INGESTER }, RelationshipType.SERVICE_PRINCIPAL);

  const orgB = (await seedWorld(server, "globex")).org;
  shared.home = await insertExact(world.org, world.org, SHARED_SUBJECT);
  shared.foreign = await insertExact(orgB, orgB, SHARED_SUBJECT);
  shared.person = await insertExact(null, world.org, PERSON_SUBJECT);
  shared.personInB = await insertExact(orgB, orgB, PERSON_SUBJECT);
  t.shared = await idp.mint({ sub: SHARED_SUBJECT });

  const squatter = (await seedWorld(server, "squatter")).org;
  const before = new Date(Date.now() - 3_600_000);
  const squatted = { issuer: idp.url, parent: squatter, count: MAX_CANDIDATE_IDENTITIES, createTime: before };
  squat.squatters.push(...(await insertClaimMatches(server, { ...squatted, subject: LATE_SUBJECT })));
  squat.late = await insertExact(world.org, world.org, LATE_SUBJECT);
  squat.early = (await insertClaimMatches(server, { issuer: idp.url, subject: EARLY_SUBJECT, parent: world.org, bindOn: world.org, createTime: new Date(before.getTime() - 60_000) }))[0]!;
  squat.squatters.push(...(await insertClaimMatches(server, { ...squatted, subject: EARLY_SUBJECT })));
  t.late = await idp.mint({ sub: LATE_SUBJECT });
  t.early = await idp.mint({ sub: EARLY_SUBJECT });
  t.person = await idp.mint({ sub: PERSON_SUBJECT });

  const patternClaims = { aud: "sts-test", repository_owner: "acme", ref: "refs/heads/main" };
  t.exact = await idp.mint({ sub: EXACT_SUBJECT });
  t.exactEs256 = await idp.mint({ sub: EXACT_SUBJECT }, { alg: "ES256" });
  t.exactLong = await idp.mint({ sub: EXACT_SUBJECT }, { ttlSeconds: 3 * 3600 });
  t.exactShort = await idp.mint({ sub: EXACT_SUBJECT }, { ttlSeconds: 300 });
  t.exactExpired = await idp.mint({ sub: EXACT_SUBJECT }, { ttlSeconds: -600 });
  t.exactOtherAudience = await idp.mint({ sub: EXACT_SUBJECT, aud: "https://other-app.example" });
  t.otherSubject = await idp.mint({ sub: "repo:acme/other:ref:refs/heads/main" });
  t.pattern = await idp.mint({ sub: "repo:acme/app", ...patternClaims });
  t.patternPrefix = await idp.mint({ sub: "xrepo:acme/app", ...patternClaims });
  t.patternWrongAud = await idp.mint({ sub: "repo:acme/app", ...patternClaims, aud: "other" });
  t.patternWrongClaim = await idp.mint({ sub: "repo:acme/app", ...patternClaims, repository_owner: "acme-evil" });
  t.patternWrongClaimPattern = await idp.mint({ sub: "repo:acme/app", ...patternClaims, ref: "refs/pull/1/merge" });
  t.static = await keys.sign({ iss: STATIC_ISSUER, sub: "build-bot", aud: "platform" }, { ttlSeconds: 3600 });
  t.staticWrongAud = await keys.sign({ iss: STATIC_ISSUER, sub: "build-bot", aud: "elsewhere" });
  t.staticOtherKey = await (await staticKeyPair("ES256")).sign({ iss: STATIC_ISSUER, sub: "build-bot", aud: "platform" });
  t.own = world.token.owner;
});
afterAll(async () => {
  await server?.close();
  await idp?.close();
});

const bearer = (name: string) => () => ({ authorization: `Bearer ${t[name]}` });
const assume = (k: keyof typeof id) => () => ({ identity: id[k] });
const notAccepted = { code: Code.Unauthenticated, reason: "TOKEN_NOT_ACCEPTED", domain: "oidc.platform.test" };

/** Exchanges over one protocol and returns the minted token (failing the test on an error). */
async function exchangeOk(protocol: Protocol, token: string, request: { identity?: string; aud?: string[] }) {
  const out = await call(protocol, server.baseUrl, exchange, request, { authorization: `Bearer ${token}` });
  expect(out.error, out.error ? `${Code[out.error.code]}: ${out.error.message}` : "").toBeUndefined();
  const raw = out.message!;
  expect(raw.token).not.toBe("");
  expect(raw.refreshToken).toBe("");
  return { raw, claims: decodeJwt(raw.token), expiry: timestampDate(raw.expiry!) };
}

describe.each(protocols)("Exchange [%s]", (protocol) => {
  it("mints a token of this server for the named identity, recording the upstream token, that works on API calls", async () => {
    const { raw, claims, expiry } = await exchangeOk(protocol, t.exact!, { identity: id.exact });
    const presented = decodeJwt(t.exact!);
    expect(claims).toMatchObject({ iss: server.baseUrl, sub: id.exact, aud: server.baseUrl, act: { iss: idp.url, sub: EXACT_SUBJECT } });
    expect(decodeProtectedHeader(raw.token).kid).toBe((await server.keys.signingKey()).kid);
    expect(expiry.getTime() / 1000).toBe(claims.exp);
    expect(claims.exp).toBeLessThanOrEqual(presented.exp!);
    const next = await call(protocol, server.baseUrl, GroupsService.method.getGroup, { uid: world.org }, { authorization: `Bearer ${raw.token}` });
    if (next.error) expect(Code[next.error.code], next.error.message).not.toBe(Code[Code.Unauthenticated]);
    else expect(next.message.uid).toBe(world.org);
  });

  it("accepts the requested audience when it is this server's", async () => {
    const { claims } = await exchangeOk(protocol, t.exactEs256!, { identity: id.exact, aud: [server.baseUrl] });
    expect(claims.aud).toEqual([server.baseUrl]);
  });

  it("with no identity named, assumes the one identity with the token's exact issuer and subject", async () => {
    const { claims } = await exchangeOk(protocol, t.exact!, {});
    expect(claims.sub).toBe(id.exact);
  });

  it("caps the lifetime at one hour", async () => {
    const before = Math.floor(Date.now() / 1000);
    const { claims } = await exchangeOk(protocol, t.exactLong!, { identity: id.exact });
    expect(claims.exp! - claims.iat!).toBe(3600);
    expect(claims.exp!).toBeGreaterThanOrEqual(before + 3600);
    expect(claims.exp!).toBeLessThanOrEqual(Math.floor(Date.now() / 1000) + 3600);
  });

  it("never outlives the presented token", async () => {
    const { claims } = await exchangeOk(protocol, t.exactShort!, { identity: id.exact });
    expect(claims.exp).toBe(decodeJwt(t.exactShort!).exp);
  });

  it("matches anchored subject and issuer patterns, the audience and the claims", async () => {
    const { claims } = await exchangeOk(protocol, t.pattern!, { identity: id.pattern });
    expect(claims).toMatchObject({ sub: id.pattern, act: { iss: idp.url, sub: "repo:acme/app" } });
  });

  it("verifies StaticKeys tokens with the identity's registered keys, never past its expiration_time", async () => {
    const { claims } = await exchangeOk(protocol, t.static!, { identity: id.static });
    expect(claims).toMatchObject({ sub: id.static, act: { iss: STATIC_ISSUER, sub: "build-bot" } });
    expect(claims.exp).toBeLessThanOrEqual(Math.floor(staticExpiry.getTime() / 1000));
  });

  it("answers an unknown identity exactly as one the token does not match", async () => {
    const unknown = `${world.org}/0123456789abcdef`;
    const a = await call(protocol, server.baseUrl, exchange, { identity: id.pattern }, bearer("exact")());
    const b = await call(protocol, server.baseUrl, exchange, { identity: unknown }, bearer("exact")());
    assertError(protocol, a.error!, notAccepted);
    assertError(protocol, b.error!, notAccepted);
    expect(a.error!.message.replace(id.pattern, "X")).toBe(b.error!.message.replace(unknown, "X"));
  });

  it("GET /sts/exchange works like POST", async () => {
    if (protocol !== "rest") return;
    const res = await fetch(`${server.baseUrl}/sts/exchange?identity=${encodeURIComponent(id.exact)}`, { headers: bearer("exact")() });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { token: string; expiry: string };
    expect(decodeJwt(body.token).sub).toBe(id.exact);
    expect(new Date(body.expiry).getTime()).toBeGreaterThan(Date.now());
  });
});

// The SDK's HTTP/1 exchanger (sts.HTTP1DowngradeExchanger) POSTs the fields form-encoded, as grpc-gateway
// reads them for a binding without a body (Go's ParseForm): the body's fields count like the query's.
describe("Exchange over REST with a form-encoded body, as the SDK's HTTP/1 exchanger sends it", () => {
  const postForm = (path: string, form: URLSearchParams, token: string, query = "") =>
    fetch(`${server.baseUrl}${path}${query}`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/x-www-form-urlencoded" },
      body: form.toString(),
    });

  it("assumes the identity the form names and returns the refresh token it asks for", async () => {
    for (const identity of [shared.home, shared.foreign]) {
      const form = new URLSearchParams([
        ["aud", server.baseUrl],
        ["scope", "offline_access"],
        ["scopes", "offline_access"],
        ["identity", identity],
      ]);
      const res = await postForm("/sts/exchange", form, t.shared!);
      const body = (await res.json()) as { token: string; refreshToken: string; message?: string };
      expect(res.status, body.message).toBe(200);
      expect(decodeJwt(body.token)).toMatchObject({ sub: identity, aud: [server.baseUrl] });
      expect(body.refreshToken).toMatch(/^cgrt_/);

      // ExchangeRefreshToken reads its form the same way (the SDK's Refresh).
      const refreshed = await postForm("/sts/exchange_refresh_token", new URLSearchParams([["aud", "https://elsewhere.example"]]), body.refreshToken);
      expect(refreshed.status).toBe(400);
      expect(((await refreshed.json()) as { message: string }).message).toMatch(/aud/);
    }
  });

  it("mints for the registry's audience (the issuer's host), as the SDK's registry keychain asks: the token pulls through /token and /v2/, and is no API token", async () => {
    const host = new URL(server.baseUrl).host;
    const res = await postForm("/sts/exchange", new URLSearchParams([["aud", host], ["identity", id.exact]]), t.exact!);
    const body = (await res.json()) as { token: string; message?: string };
    expect(res.status, body.message).toBe(200);
    expect(decodeJwt(body.token)).toMatchObject({ sub: id.exact, aud: [host] });

    // An image's blob the identity (a viewer of the organization) may pull.
    const name = `${world.org}/sdk-keychain`;
    const blob = Buffer.from("pulled with the keychain's token");
    const digest = `sha256:${createHash("sha256").update(blob).digest("hex")}`;
    const pushed = await fetch(`${server.baseUrl}/v2/${name}/blobs/uploads/?digest=${digest}`, { method: "POST", body: blob, headers: { authorization: `Bearer ${world.token.owner}` } });
    expect(pushed.status).toBe(201);

    // The keychain's credentials: Basic, user _token, the minted token as the password.
    const basic = { authorization: `Basic ${Buffer.from(`_token:${body.token}`).toString("base64")}` };
    const direct = await fetch(`${server.baseUrl}/v2/${name}/blobs/${digest}`, { headers: basic });
    expect(direct.status).toBe(200);
    expect(Buffer.from(await direct.arrayBuffer()).equals(blob)).toBe(true);
    const issued = await fetch(`${server.baseUrl}/token?service=${encodeURIComponent(host)}&scope=${encodeURIComponent(`repository:${name}:pull,push`)}`, { headers: basic });
    expect(issued.status).toBe(200);
    const registryToken = ((await issued.json()) as { token: string }).token;
    expect(decodeJwt(registryToken)).toMatchObject({ sub: id.exact, access: [{ type: "repository", name, actions: ["pull"] }] });
    const pulled = await fetch(`${server.baseUrl}/v2/${name}/blobs/${digest}`, { headers: { authorization: `Bearer ${registryToken}` } });
    expect(pulled.status).toBe(200);
    // A viewer's: no push.
    expect((await fetch(`${server.baseUrl}/v2/${name}/blobs/uploads/`, { method: "POST", headers: basic })).status).toBe(403);

    const api = await fetch(`${server.baseUrl}/iam/v2/groups`, { headers: { authorization: `Bearer ${body.token}` } });
    expect(api.status).toBe(401);
  });

  it("a field in both the form and the query is refused, not chosen silently", async () => {
    const res = await postForm("/sts/exchange", new URLSearchParams([["identity", shared.home]]), t.shared!, `?identity=${encodeURIComponent(shared.foreign)}`);
    expect(res.status).toBe(400);
    const body = (await res.json()) as { details: Array<{ fieldViolations?: Array<{ field: string }> }> };
    expect(body.details.flatMap((d) => d.fieldViolations ?? [])).toEqual([expect.objectContaining({ field: "identity" })]);
  });

  it("a form field naming no field of the request is ignored, as in the query", async () => {
    const res = await postForm("/sts/exchange", new URLSearchParams([["identity", shared.foreign], ["colour", "red"]]), t.shared!);
    expect(res.status).toBe(200);
    expect(decodeJwt(((await res.json()) as { token: string }).token).sub).toBe(shared.foreign);
  });
});

describe.each(protocols)("Exchange of a token several organizations gave an identity to [%s]", (protocol) => {
  it("assumes whichever of them the caller names", async () => {
    for (const identity of [shared.home, shared.foreign]) {
      const { claims } = await exchangeOk(protocol, t.shared!, { identity });
      expect(claims.sub).toBe(identity);
    }
  });

  it("with no identity named, answers which identities the token may assume", async () => {
    const out = await call(protocol, server.baseUrl, exchange, {}, bearer("shared")());
    assertError(protocol, out.error!, { code: Code.FailedPrecondition, reason: "IDENTITY_AMBIGUOUS", domain: "oidc.platform.test" });
    const subjects = detail(out.error!, PreconditionFailureSchema)!.violations.map((v) => v.subject);
    expect(subjects.sort()).toEqual([shared.home, shared.foreign].sort());
  });

  it("with no identity named, assumes a person's own (root-level) identity, which no organization can create", async () => {
    expect((await exchangeOk(protocol, t.person!, {})).claims.sub).toBe(shared.person);
    expect((await exchangeOk(protocol, t.person!, { identity: shared.personInB })).claims.sub).toBe(shared.personInB);
  });
});

describe.each(protocols)("Exchange of a token another organization made many identities for [%s]", (protocol) => {
  it("with no identity named, takes the only identity its holder could see", async () => {
    expect((await exchangeOk(protocol, t.early!, {})).claims.sub).toBe(squat.early);
  });

  it("with no identity named and none to take, never names the identities its holder could not see", async () => {
    const out = await call(protocol, server.baseUrl, exchange, {}, bearer("late")());
    assertError(protocol, out.error!, { code: Code.FailedPrecondition, reason: "IDENTITY_AMBIGUOUS", domain: "oidc.platform.test" });
    const named = detail(out.error!, PreconditionFailureSchema)!.violations.map((v) => v.subject);
    expect(named.filter((uid) => squat.squatters.includes(uid))).toEqual([]);
    expect(out.error!.message).not.toMatch(new RegExp(squat.squatters[0]!));
  });

  it("assumes the identity it names, however many others match", async () => {
    expect((await exchangeOk(protocol, t.late!, { identity: squat.late })).claims.sub).toBe(squat.late);
  });
});

describe("Exchange: repeated failures from one caller are rate-limited", () => {
  const few = { burst: 3, perMinute: 1 };
  const many = { burst: 1000, perMinute: 1000 };
  // Budgets are per server: one server limits by subject (every protocol with a subject of its own), and
  // one per protocol tested limits by address (all of a test's requests come from 127.0.0.1).
  let bySubject: TestServer;
  const servers: TestServer[] = [];
  beforeAll(async () => {
    bySubject = await startTestServer({ rateLimits: { exchangeFailures: { bySubject: few, byAddress: many } } });
    servers.push(bySubject);
  });
  afterAll(async () => {
    for (const s of servers) await s.close();
  });
  const exchangeWith = (protocol: Protocol, on: TestServer, token: string, headers: Record<string, string> = {}) =>
    call(protocol, on.baseUrl, exchange, {}, { ...headers, authorization: `Bearer ${token}` });
  const exhausted = (protocol: Protocol, out: Awaited<ReturnType<typeof exchangeWith>>) => {
    assertError(protocol, out.error!, { code: Code.ResourceExhausted, reason: "TOO_MANY_FAILURES" });
    const delay = detail(out.error!, RetryInfoSchema)?.retryDelay;
    expect(Number(delay?.seconds ?? 0) * 1e9 + (delay?.nanos ?? 0)).toBeGreaterThan(0);
  };

  /** An identity on `on` with an exact claim match on the fake issuer and `subject`. */
  async function insertWorkload(on: TestServer, subject: string) {
    const org = (await seedWorld(on, `w${Math.random().toString(36).slice(2, 8)}`)).org;
    await on.database.db.insert(identities).values({
      uid: newChildUid(org),
      parentUid: org,
      name: "workload",
      relationship: { claimMatch: { issuer: idp.url, subject } },
      relationshipType: RelationshipType.CLAIM_MATCH,
      issuer: idp.url,
      subject,
    });
  }

  it.each(protocols)("by the token's issuer and subject, once its signature verified [%s]", async (protocol) => {
    const subject = `probe-${protocol}`;
    await insertWorkload(bySubject, subject);
    // Signed by the issuer, refused after the signature verified (not valid before an hour from now).
    const notYet = () => idp.mint({ sub: subject, aud: bySubject.baseUrl, nbf: Math.floor(Date.now() / 1000) + 3600, jti: crypto.randomUUID() });
    for (let i = 0; i < 3; i++) assertError(protocol, (await exchangeWith(protocol, bySubject, await notYet())).error!, { code: Code.Unauthenticated });
    exhausted(protocol, await exchangeWith(protocol, bySubject, await notYet()));
    // Another token of the same subject is the same caller; another subject from the same address is not.
    exhausted(protocol, await exchangeWith(protocol, bySubject, await idp.mint({ sub: subject, aud: bySubject.baseUrl })));
    assertError(protocol, (await exchangeWith(protocol, bySubject, await idp.mint({ sub: `somebody-else-${protocol}` }))).error!, { code: Code.Unauthenticated });
  });

  it.each(protocols)("never by a subject that tokens signed with another key claim: its holder's exchanges go on [%s]", async (protocol) => {
    const subject = `victim-${protocol}`;
    await insertWorkload(bySubject, subject);
    const forged = () => idp.mint({ sub: subject, aud: bySubject.baseUrl, jti: crypto.randomUUID() }, { unpublishedKey: true });
    for (let i = 0; i < 6; i++) {
      assertError(protocol, (await exchangeWith(protocol, bySubject, await forged())).error!, { code: Code.Unauthenticated, reason: "TOKEN_NOT_ACCEPTED" });
    }
    const genuine = await exchangeWith(protocol, bySubject, await idp.mint({ sub: subject, aud: bySubject.baseUrl }));
    expect(genuine.error, genuine.error?.message).toBeUndefined();
    // Nor by claims that fail before any signature is checked (an audience this server does not accept).
    for (let i = 0; i < 6; i++) {
      const out = await exchangeWith(protocol, bySubject, await idp.mint({ sub: subject, aud: "https://elsewhere.example", jti: crypto.randomUUID() }, { unpublishedKey: true }));
      assertError(protocol, out.error!, { code: Code.Unauthenticated });
    }
    expect((await exchangeWith(protocol, bySubject, await idp.mint({ sub: subject, aud: bySubject.baseUrl }))).error).toBeUndefined();
  });

  it("does not count successful exchanges", async () => {
    const subject = "repo:acme/busy:ref:refs/heads/main";
    await insertWorkload(bySubject, subject);
    const token = await idp.mint({ sub: subject, aud: bySubject.baseUrl });
    for (let i = 0; i < 6; i++) {
      const out = await exchangeWith("connect-json", bySubject, token);
      expect(out.error, out.error?.message).toBeUndefined();
    }
  });

  // gRPC goes through the server's own router, REST through the gateway: both record the address.
  it.each(["grpc", "rest"] as const)("by the connection's address, whatever headers say, for tokens that do not decode [%s]", async (protocol) => {
    const limited = await startTestServer({ rateLimits: { exchangeFailures: { bySubject: many, byAddress: few } } });
    servers.push(limited);
    for (let i = 0; i < 3; i++) {
      const out = await exchangeWith(protocol, limited, `garbage-${i}`, { "x-forwarded-for": `192.0.2.${i}`, forwarded: `for=192.0.2.${i}` });
      assertError(protocol, out.error!, { code: Code.Unauthenticated, reason: "TOKEN_INVALID" });
    }
    exhausted(protocol, await exchangeWith(protocol, limited, "garbage-3", { "x-forwarded-for": "192.0.2.99" }));
    exhausted(protocol, await exchangeWith(protocol, limited, await idp.mint({ sub: "fresh-subject" })));
  });
});

runContractCases("Exchange refused", () => server.baseUrl, [
  contractCase({ name: "no token", method: exchange, request: assume("exact"), error: { code: Code.Unauthenticated, reason: "TOKEN_MISSING" } }),
  contractCase({
    name: "a token sent as \"Bearer Bearer <token>\"",
    method: exchange,
    request: assume("exact"),
    headers: () => ({ authorization: `Bearer ${bearer("exact")().authorization}` }),
    error: { code: Code.Unauthenticated, reason: "AUTHORIZATION_MALFORMED", message: /says "Bearer" twice/ },
  }),
  contractCase({ name: "garbage token", method: exchange, request: assume("exact"), headers: { authorization: "Bearer garbage" }, error: { code: Code.Unauthenticated, reason: "TOKEN_INVALID" } }),
  contractCase({ name: "expired token", method: exchange, request: assume("exact"), headers: bearer("exactExpired"), error: { code: Code.Unauthenticated, reason: "TOKEN_EXPIRED" } }),
  contractCase({ name: "a token for another identity (wrong subject)", method: exchange, request: assume("exact"), headers: bearer("otherSubject"), error: notAccepted }),
  contractCase({
    name: "a token meant for another application (the identity names no audience)",
    method: exchange,
    request: assume("exact"),
    headers: bearer("exactOtherAudience"),
    error: notAccepted,
  }),
  contractCase({
    name: "a token meant for another application, no identity named",
    method: exchange,
    request: {},
    headers: bearer("exactOtherAudience"),
    error: notAccepted,
  }),
  contractCase({ name: "a token that satisfies another identity", method: exchange, request: assume("pattern"), headers: bearer("exact"), error: notAccepted }),
  contractCase({ name: "subject pattern is anchored (xrepo:acme/... against repo:acme/.*)", method: exchange, request: assume("pattern"), headers: bearer("patternPrefix"), error: notAccepted }),
  contractCase({ name: "audience does not match", method: exchange, request: assume("pattern"), headers: bearer("patternWrongAud"), error: notAccepted }),
  contractCase({ name: "a claim does not match", method: exchange, request: assume("pattern"), headers: bearer("patternWrongClaim"), error: notAccepted }),
  contractCase({ name: "a claim pattern does not match", method: exchange, request: assume("pattern"), headers: bearer("patternWrongClaimPattern"), error: notAccepted }),
  contractCase({ name: "static keys: audience not among the identity's", method: exchange, request: assume("static"), headers: bearer("staticWrongAud"), error: notAccepted }),
  contractCase({ name: "static keys: signed by another key", method: exchange, request: assume("static"), headers: bearer("staticOtherKey"), error: notAccepted }),
  contractCase({ name: "this server's own token for an identity that does not reference it", method: exchange, request: assume("exact"), headers: bearer("own"), error: notAccepted }),
  contractCase({
    name: "an audience other than this server's",
    method: exchange,
    request: () => ({ identity: id.exact, aud: ["https://elsewhere.example"] }),
    headers: bearer("exact"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "aud[0]" }] } }] },
  }),
  contractCase({
    name: "a cap naming no capability is refused rather than ignored (down-scoping: down-scoping.contract.test.ts)",
    method: exchange,
    request: () => ({ identity: id.exact, cap: ["CAP_IAM_GROUPS_LIST", "groups.lsit"] }),
    headers: bearer("exact"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "cap[1]" }] } }] },
  }),
  contractCase({
    name: "AWS identity: no verifier in this server",
    method: exchange,
    request: assume("aws"),
    headers: bearer("exact"),
    error: {
      code: Code.FailedPrecondition,
      message: /no verifier for AWS identities in this server/,
      details: [{ schema: PreconditionFailureSchema, value: { violations: [{ type: "IDENTITY_NOT_EXCHANGEABLE" }] } }],
    },
  }),
  contractCase({
    name: "service-principal identity: no verifier in this server",
    method: exchange,
    request: assume("sp"),
    headers: bearer("exact"),
    error: { code: Code.FailedPrecondition, message: /no verifier for service principal identities in this server/ },
  }),
  contractCase({
    name: "ExchangeRefreshToken refuses an exchangeable token: only a refresh token is its bearer (refresh-tokens.contract.test.ts)",
    method: SecurityTokenService.method.exchangeRefreshToken,
    request: {},
    headers: bearer("exact"),
    error: { code: Code.Unauthenticated, reason: "REFRESH_TOKEN_INVALID", domain: "oidc.platform.test" },
  }),
]);
