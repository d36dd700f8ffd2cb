// Errors over HTTP: the status for each code (or, for the HTTP layer's refusals, each reason), and the REST
// form of an error, a google.rpc.Status JSON body ({code, message, details: [{"@type": ...}]}) with its
// status and headers.
import { Code, type ConnectError } from "@connectrpc/connect";
import { anyPack, type Any } from "@bufbuild/protobuf/wkt";
import { create, fromBinary, toJson, type JsonValue, type Registry } from "@bufbuild/protobuf";
import { StatusSchema } from "../../../gen/google/rpc/status_pb.js";
import { errorReasonOf, toPublicError } from "./public.js";

const httpStatus: Record<Code, number> = {
  [Code.Canceled]: 499,
  [Code.Unknown]: 500,
  [Code.InvalidArgument]: 400,
  [Code.DeadlineExceeded]: 504,
  [Code.NotFound]: 404,
  [Code.AlreadyExists]: 409,
  [Code.PermissionDenied]: 403,
  [Code.ResourceExhausted]: 429,
  [Code.FailedPrecondition]: 400,
  [Code.Aborted]: 409,
  [Code.OutOfRange]: 400,
  [Code.Unimplemented]: 501,
  [Code.Internal]: 500,
  [Code.Unavailable]: 503,
  [Code.DataLoss]: 500,
  [Code.Unauthenticated]: 401,
};

/** The HTTP status for a gRPC code, as the google.api HTTP mapping defines it. */
export function httpStatusOf(code: Code): number {
  return httpStatus[code] ?? 500;
}

/** Reasons of the HTTP layer's refusals (builders.ts) whose status is more precise than their code's. */
const httpStatusByReason: Record<string, number> = {
  METHOD_NOT_ALLOWED: 405,
  PAYLOAD_TOO_LARGE: 413,
  REQUEST_HEADERS_TOO_LARGE: 431,
  REQUEST_TIMEOUT: 408,
  UNSUPPORTED_MEDIA_TYPE: 415,
  HTTP_VERSION_NOT_SUPPORTED: 505,
};

/** The HTTP status of a public error: its reason's when the HTTP layer refused the request, else its code's. */
export function httpStatusOfError(err: ConnectError): number {
  return httpStatusByReason[errorReasonOf(err) ?? ""] ?? httpStatusOf(err.code);
}

/** Packs a ConnectError's details (outgoing or incoming) as Any messages. */
export function detailsAsAny(err: ConnectError, registry: Registry): Any[] {
  const out: Any[] = [];
  for (const d of err.details) {
    if ("desc" in d) {
      out.push(anyPack(d.desc, create(d.desc, d.value)));
    } else {
      const desc = registry.getMessage(d.type);
      if (desc) out.push(anyPack(desc, fromBinary(desc, d.value)));
    }
  }
  return out;
}

/** The google.rpc.Status JSON body for a REST error response. */
export function statusJson(err: ConnectError, registry: Registry): JsonValue {
  const status = create(StatusSchema, {
    code: err.code,
    message: err.rawMessage,
    details: detailsAsAny(err, registry),
  });
  // `registry` must hold the detail types (the server's registry holds every google.rpc type).
  return toJson(StatusSchema, status, { registry });
}

/** An error as a REST response. */
export interface RestError {
  status: number;
  /** The code of the public error. */
  code: Code;
  /** The error's metadata: headers a method set before failing, Allow for a 405. */
  headers: Headers;
  /** google.rpc.Status JSON. */
  body: string;
}

/** Turns anything thrown into its REST response, through toPublicError (with the request's id, when known). */
export function toRestError(err: unknown, domain: string, registry: Registry, requestId?: string): RestError {
  const error = toPublicError(err, domain, { requestId });
  return { status: httpStatusOfError(error), code: error.code, headers: error.metadata, body: JSON.stringify(statusJson(error, registry)) };
}
