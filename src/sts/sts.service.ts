// SecurityTokenService: exchanges a token of an external OIDC issuer (or of this server) for a short-lived
// access token of this server that acts as an identity.
//
// The method's auth rule is `disabled`: the handler authenticates the presented token itself, taken from the
// Authorization: Bearer header. The caller names the identity to assume in `identity`; the token must satisfy
// that identity's relationship (ClaimMatch with patterns, audience and claims, or StaticKeys). With no
// `identity`, the identities the token assumes by exact issuer and subject, as on a direct API call: the
// only one, the only root-level one (a person's own, which no organization can create), or the only one the
// token's holder could see (kernel/auth/access.ts chooseCandidate); otherwise FAILED_PRECONDITION
// (IDENTITY_AMBIGUOUS) lists those the holder could see, one PreconditionFailure violation each with the
// identity uid as its subject, and the caller exchanges again naming one. Nobody loses access because
// another organization created identities for them, nor learns of identities they cannot read.
//
// With `identity_provider` (the uid of an organization's identity provider), the token is an ID token of that
// provider: the IAM domain verifies it against the provider's issuer and client id, finds or creates the
// identity it correlates to, and brings its group-mapped role bindings in line with the token
// (iam/sso-login.ts); `identity` is then left empty (the provider decides which identity it is).
//
// Audience. `aud` names this server's API (its issuer URL, the default when empty) or its registry (the
// issuer's host, the registry service: what the published SDK's registry keychain asks for). A registry token
// works on /v2/ and /token (sent as the password of the user `_token`), not on API calls.
//
// Down-scoping. `scopes` and `scope` (a space-separated list; the union of both counts) name groups, `cap`
// capabilities (the SDK's names, "repo.list", or the enum names): the token then holds only the identity's
// role bindings at or above each group, reaching that group's subtree, and of those only the capabilities
// named, as the published proto describes (kernel/auth/restriction.ts). A group or capability the identity
// does not hold is not an error: the token simply cannot act there (the proto's "if any exist"). A value that
// is neither a group uid nor `offline_access`, or names no capability, is INVALID_ARGUMENT.
//
// Refresh tokens. A caller asks Exchange for one as OIDC does: the scope `offline_access`, in `scope` or in
// `scopes`. The answer's `refresh_token` then holds an opaque token bound to the identity, the access token's
// audience and its restriction (a refresh asking for other scopes or capabilities is refused); its chain (it
// and every token rotated from it) ends 30 days after this exchange by default (REFRESH_TOKEN_TTL_HOURS),
// however often it is used, and no later than a StaticKeys identity's expiration_time. A chain started by a
// login through an identity provider also ends when the roles the provider's groups gave at that login
// change (refresh-tokens.store.ts). ExchangeRefreshToken takes it as the bearer (Authorization: Bearer
// <refresh token>) and answers a new access token (one hour, same identity, audience, `act` and restriction,
// never past the chain's end) and a new refresh token: each refresh token is used once. Presenting a used one
// again is reuse: the whole chain (every token descended from the same exchange) is revoked. A refresh token ends with its identity, with the identity's
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
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import {
  capabilityByName,
  chooseCandidate,
  MAX_RESTRICTION_SCOPES,
  mintToken,
  readAuthorization,
  restrictionClaims,
  type TokenRestriction,
} from "../kernel/auth/index.js";
import { canAssume, ExternalTokenError, type ExternalAssumption } from "../kernel/auth/external.js";
import { failedPrecondition, invalidArgument, isMissingReference, unauthenticated, type FieldViolation } from "../kernel/errors/index.js";
import { log } from "../kernel/log.js";
import { callerOf, createFailureLimiter, DEFAULT_RATE_LIMITS, provenCaller } from "../kernel/rate-limit.js";
import { isGroupUid, isValidUid } from "../kernel/uidp.js";
import { bindService, type ServiceBinding } from "../kernel/module.js";
import type { StsDeps } from "./deps.js";
import { createRefreshTokenStore, DEFAULT_REFRESH_TOKEN_TTL_SECONDS, RefreshRefused, restrictionOfRow, type RefreshTokenRow } from "./refresh-tokens.store.js";

/** The longest lifetime of an exchanged token. */
export const EXCHANGE_MAX_TTL_SECONDS = 3600;

/** A restriction with only the fields asked for (a TokenRestriction leaves the others out). */
function pruned(r: Asked["restriction"]): TokenRestriction {
  return { ...(r.scopes !== undefined ? { scopes: r.scopes } : {}), ...(r.capabilities !== undefined ? { capabilities: r.capabilities } : {}) };
}

/** The scope that asks Exchange for a refresh token (OpenID Connect Core 1.0, section 11). */
export const OFFLINE_ACCESS = "offline_access";

/** What a request asks of the tokens it gets: a refresh token (offline_access), and a restriction. */
interface Asked {
  offline: boolean;
  /** Each field undefined when the request does not restrict by it. */
  restriction: { scopes: string[] | undefined; capabilities: Capability[] | undefined };
}

/**
 * The audience, scope and cap fields both methods share. `scope` (space-separated, as OIDC's) and `scopes`
 * name the groups to restrict the token to, deduplicated, and `offline_access`, which asks for a refresh token
 * and restricts nothing; `cap` names capabilities by the SDK's name ("repo.list") or the enum name.
 */
function audienceAndScopes(req: Pick<ExchangeRequest, "aud" | "scope" | "cap" | "scopes">, issuerUrl: string, violations: FieldViolation[]): Asked {
  const audiences = audiencesOf(issuerUrl);
  req.aud.forEach((a, i) => {
    if (!audiences.includes(a)) {
      violations.push({ field: `aud[${i}]`, description: `this server only mints tokens for its own audiences: ${audiences.map((x) => JSON.stringify(x)).join(" (its API) and ")} (its registry)` });
    }
  });
  let offline = false;
  const groups = new Set<string>();
  const scope = (value: string, field: string) => {
    if (value === OFFLINE_ACCESS) offline = true;
    else if (isGroupUid(value)) groups.add(value);
    else violations.push({ field, description: `${JSON.stringify(value)} is neither a group uid (to restrict the token to) nor offline_access (to ask for a refresh token)` });
  };
  for (const s of req.scope.split(" ")) if (s !== "") scope(s, "scope");
  req.scopes.forEach((s, i) => scope(s, `scopes[${i}]`));
  if (groups.size > MAX_RESTRICTION_SCOPES) violations.push({ field: "scopes", description: `at most ${MAX_RESTRICTION_SCOPES} groups, ${groups.size} given` });
  const capabilities = new Set<Capability>();
  req.cap.forEach((c, i) => {
    const cap = capabilityByName(c);
    if (cap !== undefined) capabilities.add(cap);
    else violations.push({ field: `cap[${i}]`, description: `${JSON.stringify(c)} is not a capability: give its SDK name (such as "repo.list") or its enum name (such as "CAP_REPO_LIST")` });
  });
  return {
    offline,
    restriction: {
      scopes: groups.size > 0 ? [...groups].sort() : undefined,
      capabilities: capabilities.size > 0 ? [...capabilities].sort((a, b) => a - b) : undefined,
    },
  };
}

/**
 * The audiences this server mints for: its API (the issuer URL) and its registry (the issuer's host, the
 * registry service's name: what the published SDK's registry keychain asks for, `sts.New(issuer,
 * <registry host>)`, before sending the token as the password of `_token` to /v2/ and /token).
 */
function audiencesOf(issuerUrl: string): string[] {
  return [issuerUrl, new URL(issuerUrl).host];
}

/** What Exchange asks for. */
function validate(req: ExchangeRequest, issuerUrl: string): Asked {
  const violations: FieldViolation[] = [];
  const asked = audienceAndScopes(req, issuerUrl, violations);
  if (req.identity !== "" && !isValidUid(req.identity)) violations.push({ field: "identity", description: "is not a valid uid" });
  if (req.identityProvider !== "") {
    if (!isValidUid(req.identityProvider)) violations.push({ field: "identity_provider", description: "is not a valid uid" });
    if (req.identity !== "") violations.push({ field: "identity", description: "must be empty with identity_provider: the provider's login decides the identity" });
  }
  if (violations.length > 0) throw invalidArgument(violations);
  return asked;
}

/**
 * The restriction of a refresh's access token: the chain's. A refresh may repeat what the exchange asked for
 * (the SDK sends the same options), but a scopes or cap that differs from the chain's is refused (before
 * anything is used up): a chain neither widens nor changes.
 */
function refreshRestriction(chain: TokenRestriction | undefined, asked: Asked["restriction"]): TokenRestriction | undefined {
  const same = <T>(a: readonly T[] | undefined, b: readonly T[] | undefined) => a === undefined || (b !== undefined && a.length === b.length && a.every((x, i) => x === b[i]));
  const violations: FieldViolation[] = [];
  if (!same(asked.scopes, chain?.scopes)) {
    violations.push({ field: "scopes", description: `the refresh token is bound to the groups ${JSON.stringify(chain?.scopes ?? [])} (none: not restricted by group)` });
  }
  if (!same(asked.capabilities, chain?.capabilities)) {
    const names = (chain?.capabilities ?? []).map((c) => Capability[c]);
    violations.push({ field: "cap", description: `the refresh token is bound to the capabilities ${JSON.stringify(names)} (none: not restricted by capability)` });
  }
  if (violations.length > 0) throw invalidArgument(violations);
  return chain;
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

/** One exchange as the failure limiter sees it: whether the presented token's signature has verified. */
interface Attempt {
  verified: boolean;
}

export function createStsService(deps: StsDeps): ServiceImpl<typeof SecurityTokenService> {
  // Refused exchanges (UNAUTHENTICATED) are counted per caller; a caller over its budget is refused with
  // RESOURCE_EXHAUSTED before its token is looked at (kernel/rate-limit.ts). A refusal counts against the
  // token's issuer and subject only once its signature verified (a forged token claiming someone's subject
  // must not lock that person out), else against the address alone.
  // Refused refreshes count against the same budgets: a refresh token is a credential to guess as well. Being
  // opaque, it counts by the caller's address only.
  const failures = createFailureLimiter({ what: "failed token exchanges", ...(deps.rateLimits?.exchangeFailures ?? DEFAULT_RATE_LIMITS.exchangeFailures) });
  const refreshTokens = createRefreshTokenStore(deps.db);
  const refreshTtl = deps.refreshTokenTtlSeconds ?? DEFAULT_REFRESH_TOKEN_TTL_SECONDS;

  /**
   * Runs `fn` for a caller within its budget, counting an UNAUTHENTICATED answer as a failure; `fn` sets
   * `attempt.verified` once the token's signature has verified.
   */
  async function limited<T>(ctx: HandlerContext, fn: (token: string | undefined, attempt: Attempt) => Promise<T>): Promise<T> {
    const auth = readAuthorization(ctx.requestHeader);
    const token = auth.kind === "bearer" ? auth.token : undefined;
    const caller = callerOf(ctx, token);
    failures.check(caller);
    const attempt: Attempt = { verified: false };
    try {
      if (auth.kind === "malformed") throw auth.error;
      return await fn(token, attempt);
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.Unauthenticated) failures.failed(provenCaller(caller, attempt.verified));
      throw err;
    }
  }

  return {
    exchange: (req: ExchangeRequest, ctx: HandlerContext) => limited(ctx, (token, attempt) => exchange(req, token, attempt, ctx.signal)),
    exchangeRefreshToken: (req: ExchangeRefreshTokenRequest, ctx: HandlerContext) => limited(ctx, (token) => refresh(req, token)),
  };

  async function refresh(req: ExchangeRefreshTokenRequest, token: string | undefined) {
    if (!token) throw unauthenticated("ExchangeRefreshToken needs the refresh token in an Authorization: Bearer <token> header", "TOKEN_MISSING");
    const violations: FieldViolation[] = [];
    const { restriction: askedRestriction } = audienceAndScopes(req, deps.issuerUrl, violations);
    if (violations.length > 0) throw invalidArgument(violations);
    try {
      const { result, next } = await refreshTokens.rotate(token, refreshTtl, async (row) => {
        // A requested audience must be the one the chain is bound to (refused before anything is used up).
        const bound = boundAudience(row, deps.issuerUrl);
        const asked = [...new Set(req.aud)];
        if (asked.length > 0 && (asked.length !== bound.length || asked.some((a) => !bound.includes(a)))) {
          throw invalidArgument({ field: "aud", description: `the refresh token is bound to the audience ${JSON.stringify(bound)}` });
        }
        const restriction = refreshRestriction(restrictionOfRow(row), askedRestriction);
        const minted = await mintToken(deps.keys, {
          restriction,
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

  async function exchange(req: ExchangeRequest, token: string | undefined, attempt: Attempt, signal: AbortSignal) {
    if (!token) throw unauthenticated("Exchange needs the token to exchange in an Authorization: Bearer <token> header", "TOKEN_MISSING");
    const asked = validate(req, deps.issuerUrl);
    if (req.identityProvider !== "") return mint(req, await providerLogin(req.identityProvider, token, attempt, signal), asked);
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
        found = await chooseAssumption(await verifier.verify(token, iss));
      }
    } catch (err) {
      if (err instanceof ExternalTokenError && err.signatureVerified) attempt.verified = true;
      throw refusal(err, req.identity, "");
    }
    attempt.verified = true;
    return mint(req, found, asked);
  }

  /** Of the identities a token assumes by exact issuer and subject, the one an exchange naming none takes. */
  async function chooseAssumption(candidates: ExternalAssumption[]): Promise<ExternalAssumption> {
    if (candidates.length === 1) return candidates[0]!;
    const withGrants = await Promise.all(
      candidates.map(async (c) => {
        const grants = await deps.grants(c.identityUid);
        return grants && !grants.inactive
          ? { assumption: c, bindings: grants.bindings, principal: { identityUid: c.identityUid, homeGroup: c.homeGroup, issuer: c.issuer, subject: c.subject } }
          : undefined;
      }),
    );
    const remaining = withGrants.filter((c) => c !== undefined);
    if (remaining.length === 0) throw new ExternalTokenError("NOT_ACCEPTED", "the identities were deleted", { signatureVerified: true });
    return chooseCandidate(remaining, "exchange again naming it in `identity`").assumption;
  }

  async function providerLogin(providerUid: string, token: string, attempt: Attempt, signal: AbortSignal): Promise<ExternalAssumption> {
    if (!deps.providerLogin) {
      throw failedPrecondition({ type: "EXCHANGE_NOT_CONFIGURED", description: "this server has no verifier for identity providers' tokens" });
    }
    try {
      const found = await deps.providerLogin.login(providerUid, token, signal);
      attempt.verified = true;
      return found;
    } catch (err) {
      if (err instanceof ExternalTokenError && err.signatureVerified) attempt.verified = true;
      throw refusal(err, "", providerUid);
    }
  }

  async function mint(req: ExchangeRequest, found: ExternalAssumption, { offline, restriction: asked }: Asked) {
    const restriction = asked.scopes === undefined && asked.capabilities === undefined ? undefined : pruned(asked);
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
      restriction,
    });
    let refreshToken = "";
    if (offline) {
      try {
        refreshToken = (
          await refreshTokens.issue(
            { identityUid: found.identityUid, audience: aud, upstream, notAfter: found.identityExpiresAt, restriction, providerLogin: req.identityProvider !== "" },
            refreshTtl,
          )
        ).token;
      } catch (err) {
        // The identity was deleted since it was verified: as if it had never matched.
        if (isMissingReference(err)) throw refusal(new ExternalTokenError("NOT_ACCEPTED", "the identity was deleted"), req.identity, req.identityProvider);
        throw err;
      }
    }
    log.info("token exchanged", {
      identity: found.identityUid,
      upstreamIssuer: found.issuer,
      expiry: minted.expiry.toISOString(),
      refreshToken: offline,
      ...(restriction ? { restrictedTo: restrictionClaims(restriction) } : {}),
    });
    return { token: minted.token, refreshToken, expiry: timestampFromDate(minted.expiry) };
  }
}

export function stsServiceBindings(deps: StsDeps): ServiceBinding[] {
  return [bindService(SecurityTokenService, createStsService(deps))];
}
