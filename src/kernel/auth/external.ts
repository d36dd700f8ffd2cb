// Verification of tokens from external OIDC issuers, for identities whose relationship is a ClaimMatch
// (keys found by OIDC discovery) or StaticKeys (keys registered on the identity).
//
// Two uses:
//   verify(token, iss)        a token presented directly on an API call (specification, Authentication rule
//                             5), or to the exchange naming no identity: every identity that names its exact
//                             issuer AND exact subject and whose relationship it satisfies. Several
//                             organizations may each have given the same person or workload an identity;
//                             none of them can lock the others out (the caller picks, per call or by
//                             exchanging for one: see access.ts, sts.service.ts). With a uid, only the
//                             identities that can act on it, however many others match.
//   assume(token, identity)   a token presented to the token exchange to assume the named identity: it
//                             must satisfy that identity's relationship (patterns, audience, claims).
//   verifyIdToken(token, client)
//                             an ID token presented to log in through an organization's identity provider
//                             (iam/sso-login.ts): issued by the provider's issuer for its client id.
//
// Audience (RFC 8725, section 3.9): a token must be meant for this service. An identity that names an
// audience (ClaimMatch.aud, StaticKeys.audiences) takes tokens for that audience only; one that names none
// takes tokens carrying one of the operator's `audiences` (EXTERNAL_AUDIENCES, default the issuer URL), so
// an ID token some other application received cannot be replayed here.
//
// Nothing is fetched for an issuer that the identity in question does not reference, so an arbitrary `iss`
// cannot make the server call out (SSRF). Discovery and keys are fetched over https only; plain http only
// for loopback hosts when allowInsecureLoopback is set. Fetches have timeouts and size caps, do not follow
// redirects, and their results are cached per issuer (failures too, briefly).
//
// Every refusal is an ExternalTokenError (anything unexpected during verification, TypeErrors included,
// becomes one); only database errors pass through as they are. The code is the same for "no such
// identity" and "the token does not match it", so callers can answer without revealing which identities
// exist.
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  customFetch,
  decodeJwt,
  decodeProtectedHeader,
  jwtVerify,
  type FetchImplementation,
  type JSONWebKeySet,
  type JWK,
  type JWTPayload,
  type JWTVerifyGetKey,
  type ProtectedHeaderParameters,
} from "jose";
import type { Identity } from "../../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { log } from "../log.js";
import { checkFetchUrl } from "../outbound.js";
import { MAX_TOKEN_BYTES, type ExternalVerifier } from "./authenticator.js";
import { audiencesOf, claimMatchSpecOf, claimMismatch, isExactIssuerAndSubject, issuerAccepted, type ClaimMatchSpec } from "./claim-match.js";
import type { AssumableIdentity, IdentityDirectory } from "./types.js";
import type { KeyStore } from "./keys.js";

/**
 * Identities a direct token is verified against, at most: root-level ones first, then the oldest (see
 * IdentityDirectory.withIssuerAndSubject), so identities created later cannot push earlier ones out.
 */
export const MAX_CANDIDATE_IDENTITIES = 20;

/** Signature algorithms accepted from external issuers (no HMAC, no "none"). */
export const EXTERNAL_ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA", "Ed25519"] as const;

/**
 * Why a token was refused:
 *   TOKEN_INVALID      not a well-formed JWT with iss, sub and exp, or an algorithm not accepted
 *   ERR_JWT_EXPIRED    expired (jose's code, which the authenticator recognizes)
 *   NOT_ACCEPTED       no such identity, or the token does not satisfy it (deliberately one code)
 *   NO_VERIFIER        the identity is of a kind this server cannot verify tokens for (AWS, service principal)
 */
export type ExternalFailureCode = "TOKEN_INVALID" | "ERR_JWT_EXPIRED" | "NOT_ACCEPTED" | "NO_VERIFIER";

export class ExternalTokenError extends Error {
  /**
   * True when the token's signature verified before it was refused (a claim checked after it, an expiry
   * found by the verification): its issuer and subject are then proven, and the refusal may count against
   * them (kernel/rate-limit.ts). False for everything decided on the token's unverified claims.
   */
  readonly signatureVerified: boolean;

  constructor(
    readonly code: ExternalFailureCode,
    message: string,
    options?: { cause?: unknown; signatureVerified?: boolean },
  ) {
    super(message, options);
    this.name = "ExternalTokenError";
    this.signatureVerified = options?.signatureVerified ?? false;
  }
}

/** An identity a verified external token assumes. */
export interface ExternalAssumption {
  identityUid: string;
  /** Issuer and subject of the token presented. */
  issuer: string;
  subject: string;
  /** The presented token's expiry (seconds since the epoch). */
  expiresAt: number;
  /** A later limit from the identity itself (StaticKeys.expiration_time), seconds since the epoch. */
  identityExpiresAt?: number | undefined;
  /** The group the identity was created under; undefined for a root-level identity. */
  homeGroup?: string | undefined;
}

/** An OIDC client an organization registered at its identity provider: whose ID tokens it takes. */
export interface OidcClient {
  issuer: string;
  clientId: string;
}

/** A verified ID token. */
export interface VerifiedIdToken {
  issuer: string;
  subject: string;
  /** Seconds since the epoch. */
  expiresAt: number;
  /** Every claim of the token (verified). */
  claims: JWTPayload;
}

export interface ExternalTokenVerifier extends ExternalVerifier {
  /**
   * Every identity the token assumes directly (never empty), root-level first, then oldest; with `within`,
   * only those that can act on that uid (IdentityDirectory.withIssuerAndSubject).
   */
  verify(token: string, issuer: string, within?: string): Promise<ExternalAssumption[]>;
  /** Verifies a token presented to assume the identity `identityUid` (token exchange). */
  assume(token: string, identityUid: string): Promise<ExternalAssumption>;
  /**
   * Verifies an ID token of `client` (OpenID Connect Core 1.0, section 3.1.3.7: issuer, audience, azp,
   * signature, expiry). `client` is asked only once the token's own shape and expiry have passed, and
   * answers undefined when there is no such client (NOT_ACCEPTED, as a token that does not verify).
   */
  verifyIdToken(token: string, client: () => Promise<OidcClient | undefined>): Promise<VerifiedIdToken>;
  /**
   * Verifies a token of whichever issuer it names, with that issuer's discovered keys, for a caller that has
   * no identity yet (accepting a group invite): signature, expiry, and an audience among the operator's
   * `audiences`, as for an identity that names none. Unlike verify(), this fetches the keys of an issuer no
   * identity references: its caller must call it only once the request has shown a credential of its own
   * (a live invite code), so an arbitrary `iss` cannot make the server call out.
   */
  verifyAnyIssuer(token: string): Promise<VerifiedIdToken>;
}

/** Whether a verifier can verify tokens of any issuer (accepting group invites). */
export function canVerifyAnyIssuer(v: ExternalVerifier | undefined): v is ExternalTokenVerifier {
  return typeof (v as Partial<ExternalTokenVerifier> | undefined)?.verifyAnyIssuer === "function";
}

/** Whether a verifier (for example the one the composition root hands the sts module) can serve the token exchange. */
export function canAssume(v: ExternalVerifier | undefined): v is ExternalTokenVerifier {
  return typeof (v as Partial<ExternalTokenVerifier> | undefined)?.assume === "function";
}

export interface ExternalVerifierOptions {
  /** Where the identities a token may assume are found. */
  directory: IdentityDirectory;
  /** Allow plain http for issuers and JWKS on loopback hosts (127.0.0.0/8, ::1, localhost). */
  allowInsecureLoopback: boolean;
  /** Timeout of each discovery or JWKS fetch. Default 5 s. */
  fetchTimeoutMs?: number;
  /** How long a discovery document is trusted. Default 1 hour. */
  discoveryTtlMs?: number;
  /** How long a failed discovery (or JWKS fetch) is remembered before trying again. Default 30 s. */
  failureTtlMs?: number;
  /** Size caps of the documents fetched. Defaults 64 KiB (discovery) and 256 KiB (JWKS). */
  maxDiscoveryBytes?: number;
  maxJwksBytes?: number;
  /** After a successful JWKS fetch, how long before an unknown kid may trigger another. Default 30 s. */
  jwksCooldownMs?: number;
  /** How long fetched keys are used before they are fetched again. Default 10 minutes. */
  jwksMaxAgeMs?: number;
  /** Clock skew tolerated on exp/nbf. Default 30 s. */
  clockToleranceSeconds?: number;
  /** Issuers kept in the cache (oldest dropped first). Default 1000. */
  maxIssuers?: number;
  /**
   * The audiences a token must carry one of when the identity names none of its own. Default: this
   * server's issuer URL (`self.issuer`) when given, else none (only identities naming an audience match).
   */
  audiences?: readonly string[];
  /** This server as an issuer: its tokens are verified with its own keys, never fetched. */
  self?: { issuer: string; keys: KeyStore } | undefined;
  /** The fetch to use (tests). */
  fetch?: typeof fetch;
}

// ---------------------------------------------------------------------------------------------------------
// Which URLs may be fetched.

/** Whether an issuer identifier may be contacted: as checkFetchUrl, and no query or fragment. */
export function checkIssuerUrl(issuer: string, allowInsecureLoopback: boolean): { url: URL } | { refused: string } {
  const r = checkFetchUrl(issuer, allowInsecureLoopback);
  if ("url" in r && (r.url.search || r.url.hash || issuer.includes("#"))) return { refused: "an issuer has no query or fragment" };
  return r;
}

/** Where an issuer's discovery document lives (OpenID Connect Discovery 1.0, section 4). */
export function discoveryUrlOf(issuer: string): string {
  return issuer.replace(/\/$/, "") + "/.well-known/openid-configuration";
}

// ---------------------------------------------------------------------------------------------------------

/** Reads a response body, failing once it exceeds `maxBytes`. */
async function readCapped(res: Response, maxBytes: number): Promise<Uint8Array> {
  const declared = Number(res.headers.get("content-length") ?? "NaN");
  if (Number.isFinite(declared) && declared > maxBytes) {
    await res.body?.cancel().catch(() => {});
    throw new Error(`response larger than ${maxBytes} bytes`);
  }
  if (!res.body) return new Uint8Array();
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      await reader.cancel().catch(() => {});
      throw new Error(`response larger than ${maxBytes} bytes`);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

interface Presented {
  header: ProtectedHeaderParameters;
  claims: JWTPayload;
  iss: string;
  sub: string;
  exp: number;
}

const invalid = (why: string, cause?: unknown) => new ExternalTokenError("TOKEN_INVALID", why, { cause });
const notAccepted = (why: string, cause?: unknown) => new ExternalTokenError("NOT_ACCEPTED", why, { cause });
/** A refusal of a token whose signature has verified. */
const notAcceptedVerified = (why: string) => new ExternalTokenError("NOT_ACCEPTED", why, { signatureVerified: true });

/**
 * A failure of jose's jwtVerify as a refusal. jose checks the signature first and the claims after it, so
 * its claim and expiry failures are refusals of a token whose signature verified.
 */
function joseRefusal(err: unknown): ExternalTokenError {
  const code = (err as { code?: string }).code;
  const signatureVerified = code === "ERR_JWT_EXPIRED" || code === "ERR_JWT_CLAIM_VALIDATION_FAILED";
  if (code === "ERR_JWT_EXPIRED") return new ExternalTokenError("ERR_JWT_EXPIRED", "token expired", { cause: err, signatureVerified });
  return new ExternalTokenError("NOT_ACCEPTED", "signature or claims do not verify", { cause: err, signatureVerified });
}

/**
 * What can be said of a token before knowing any identity: its shape, algorithm and expiry. Nothing here
 * depends on which identities exist.
 */
function inspect(token: string, toleranceSeconds: number): Presented {
  if (token.length > MAX_TOKEN_BYTES) throw invalid("token too large");
  let header: ProtectedHeaderParameters;
  let claims: JWTPayload;
  try {
    header = decodeProtectedHeader(token);
    claims = decodeJwt(token);
  } catch (err) {
    throw invalid("not a JWT", err);
  }
  if (typeof header.alg !== "string" || !(EXTERNAL_ALGORITHMS as readonly string[]).includes(header.alg)) {
    throw invalid(`algorithm ${String(header.alg)} is not accepted`);
  }
  const { iss, sub, exp } = claims;
  if (typeof iss !== "string" || iss === "") throw invalid("no issuer");
  if (typeof sub !== "string" || sub === "") throw invalid("no subject");
  if (typeof exp !== "number" || !Number.isFinite(exp)) throw invalid("no expiry");
  if (exp + toleranceSeconds <= Math.floor(Date.now() / 1000)) throw new ExternalTokenError("ERR_JWT_EXPIRED", "token expired");
  return { header, claims, iss, sub, exp };
}

type Relationship = Identity["relationship"];

/** Errors of fetching or reading a JWKS: jose's timeout, non-200, bad JSON or bad set, or the fetch itself. */
function isFetchFailure(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  if (code === undefined) return true; // fetch's TypeError, our URL refusal or size cap
  return code === "ERR_JWKS_TIMEOUT" || code === "ERR_JWKS_INVALID" || code === "ERR_JOSE_GENERIC";
}

interface IssuerKeys {
  getKey: JWTVerifyGetKey;
  jwksUri: string;
  until: number;
}
type IssuerEntry = { ok: true; keys: IssuerKeys } | { ok: false; error: Error; until: number };

export function createExternalVerifier(opts: ExternalVerifierOptions): ExternalTokenVerifier {
  const fetchImpl = opts.fetch ?? fetch;
  const timeoutMs = opts.fetchTimeoutMs ?? 5_000;
  const discoveryTtlMs = opts.discoveryTtlMs ?? 3_600_000;
  const failureTtlMs = opts.failureTtlMs ?? 30_000;
  const maxDiscoveryBytes = opts.maxDiscoveryBytes ?? 64 * 1024;
  const maxJwksBytes = opts.maxJwksBytes ?? 256 * 1024;
  const tolerance = opts.clockToleranceSeconds ?? 30;
  const maxIssuers = opts.maxIssuers ?? 1000;
  const allowedAudiences = new Set(opts.audiences ?? (opts.self ? [opts.self.issuer] : []));
  /** Whether a token meets the operator's audience list (for identities that name no audience). */
  const forThisService = (claims: JWTPayload) => audiencesOf(claims).some((a) => allowedAudiences.has(a));

  const issuers = new Map<string, IssuerEntry>();
  const pending = new Map<string, Promise<IssuerEntry>>();
  const remember = (issuer: string, entry: IssuerEntry) => {
    issuers.delete(issuer);
    if (issuers.size >= maxIssuers) issuers.delete(issuers.keys().next().value as string);
    issuers.set(issuer, entry);
  };
  const fail = (issuer: string, error: Error) => remember(issuer, { ok: false, error, until: Date.now() + failureTtlMs });

  /** jose's JWKS fetch, with the URL rule re-checked, no redirects, and a size cap. */
  const jwksFetch: FetchImplementation = async (url, init) => {
    const checked = checkFetchUrl(url, opts.allowInsecureLoopback);
    if ("refused" in checked) throw new Error(`JWKS URL refused: ${checked.refused}`);
    const res = await fetchImpl(checked.url, { ...init, redirect: "manual" });
    if (res.status !== 200) {
      await res.body?.cancel().catch(() => {});
      return new Response(null, { status: 502 });
    }
    const body = await readCapped(res, maxJwksBytes);
    return new Response(body, { status: 200, headers: { "content-type": "application/json" } });
  };

  const discover = async (issuer: string, previous: IssuerKeys | undefined): Promise<IssuerKeys> => {
    const checked = checkIssuerUrl(issuer, opts.allowInsecureLoopback);
    if ("refused" in checked) throw new Error(`issuer refused: ${checked.refused}`);
    const res = await fetchImpl(discoveryUrlOf(issuer), {
      signal: AbortSignal.timeout(timeoutMs),
      redirect: "error",
      headers: { accept: "application/json" },
    });
    if (res.status !== 200) {
      await res.body?.cancel().catch(() => {});
      throw new Error(`discovery answered HTTP ${res.status}`);
    }
    const doc = JSON.parse(new TextDecoder().decode(await readCapped(res, maxDiscoveryBytes))) as unknown;
    if (doc === null || typeof doc !== "object") throw new Error("discovery document is not an object");
    const { issuer: declared, jwks_uri: jwksUri } = doc as { issuer?: unknown; jwks_uri?: unknown };
    if (declared !== issuer) throw new Error(`discovery names issuer ${JSON.stringify(declared)}, not ${JSON.stringify(issuer)}`);
    if (typeof jwksUri !== "string") throw new Error("discovery has no jwks_uri");
    const jwksChecked = checkFetchUrl(jwksUri, opts.allowInsecureLoopback);
    if ("refused" in jwksChecked) throw new Error(`jwks_uri refused: ${jwksChecked.refused}`);
    const until = Date.now() + discoveryTtlMs;
    // Same JWKS location as before: keep the key set (and its cache).
    if (previous && previous.jwksUri === jwksUri) return { ...previous, until };
    const remote = createRemoteJWKSet(jwksChecked.url, {
      timeoutDuration: timeoutMs,
      ...(opts.jwksCooldownMs !== undefined ? { cooldownDuration: opts.jwksCooldownMs } : {}),
      ...(opts.jwksMaxAgeMs !== undefined ? { cacheMaxAge: opts.jwksMaxAgeMs } : {}),
      [customFetch]: jwksFetch,
    });
    const getKey: JWTVerifyGetKey = async (header, token) => {
      try {
        return await remote(header, token);
      } catch (err) {
        // The JWKS could not be fetched or read: remember the failure briefly. Anything a token can cause
        // (no key for its kid or alg, a key that does not import for its alg) is not the issuer's failure,
        // so a crafted token cannot shut an issuer out.
        if (isFetchFailure(err)) fail(issuer, new Error("JWKS unavailable", { cause: err }));
        throw err;
      }
    };
    return { getKey, jwksUri, until };
  };

  /** The key resolver of an issuer the caller has already checked is referenced by the identity. */
  const keysOf = async (issuer: string): Promise<JWTVerifyGetKey> => {
    if (opts.self && issuer === opts.self.issuer) {
      const keys = opts.self.keys;
      return async (header) => {
        const key = header.kid ? await keys.verificationKey(header.kid) : undefined;
        if (!key) throw new Error("unknown signing key");
        return key;
      };
    }
    const now = Date.now();
    const entry = issuers.get(issuer);
    if (entry && entry.ok && entry.keys.until > now) return entry.keys.getKey;
    if (entry && !entry.ok && entry.until > now) throw entry.error;
    let p = pending.get(issuer);
    if (!p) {
      const previous = entry?.ok ? entry.keys : undefined;
      p = discover(issuer, previous).then(
        (keys): IssuerEntry => ({ ok: true, keys }),
        (err: unknown): IssuerEntry => {
          log.warn("external issuer unavailable", { issuer, err });
          return { ok: false, error: err instanceof Error ? err : new Error(String(err)), until: Date.now() + failureTtlMs };
        },
      );
      pending.set(issuer, p);
      void p.then((e) => {
        pending.delete(issuer);
        remember(issuer, e);
      });
    }
    const result = await p;
    if (!result.ok) throw result.error;
    return result.keys.getKey;
  };

  const staticKeySets = new Map<string, JWTVerifyGetKey>();
  const staticKeysOf = (issuerKeys: string): JWTVerifyGetKey => {
    let k = staticKeySets.get(issuerKeys);
    if (!k) {
      const parsed = JSON.parse(issuerKeys) as JSONWebKeySet | JWK;
      k = createLocalJWKSet("keys" in parsed ? parsed : { keys: [parsed] });
      if (staticKeySets.size >= 1000) staticKeySets.delete(staticKeySets.keys().next().value as string);
      staticKeySets.set(issuerKeys, k);
    }
    return k;
  };

  const baseVerifyOptions = {
    algorithms: [...EXTERNAL_ALGORITHMS],
    requiredClaims: ["exp", "iat", "sub"],
    clockTolerance: tolerance,
  };

  /**
   * The token's payload once its signature (with the keys its issuer publishes) and standard claims verify;
   * an expired token and every other failure answer apart (ExternalTokenError codes).
   */
  const verifiedPayload = async (token: string, issuer: string, audience?: string): Promise<JWTPayload> => {
    let getKey: JWTVerifyGetKey;
    try {
      getKey = await keysOf(issuer);
    } catch (err) {
      throw notAccepted("issuer keys unavailable", err);
    }
    try {
      return (await jwtVerify(token, getKey, { ...baseVerifyOptions, issuer, ...(audience === undefined ? {} : { audience }) })).payload;
    } catch (err) {
      throw joseRefusal(err);
    }
  };

  const verifyClaimMatch = async (uid: string, spec: ClaimMatchSpec, token: string, t: Presented): Promise<ExternalAssumption> => {
    // Decided on the token's own claims before anything is fetched: an issuer the identity does not
    // reference is never contacted.
    if (!issuerAccepted(spec, t.iss)) throw notAccepted("issuer not referenced by the identity");
    const before = claimMismatch(spec, t.claims);
    if (before) throw notAccepted(before);
    if (!spec.audience && !forThisService(t.claims)) throw notAccepted("audience is not one this service accepts");
    const payload = await verifiedPayload(token, t.iss);
    const after = claimMismatch(spec, payload);
    if (after) throw notAcceptedVerified(after);
    return { identityUid: uid, issuer: t.iss, subject: t.sub, expiresAt: payload.exp ?? t.exp };
  };

  const verifyStaticKeys = async (
    uid: string,
    sk: { issuer: string; subject: string; issuerKeys: string; expirationTime?: { seconds: bigint } | undefined; audiences: string[] },
    token: string,
    t: Presented,
  ): Promise<ExternalAssumption> => {
    if (sk.issuer === "" || sk.issuer !== t.iss || sk.subject === "" || sk.subject !== t.sub) throw notAccepted("issuer or subject does not match");
    const identityExpiresAt = sk.expirationTime ? Number(sk.expirationTime.seconds) : undefined;
    if (identityExpiresAt !== undefined && identityExpiresAt <= Math.floor(Date.now() / 1000)) throw notAccepted("the identity's keys have expired");
    if (sk.audiences.length > 0 && !audiencesOf(t.claims).some((a) => sk.audiences.includes(a))) throw notAccepted("audience does not match");
    if (sk.audiences.length === 0 && !forThisService(t.claims)) throw notAccepted("audience is not one this service accepts");
    let payload: JWTPayload;
    try {
      ({ payload } = await jwtVerify(token, staticKeysOf(sk.issuerKeys), {
        ...baseVerifyOptions,
        issuer: sk.issuer,
        subject: sk.subject,
        ...(sk.audiences.length > 0 ? { audience: sk.audiences } : {}),
      }));
    } catch (err) {
      throw joseRefusal(err);
    }
    return { identityUid: uid, issuer: t.iss, subject: t.sub, expiresAt: payload.exp ?? t.exp, identityExpiresAt };
  };

  const verifyAgainst = async (identity: AssumableIdentity, token: string, t: Presented, direct: boolean): Promise<ExternalAssumption> => {
    const found = await verifyRelationship(identity.uid, identity.relationship, token, t, direct);
    return { ...found, homeGroup: identity.homeGroup };
  };
  const verifyRelationship = async (uid: string, rel: Relationship, token: string, t: Presented, direct: boolean) => {
    switch (rel.case) {
      case "claimMatch": {
        const spec = claimMatchSpecOf(rel.value);
        if (direct && !isExactIssuerAndSubject(spec)) throw notAccepted("direct use needs an exact issuer and subject");
        return verifyClaimMatch(uid, spec, token, t);
      }
      case "staticKeys":
        return verifyStaticKeys(uid, rel.value, token, t);
      default:
        throw notAccepted("the identity is not assumed with OIDC tokens");
    }
  };

  /** Runs `fn`, turning anything unexpected (TypeErrors included) into NOT_ACCEPTED. */
  const guarded = async <T>(fn: () => Promise<T>): Promise<T> => {
    try {
      return await fn();
    } catch (err) {
      if (err instanceof ExternalTokenError) throw err;
      throw notAccepted("verification failed", err);
    }
  };

  // Database errors are not caught here: they are not the token's fault (the authenticator refuses the
  // token anyway; the token exchange reports them as the server's failure).
  const { directory } = opts;

  return {
    async verify(token, issuer, within) {
      const t = await guarded(async () => {
        const t = inspect(token, tolerance);
        if (t.iss !== issuer) throw invalid("issuer mismatch");
        return t;
      });
      const found = await directory.withIssuerAndSubject(t.iss, t.sub, MAX_CANDIDATE_IDENTITIES, within);
      if (found.length === 0) throw notAccepted("no identity has this issuer and subject");
      const assumed: ExternalAssumption[] = [];
      let refusal: ExternalTokenError | undefined;
      for (const identity of found) {
        try {
          assumed.push(await guarded(() => verifyAgainst(identity, token, t, true)));
        } catch (err) {
          // Expiry is the token's, not one identity's; anything else only rules this identity out.
          if (!(err instanceof ExternalTokenError) || err.code === "ERR_JWT_EXPIRED") throw err;
          // A refusal after the signature verified is the one answered: it proves the token's subject.
          if (!refusal || (err.signatureVerified && !refusal.signatureVerified)) refusal = err;
        }
      }
      if (assumed.length === 0) throw refusal!;
      return assumed;
    },

    async assume(token, identityUid) {
      const identity = await directory.assumable(identityUid);
      return guarded(async () => {
        const rel = identity?.relationship;
        if (rel?.case === "awsIdentity") throw new ExternalTokenError("NO_VERIFIER", "AWS identities");
        if (rel?.case === "servicePrincipal") throw new ExternalTokenError("NO_VERIFIER", "service principal identities");
        // Token-only checks come before anything that depends on the identity existing.
        const t = inspect(token, tolerance);
        if (!identity) throw notAccepted("no such identity");
        return verifyAgainst(identity, token, t, false);
      });
    },

    async verifyAnyIssuer(token) {
      return guarded(async () => {
        const t = inspect(token, tolerance);
        if (!forThisService(t.claims)) throw notAccepted("audience is not one this service accepts");
        const payload = await verifiedPayload(token, t.iss);
        return { issuer: t.iss, subject: t.sub, expiresAt: payload.exp ?? t.exp, claims: payload };
      });
    },

    async verifyIdToken(token, clientOf) {
      const t = await guarded(async () => inspect(token, tolerance));
      // Database errors pass through, as in assume().
      const client = await clientOf();
      return guarded(async () => {
        if (!client) throw notAccepted("no such client");
        // Decided on the token's own claims before anything is fetched: a token of another issuer never
        // makes the server contact it.
        if (t.iss !== client.issuer) throw notAccepted("issuer is not the client's");
        if (!audiencesOf(t.claims).includes(client.clientId)) throw notAccepted("audience is not the client's");
        const payload = await verifiedPayload(token, client.issuer, client.clientId);
        // An ID token issued to another party that merely lists this client among its audiences.
        if (payload.azp !== undefined && payload.azp !== client.clientId) throw notAcceptedVerified("authorized party is not the client");
        return { issuer: t.iss, subject: t.sub, expiresAt: payload.exp ?? t.exp, claims: payload };
      });
    },
  };
}
