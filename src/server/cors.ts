// CORS for browser clients (Connect-web, gRPC-web, fetch() on the REST paths), in one place in front of every
// route: origins the operator lists (CORS_ALLOWED_ORIGINS, exact origins) get the CORS headers, preflights
// included; any other origin, and every request when none is listed (the default), gets no CORS header at all,
// so browsers keep other sites' pages from reading the answers.
import { cors as connectCors } from "@connectrpc/connect";
import corsMiddleware from "cors";
import type { RequestHandler } from "./listener.js";

/** Connect's and gRPC-web's methods, and those of the REST bindings (google.api.http). */
export const CORS_ALLOWED_METHODS: readonly string[] = [...new Set([...connectCors.allowedMethods, "GET", "POST", "PUT", "PATCH", "DELETE"])];
/** The request headers Connect and gRPC-web send, the bearer token, and the caller's request id. */
export const CORS_ALLOWED_HEADERS: readonly string[] = [...connectCors.allowedHeaders, "Authorization", "X-Request-Id"];
/** What a browser client reads of a response: gRPC-web's status in headers, error details, the request id. */
export const CORS_EXPOSED_HEADERS: readonly string[] = [...connectCors.exposedHeaders, "X-Request-Id", "Retry-After"];
/** How long a browser may reuse a preflight's answer (2 hours, Chromium's cap). */
const PREFLIGHT_MAX_AGE_SECONDS = 7200;

/** The handler, answering CORS for the allowed origins (the handler itself when there are none). */
export function withCors(handler: RequestHandler, allowedOrigins: readonly string[]): RequestHandler {
  if (allowedOrigins.length === 0) return handler;
  const allowed = new Set(allowedOrigins);
  const middleware = corsMiddleware({
    // A listed origin is echoed back; any other makes the middleware step aside (no header at all).
    origin: (origin, callback) => callback(null, origin !== undefined && allowed.has(origin) ? origin : false),
    methods: [...CORS_ALLOWED_METHODS],
    allowedHeaders: [...CORS_ALLOWED_HEADERS],
    exposedHeaders: [...CORS_EXPOSED_HEADERS],
    maxAge: PREFLIGHT_MAX_AGE_SECONDS,
  });
  // HTTP/2's compatibility API has what the middleware uses (method, headers, statusCode, setHeader, getHeader, end).
  return (req, res) => middleware(req, res, () => handler(req, res));
}
