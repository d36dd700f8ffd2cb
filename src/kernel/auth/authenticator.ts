// Turns a bearer token into a Principal. Tokens this server minted are verified with its own keys; tokens of
// other issuers go to the external verifier (OIDC discovery + JWKS, matched against identities' claimMatch).
// Every failure is UNAUTHENTICATED: never a 500, never a hint of which identities exist.
import { Code, ConnectError } from "@connectrpc/connect";
import { decodeJwt, decodeProtectedHeader } from "jose";
import { unauthenticated } from "../errors/index.js";
import { log } from "../log.js";
import type { KeyStore } from "./keys.js";
import type { Principal } from "./principal.js";
import type { Authenticated, Candidates, IdentityDirectory, IdentityGrants } from "./types.js";
import { restrictionOfClaims } from "./restriction.js";
import { verifyOwnToken } from "./tokens.js";

/** Tokens larger than this are refused before any parsing. */
export const MAX_TOKEN_BYTES = 16 * 1024;
/** lastSeenTime is written at most this often per identity. */
const LAST_SEEN_GRANULARITY_SECONDS = 60;

export interface ExternalVerifier {
  /**
   * Verifies a token whose issuer is not this server and returns the identities it assumes (never none):
   * several when several organizations gave its issuer and subject an identity, root-level first, then the
   * oldest. Throws when the token is not valid or matches no identity.
   */
  verify(token: string, issuer: string, within?: string): Promise<Array<{ identityUid: string; issuer: string; subject: string }>>;
}

export interface Authenticator {
  /**
   * The identities the token acts as, best first (never none): one for this server's own tokens; for an
   * external token, each identity it assumes (see createCandidateAccess for how a call picks one).
   */
  authenticate(token: string): Promise<Candidates>;
}

/** Verified own tokens remembered (until they expire), so a repeated token skips the signature check. */
const VERIFIED_CACHE_SIZE = 10_000;

export interface AuthenticatorOptions {
  /** Where identities and their grants are read, and lastSeenTime recorded. */
  directory: IdentityDirectory;
  keys: KeyStore;
  /** This server's issuer URL. */
  issuer: string;
  /** The audience this server's access tokens carry. */
  audience: string;
  external?: ExternalVerifier;
  /** Where an identity's grants come from (a GrantsCache's get); default: the directory, on every request. */
  grants?: (identityUid: string) => Promise<IdentityGrants | undefined>;
}

const invalid = (why: string, reason = "TOKEN_INVALID") => unauthenticated(`Invalid bearer token: ${why}`, reason);

/** Refusals of a well-formed, unexpired token of another issuer because it assumes no identity. */
const noIdentity = new WeakSet<Error>();
function assumesNoIdentity(err: Error, yes: boolean): Error {
  if (yes) noIdentity.add(err);
  return err;
}

/**
 * Whether `err` is the authenticator refusing a token of another issuer only because it assumes no identity
 * (none names its issuer and subject, or none it names is satisfied by it): the token may still be a valid
 * token of its issuer, which a method whose rule is identity_optional verifies itself.
 */
export function isNoIdentityRefusal(err: unknown): boolean {
  return err instanceof Error && noIdentity.has(err);
}

/** The codes of the external verifier's refusals (external.ts ExternalFailureCode); anything else is the server's. */
const EXTERNAL_REFUSALS: ReadonlySet<unknown> = new Set(["TOKEN_INVALID", "ERR_JWT_EXPIRED", "NOT_ACCEPTED", "NO_VERIFIER"]);

function isExpired(err: unknown): boolean {
  return (err as { code?: string }).code === "ERR_JWT_EXPIRED";
}

export function createAuthenticator(opts: AuthenticatorOptions): Authenticator {
  const { directory } = opts;
  const lastTouched = new Map<string, number>();

  const touch = (uid: string) => {
    const now = Date.now();
    if (now - (lastTouched.get(uid) ?? 0) < LAST_SEEN_GRANULARITY_SECONDS * 1000) return;
    lastTouched.set(uid, now);
    if (lastTouched.size > 100_000) lastTouched.clear();
    directory
      .markSeen(uid, LAST_SEEN_GRANULARITY_SECONDS)
      .catch((err: unknown) => log.warn("could not record lastSeenTime", { identity: uid, err }));
  };

  const loadIdentity = opts.grants ?? ((uid: string) => directory.grants(uid));
  const grantsOf = async (uid: string) => {
    const grants = await loadIdentity(uid);
    if (!grants) throw invalid("the identity it names does not exist");
    // Deactivated, not merely powerless: every call is refused at the door, those needing no capability
    // too, as a deleted identity's are; reactivating it makes the same token work again.
    if (grants.inactive) throw invalid("the identity it names is deactivated", "IDENTITY_INACTIVE");
    return grants;
  };

  // token -> what its verification established, until the token's expiry, as long as the key that signed it
  // still verifies (a removed key reaches every server at once: keys.ts). Only this server's own tokens: they
  // are fully checked once; the identity and its bindings are looked up on every request.
  const verified = new Map<string, { claims: Omit<Principal, "homeGroup">; exp: number; kid: string }>();
  const remember = (token: string, claims: Omit<Principal, "homeGroup">, exp: number) => {
    if (verified.size >= VERIFIED_CACHE_SIZE) verified.delete(verified.keys().next().value!);
    verified.set(token, { claims, exp, kid: decodeProtectedHeader(token).kid! });
  };
  const verifyOwn = async (token: string, iss: string): Promise<Omit<Principal, "homeGroup">> => {
    const hit = verified.get(token);
    if (hit) {
      if (hit.exp * 1000 <= Date.now()) {
        verified.delete(token);
        throw invalid("expired", "TOKEN_EXPIRED");
      }
      if (await opts.keys.verificationKey(hit.kid)) return hit.claims;
      verified.delete(token);
      throw invalid("signature or claims do not verify");
    }
    let payload;
    let restriction;
    try {
      payload = await verifyOwnToken(opts.keys, token, { issuer: opts.issuer, audience: opts.audience });
      restriction = restrictionOfClaims(payload);
    } catch (err) {
      throw isExpired(err) ? invalid("expired", "TOKEN_EXPIRED") : invalid("signature or claims do not verify");
    }
    const act = payload.act as { iss?: unknown; sub?: unknown } | undefined;
    const claims = {
      identityUid: payload.sub,
      issuer: iss,
      subject: payload.sub,
      upstream: typeof act?.iss === "string" && typeof act.sub === "string" ? { issuer: act.iss, subject: act.sub } : undefined,
      restriction,
    };
    remember(token, claims, payload.exp!);
    return claims;
  };

  return {
    async authenticate(token) {
      if (token.length > MAX_TOKEN_BYTES) throw invalid("too large");
      const known = verified.get(token);
      if (known) return [await withGrants(await verifyOwn(token, known.claims.issuer))];
      let iss: string | undefined;
      try {
        iss = decodeJwt(token).iss;
      } catch {
        throw invalid("not a JWT");
      }
      if (!iss) throw invalid("no issuer");

      if (iss === opts.issuer) return [await withGrants(await verifyOwn(token, iss))];
      if (!opts.external) throw invalid("unknown issuer");
      const external = opts.external;
      let found;
      try {
        found = await external.verify(token, iss);
      } catch (err) {
        if (isExpired(err)) throw invalid("expired", "TOKEN_EXPIRED");
        log.debug("external token refused", { iss, err });
        throw assumesNoIdentity(invalid(`not accepted for any identity (issuer ${JSON.stringify(iss.slice(0, 200))}; this server's tokens have issuer ${JSON.stringify(opts.issuer)})`), (err as { code?: unknown }).code === "NOT_ACCEPTED");
      }
      const remaining = await withGrantsOf(found);
      if (remaining.length === 0) throw invalid("the identity it names does not exist");
      const within = async (uid: string): Promise<Authenticated[]> => {
        try {
          return await withGrantsOf(await external.verify(token, iss, uid));
        } catch (err) {
          // None of the identities that can act on `uid` takes the token: the call has no one to act as there.
          if (EXTERNAL_REFUSALS.has((err as { code?: unknown }).code)) return [];
          throw err;
        }
      };
      return Object.assign(remaining, { within });
    },
  };

  /** The candidates with their grants; an identity removed since it was found is left out. */
  async function withGrantsOf(found: ReadonlyArray<{ identityUid: string; issuer: string; subject: string }>): Promise<Authenticated[]> {
    const candidates = await Promise.all(
      found.map((f) =>
        withGrants({ identityUid: f.identityUid, issuer: f.issuer, subject: f.subject }).catch((err: unknown) => {
          if (err instanceof ConnectError && err.code === Code.Unauthenticated) return undefined;
          throw err;
        }),
      ),
    );
    return candidates.filter((c): c is Authenticated => c !== undefined);
  }

  async function withGrants(claims: Omit<Principal, "homeGroup">): Promise<Authenticated> {
    const { homeGroup, bindings } = await grantsOf(claims.identityUid);
    const principal: Principal = { ...claims, homeGroup };
    touch(principal.identityUid);
    return { principal, bindings };
  }
}
