// The Authorization header as bearer-token clients send it (RFC 6750 section 2.1), read in one place for
// every route that takes a bearer token: the API's interceptor and token exchange, SCIM, /metrics, and the
// challenge of a 401.

/** What an Authorization header holds. */
type AuthorizationHeader =
  | { kind: "none" }
  | { kind: "bearer"; token: string }
  /**
   * A header that holds no usable bearer token. `problem` says what is wrong with it and how to send it,
   * without repeating any of it (it may hold a credential); `presented` is true when its scheme is Bearer
   * and something follows, so that a refusal answers as to a token that was presented and refused.
   */
  | { kind: "malformed"; problem: string; presented: boolean };

const HOW = 'send "Authorization: Bearer <token>", the token alone after "Bearer "';

/**
 * Reads an Authorization header's value. The usual mistake is "Bearer Bearer <token>", from a token pasted
 * with its scheme where a client (the /docs Authorize dialog) adds the scheme itself.
 */
export function parseAuthorization(value: string | null | undefined): AuthorizationHeader {
  if (!value) return { kind: "none" };
  const words = value.trim().split(/\s+/);
  const isBearer = (w: string | undefined) => w?.toLowerCase() === "bearer";
  if (isBearer(words[0]) && words.length === 2 && !isBearer(words[1])) return { kind: "bearer", token: words[1]! };
  const presented = isBearer(words[0]) && words.length > 1;
  let problem: string;
  if (isBearer(words[0]) && isBearer(words[1])) {
    problem = `says "Bearer" twice: ${HOW} (in the /docs Authorize dialog, paste the token without "Bearer ")`;
  } else if (isBearer(words[0])) {
    problem = words.length === 1 ? `has no token after "Bearer": ${HOW}` : `has more than one word after "Bearer" (a token has no spaces): ${HOW}`;
  } else if (words.length === 1) {
    problem = `has no scheme before the token: ${HOW}`;
  } else {
    problem = `is not a bearer token (its scheme is not "Bearer"): ${HOW}`;
  }
  return { kind: "malformed", problem, presented };
}

/** The bearer token an Authorization header holds, or undefined when it holds none or is malformed. */
export function bearerTokenOf(value: string | null | undefined): string | undefined {
  const auth = parseAuthorization(value);
  return auth.kind === "bearer" ? auth.token : undefined;
}

/**
 * The challenge of a 401, for its WWW-Authenticate header (RFC 6750 section 3): `Bearer`, with
 * error="invalid_token" when the request presented a bearer token that was refused (expired, malformed,
 * unknown signer, no matching identity). A request with no credentials, or another scheme, gets the plain
 * challenge, as the RFC says for a request that lacks authentication.
 */
export function bearerChallenge(authorization: string | null | undefined): string {
  const auth = parseAuthorization(authorization);
  return auth.kind === "bearer" || (auth.kind === "malformed" && auth.presented) ? 'Bearer error="invalid_token"' : "Bearer";
}
