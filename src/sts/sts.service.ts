// SecurityTokenService: exchanges a token of an external OIDC issuer (or of this server) for a short-lived
// access token of this server that acts as an identity.
//
// The method's auth rule is `disabled`: the handler authenticates the presented token itself, taken from the
// Authorization: Bearer header. The caller names the identity to assume in `identity`; the token must satisfy
// that identity's relationship (ClaimMatch with patterns, audience and claims, or StaticKeys). With no
// `identity`, the identities the token assumes by exact issuer and subject, as on a direct API call: the
// only one, or the only root-level one (a person's own, which no organization can create); when several
// organizations gave the token an identity, FAILED_PRECONDITION (IDENTITY_AMBIGUOUS) lists them, one
// PreconditionFailure violation each with the identity uid as its subject, and the caller exchanges again
// naming one. Nobody loses access because another organization created an identity for them.
//
// With `identity_provider` (the uid of an organization's identity provider), the token is an ID token of that
// provider: the IAM domain verifies it against the provider's issuer and client id, finds or creates the
// identity it correlates to, and brings its group-mapped role bindings in line with the token
// (iam/sso-login.ts); `identity` is then left empty (the provider decides which identity it is).
//
// Refresh tokens. A caller asks Exchange for one as OIDC does: the scope `offline_access`, in `scope` (a
// space-separated list) or in `scopes`; any other scope is still refused (no down-scoping). The answer's
// `refresh_token` then holds an opaque token bound to the identity and the access token's audience, valid
// for 30 days by default (REFRESH_TOKEN_TTL_HOURS), and capped like the access token at a StaticKeys
// identity's expiration_time. ExchangeRefreshToken takes it as the bearer (Authorization: Bearer <refresh
// token>) and answers a new access token (one hour, same identity, audience and `act`) and a new refresh
// token: each refresh token is used once. Presenting a used one again is reuse: the whole chain (every token
// descended from the same exchange) is revoked. A refresh token ends with its identity, with the identity's
// last role binding, and does not work while the identity is deactivated or holds no binding. An unknown,
// expired, used, revoked or ended token gets one answer (UNAUTHENTICATED, REFRESH_TOKEN_INVALID), counted
// against the caller's budget of failed exchanges. Refresh tokens are never logged nor put in an event.
//
// Refusals never reveal whether an identity exists: an unknown identity and one the token does not match
// give the same UNAUTHENTICATED answer. The exception is an AWS or service-principal identity, which this
// server cannot verify tokens for at all: that is said plainly (FAILED_PRECONDITION).
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { decodeJwt } from "jose";
import { SecurityTokenService, type ExchangeRefreshTokenRequest, type ExchangeRequest } from "../../gen/platform/oidc/v1/oidc.platform_pb.js";
import { identityAmbiguous, mintToken, readAuthorization, soleCandidate } from "../kernel/auth/index.js";
import { canAssume, ExternalTokenError, type ExternalAssumption } from "../kernel/auth/external.js";
import { failedPrecondition, invalidArgument, isMissingReference, unauthenticated, type FieldViolation } from "../kernel/errors/index.js";
import { log } from "../kernel/log.js";
import { callerOf, createFailureLimiter, DEFAULT_RATE_LIMITS } from "../kernel/rate-limit.js";
import { isValidUid } from "../kernel/uidp.js";
import { bindService, type DomainDeps, type ServiceBinding } from "../server/bindings.js";
import { createRefreshTokenStore, DEFAULT_REFRESH_TOKEN_TTL_SECONDS, RefreshRefused, type RefreshTokenRow } from "./refresh-tokens.store.js";

/** The longest lifetime of an exchanged token. */
export const EXCHANGE_MAX_TTL_SECONDS = 3600;

/** The scope that asks Exchange for a refresh token (OpenID Connect Core 1.0, section 11). */
export const OFFLINE_ACCESS = "offline_access";

/**
 * The audience, scope and cap fields both methods share; whether `offline_access` was asked for. Down-scoping
 * is not implemented: refusing is safer than silently minting a token with more power than the caller asked
 * for. `offline_access` is the one scope accepted: it asks for a refresh token, and scopes nothing.
 */
function audienceAndScopes(req: Pick<ExchangeRequest, "aud" | "scope" | "cap" | "scopes">, issuerUrl: string, violations: FieldViolation[]): boolean {
  req.aud.forEach((a, i) => {
    if (a !== issuerUrl) violations.push({ field: `aud[${i}]`, description: `this server only mints tokens for its own audience ${JSON.stringify(issuerUrl)}` });
  });
  const scope = req.scope.split(" ").filter((s) => s !== "");
  const downScoping = "down-scoping tokens is not supported by this server; the only scope accepted is offline_access (a refresh token)";
  if (scope.some((s) => s !== OFFLINE_ACCESS)) violations.push({ field: "scope", description: downScoping });
  if (req.cap.length > 0) violations.push({ field: "cap", description: "down-scoping tokens is not supported by this server" });
  req.scopes.forEach((s, i) => {
    if (s !== OFFLINE_ACCESS) violations.push({ field: `scopes[${i}]`, description: downScoping });
  });
  return scope.includes(OFFLINE_ACCESS) || req.scopes.includes(OFFLINE_ACCESS);
}

/** Whether the exchange asks for a refresh token. */
function validate(req: ExchangeRequest, issuerUrl: string): boolean {
  const violations: FieldViolation[] = [];
  const offline = audienceAndScopes(req, issuerUrl, violations);
  if (req.identity !== "" && !isValidUid(req.identity)) violations.push({ field: "identity", description: "is not a valid uid" });
  if (req.identityProvider !== "") {
    if (!isValidUid(req.identityProvider)) violations.push({ field: "identity_provider", description: "is not a valid uid" });
    if (req.identity !== "") violations.push({ field: "identity", description: "must be empty with identity_provider: the provider's login decides the identity" });
  }
  if (violations.length > 0) throw invalidArgument(violations);
  return offline;
}

/** The audience a chain is bound to, as a set of values (empty: this server's issuer URL). */
function boundAudience(row: Pick<RefreshTokenRow, "audience">, issuerUrl: string): string[] {
  return row.audience.length > 0 ? row.audience : [issuerUrl];
}

/** The one answer to every refresh token that cannot be used (no oracle). */
function refreshRefusal(err: RefreshRefused): Error {
  log.debug("refresh refused", { why: err.why, ...err.found });
  return unauthenticated(
    "The refresh token is not valid (unknown, expired, already used, or revoked); exchange a token of your identity provider again",
    "REFRESH_TOKEN_INVALID",
  );
}

function refusal(err: unknown, identity: string, provider: string): Error {
  if (!(err instanceof ExternalTokenError)) return err instanceof Error ? err : new Error(String(err));
  log.debug("token exchange refused", { identity, provider, code: err.code, why: err.message, cause: err.cause });
  switch (err.code) {
    case "TOKEN_INVALID":
      return unauthenticated(`Invalid bearer token: ${err.message}`, "TOKEN_INVALID");
    case "ERR_JWT_EXPIRED":
      return unauthenticated("Invalid bearer token: expired", "TOKEN_EXPIRED");
    case "NO_VERIFIER":
      return failedPrecondition({
        type: "IDENTITY_NOT_EXCHANGEABLE",
        subject: identity,
        // Kept short: the identity is in `subject`.
        description: `no verifier for ${err.message} in this server`,
      });
    case "NOT_ACCEPTED":
      return unauthenticated(
        provider
          ? `The presented token is not accepted by identity provider ${provider} (the provider does not exist, or the token is not an ID token it issued for its client)`
          : identity
            ? `The presented token does not assume identity ${identity} (the identity does not exist, or the token does not satisfy it)`
            : "The presented token does not assume any identity by its exact issuer and subject",
        "TOKEN_NOT_ACCEPTED",
      );
  }
}

export function createStsService(deps: DomainDeps): ServiceImpl<typeof SecurityTokenService> {
  // Refused exchanges (UNAUTHENTICATED) are counted per caller; a caller over its budget is refused with
  // RESOURCE_EXHAUSTED before its token is looked at (kernel/rate-limit.ts).
  // Refused refreshes count against the same budgets: a refresh token is a credential to guess as well. Being
  // opaque, it counts by the caller's address only.
  const failures = createFailureLimiter({ what: "failed token exchanges", ...(deps.rateLimits?.exchangeFailures ?? DEFAULT_RATE_LIMITS.exchangeFailures) });
  const refreshTokens = createRefreshTokenStore(deps.db);
  const refreshTtl = deps.refreshTokenTtlSeconds ?? DEFAULT_REFRESH_TOKEN_TTL_SECONDS;

  /** Runs `fn` for a caller within its budget, counting an UNAUTHENTICATED answer as a failure. */
  async function limited<T>(ctx: HandlerContext, fn: (token: string | undefined) => Promise<T>): Promise<T> {
    const auth = readAuthorization(ctx.requestHeader);
    const token = auth.kind === "bearer" ? auth.token : undefined;
    const caller = callerOf(ctx, token);
    failures.check(caller);
    try {
      if (auth.kind === "malformed") throw auth.error;
      return await fn(token);
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.Unauthenticated) failures.failed(caller);
      throw err;
    }
  }

  return {
    exchange: (req: ExchangeRequest, ctx: HandlerContext) => limited(ctx, (token) => exchange(req, token)),
    exchangeRefreshToken: (req: ExchangeRefreshTokenRequest, ctx: HandlerContext) => limited(ctx, (token) => refresh(req, token)),
  };

  async function refresh(req: ExchangeRefreshTokenRequest, token: string | undefined) {
    if (!token) throw unauthenticated("ExchangeRefreshToken needs the refresh token in an Authorization: Bearer <token> header", "TOKEN_MISSING");
    const violations: FieldViolation[] = [];
    audienceAndScopes(req, deps.issuerUrl, violations);
    if (violations.length > 0) throw invalidArgument(violations);
    try {
      const { result, next } = await refreshTokens.rotate(token, refreshTtl, async (row) => {
        // A requested audience must be the one the chain is bound to (refused before anything is used up).
        const bound = boundAudience(row, deps.issuerUrl);
        const asked = [...new Set(req.aud)];
        if (asked.length > 0 && (asked.length !== bound.length || asked.some((a) => !bound.includes(a)))) {
          throw invalidArgument({ field: "aud", description: `the refresh token is bound to the audience ${JSON.stringify(bound)}` });
        }
        const minted = await mintToken(deps.keys, {
          issuer: deps.issuerUrl,
          subject: row.identityUid,
          audience: row.audience.length > 0 ? row.audience : deps.issuerUrl,
          ttlSeconds: EXCHANGE_MAX_TTL_SECONDS,
          upstream: { issuer: row.upstreamIssuer, subject: row.upstreamSubject },
          ...(row.notAfter ? { notAfter: Math.floor(row.notAfter.getTime() / 1000) } : {}),
        });
        return { ...minted, identityUid: row.identityUid, chainId: row.chainId };
      });
      log.info("token refreshed", { identity: result.identityUid, chain: result.chainId, expiry: result.expiry.toISOString() });
      return {
        token: { token: result.token, expiry: timestampFromDate(result.expiry) },
        refreshToken: { token: next.token, expiry: timestampFromDate(next.expireTime) },
      };
    } catch (err) {
      throw err instanceof RefreshRefused ? refreshRefusal(err) : err;
    }
  }

  async function exchange(req: ExchangeRequest, token: string | undefined) {
    if (!token) throw unauthenticated("Exchange needs the token to exchange in an Authorization: Bearer <token> header", "TOKEN_MISSING");
    const offline = validate(req, deps.issuerUrl);
    if (req.identityProvider !== "") return mint(req, await providerLogin(req.identityProvider, token), offline);
    const verifier = deps.external;
    if (!canAssume(verifier)) {
      throw failedPrecondition({ type: "EXCHANGE_NOT_CONFIGURED", description: "this server has no verifier for external tokens" });
    }

    let found: ExternalAssumption;
    try {
      if (req.identity !== "") {
        found = await verifier.assume(token, req.identity);
      } else {
        let iss: unknown;
        try {
          iss = decodeJwt(token).iss;
        } catch (err) {
          throw new ExternalTokenError("TOKEN_INVALID", "not a JWT", { cause: err });
        }
        if (typeof iss !== "string" || iss === "") throw new ExternalTokenError("TOKEN_INVALID", "no issuer");
        const candidates = await verifier.verify(token, iss);
        const sole = soleCandidate(candidates, (c) => c.homeGroup === undefined);
        if (!sole) throw identityAmbiguous(candidates.map((c) => c.identityUid), "exchange again naming it in `identity`");
        found = sole;
      }
    } catch (err) {
      throw refusal(err, req.identity, "");
    }
    return mint(req, found, offline);
  }

  async function providerLogin(providerUid: string, token: string): Promise<ExternalAssumption> {
    if (!deps.providerLogin) {
      throw failedPrecondition({ type: "EXCHANGE_NOT_CONFIGURED", description: "this server has no verifier for identity providers' tokens" });
    }
    try {
      return await deps.providerLogin.login(providerUid, token);
    } catch (err) {
      throw refusal(err, "", providerUid);
    }
  }

  async function mint(req: ExchangeRequest, found: ExternalAssumption, offline: boolean) {
    const now = Math.floor(Date.now() / 1000);
    const notAfter = Math.min(found.expiresAt, found.identityExpiresAt ?? Infinity);
    // A token within the clock tolerance of its expiry verifies, but leaves nothing to mint.
    if (notAfter <= now) throw unauthenticated("Invalid bearer token: expired", "TOKEN_EXPIRED");
    const aud = [...new Set(req.aud)];
    const upstream = { issuer: found.issuer, subject: found.subject };
    const minted = await mintToken(deps.keys, {
      issuer: deps.issuerUrl,
      subject: found.identityUid,
      audience: aud.length > 0 ? aud : deps.issuerUrl,
      ttlSeconds: EXCHANGE_MAX_TTL_SECONDS,
      upstream,
      notAfter,
    });
    let refreshToken = "";
    if (offline) {
      try {
        refreshToken = (await refreshTokens.issue({ identityUid: found.identityUid, audience: aud, upstream, notAfter: found.identityExpiresAt }, refreshTtl)).token;
      } catch (err) {
        // The identity was deleted since it was verified: as if it had never matched.
        if (isMissingReference(err)) throw refusal(new ExternalTokenError("NOT_ACCEPTED", "the identity was deleted"), req.identity, req.identityProvider);
        throw err;
      }
    }
    log.info("token exchanged", { identity: found.identityUid, upstreamIssuer: found.issuer, expiry: minted.expiry.toISOString(), refreshToken: offline });
    return { token: minted.token, refreshToken, expiry: timestampFromDate(minted.expiry) };
  }
}

export function stsServiceBindings(deps: DomainDeps): ServiceBinding[] {
  return [bindService(SecurityTokenService, createStsService(deps))];
}
