// Errors the gateway raises itself, before any method runs. Each carries an ErrorInfo (its domain is filled
// in by toPublicError) and, where the gRPC code's usual HTTP status is not the right one, the status to send.
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";

/** A ConnectError with the HTTP status and headers the gateway answers it with. */
export interface GatewayError {
  error: ConnectError;
  httpStatus: number;
  headers?: Record<string, string>;
}

function withReason(message: string, code: Code, reason: string, metadata: Record<string, string> = {}): ConnectError {
  return new ConnectError(message, code, undefined, [{ desc: ErrorInfoSchema, value: { reason, domain: "", metadata } }]);
}

/** No template matches the path: 404, NOT_FOUND. */
export function routeNotFound(verb: string, path: string): GatewayError {
  return {
    error: withReason(`No REST route for ${verb} ${path}`, Code.NotFound, "ROUTE_NOT_FOUND", { method: verb, path }),
    httpStatus: 404,
  };
}

/** The path exists under other HTTP methods: 405 with Allow, UNIMPLEMENTED. */
export function methodNotAllowed(verb: string, path: string, allowed: readonly string[]): GatewayError {
  const allow = allowed.join(", ");
  return {
    error: withReason(`Method ${verb} is not allowed on ${path}; allowed: ${allow}`, Code.Unimplemented, "METHOD_NOT_ALLOWED", { method: verb, allow }),
    httpStatus: 405,
    headers: { allow },
  };
}

/** The body is over the cap: 413, RESOURCE_EXHAUSTED. */
export function payloadTooLarge(limit: number): GatewayError {
  return {
    error: withReason(`Request body exceeds the limit of ${limit} bytes`, Code.ResourceExhausted, "PAYLOAD_TOO_LARGE", { limitBytes: String(limit) }),
    httpStatus: 413,
  };
}

/** A bound method with no handler in the router: 501, UNIMPLEMENTED. */
export function methodNotServed(procedure: string): GatewayError {
  return {
    error: withReason(`${procedure} is not implemented by this server`, Code.Unimplemented, "UNIMPLEMENTED"),
    httpStatus: 501,
  };
}
