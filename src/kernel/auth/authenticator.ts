// Turns a bearer token into a Principal. Tokens this server minted are verified with its own keys; tokens of
// other issuers go to the external verifier (OIDC discovery + JWKS, matched against identities' claimMatch).
// Every failure is UNAUTHENTICATED: never a 500, never a hint of which identities exist.
import { eq, and, or, isNull, lt, sql } from "drizzle-orm";
import { decodeJwt } from "jose";
import type { Db } from "../../db/client.js";
import { identities } from "../../db/schema/index.js";
import { unauthenticated } from "../errors/index.js";
import { log } from "../log.js";
import type { KeyStore } from "./keys.js";
import type { Principal } from "./principal.js";
import { verifyOwnToken } from "./tokens.js";

/** Tokens larger than this are refused before any parsing. */
export const MAX_TOKEN_BYTES = 16 * 1024;
/** lastSeenTime is written at most this often per identity. */
const LAST_SEEN_GRANULARITY_MS = 60_000;

export interface ExternalVerifier {
  /**
   * Verifies a token whose issuer is not this server and returns the identity it assumes. Throws when the
   * token is not valid or matches no identity.
   */
  verify(token: string, issuer: string): Promise<{ identityUid: string; issuer: string; subject: string }>;
}

export interface Authenticator {
  authenticate(token: string): Promise<Principal>;
}

export interface AuthenticatorOptions {
  db: Db;
  keys: KeyStore;
  /** This server's issuer URL. */
  issuer: string;
  /** The audience this server's access tokens carry. */
  audience: string;
  external?: ExternalVerifier;
}

const invalid = (why: string, reason = "TOKEN_INVALID") => unauthenticated(`Invalid bearer token: ${why}`, reason);

function isExpired(err: unknown): boolean {
  return (err as { code?: string }).code === "ERR_JWT_EXPIRED";
}

export function createAuthenticator(opts: AuthenticatorOptions): Authenticator {
  const { db } = opts;
  const lastTouched = new Map<string, number>();

  const touch = (uid: string) => {
    const now = Date.now();
    if (now - (lastTouched.get(uid) ?? 0) < LAST_SEEN_GRANULARITY_MS) return;
    lastTouched.set(uid, now);
    if (lastTouched.size > 100_000) lastTouched.clear();
    db.update(identities)
      .set({ lastSeenTime: sql`now()` })
      .where(
        and(
          eq(identities.uid, uid),
          or(isNull(identities.lastSeenTime), lt(identities.lastSeenTime, sql`now() - make_interval(secs => ${LAST_SEEN_GRANULARITY_MS / 1000})`)),
        ),
      )
      .catch((err: unknown) => log.warn("could not record lastSeenTime", { identity: uid, err }));
  };

  const homeGroupOf = async (uid: string): Promise<string | undefined> => {
    const [row] = await db.select({ parentUid: identities.parentUid }).from(identities).where(eq(identities.uid, uid));
    if (!row) throw invalid("the identity it names does not exist");
    return row.parentUid ?? undefined;
  };

  return {
    async authenticate(token) {
      if (token.length > MAX_TOKEN_BYTES) throw invalid("too large");
      let iss: string | undefined;
      try {
        iss = decodeJwt(token).iss;
      } catch {
        throw invalid("not a JWT");
      }
      if (!iss) throw invalid("no issuer");

      let principal: Principal;
      if (iss === opts.issuer) {
        let payload;
        try {
          payload = await verifyOwnToken(opts.keys, token, { issuer: opts.issuer, audience: opts.audience });
        } catch (err) {
          throw isExpired(err) ? invalid("expired", "TOKEN_EXPIRED") : invalid("signature or claims do not verify");
        }
        const act = payload.act as { iss?: unknown; sub?: unknown } | undefined;
        principal = {
          identityUid: payload.sub,
          homeGroup: await homeGroupOf(payload.sub),
          issuer: iss,
          subject: payload.sub,
          upstream: typeof act?.iss === "string" && typeof act.sub === "string" ? { issuer: act.iss, subject: act.sub } : undefined,
        };
      } else {
        if (!opts.external) throw invalid("unknown issuer");
        let found;
        try {
          found = await opts.external.verify(token, iss);
        } catch (err) {
          if (isExpired(err)) throw invalid("expired", "TOKEN_EXPIRED");
          log.debug("external token refused", { iss, err });
          throw invalid("not accepted for any identity");
        }
        principal = {
          identityUid: found.identityUid,
          homeGroup: await homeGroupOf(found.identityUid),
          issuer: found.issuer,
          subject: found.subject,
        };
      }
      touch(principal.identityUid);
      return principal;
    },
  };
}
