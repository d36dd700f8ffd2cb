// The public form of an error: what every path (the error boundary, the REST gateway, the protocol layer's
// own errors) turns a failure into before a client sees it. Structured errors get their ErrorInfo completed
// (domain from the failing method's API domain), database errors are mapped by SQLSTATE, and anything else
// becomes INTERNAL with a request id. The cause is logged, never sent.
import { randomUUID } from "node:crypto";
import { fromBinary, type DescMethod, type DescService } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { log } from "../log.js";
import { internal, reasonOf } from "./builders.js";
import { fromDatabase, sqlStateOf } from "./sqlstate.js";

/** "chainguard.platform.iam.v2" -> "iam"; "chainguard.platform.oidc" -> "oidc"; "grpc.health.v1" -> "health". */
export function apiDomainOf(service: DescService): string {
  const parts = service.typeName.split(".");
  const i = parts.indexOf("platform");
  if (i >= 0 && parts[i + 1]) return parts[i + 1]!;
  return parts[parts.length - 3] ?? parts[0]!;
}

/** The ErrorInfo domain for a method: "<api domain>.<service domain>", for example iam.platform.local. */
export function errorDomainOf(method: DescMethod | undefined, serviceDomain: string): string {
  return method ? `${apiDomainOf(method.parent)}.${serviceDomain}` : serviceDomain;
}

/** What is known of the request an error answers: its id goes into the ErrorInfo; the rest is logged. */
export interface ErrorContext {
  /** The request id (kernel/request.ts): put in the ErrorInfo metadata of every error as `requestId`. */
  requestId?: string | undefined;
  [field: string]: unknown;
}

/**
 * Turns anything thrown into a ConnectError a client may see, with a complete ErrorInfo (as the first detail
 * when it had none) carrying the request id in its metadata (`requestId`), so a user's report of any error
 * points at the request's log lines. An error that already carries an ErrorInfo, typed or as received over
 * the wire, keeps its code, message and details.
 */
export function toPublicError(err: unknown, domain: string, context: ErrorContext = {}): ConnectError {
  const hide = (cause: unknown): ConnectError => {
    const requestId = context.requestId ?? randomUUID();
    log.error("internal error", { ...context, requestId, err: cause });
    return internal(requestId);
  };
  let out: ConnectError;
  if (err instanceof ConnectError) {
    // An Internal or Unknown error that did not come from our builders carries a library's text: hide it.
    const opaque = (err.code === Code.Internal || err.code === Code.Unknown) && !hasErrorInfo(err);
    out = opaque ? hide(err) : err;
  } else {
    const mapped = fromDatabase(err);
    if (mapped) log.warn("database error mapped", { ...context, err, sqlState: sqlStateOf(err), code: Code[mapped.code] });
    out = mapped ?? hide(err);
  }
  completeErrorInfo(out, domain, context.requestId);
  return out;
}

/** The ErrorInfo reason of an error, or undefined when it carries none. */
export function errorReasonOf(err: ConnectError): string | undefined {
  for (const d of err.details) {
    if ("desc" in d && d.desc.typeName === ErrorInfoSchema.typeName) return (d.value as { reason?: string }).reason;
  }
  return undefined;
}

function isErrorInfo(d: ConnectError["details"][number]): boolean {
  return ("desc" in d ? d.desc.typeName : d.type) === ErrorInfoSchema.typeName;
}

/** Whether the error carries a google.rpc.ErrorInfo, typed or as received over the wire. */
export function hasErrorInfo(err: ConnectError): boolean {
  return err.details.some(isErrorInfo);
}

/**
 * Fills an empty ErrorInfo domain and a missing request id (an ErrorInfo received over the wire is decoded
 * first), or adds an ErrorInfo.
 */
function completeErrorInfo(err: ConnectError, domain: string, requestId: string | undefined): void {
  let found = false;
  for (let i = 0; i < err.details.length; i++) {
    const d = err.details[i]!;
    if (!isErrorInfo(d)) continue;
    found = true;
    let value: { domain?: string; metadata?: Record<string, string> };
    try {
      value = "desc" in d ? (d.value as typeof value) : fromBinary(ErrorInfoSchema, d.value);
    } catch {
      continue; // Undecodable: kept as received.
    }
    if (!value.domain) value.domain = domain;
    // A new metadata object: one the error shares with nothing else is not assumed.
    if (requestId !== undefined && value.metadata?.requestId === undefined) value.metadata = { ...value.metadata, requestId };
    err.details[i] = { desc: ErrorInfoSchema, value };
  }
  if (!found) {
    err.details.unshift({ desc: ErrorInfoSchema, value: { reason: reasonOf(err.code), domain, metadata: requestId === undefined ? {} : { requestId } } });
  }
}
