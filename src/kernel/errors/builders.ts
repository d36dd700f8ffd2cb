// Builders for the AIP-193 errors domain code throws. Each error carries a google.rpc.ErrorInfo with a
// reason; its domain is filled in by the error boundary from the method that failed, so domain code never
// repeats it. Messages follow the specification's forms ("Invalid argument: <field>: <description>",
// "Precondition failed: <description>").
import { Code, ConnectError } from "@connectrpc/connect";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import {
  BadRequestSchema,
  ErrorInfoSchema,
  PreconditionFailureSchema,
  RequestInfoSchema,
  ResourceInfoSchema,
  RetryInfoSchema,
} from "../../../gen/google/rpc/error_details_pb.js";

export interface FieldViolation {
  /**
   * The request field: its path from the request message's root, in proto field names (for example
   * "group.name", "repo.catalog_tier", "uidp.children_of" or "update_mask"), on every protocol.
   */
  field: string;
  description: string;
}

export interface PreconditionViolation {
  /** A machine-readable kind, for example RESOURCE_NOT_EMPTY. */
  type: string;
  /** What the violation is about, for example the uid of the blocking resource or group. */
  subject?: string;
  description: string;
}

/** The reason every error carries: the code's canonical name unless a more precise one is given. */
export function reasonOf(code: Code): string {
  return Code[code]
    .replace(/([a-z])([A-Z])/g, "$1_$2")
    .toUpperCase();
}

function errorInfo(reason: string, metadata: Record<string, string> = {}) {
  // domain is left empty here and set by the error boundary from the method that failed.
  return { desc: ErrorInfoSchema, value: { reason, domain: "", metadata } };
}

/** Longest text of a request echoed in an error (a description quoting a value, a resource name). */
const maxEchoChars = 256;

/**
 * Text of a request as an error may quote it: cut beyond maxEchoChars. A 20 KB field mask path quoted in full
 * made a gRPC error's trailers (grpc-message, percent-encoded, and the same text again in
 * grpc-status-details-bin) larger than clients accept: they reset the connection instead of reading the error.
 */
export function clip(text: string): string {
  return text.length <= maxEchoChars ? text : `${text.slice(0, maxEchoChars)}… (${text.length} characters)`;
}

export function invalidArgument(violations: FieldViolation | FieldViolation[], reason = "INVALID_ARGUMENT"): ConnectError {
  const list = (Array.isArray(violations) ? violations : [violations]).map((v) => ({ ...v, field: clip(v.field), description: clip(v.description) }));
  const message = "Invalid argument: " + list.map((v) => `${v.field}: ${v.description}`).join("; ");
  return new ConnectError(message, Code.InvalidArgument, undefined, [
    errorInfo(reason),
    { desc: BadRequestSchema, value: { fieldViolations: list } },
  ]);
}

/** Violation paths relative to a request field ("group"), made relative to the request's root ("group.name"). */
export function under(field: string, violations: readonly FieldViolation[]): FieldViolation[] {
  return field === "" ? [...violations] : violations.map((v) => ({ ...v, field: `${field}.${v.field}` }));
}

/** Throws INVALID_ARGUMENT carrying every violation found, when there is at least one. */
export function throwIfAny(violations: readonly FieldViolation[]): void {
  if (violations.length > 0) throw invalidArgument([...violations]);
}

export function notFound(resourceType: string, name: string, description?: string): ConnectError {
  const resourceName = clip(name);
  return new ConnectError(description ?? `${resourceType} ${JSON.stringify(resourceName)} not found`, Code.NotFound, undefined, [
    errorInfo("NOT_FOUND"),
    { desc: ResourceInfoSchema, value: { resourceType, resourceName, description: description ?? "" } },
  ]);
}

export function failedPrecondition(violations: PreconditionViolation | PreconditionViolation[], reason = "FAILED_PRECONDITION"): ConnectError {
  const list = (Array.isArray(violations) ? violations : [violations]).map((v) => ({ ...v, description: clip(v.description), ...(v.subject !== undefined ? { subject: clip(v.subject) } : {}) }));
  const message = "Precondition failed: " + list.map((v) => v.description).join("; ");
  return new ConnectError(message, Code.FailedPrecondition, undefined, [
    errorInfo(reason),
    {
      desc: PreconditionFailureSchema,
      value: { violations: list.map((v) => ({ type: v.type, subject: v.subject ?? "", description: v.description })) },
    },
  ]);
}

export function permissionDenied(description: string, reason = "PERMISSION_DENIED"): ConnectError {
  return new ConnectError(description, Code.PermissionDenied, undefined, [errorInfo(reason)]);
}

export function unauthenticated(description: string, reason = "UNAUTHENTICATED"): ConnectError {
  return new ConnectError(description, Code.Unauthenticated, undefined, [errorInfo(reason)]);
}

export function alreadyExists(resourceType: string, name: string, description?: string): ConnectError {
  const resourceName = clip(name);
  return new ConnectError(description ?? `${resourceType} ${JSON.stringify(resourceName)} already exists`, Code.AlreadyExists, undefined, [
    errorInfo("ALREADY_EXISTS"),
    { desc: ResourceInfoSchema, value: { resourceType, resourceName, description: description ?? "" } },
  ]);
}

export function aborted(description: string, reason = "ABORTED"): ConnectError {
  return new ConnectError(description, Code.Aborted, undefined, [errorInfo(reason)]);
}

/** The call ran out of time: its deadline (the server's, or a shorter one the client asked for) passed. */
export function deadlineExceeded(description: string, reason = "DEADLINE_EXCEEDED"): ConnectError {
  return new ConnectError(description, Code.DeadlineExceeded, undefined, [errorInfo(reason)]);
}

export function resourceExhausted(description: string, retryAfterMs: number, reason = "RESOURCE_EXHAUSTED"): ConnectError {
  return new ConnectError(description, Code.ResourceExhausted, undefined, [
    errorInfo(reason),
    { desc: RetryInfoSchema, value: { retryDelay: durationFromMs(retryAfterMs) } },
  ]);
}

/** A dependency (the database) cannot be reached: UNAVAILABLE (503), with when to retry. */
export function unavailable(description: string, retryAfterMs: number, reason = "UNAVAILABLE"): ConnectError {
  return new ConnectError(description, Code.Unavailable, undefined, [
    errorInfo(reason),
    { desc: RetryInfoSchema, value: { retryDelay: durationFromMs(retryAfterMs) } },
  ]);
}

export function unimplemented(description: string, reason = "UNIMPLEMENTED"): ConnectError {
  return new ConnectError(description, Code.Unimplemented, undefined, [errorInfo(reason)]);
}

/** The only error that reaches a client for an unexpected failure: no cause, just a request id to quote. */
export function internal(requestId: string): ConnectError {
  return new ConnectError(`Internal error; quote request id ${requestId} when reporting it`, Code.Internal, undefined, [
    errorInfo("INTERNAL", { requestId }),
    { desc: RequestInfoSchema, value: { requestId, servingData: "" } },
  ]);
}

// Refusals of the HTTP layer, before any method runs (REST routing, the RPC paths' protocol checks). Their
// HTTP status is more precise than their code's (http.ts maps it by reason); headers to send are metadata.

/** No REST route for the path: NOT_FOUND (404). */
export function routeNotFound(verb: string, path: string, withoutTrailingSlash?: string): ConnectError {
  if (withoutTrailingSlash === undefined) {
    return new ConnectError(`No REST route for ${verb} ${path}`, Code.NotFound, undefined, [errorInfo("ROUTE_NOT_FOUND", { method: verb, path })]);
  }
  return new ConnectError(`No REST route for ${verb} ${path}: drop the trailing slash (${verb} ${withoutTrailingSlash} is a route)`, Code.NotFound, undefined, [
    errorInfo("ROUTE_NOT_FOUND", { method: verb, path, suggestedPath: withoutTrailingSlash }),
  ]);
}

/** The path is served under other HTTP methods: UNIMPLEMENTED, answered 405 with Allow. */
export function methodNotAllowed(verb: string, path: string, allowed: readonly string[]): ConnectError {
  const allow = allowed.join(", ");
  return new ConnectError(`Method ${verb} is not allowed on ${path}; allowed: ${allow}`, Code.Unimplemented, { allow }, [
    errorInfo("METHOD_NOT_ALLOWED", { method: verb, allow }),
  ]);
}

/** The request line and headers are over the listener's limit: RESOURCE_EXHAUSTED, answered 431. */
export function requestHeadersTooLarge(limit: number): ConnectError {
  return new ConnectError(`Request line and headers exceed the limit of ${limit} bytes`, Code.ResourceExhausted, undefined, [
    errorInfo("REQUEST_HEADERS_TOO_LARGE", { limitBytes: String(limit) }),
  ]);
}

/** The HTTP/1.1 parser refused the request before any route saw it: INVALID_ARGUMENT, answered 400. */
export function malformedHttpRequest(): ConnectError {
  return new ConnectError("Malformed HTTP/1.1 request", Code.InvalidArgument, undefined, [errorInfo("MALFORMED_HTTP_REQUEST")]);
}

/**
 * The request (its headers, or its body) did not arrive within the listener's limit: DEADLINE_EXCEEDED,
 * answered 408. A connection that keeps the server waiting holds a socket and memory for nothing.
 */
export function requestTimedOut(): ConnectError {
  return new ConnectError("The request did not arrive in time", Code.DeadlineExceeded, undefined, [errorInfo("REQUEST_TIMEOUT")]);
}

/** A timeout header the client sent that cannot be read: INVALID_ARGUMENT (REST's grpc-timeout). */
export function malformedTimeout(header: string, value: string): ConnectError {
  return new ConnectError(
    `The ${header} header ${JSON.stringify(value)} is malformed: up to 8 digits and a unit (H, M, S, m, u or n), for example 500m`,
    Code.InvalidArgument,
    undefined,
    [errorInfo("MALFORMED_TIMEOUT", { header })],
  );
}

/** The request body is over the cap: RESOURCE_EXHAUSTED, answered 413. */
export function payloadTooLarge(limit: number): ConnectError {
  return new ConnectError(`Request body exceeds the limit of ${limit} bytes`, Code.ResourceExhausted, undefined, [
    errorInfo("PAYLOAD_TOO_LARGE", { limitBytes: String(limit) }),
  ]);
}

/** No protocol of the path reads this content type: UNIMPLEMENTED, answered 415. */
export function unsupportedMediaType(contentType: string, path: string): ConnectError {
  return new ConnectError(
    `Content type ${JSON.stringify(contentType)} is not supported on ${path}; send application/json or application/proto (Connect), application/grpc or application/grpc-web`,
    Code.Unimplemented,
    undefined,
    [errorInfo("UNSUPPORTED_MEDIA_TYPE", { contentType })],
  );
}

/** A streaming method that needs HTTP/2 was called over HTTP/1.1: UNIMPLEMENTED, answered 505. */
export function httpVersionNotSupported(httpVersion: string, path: string): ConnectError {
  return new ConnectError(`${path} streams in both directions and needs HTTP/2; the request came over HTTP/${httpVersion}`, Code.Unimplemented, undefined, [
    errorInfo("HTTP_VERSION_NOT_SUPPORTED", { httpVersion }),
  ]);
}
