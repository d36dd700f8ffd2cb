// Tokens minted by this server: ES256 JWTs whose subject is an identity uid.
import { SignJWT, jwtVerify, decodeProtectedHeader, type JWTPayload } from "jose";
import type { KeyStore } from "./keys.js";
import { MAX_TOKEN_LIFETIME_SECONDS } from "./keys.js";
import { restrictionClaims, type TokenRestriction } from "./restriction.js";

export interface MintOptions {
  issuer: string;
  /** The identity uid the token acts as. */
  subject: string;
  audience: string | string[];
  /** Lifetime in seconds (at most 24 hours). */
  ttlSeconds: number;
  /** The upstream token's issuer and subject, for tokens minted by exchange. */
  upstream?: { issuer: string; subject: string };
  /** Never later than this (seconds since the epoch), e.g. the expiry of the token exchanged. */
  notAfter?: number;
  /** What a down-scoped token is restricted to (restriction.ts); undefined: nothing. */
  restriction?: TokenRestriction | undefined;
  /** Further claims of the token's own kind (a registry token's `access`); never the registered ones above. */
  claims?: Record<string, unknown> | undefined;
}

export async function mintToken(keys: KeyStore, opts: MintOptions): Promise<{ token: string; expiry: Date }> {
  const { kid, alg, key } = await keys.signingKey();
  const now = Math.floor(Date.now() / 1000);
  let exp = now + Math.min(opts.ttlSeconds, MAX_TOKEN_LIFETIME_SECONDS);
  if (opts.notAfter !== undefined) exp = Math.min(exp, opts.notAfter);
  const claims: JWTPayload = {
    ...opts.claims,
    ...(opts.upstream ? { act: { iss: opts.upstream.issuer, sub: opts.upstream.subject } } : {}),
    ...restrictionClaims(opts.restriction),
  };
  const token = await new SignJWT(claims)
    .setProtectedHeader({ alg, kid, typ: "JWT" })
    .setIssuer(opts.issuer)
    .setSubject(opts.subject)
    .setAudience(opts.audience)
    .setIssuedAt(now)
    .setExpirationTime(exp)
    .sign(key);
  return { token, expiry: new Date(exp * 1000) };
}

/** Verifies a token this server minted. Throws (any error) when it is not valid. */
export async function verifyOwnToken(
  keys: KeyStore,
  token: string,
  opts: { issuer: string; audience: string },
): Promise<JWTPayload & { sub: string }> {
  const { kid } = decodeProtectedHeader(token);
  if (!kid) throw new Error("token has no kid");
  const key = await keys.verificationKey(kid);
  if (!key) throw new Error("unknown signing key");
  const { payload } = await jwtVerify(token, key, {
    issuer: opts.issuer,
    audience: opts.audience,
    algorithms: ["ES256"],
    requiredClaims: ["exp", "iat", "sub"],
    clockTolerance: 30,
  });
  return payload as JWTPayload & { sub: string };
}
