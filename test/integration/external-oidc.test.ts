// The external OIDC verifier against a fake issuer on 127.0.0.1 and a real database: discovery and JWKS
// fetching (https/loopback rule, issuer check, caps, timeouts, caches, key rotation), what is fetched for
// which `iss` (nothing for issuers no identity references), exact and pattern matching, StaticKeys, and
// the mapping of every failure to UNAUTHENTICATED by the authenticator. Also this server's own signing-key
// rotation, through the running server and through `npm run keys:rotate`.
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Code, ConnectError } from "@connectrpc/connect";
import { create, toJson } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { base64url, decodeProtectedHeader, SignJWT } from "jose";
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from "vitest";
import { IdentitySchema, RelationshipType, ServicePrincipal, type Identity } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { openPglite } from "../../src/db/client.js";
import { groups, identities, signingKeys } from "../../src/db/schema/index.js";
import { createIdentityDirectory } from "../../src/iam/directory.js";
import { createAuthenticator, createKeyStore, mintToken, type Authenticated, type IdentityDirectory, type KeyStore } from "../../src/kernel/auth/index.js";
import { createExternalVerifier, ExternalTokenError, type ExternalVerifierOptions } from "../../src/kernel/auth/external.js";
import { setLogLevel } from "../../src/kernel/log.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { call } from "../contract/harness.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";
import { startFakeIssuer, staticKeyPair, type FakeIssuer } from "../support/fake-issuer.js";
import { startTestServer } from "../support/server.js";

let database: TestDatabase;
let idp: FakeIssuer;
let stranger: FakeIssuer; // an issuer no identity references
let keys: KeyStore;
let directory: IdentityDirectory;
/** The audience the verifiers here accept from identities that name none (the operator's list). */
const AUDIENCE = "https://platform.example";

beforeAll(async () => {
  setLogLevel("silent");
  database = await openTestDatabase();
  keys = await createKeyStore(database.db);
  directory = createIdentityDirectory(database.db);
  idp = await startFakeIssuer({ audience: AUDIENCE });
  stranger = await startFakeIssuer({ path: "/tenant", audience: AUDIENCE });
});
afterAll(async () => {
  await idp?.close();
  await stranger?.close();
  await database?.dispose();
});
afterEach(() => {
  idp.reset();
  stranger.reset();
});

/**
 * Inserts an identity with the relationship as CreateIdentity stores it (JSON + exact issuer/subject
 * columns): root-level, or under a new organization of that name.
 */
async function insertIdentity(relationship: Identity["relationship"], organization?: string): Promise<string> {
  let parentUid: string | null = null;
  if (organization) {
    parentUid = newRootUid();
    await database.db.insert(groups).values({ uid: parentUid, parentUid: null, name: organization });
  }
  const uid = parentUid ? newChildUid(parentUid) : newRootUid();
  const json = toJson(IdentitySchema, create(IdentitySchema, { relationship })) as Record<string, unknown>;
  let issuer: string | null = null;
  let subject: string | null = null;
  if (relationship.case === "claimMatch") {
    if (relationship.value.iss.case === "issuer") issuer = relationship.value.iss.value;
    if (relationship.value.sub.case === "subject") subject = relationship.value.sub.value;
  } else if (relationship.case === "staticKeys") {
    issuer = relationship.value.issuer;
    subject = relationship.value.subject;
  }
  const type = {
    claimMatch: RelationshipType.CLAIM_MATCH,
    staticKeys: RelationshipType.STATIC,
    awsIdentity: RelationshipType.AWS_IDENTITY,
    servicePrincipal: RelationshipType.SERVICE_PRINCIPAL,
  }[relationship.case!];
  await database.db.insert(identities).values({ uid, parentUid, name: "test", relationship: json, relationshipType: type, issuer, subject });
  return uid;
}

const claimMatch = (value: Record<string, unknown>): Identity["relationship"] =>
  ({ case: "claimMatch", value: create(IdentitySchema, { relationship: { case: "claimMatch", value: value as never } }).relationship.value }) as Identity["relationship"];

let subjectCounter = 0;
const freshSubject = () => `subject-${Date.now()}-${++subjectCounter}`;

function verifier(over: Partial<ExternalVerifierOptions> = {}) {
  return createExternalVerifier({ directory, allowInsecureLoopback: true, jwksCooldownMs: 0, audiences: [AUDIENCE], ...over });
}

async function failure(p: Promise<unknown>): Promise<ExternalTokenError> {
  const err = await p.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err, "expected a refusal").toBeInstanceOf(ExternalTokenError);
  return err as ExternalTokenError;
}

const unsigned = (header: object, payload: object) =>
  `${base64url.encode(JSON.stringify(header))}.${base64url.encode(JSON.stringify(payload))}.`;

describe("direct use: exact issuer and subject", () => {
  it("accepts a token naming exactly one identity, and fetches discovery and keys once", async () => {
    const sub = freshSubject();
    const uid = await insertIdentity(claimMatch({ iss: { case: "issuer", value: idp.url }, sub: { case: "subject", value: sub } }));
    const v = verifier();
    const before = { ...idp.requests };
    for (const alg of ["RS256", "ES256", "RS256"] as const) {
      const [found, ...more] = await v.verify(await idp.mint({ sub }, { alg }), idp.url);
      expect(more).toEqual([]);
      expect(found).toMatchObject({ identityUid: uid, issuer: idp.url, subject: sub });
    }
    expect(idp.requests.discovery - before.discovery).toBe(1);
    expect(idp.requests.jwks - before.jwks).toBe(1);
  });

  it("fetches nothing for an issuer no identity references, whatever the token says", async () => {
    const v = verifier();
    const err = await failure(v.verify(await stranger.mint({ sub: "anyone" }), stranger.url));
    expect(err.code).toBe("NOT_ACCEPTED");
    expect(stranger.requests).toEqual({ discovery: 0, jwks: 0 });
  });

  it("fetches nothing for a referenced issuer when the subject names no identity", async () => {
    const v = verifier();
    const before = { ...idp.requests };
    expect((await failure(v.verify(await idp.mint({ sub: freshSubject() }), idp.url))).code).toBe("NOT_ACCEPTED");
    expect(idp.requests).toEqual(before);
  });

  it("verifies a token against every identity with its issuer and subject: root-level first, then oldest", async () => {
    // Organizations cannot stop each other's identities from working by creating one with the same issuer
    // and subject: the token assumes each identity whose relationship it satisfies.
    const sub = freshSubject();
    const exact = { iss: { case: "issuer", value: idp.url }, sub: { case: "subject", value: sub } };
    const older = await insertIdentity(claimMatch(exact), "acme");
    const newer = await insertIdentity(claimMatch(exact), "globex");
    const person = await insertIdentity(claimMatch(exact));
    const picky = await insertIdentity(claimMatch({ ...exact, claims: { repository: "acme/app" } }), "initech");
    const found = await verifier().verify(await idp.mint({ sub }), idp.url);
    expect(found.map((f) => f.identityUid)).toEqual([person, older, newer]);
    expect(found.map((f) => f.homeGroup)).toEqual([undefined, expect.any(String), expect.any(String)]);
    const all = await verifier().verify(await idp.mint({ sub, repository: "acme/app" }), idp.url);
    expect(all.map((f) => f.identityUid)).toEqual([person, older, newer, picky]);
  });

  it("checks the identity's audience and claims", async () => {
    const sub = freshSubject();
    await insertIdentity(
      claimMatch({
        iss: { case: "issuer", value: idp.url },
        sub: { case: "subject", value: sub },
        aud: { case: "audience", value: "platform" },
        claims: { repository: "acme/app" },
      }),
    );
    const v = verifier();
    await v.verify(await idp.mint({ sub, aud: ["x", "platform"], repository: "acme/app" }), idp.url);
    expect((await failure(v.verify(await idp.mint({ sub, repository: "acme/app" }), idp.url))).code).toBe("NOT_ACCEPTED");
    expect((await failure(v.verify(await idp.mint({ sub, aud: "platform", repository: "acme/other" }), idp.url))).code).toBe("NOT_ACCEPTED");
  });
});

describe("token checks", () => {
  let sub: string;
  beforeAll(async () => {
    sub = freshSubject();
    await insertIdentity(claimMatch({ iss: { case: "issuer", value: idp.url }, sub: { case: "subject", value: sub } }));
  });

  it("refuses unsigned and HMAC tokens before fetching anything", async () => {
    const v = verifier();
    const before = { ...idp.requests };
    const now = Math.floor(Date.now() / 1000);
    const none = unsigned({ alg: "none" }, { iss: idp.url, sub, iat: now, exp: now + 600 });
    expect((await failure(v.verify(none, idp.url))).code).toBe("TOKEN_INVALID");
    const hs = await new SignJWT({ sub }).setProtectedHeader({ alg: "HS256" }).setIssuer(idp.url).setIssuedAt().setExpirationTime("5m").sign(new Uint8Array(32));
    expect((await failure(v.verify(hs, idp.url))).code).toBe("TOKEN_INVALID");
    expect(idp.requests).toEqual(before);
  });

  it("needs exp, iat and sub; refuses expired and not-yet-valid tokens", async () => {
    const v = verifier();
    const now = Math.floor(Date.now() / 1000);
    expect((await failure(v.verify(await idp.mint({ sub }, { exp: undefined }), idp.url))).code).toBe("TOKEN_INVALID");
    expect((await failure(v.verify(await idp.mint({ sub }, { iat: undefined }), idp.url))).code).toBe("NOT_ACCEPTED");
    expect((await failure(v.verify(await idp.mint({ sub }, { ttlSeconds: -120 }), idp.url))).code).toBe("ERR_JWT_EXPIRED");
    expect((await failure(v.verify(await idp.mint({ sub, nbf: now + 600 }), idp.url))).code).toBe("NOT_ACCEPTED");
    // Within the clock tolerance (30 s) an expiry just past is still accepted.
    await v.verify(await idp.mint({ sub }, { exp: now - 5 }), idp.url);
  });

  it("refuses a token signed by a key the issuer does not publish", async () => {
    const v = verifier();
    expect((await failure(v.verify(await idp.mint({ sub }, { unpublishedKey: true }), idp.url))).code).toBe("NOT_ACCEPTED");
    expect((await failure(v.verify(await idp.mint({ sub }, { unpublishedKey: true, kid: "unknown" }), idp.url))).code).toBe("NOT_ACCEPTED");
    // Such tokens do not make the issuer look unavailable: a good token still verifies.
    await v.verify(await idp.mint({ sub }), idp.url);
  });

  it("refuses a token whose iss differs from the issuer it is presented for", async () => {
    expect((await failure(verifier().verify(await idp.mint({ sub }), "https://other.example"))).code).toBe("TOKEN_INVALID");
  });

  it("refuses garbage and oversized tokens", async () => {
    const v = verifier();
    expect((await failure(v.verify("not-a-jwt", idp.url))).code).toBe("TOKEN_INVALID");
    expect((await failure(v.verify("a.b.c", idp.url))).code).toBe("TOKEN_INVALID");
    expect((await failure(v.verify(await idp.mint({ sub, pad: "x".repeat(20_000) }), idp.url))).code).toBe("TOKEN_INVALID");
  });

  it("follows the issuer's key rotation", async () => {
    const v = verifier();
    const old = await idp.mint({ sub });
    await v.verify(old, idp.url);
    await idp.rotate("RS256");
    await v.verify(await idp.mint({ sub }), idp.url); // unknown kid: the JWKS is fetched again
    expect((await failure(v.verify(old, idp.url))).code).toBe("NOT_ACCEPTED"); // the old key is gone
  });
});

describe("discovery and JWKS fetching", () => {
  let sub: string;
  beforeAll(async () => {
    sub = freshSubject();
    await insertIdentity(claimMatch({ iss: { case: "issuer", value: idp.url }, sub: { case: "subject", value: sub } }));
  });
  const refused = async (v: ReturnType<typeof verifier>) => expect((await failure(v.verify(await idp.mint({ sub }), idp.url))).code).toBe("NOT_ACCEPTED");

  it("refuses a discovery document that names another issuer, and remembers the failure for a while", async () => {
    // The clock stands still (only Date is faked; timers and I/O run), so a loaded machine cannot let the
    // failure's time pass between the calls that must find it remembered; the test moves it on itself.
    vi.useFakeTimers({ toFake: ["Date"], now: Date.now() });
    try {
      idp.knobs.discoveryIssuer = idp.url + "/";
      const v = verifier({ failureTtlMs: 300 });
      const before = idp.requests.discovery;
      await refused(v);
      await refused(v);
      expect(idp.requests.discovery - before).toBe(1); // negative cache
      idp.reset();
      await refused(v); // still cached
      vi.setSystemTime(Date.now() + 350);
      await v.verify(await idp.mint({ sub }), idp.url); // tried again after the failure TTL
      expect(idp.requests.discovery - before).toBe(2);
    } finally {
      vi.useRealTimers();
    }
  });

  it("refuses plain http when loopback issuers are not allowed, without fetching", async () => {
    const before = { ...idp.requests };
    await refused(verifier({ allowInsecureLoopback: false }));
    expect(idp.requests).toEqual(before);
  });

  it("refuses a jwks_uri on plain http to a non-loopback host, without fetching it", async () => {
    idp.knobs.jwksUri = "http://169.254.169.254/latest/meta-data";
    const seen: string[] = [];
    const spy: typeof fetch = (input, init) => {
      seen.push(String(input));
      return fetch(input, init);
    };
    await refused(verifier({ fetch: spy }));
    expect(seen).toEqual([`${idp.url}/.well-known/openid-configuration`]);
  });

  it("does not follow redirects", async () => {
    idp.knobs.redirectDiscoveryTo = `${stranger.url}/.well-known/openid-configuration`;
    await refused(verifier());
    expect(stranger.requests.discovery).toBe(0);
  });

  it("caps the size of discovery and JWKS responses", async () => {
    idp.knobs.padBytes = 100_000;
    await refused(verifier({ maxDiscoveryBytes: 64 * 1024 }));
    await refused(verifier({ maxDiscoveryBytes: 1024 * 1024, maxJwksBytes: 64 * 1024 }));
    await verifier({ maxDiscoveryBytes: 1024 * 1024, maxJwksBytes: 1024 * 1024 }).verify(await idp.mint({ sub }), idp.url);
  });

  it("times out a slow issuer", async () => {
    idp.knobs.delayMs = 2_000;
    const start = Date.now();
    await refused(verifier({ fetchTimeoutMs: 200 }));
    expect(Date.now() - start).toBeLessThan(1_500);
  });

  it("refuses an issuer whose endpoints fail", async () => {
    idp.knobs.discoveryStatus = 500;
    await refused(verifier());
    idp.reset();
    idp.knobs.jwksStatus = 503;
    await refused(verifier());
  });

  it("turns a fetch that throws anything (a TypeError) into a refusal", async () => {
    const broken: typeof fetch = () => {
      throw new TypeError("fetch failed");
    };
    await refused(verifier({ fetch: broken }));
  });
});

describe("assume (token exchange): the named identity's relationship", () => {
  it("matches issuer and subject patterns, anchored", async () => {
    const uid = await insertIdentity(
      claimMatch({
        iss: { case: "issuerPattern", value: "http://127\\.0\\.0\\.1:[0-9]+" },
        sub: { case: "subjectPattern", value: "repo:acme/.*" },
        aud: { case: "audiencePattern", value: "sts\\..*" },
        claimPatterns: { ref: "refs/heads/(main|release-.*)" },
      }),
    );
    const v = verifier();
    const ok = await v.assume(await idp.mint({ sub: "repo:acme/app", aud: "sts.test", ref: "refs/heads/main" }), uid);
    expect(ok).toMatchObject({ identityUid: uid, issuer: idp.url, subject: "repo:acme/app" });
    for (const claims of [
      { sub: "xrepo:acme/app", aud: "sts.test", ref: "refs/heads/main" },
      { sub: "repo:acme/app", aud: "xsts.test", ref: "refs/heads/main" },
      { sub: "repo:acme/app", aud: "sts.test", ref: "refs/heads/mainline" },
    ]) {
      expect((await failure(v.assume(await idp.mint(claims), uid))).code).toBe("NOT_ACCEPTED");
    }
    // A pattern identity cannot be assumed directly on API calls (exact issuer and subject only).
    expect((await failure(v.verify(await idp.mint({ sub: "repo:acme/app", aud: "sts.test", ref: "refs/heads/main" }), idp.url))).code).toBe("NOT_ACCEPTED");
    // The issuer pattern is anchored too: the stranger's issuer has a path and is never contacted.
    expect((await failure(v.assume(await stranger.mint({ sub: "repo:acme/app", aud: "sts.test", ref: "refs/heads/main" }), uid))).code).toBe("NOT_ACCEPTED");
    expect(stranger.requests.discovery).toBe(0);
  });

  it("answers the same for an unknown identity and a non-matching one", async () => {
    const uid = await insertIdentity(claimMatch({ iss: { case: "issuer", value: idp.url }, sub: { case: "subject", value: freshSubject() } }));
    const v = verifier();
    const token = await idp.mint({ sub: "someone-else" });
    const a = await failure(v.assume(token, uid));
    const b = await failure(v.assume(token, `${uid}0`));
    expect([a.code, b.code]).toEqual(["NOT_ACCEPTED", "NOT_ACCEPTED"]);
    expect((await failure(v.assume("garbage", uid))).code).toBe("TOKEN_INVALID");
    expect((await failure(v.assume("garbage", `${uid}0`))).code).toBe("TOKEN_INVALID");
  });

  it("has no verifier for AWS and service-principal identities", async () => {
    const aws = await insertIdentity({ case: "awsIdentity", value: create(IdentitySchema, { relationship: { case: "awsIdentity", value: { awsAccount: "123456789012", awsArn: { case: "arn", value: "arn:aws:iam::123456789012:role/x" } } } }).relationship.value as never });
    const sp = await insertIdentity({ case: "servicePrincipal", value: ServicePrincipal.INGESTER });
    const v = verifier();
    expect((await failure(v.assume("anything", aws))).code).toBe("NO_VERIFIER");
    expect((await failure(v.assume(await idp.mint({ sub: "x" }), sp))).code).toBe("NO_VERIFIER");
  });

  it("verifies this server's own tokens with its own keys, fetching nothing", async () => {
    const issuer = "https://self.invalid";
    const user = newRootUid();
    const uid = await insertIdentity(claimMatch({ iss: { case: "issuer", value: issuer }, sub: { case: "subject", value: user } }));
    const seen: string[] = [];
    const v = verifier({ self: { issuer, keys }, audiences: [issuer], fetch: (i) => (seen.push(String(i)), Promise.reject(new Error("no"))) });
    const { token } = await mintToken(keys, { issuer, subject: user, audience: issuer, ttlSeconds: 60 });
    expect(await v.assume(token, uid)).toMatchObject({ identityUid: uid, issuer, subject: user });
    expect(seen).toEqual([]);
  });
});

describe("audience: an identity that names none takes the operator's list (RFC 8725 3.9)", () => {
  const other = "https://other-app.example";

  it("refuses a token for another application, or for none, directly and by exchange", async () => {
    const sub = freshSubject();
    const uid = await insertIdentity(claimMatch({ iss: { case: "issuer", value: idp.url }, sub: { case: "subject", value: sub } }));
    const v = verifier({ audiences: [AUDIENCE, "https://second.example"] });
    for (const aud of [other, [other, "x"], undefined]) {
      const token = await idp.mint({ sub, aud });
      expect((await failure(v.verify(token, idp.url))).code, JSON.stringify(aud)).toBe("NOT_ACCEPTED");
      expect((await failure(v.assume(token, uid))).code, JSON.stringify(aud)).toBe("NOT_ACCEPTED");
    }
    for (const aud of [AUDIENCE, [other, "https://second.example"]]) {
      const token = await idp.mint({ sub, aud });
      expect((await v.verify(token, idp.url)).map((f) => f.identityUid)).toEqual([uid]);
      expect((await v.assume(token, uid)).identityUid).toBe(uid);
    }
  });

  it("holds an identity that names its own audience to that one alone", async () => {
    const sub = freshSubject();
    const uid = await insertIdentity(
      claimMatch({ iss: { case: "issuer", value: idp.url }, sub: { case: "subject", value: sub }, aud: { case: "audience", value: other } }),
    );
    const v = verifier();
    expect((await v.assume(await idp.mint({ sub, aud: other }), uid)).identityUid).toBe(uid);
    expect((await failure(v.assume(await idp.mint({ sub, aud: AUDIENCE }), uid))).code).toBe("NOT_ACCEPTED");
  });

  it("applies to StaticKeys identities with no audiences of their own", async () => {
    const pair = await staticKeyPair("ES256");
    const issuer = "https://static-aud.example";
    const subject = freshSubject();
    const uid = await insertIdentity({ case: "staticKeys", value: create(IdentitySchema, { relationship: { case: "staticKeys", value: { issuer, subject, issuerKeys: pair.issuerKeys } } }).relationship.value as never });
    const v = verifier();
    expect((await failure(v.verify(await pair.sign({ iss: issuer, sub: subject, aud: other }), issuer))).code).toBe("NOT_ACCEPTED");
    expect((await failure(v.assume(await pair.sign({ iss: issuer, sub: subject }), uid))).code).toBe("NOT_ACCEPTED");
    expect((await v.assume(await pair.sign({ iss: issuer, sub: subject, aud: AUDIENCE }), uid)).identityUid).toBe(uid);
  });
});

describe("verifyIdToken (login through an identity provider): the client's issuer and client id", () => {
  const client = { issuer: "", clientId: "client-x" };
  beforeAll(() => {
    client.issuer = idp.url;
  });
  const of = (c: { issuer: string; clientId: string } | undefined) => () => Promise.resolve(c);

  it("verifies an ID token of the client, with the same discovery and key caches as other tokens", async () => {
    const v = verifier();
    const before = { ...idp.requests };
    for (const alg of ["RS256", "ES256"] as const) {
      const got = await v.verifyIdToken(await idp.mint({ sub: "someone", aud: "client-x", groups: ["a"] }, { alg }), of(client));
      expect(got).toMatchObject({ issuer: idp.url, subject: "someone", claims: { groups: ["a"] } });
    }
    expect(await v.verifyIdToken(await idp.mint({ sub: "someone", aud: ["client-x", "other"], azp: "client-x" }), of(client))).toBeDefined();
    expect(idp.requests.discovery - before.discovery).toBe(1);
    expect(idp.requests.jwks - before.jwks).toBe(1);
  });

  it("refuses another client's token, another issuer's (fetching nothing from it), and no client at all", async () => {
    const v = verifier();
    const beforeStranger = { ...stranger.requests };
    for (const [token, c] of [
      [await idp.mint({ sub: "someone", aud: "client-y" }), client],
      [await idp.mint({ sub: "someone", aud: ["client-x", "client-y"], azp: "client-y" }), client],
      [await idp.mint({ sub: "someone", aud: AUDIENCE }), client],
      [await stranger.mint({ sub: "someone", aud: "client-x" }), client],
      [await idp.mint({ sub: "someone", aud: "client-x" }, { unpublishedKey: true }), client],
      [await idp.mint({ sub: "someone", aud: "client-x" }), undefined],
    ] as const) {
      expect((await failure(v.verifyIdToken(token, of(c)))).code).toBe("NOT_ACCEPTED");
    }
    expect(stranger.requests).toEqual(beforeStranger);
  });

  it("checks the token itself before asking for the client; plain http only when loopback issuers are allowed", async () => {
    let asked = 0;
    const counted = () => {
      asked++;
      return Promise.resolve(client);
    };
    const v = verifier();
    expect((await failure(v.verifyIdToken("garbage", counted))).code).toBe("TOKEN_INVALID");
    expect((await failure(v.verifyIdToken(await idp.mint({ sub: "someone", aud: "client-x" }, { ttlSeconds: -600 }), counted))).code).toBe("ERR_JWT_EXPIRED");
    expect(asked).toBe(0);
    const before = { ...idp.requests };
    const strict = verifier({ allowInsecureLoopback: false });
    expect((await failure(strict.verifyIdToken(await idp.mint({ sub: "someone", aud: "client-x" }), counted))).code).toBe("NOT_ACCEPTED");
    expect(idp.requests).toEqual(before);
  });
});

describe("StaticKeys identities", () => {
  it("verifies with the registered keys, honouring audiences and expiration", async () => {
    const pair = await staticKeyPair("ES256");
    const issuer = "https://static.example"; // never fetched
    const subject = freshSubject();
    const staticKeys = (extra: Record<string, unknown>) =>
      ({ case: "staticKeys", value: create(IdentitySchema, { relationship: { case: "staticKeys", value: { issuer, subject, issuerKeys: pair.issuerKeys, ...extra } as never } }).relationship.value }) as Identity["relationship"];
    const uid = await insertIdentity(staticKeys({ audiences: ["platform"], expirationTime: timestampFromDate(new Date(Date.now() + 7200_000)) }));
    const seen: string[] = [];
    const v = verifier({ fetch: (i) => (seen.push(String(i)), Promise.reject(new Error("no"))) });
    const [found] = await v.verify(await pair.sign({ iss: issuer, sub: subject, aud: "platform" }), issuer);
    expect(found).toMatchObject({ identityUid: uid, issuer, subject });
    expect(found!.identityExpiresAt).toBeGreaterThan(Date.now() / 1000);
    expect((await v.assume(await pair.sign({ iss: issuer, sub: subject, aud: ["x", "platform"] }), uid)).identityUid).toBe(uid);
    expect((await failure(v.assume(await pair.sign({ iss: issuer, sub: subject, aud: "other" }), uid))).code).toBe("NOT_ACCEPTED");
    expect((await failure(v.assume(await pair.sign({ iss: issuer, sub: "other", aud: "platform" }), uid))).code).toBe("NOT_ACCEPTED");
    const otherPair = await staticKeyPair("ES256");
    expect((await failure(v.assume(await otherPair.sign({ iss: issuer, sub: subject, aud: "platform" }), uid))).code).toBe("NOT_ACCEPTED");
    expect(seen).toEqual([]);

    const expiredSubject = freshSubject();
    const expired = await insertIdentity(
      ({ case: "staticKeys", value: create(IdentitySchema, { relationship: { case: "staticKeys", value: { issuer, subject: expiredSubject, issuerKeys: pair.issuerKeys, expirationTime: timestampFromDate(new Date(Date.now() - 1000)) } } }).relationship.value }) as Identity["relationship"],
    );
    expect((await failure(v.assume(await pair.sign({ iss: issuer, sub: expiredSubject }), expired))).code).toBe("NOT_ACCEPTED");
  });
});

describe("authenticator with the external verifier", () => {
  it("builds a principal for an external token, and answers every refusal with UNAUTHENTICATED", async () => {
    const sub = freshSubject();
    const uid = await insertIdentity(claimMatch({ iss: { case: "issuer", value: idp.url }, sub: { case: "subject", value: sub } }));
    const broken: typeof fetch = () => Promise.reject(new TypeError("boom"));
    const mk = (v: ReturnType<typeof verifier>) => createAuthenticator({ directory, keys, issuer: "https://self.invalid", audience: "https://self.invalid", external: v });
    const [{ principal }] = (await mk(verifier()).authenticate(await idp.mint({ sub }))) as [Authenticated];
    expect(principal).toMatchObject({ identityUid: uid, issuer: idp.url, subject: sub, homeGroup: undefined });
    const refusals: Array<[string, () => Promise<unknown>]> = [
      ["unknown subject", async () => mk(verifier()).authenticate(await idp.mint({ sub: "nobody" }))],
      ["unknown issuer", async () => mk(verifier()).authenticate(await stranger.mint({ sub }))],
      ["fetch throws TypeError", async () => mk(verifier({ fetch: broken })).authenticate(await idp.mint({ sub }))],
      ["expired", async () => mk(verifier()).authenticate(await idp.mint({ sub }, { ttlSeconds: -600 }))],
    ];
    for (const [name, run] of refusals) {
      const err = await run().then(() => undefined, (e: unknown) => e);
      expect(err, name).toBeInstanceOf(ConnectError);
      expect((err as ConnectError).code, name).toBe(Code.Unauthenticated);
    }
  });
});

describe("this server's signing-key rotation", () => {
  it("keeps tokens signed before rotation valid, signs new ones with the new kid, publishes both", async () => {
    const server = await startTestServer();
    try {
      const uid = newRootUid();
      await server.database.db.insert(identities).values({ uid, parentUid: null, name: "rot", relationship: {}, relationshipType: 0 });
      const before = await server.token(uid);
      const oldKid = decodeProtectedHeader(before).kid;
      const newKid = await server.keys.rotate();
      expect(newKid).not.toBe(oldKid);
      const after = await server.token(uid);
      expect(decodeProtectedHeader(after).kid).toBe(newKid);
      for (const token of [before, after]) {
        const out = await call("connect-json", server.baseUrl, GroupsService.method.getGroup, { uid: newRootUid() }, { authorization: `Bearer ${token}` });
        expect(out.error?.code).not.toBe(Code.Unauthenticated);
      }
      const jwks = (await (await fetch(`${server.baseUrl}/.well-known/jwks.json`)).json()) as { keys: Array<{ kid: string }> };
      expect(jwks.keys.map((k) => k.kid)).toEqual(expect.arrayContaining([oldKid, newKid]));
      // Another replica on the same database signs with the new key and verifies the old one.
      const replica = await createKeyStore(server.database.db);
      expect((await replica.signingKey()).kid).toBe(newKid);
      expect(await replica.verificationKey(oldKid!)).toBeDefined();
    } finally {
      await server.close();
    }
  });

  it("npm run keys:rotate rotates the configured database and prints the new kid as JSON", async () => {
    const dir = await mkdtemp(join(tmpdir(), "keys-rotate-"));
    try {
      const env = { ...process.env, DATA_DIR: dir, DATABASE_URL: "", LOG_LEVEL: "warn" };
      const run = async () => {
        const { stdout } = await promisify(execFile)("npm", ["run", "--silent", "keys:rotate"], { env, cwd: process.cwd() });
        return JSON.parse(stdout.trim()) as { kid: string; published: string[] };
      };
      const first = await run();
      const second = await run();
      expect(second.kid).not.toBe(first.kid);
      expect(second.published[0]).toBe(second.kid);
      expect(second.published).toContain(first.kid);
      const db = await openPglite(dir);
      try {
        const rows = await db.db.select().from(signingKeys);
        expect(rows).toHaveLength(3); // the first start's key, then one per rotation
        expect(rows.filter((r) => r.retireTime === null).map((r) => r.kid)).toEqual([second.kid]);
      } finally {
        await db.close();
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
