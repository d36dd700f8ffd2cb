// The single error boundary. Every error leaving a handler passes here: structured errors get their
// ErrorInfo completed (domain from the failing method's API domain), database errors are mapped by SQLSTATE,
// and anything else becomes INTERNAL with a request id. The cause is logged, never sent.
import { randomUUID } from "node:crypto";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import type { DescMethod, DescService } from "@bufbuild/protobuf";
import { ErrorInfoSchema } from "../../../gen/google/rpc/error_details_pb.js";
import { log } from "../log.js";
import { aborted, internal, reasonOf } from "./builders.js";

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

/** SQLSTATE of a database error, looked up through the cause chain (Drizzle wraps driver errors). */
export function sqlStateOf(err: unknown): string | undefined {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === "string" && /^[0-9A-Z]{5}$/.test(code)) return code;
  }
  return undefined;
}

/** Errors worth retrying that the database reports: serialization failures and deadlocks. */
function fromDatabase(err: unknown): ConnectError | undefined {
  const state = sqlStateOf(err);
  if (state === "40001" || state === "40P01") return aborted("The request conflicted with a concurrent change; retry it");
  if (state === "53300" || state === "57P01" || state === "57P03") {
    return new ConnectError("The database is unavailable; retry later", Code.Unavailable);
  }
  return undefined;
}

/**
 * Turns anything thrown into a ConnectError a client may see, with a complete ErrorInfo. Used by the
 * interceptor and by the REST gateway for the errors it raises itself.
 */
export function toPublicError(err: unknown, domain: string, context: Record<string, unknown> = {}): ConnectError {
  const hide = (cause: unknown): ConnectError => {
    const requestId = randomUUID();
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
  completeErrorInfo(out, domain);
  return out;
}

function hasErrorInfo(err: ConnectError): boolean {
  return err.details.some((d) => "desc" in d && d.desc.typeName === ErrorInfoSchema.typeName);
}

function completeErrorInfo(err: ConnectError, domain: string): void {
  let found = false;
  for (const d of err.details) {
    if ("desc" in d && d.desc.typeName === ErrorInfoSchema.typeName) {
      found = true;
      const value = d.value as { domain?: string };
      if (!value.domain) value.domain = domain;
    }
  }
  if (!found) {
    err.details.unshift({ desc: ErrorInfoSchema, value: { reason: reasonOf(err.code), domain, metadata: {} } });
  }
}

/** The outermost interceptor. */
export function createErrorBoundary(serviceDomain: string): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      throw toPublicError(err, errorDomainOf(req.method, serviceDomain), { procedure: req.url });
    }
  };
}
