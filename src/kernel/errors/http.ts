// Errors on the REST surface: the HTTP status for each code, and the google.rpc.Status JSON body
// ({code, message, details: [{"@type": ...}]}) built from a ConnectError.
import { Code, type ConnectError } from "@connectrpc/connect";
import { anyPack, type Any } from "@bufbuild/protobuf/wkt";
import { create, fromBinary, toJson, type JsonValue, type Registry } from "@bufbuild/protobuf";
import { StatusSchema } from "../../../gen/google/rpc/status_pb.js";

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
