// Refresh tokens of the token exchange over every protocol (REST: POST /sts/exchange and
// /sts/exchange_refresh_token, fields in the query). Exchange returns one when the scope offline_access is
// asked for (in `scope` or `scopes`): opaque, stored only as its sha256, bound to the identity and the
// access token's audience, 30 days by default. ExchangeRefreshToken takes it as the bearer and answers a new
// access token and a new refresh token; the presented one is used up. Presenting a used one again revokes
// the whole chain. Unknown, expired, used, revoked: one UNAUTHENTICATED answer with ErrorInfo. Deleting the
// identity or its last role binding ends its refresh tokens; refused refreshes count against the budget of
// refused exchanges; no refresh token is ever logged or put in an event.
import { Code } from "@connectrpc/connect";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { eq, sql } from "drizzle-orm";
import { decodeJwt } from "jose";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentitiesService, RelationshipType } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { BadRequestSchema } from "../../gen/google/rpc/error_details_pb.js";
import { SecurityTokenService } from "../../gen/platform/oidc/v1/oidc.platform_pb.js";
import { identities, outboxEvents, refreshTokens, roleBindings } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { setLogLevel } from "../../src/kernel/log.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { refreshTokenHash } from "../../src/sts/refresh-tokens.store.js";
import { startFakeIssuer, type FakeIssuer } from "../support/fake-issuer.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { assertError, call, contractCase, detail, protocols, runContractCases, type Protocol } from "./harness.js";

const exchange = SecurityTokenService.method.exchange;
const exchangeRefresh = SecurityTokenService.method.exchangeRefreshToken;
const DAY = 24 * 3600;

let server: TestServer;
let world: World;
let idp: FakeIssuer;
let serial = 0;

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server);
  idp = await startFakeIssuer({ audience: server.baseUrl });
});
afterAll(async () => {
  await server?.close();
  await idp?.close();
});

const refused = { code: Code.Unauthenticated, reason: "REFRESH_TOKEN_INVALID", domain: "oidc.platform.test" };
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

/** A fresh identity under the organization, bound as viewer on it (and on `alsoOn`), with a token of the test's issuer. */
async function newIdentity(on: TestServer = server, org = world.org, alsoOn: string[] = []) {
  const subject = `repo:acme/refresh-${++serial}`;
  const uid = newChildUid(org);
  await on.database.db.insert(identities).values({
    uid,
    parentUid: org,
    name: "refresh",
    relationship: { claimMatch: { issuer: idp.url, subject } },
    relationshipType: RelationshipType.CLAIM_MATCH,
    issuer: idp.url,
    subject,
  });
  const bindings = [org, ...alsoOn].map((g) => ({ uid: newChildUid(g), groupUid: g, identityUid: uid, roleUid: managedRole("viewer").uid }));
  await on.database.db.insert(roleBindings).values(bindings);
  return { uid, subject, bindings: bindings.map((b) => b.uid), token: await idp.mint({ sub: subject, aud: on.baseUrl }) };
}

/** Exchanges with offline_access (in `scope` unless told otherwise); fails the test on an error. */
async function exchangeOffline(protocol: Protocol, token: string, request: { scope?: string; scopes?: string[]; aud?: string[] } = { scope: "offline_access" }, on = server) {
  const out = await call(protocol, on.baseUrl, exchange, request, bearer(token));
  expect(out.error, out.error ? `${Code[out.error.code]}: ${out.error.message}` : "").toBeUndefined();
  return out.message!;
}

/** Refreshes; fails the test on an error. */
async function refreshOk(protocol: Protocol, refreshToken: string, request: { aud?: string[] } = {}) {
  const out = await call(protocol, server.baseUrl, exchangeRefresh, request, bearer(refreshToken));
  expect(out.error, out.error ? `${Code[out.error.code]}: ${out.error.message}` : "").toBeUndefined();
  const pair = out.message!;
  return { access: pair.token!.token, accessExpiry: timestampDate(pair.token!.expiry!), refresh: pair.refreshToken!.token, refreshExpiry: timestampDate(pair.refreshToken!.expiry!) };
}

const refresh = (protocol: Protocol, refreshToken: string, request: { aud?: string[] } = {}) =>
  call(protocol, server.baseUrl, exchangeRefresh, request, bearer(refreshToken));

/** Whether an access token is accepted on an API call. */
async function works(protocol: Protocol, access: string): Promise<boolean> {
  const out = await call(protocol, server.baseUrl, GroupsService.method.getGroup, { uid: world.org }, bearer(access));
  if (out.error) expect(Code[out.error.code], out.error.message).toBe(Code[Code.Unauthenticated]);
  return !out.error;
}

async function rowOf(token: string) {
  const [row] = await server.database.db.select().from(refreshTokens).where(eq(refreshTokens.tokenHash, refreshTokenHash(token)));
  return row;
}

describe.each(protocols)("Exchange with offline_access [%s]", (protocol) => {
  it("returns an opaque refresh token, stored only as its hash, bound to the identity and the audience, for 30 days", async () => {
    const who = await newIdentity();
    const before = Date.now();
    const raw = await exchangeOffline(protocol, who.token);
    expect(decodeJwt(raw.token).sub).toBe(who.uid);
    expect(raw.refreshToken).toMatch(/^cgrt_[A-Za-z0-9_-]{43}$/);
    const row = (await rowOf(raw.refreshToken))!;
    expect(row).toMatchObject({ identityUid: who.uid, audience: [], upstreamIssuer: idp.url, upstreamSubject: who.subject, usedTime: null, revokeTime: null });
    expect(row.chainId).toBe(row.id);
    expect(JSON.stringify(row)).not.toContain(raw.refreshToken.slice(5));
    expect(row.expireTime.getTime()).toBeGreaterThanOrEqual(before + 30 * DAY * 1000 - 1000);
    expect(row.expireTime.getTime()).toBeLessThanOrEqual(Date.now() + 30 * DAY * 1000 + 1000);
  });

  it("is asked for in `scopes` as well, or among other scope words; one per exchange", async () => {
    const who = await newIdentity();
    const a = await exchangeOffline(protocol, who.token, { scopes: ["offline_access"] });
    const b = await exchangeOffline(protocol, who.token, { scope: " offline_access  " });
    expect(a.refreshToken).not.toBe("");
    expect(b.refreshToken).not.toBe("");
    expect(a.refreshToken).not.toBe(b.refreshToken);
    expect((await rowOf(a.refreshToken))!.chainId).not.toBe((await rowOf(b.refreshToken))!.chainId);
  });

  it("is not returned unless asked for", async () => {
    const who = await newIdentity();
    const out = await call(protocol, server.baseUrl, exchange, {}, bearer(who.token));
    expect(out.message?.refreshToken).toBe("");
    expect(await server.database.db.select().from(refreshTokens).where(eq(refreshTokens.identityUid, who.uid))).toEqual([]);
  });
});

describe.each(protocols)("ExchangeRefreshToken [%s]", (protocol) => {
  it("answers a new access token for the same identity, audience and upstream token, and a new refresh token", async () => {
    const who = await newIdentity();
    const first = await exchangeOffline(protocol, who.token, { scope: "offline_access", aud: [server.baseUrl] });
    const next = await refreshOk(protocol, first.refreshToken);
    const claims = decodeJwt(next.access);
    expect(claims).toMatchObject({ iss: server.baseUrl, sub: who.uid, aud: [server.baseUrl], act: { iss: idp.url, sub: who.subject } });
    expect(claims.exp! - claims.iat!).toBe(3600);
    expect(next.accessExpiry.getTime() / 1000).toBe(claims.exp);
    expect(next.refresh).toMatch(/^cgrt_/);
    expect(next.refresh).not.toBe(first.refreshToken);
    expect(next.refreshExpiry.getTime()).toBeGreaterThan(Date.now() + 29 * DAY * 1000);
    expect(await works(protocol, next.access)).toBe(true);
    // The audience it was bound to may be asked for again, or left out.
    const again = await refreshOk(protocol, next.refresh, { aud: [server.baseUrl] });
    expect(decodeJwt(again.access).aud).toEqual([server.baseUrl]);
  });

  it("keeps the default audience (this server's, as a string) when the exchange named none", async () => {
    const who = await newIdentity();
    const next = await refreshOk(protocol, (await exchangeOffline(protocol, who.token)).refreshToken);
    expect(decodeJwt(next.access).aud).toBe(server.baseUrl);
  });

  it("uses the presented token up: exchange, refresh twice, and reusing the first revokes the whole chain", async () => {
    const who = await newIdentity();
    const r0 = (await exchangeOffline(protocol, who.token)).refreshToken;
    const other = (await exchangeOffline(protocol, who.token)).refreshToken; // another chain of the same identity
    const r1 = await refreshOk(protocol, r0);
    const r2 = await refreshOk(protocol, r1.refresh);
    assertError(protocol, (await refresh(protocol, r0)).error!, refused);
    // The latest token of the chain stops working too, and so do the used ones.
    assertError(protocol, (await refresh(protocol, r2.refresh)).error!, refused);
    assertError(protocol, (await refresh(protocol, r1.refresh)).error!, refused);
    const chain = await server.database.db.select().from(refreshTokens).where(eq(refreshTokens.chainId, (await rowOf(r0))!.chainId));
    expect(chain).toHaveLength(3);
    for (const row of chain) expect(row.revokeTime).not.toBeNull();
    // Another chain is not affected.
    await refreshOk(protocol, other);
  });

  it("refuses a token used once, even without a successor being presented", async () => {
    const who = await newIdentity();
    const r0 = (await exchangeOffline(protocol, who.token)).refreshToken;
    const r1 = await refreshOk(protocol, r0);
    assertError(protocol, (await refresh(protocol, r0)).error!, refused);
    assertError(protocol, (await refresh(protocol, r1.refresh)).error!, refused);
  });

  it("refuses an expired token with the answer of an unknown one", async () => {
    const who = await newIdentity();
    const r0 = (await exchangeOffline(protocol, who.token)).refreshToken;
    await server.database.db
      .update(refreshTokens)
      .set({ expireTime: sql`now() - interval '1 second'` })
      .where(eq(refreshTokens.tokenHash, refreshTokenHash(r0)));
    const expired = (await refresh(protocol, r0)).error!;
    const unknown = (await refresh(protocol, `cgrt_${"A".repeat(43)}`)).error!;
    assertError(protocol, expired, refused);
    assertError(protocol, unknown, refused);
    expect(expired.message).toBe(unknown.message);
  });

  it("refuses an audience other than the bound one without using the token up", async () => {
    const who = await newIdentity();
    const r0 = (await exchangeOffline(protocol, who.token)).refreshToken;
    const out = await refresh(protocol, r0, { aud: ["https://elsewhere.example"] });
    assertError(protocol, out.error!, { code: Code.InvalidArgument });
    expect(detail(out.error!, BadRequestSchema)!.fieldViolations.map((v) => v.field)).toEqual(["aud[0]"]);
    await refreshOk(protocol, r0);
  });

  it("ends with the identity", async () => {
    const who = await newIdentity();
    const r0 = (await exchangeOffline(protocol, who.token)).refreshToken;
    const del = await call(protocol, server.baseUrl, IdentitiesService.method.deleteIdentity, { uid: who.uid }, world.auth("owner"));
    expect(del.error, del.error?.message).toBeUndefined();
    expect(await rowOf(r0)).toBeUndefined();
    assertError(protocol, (await refresh(protocol, r0)).error!, refused);
  });

  it("ends with the identity's last role binding, for good", async () => {
    const who = await newIdentity(server, world.org, [world.team]);
    const r0 = (await exchangeOffline(protocol, who.token)).refreshToken;
    const unbind = async (uid: string) => {
      const out = await call(protocol, server.baseUrl, RoleBindingsService.method.deleteRoleBinding, { uid }, world.auth("owner"));
      expect(out.error, out.error?.message).toBeUndefined();
    };
    await unbind(who.bindings[1]!);
    const r1 = await refreshOk(protocol, r0); // one binding left: still works
    await unbind(who.bindings[0]!);
    expect(await server.database.db.select().from(refreshTokens).where(eq(refreshTokens.identityUid, who.uid))).toEqual([]);
    assertError(protocol, (await refresh(protocol, r1.refresh)).error!, refused);
    // A binding given again later does not bring them back.
    await server.database.db.insert(roleBindings).values({ uid: newChildUid(world.org), groupUid: world.org, identityUid: who.uid, roleUid: managedRole("viewer").uid });
    assertError(protocol, (await refresh(protocol, r1.refresh)).error!, refused);
  });

  it("does not work for an identity that holds no binding or is deactivated, and is not used up by trying", async () => {
    const who = await newIdentity();
    const r0 = (await exchangeOffline(protocol, who.token)).refreshToken;
    // Straight in the table: past the trigger, as if two deletions had raced (see migration refresh_tokens_end).
    await server.database.db.execute(sql`alter table role_bindings disable trigger role_bindings_end_refresh_tokens`);
    try {
      await server.database.db.delete(roleBindings).where(eq(roleBindings.identityUid, who.uid));
    } finally {
      await server.database.db.execute(sql`alter table role_bindings enable trigger role_bindings_end_refresh_tokens`);
    }
    assertError(protocol, (await refresh(protocol, r0)).error!, refused);
    expect((await rowOf(r0))!.usedTime).toBeNull();

    const inactive = await newIdentity();
    const r1 = (await exchangeOffline(protocol, inactive.token)).refreshToken;
    await server.database.db.update(identities).set({ active: false }).where(eq(identities.uid, inactive.uid));
    assertError(protocol, (await refresh(protocol, r1)).error!, refused);
    await server.database.db.update(identities).set({ active: true }).where(eq(identities.uid, inactive.uid));
    await refreshOk(protocol, r1);
  });
});

describe("Refresh tokens never appear in logs or events", () => {
  afterEach(() => {
    vi.restoreAllMocks();
    setLogLevel("silent");
  });

  it("through a whole flow, logged at debug level", async () => {
    const lines: string[] = [];
    vi.spyOn(process.stderr, "write").mockImplementation((chunk: string | Uint8Array) => {
      lines.push(String(chunk));
      return true;
    });
    setLogLevel("debug");
    const who = await newIdentity();
    const r0 = (await exchangeOffline("connect-json", who.token)).refreshToken;
    const r1 = await refreshOk("rest", r0);
    const r2 = await refreshOk("grpc", r1.refresh);
    await refresh("connect-json", r0); // reuse: the chain is revoked, and logged
    await refresh("rest", "cgrt_unknown");
    vi.restoreAllMocks();
    setLogLevel("silent");
    const all = lines.join("");
    expect(all).toContain("refresh token reused");
    for (const t of [r0, r1.refresh, r2.refresh]) {
      expect(all).not.toContain(t);
      expect(all).not.toContain(t.slice(5));
    }
    const events = JSON.stringify(await server.database.db.select().from(outboxEvents));
    for (const t of [r0, r1.refresh, r2.refresh]) expect(events).not.toContain(t.slice(5));
  });
});

describe("Refused refreshes count against the budget of refused exchanges", () => {
  const few = { burst: 3, perMinute: 1 };
  const many = { burst: 1000, perMinute: 1000 };
  const servers: TestServer[] = [];
  afterAll(async () => {
    for (const s of servers) await s.close();
  });

  it.each(["connect-json", "rest"] as const)("by the connection's address [%s]", async (protocol) => {
    const limited = await startTestServer({ rateLimits: { exchangeFailures: { bySubject: many, byAddress: few } } });
    servers.push(limited);
    const org = (await seedWorld(limited, "limited")).org;
    const who = await newIdentity(limited, org);
    const good = (await exchangeOffline(protocol, who.token, { scope: "offline_access" }, limited)).refreshToken;
    for (let i = 0; i < 3; i++) {
      const out = await call(protocol, limited.baseUrl, exchangeRefresh, {}, bearer(`cgrt_guess-${i}`));
      assertError(protocol, out.error!, refused);
    }
    const exhausted = { code: Code.ResourceExhausted, reason: "TOO_MANY_FAILURES" };
    assertError(protocol, (await call(protocol, limited.baseUrl, exchangeRefresh, {}, bearer(good))).error!, exhausted);
    // One budget for both methods.
    assertError(protocol, (await call(protocol, limited.baseUrl, exchange, {}, bearer(who.token))).error!, exhausted);
    // Nothing was used up by the refused attempt.
    expect((await limited.database.db.select().from(refreshTokens).where(eq(refreshTokens.tokenHash, refreshTokenHash(good))))[0]!.usedTime).toBeNull();
  });
});

describe("a refresh token chain's lifetime", () => {
  it.each(["connect-json", "rest"] as const)("ends a fixed time after the exchange that started it, however often it is used [%s]", async (protocol) => {
    const brief = await startTestServer({ refreshTokenTtlSeconds: 4 });
    try {
      const org = (await seedWorld(brief, "brief")).org;
      const who = await newIdentity(brief, org);
      const started = Date.now();
      const raw = await exchangeOffline(protocol, who.token, { scope: "offline_access" }, brief);
      await new Promise((r) => setTimeout(r, 2000));
      const out = await call(protocol, brief.baseUrl, exchangeRefresh, {}, bearer(raw.refreshToken));
      expect(out.error?.message).toBeUndefined();
      // Not four seconds from this rotation: the chain's end, four seconds from the exchange.
      const end = timestampDate(out.message!.refreshToken!.expiry!).getTime();
      expect(end).toBeLessThanOrEqual(started + 4000 + 1000);
      expect(timestampDate(out.message!.token!.expiry!).getTime()).toBeLessThanOrEqual(end);
      await new Promise((r) => setTimeout(r, Math.max(0, end - Date.now()) + 500));
      assertError(protocol, (await call(protocol, brief.baseUrl, exchangeRefresh, {}, bearer(out.message!.refreshToken!.token))).error!, refused);
    } finally {
      await brief.close();
    }
  });

  it("REFRESH_TOKEN_TTL_HOURS (refreshTokenTtlSeconds): the exchange's and each rotation's", async () => {
    const short = await startTestServer({ refreshTokenTtlSeconds: 3600 });
    try {
      const org = (await seedWorld(short, "short")).org;
      const who = await newIdentity(short, org);
      const raw = await exchangeOffline("connect-json", who.token, { scope: "offline_access" }, short);
      const [row] = await short.database.db.select().from(refreshTokens).where(eq(refreshTokens.tokenHash, refreshTokenHash(raw.refreshToken)));
      expect(Math.abs(row!.expireTime.getTime() - Date.now() - 3600_000)).toBeLessThan(60_000);
      const out = await call("connect-json", short.baseUrl, exchangeRefresh, {}, bearer(raw.refreshToken));
      expect(Math.abs(timestampDate(out.message!.refreshToken!.expiry!).getTime() - Date.now() - 3600_000)).toBeLessThan(60_000);
    } finally {
      await short.close();
    }
  });
});

runContractCases("ExchangeRefreshToken refused", () => server.baseUrl, [
  contractCase({ name: "no token", method: exchangeRefresh, request: {}, error: { code: Code.Unauthenticated, reason: "TOKEN_MISSING" } }),
  contractCase({ name: "unknown token", method: exchangeRefresh, request: {}, headers: bearer(`cgrt_${"x".repeat(43)}`), error: refused }),
  contractCase({ name: "not a refresh token at all", method: exchangeRefresh, request: {}, headers: bearer("garbage"), error: refused }),
  contractCase({ name: "an access token of this server", method: exchangeRefresh, request: {}, headers: () => world.auth("owner"), error: refused }),
  contractCase({
    name: "an audience other than this server's",
    method: exchangeRefresh,
    request: { aud: ["https://elsewhere.example"] },
    headers: bearer("cgrt_whatever"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "aud[0]" }] } }] },
  }),
  contractCase({
    name: "a cap naming no capability, scopes that are neither groups nor offline_access",
    method: exchangeRefresh,
    request: { cap: ["groups.lsit"], scope: "openid", scopes: ["registry.pull"] },
    headers: bearer("cgrt_whatever"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "scope" }, { field: "scopes[0]" }, { field: "cap[0]" }] } }] },
  }),
]);

runContractCases("Exchange asking for a refresh token, refused", () => server.baseUrl, [
  contractCase({
    name: "a scope that is neither a group nor offline_access (openid)",
    method: exchange,
    request: { scope: "openid offline_access" },
    headers: bearer("unused"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "scope" }] } }] },
  }),
  contractCase({
    name: "a `scopes` entry that is neither a group nor offline_access",
    method: exchange,
    request: { scopes: ["offline_access", "openid"] },
    headers: bearer("unused"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "scopes[1]" }] } }] },
  }),
]);
