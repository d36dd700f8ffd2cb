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
// Refusals never reveal whether an identity exists: an unknown identity and one the token does not match
// give the same UNAUTHENTICATED answer. The exception is an AWS or service-principal identity, which this
// server cannot verify tokens for at all: that is said plainly (FAILED_PRECONDITION).
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from "@connectrpc/connect";
import { decodeJwt } from "jose";
import { SecurityTokenService, type ExchangeRequest } from "../../gen/platform/oidc/v1/oidc.platform_pb.js";
import { bearerToken, identityAmbiguous, mintToken, soleCandidate } from "../kernel/auth/index.js";
import { canAssume, ExternalTokenError, type ExternalAssumption } from "../kernel/auth/external.js";
import { failedPrecondition, invalidArgument, unauthenticated, unimplemented, type FieldViolation } from "../kernel/errors/index.js";
import { log } from "../kernel/log.js";
import { callerOf, createFailureLimiter, DEFAULT_RATE_LIMITS } from "../kernel/rate-limit.js";
import { isValidUid } from "../kernel/uidp.js";
import { bindService, type DomainDeps, type ServiceBinding } from "../server/bindings.js";

/** The longest lifetime of an exchanged token. */
export const EXCHANGE_MAX_TTL_SECONDS = 3600;

function validate(req: ExchangeRequest, issuerUrl: string): void {
  const violations: FieldViolation[] = [];
  req.aud.forEach((a, i) => {
    if (a !== issuerUrl) violations.push({ field: `aud[${i}]`, description: `this server only mints tokens for its own audience ${JSON.stringify(issuerUrl)}` });
  });
  if (req.identity !== "" && !isValidUid(req.identity)) violations.push({ field: "identity", description: "is not a valid uid" });
  // Down-scoping is not implemented: refusing is safer than silently minting a token with more power than
  // the caller asked for.
  if (req.scope !== "") violations.push({ field: "scope", description: "down-scoping tokens is not supported by this server" });
  if (req.cap.length > 0) violations.push({ field: "cap", description: "down-scoping tokens is not supported by this server" });
  if (req.scopes.length > 0) violations.push({ field: "scopes", description: "down-scoping tokens is not supported by this server" });
  if (req.identityProvider !== "") {
    if (!isValidUid(req.identityProvider)) violations.push({ field: "identity_provider", description: "is not a valid uid" });
    if (req.identity !== "") violations.push({ field: "identity", description: "must be empty with identity_provider: the provider's login decides the identity" });
  }
  if (violations.length > 0) throw invalidArgument(violations);
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
  const failures = createFailureLimiter({ what: "failed token exchanges", ...(deps.rateLimits?.exchangeFailures ?? DEFAULT_RATE_LIMITS.exchangeFailures) });

  return {
    async exchange(req: ExchangeRequest, ctx: HandlerContext) {
      const token = bearerToken(ctx.requestHeader);
      const caller = callerOf(ctx, token);
      failures.check(caller);
      try {
        return await exchange(req, token);
      } catch (err) {
        if (err instanceof ConnectError && err.code === Code.Unauthenticated) failures.failed(caller);
        throw err;
      }
    },

    exchangeRefreshToken() {
      throw unimplemented(
        "ExchangeRefreshToken is not supported by this server: it issues no refresh tokens; exchange an OIDC token again with Exchange",
      );
    },
  };

  async function exchange(req: ExchangeRequest, token: string | undefined) {
    if (!token) throw unauthenticated("Exchange needs the token to exchange in an Authorization: Bearer <token> header", "TOKEN_MISSING");
    validate(req, deps.issuerUrl);
    if (req.identityProvider !== "") return mint(req, await providerLogin(req.identityProvider, token));
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
    return mint(req, found);
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

  async function mint(req: ExchangeRequest, found: ExternalAssumption) {
    const now = Math.floor(Date.now() / 1000);
    const notAfter = Math.min(found.expiresAt, found.identityExpiresAt ?? Infinity);
    // A token within the clock tolerance of its expiry verifies, but leaves nothing to mint.
    if (notAfter <= now) throw unauthenticated("Invalid bearer token: expired", "TOKEN_EXPIRED");
    const audience = req.aud.length > 0 ? [...new Set(req.aud)] : deps.issuerUrl;
    const minted = await mintToken(deps.keys, {
      issuer: deps.issuerUrl,
      subject: found.identityUid,
      audience,
      ttlSeconds: EXCHANGE_MAX_TTL_SECONDS,
      upstream: { issuer: found.issuer, subject: found.subject },
      notAfter,
    });
    log.info("token exchanged", { identity: found.identityUid, upstreamIssuer: found.issuer, expiry: minted.expiry.toISOString() });
    return { token: minted.token, refreshToken: "", expiry: timestampFromDate(minted.expiry) };
  }
}

export function stsServiceBindings(deps: DomainDeps): ServiceBinding[] {
  return [bindService(SecurityTokenService, createStsService(deps))];
}
