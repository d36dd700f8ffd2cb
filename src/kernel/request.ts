// What the server knows about one request while it runs: its id (kept from a client's x-request-id, else
// made here), its protocol and method, and what became of it. One object per request, created where the
// request arrives (server/observe.ts) and carried to the code that learns more about it in the call's
// context values: the error boundary (the code of an error, and the id every error's ErrorInfo carries), the
// protocol layer (its own errors, gRPC statuses), the REST gateway (the route). At the end it is the access
// log line and the request's metrics.
import { randomUUID } from "node:crypto";
import { createContextKey, type Code, type ContextValues } from "@connectrpc/connect";
import { peerContextValues } from "./peer.js";

/** The wire protocols of the API, as metrics and access lines name them. */
export type Protocol = "grpc" | "grpc-web" | "connect" | "rest";

export interface RequestRecord {
  /** The request id: the client's x-request-id when it is acceptable, else a new UUID. */
  readonly id: string;
  /** performance.now() when the request arrived. */
  readonly start: number;
  protocol: Protocol;
  /** The API service ("chainguard.platform.iam.v2.Groups"), or a fixed name for the server's own routes. */
  service: string;
  /** The method ("ListGroups"), or a fixed name for the server's own routes. */
  method: string;
  /** REST: the binding's template ("/iam/v2/groups/{uid=**}"), when one matched. */
  route: string | undefined;
  /** The outcome, when a layer that knows it recorded it (else read from the HTTP status at the end). */
  code: Code | undefined;
  /** Body bytes received, where the layer reading them counts them (else the request's content-length). */
  bytesIn: number | undefined;
  /** Body bytes sent, where the layer writing them counts them. */
  bytesOut: number | undefined;
  /** The context values of the call, where the principal is found at the end (auth interceptor). */
  values: ContextValues | undefined;
}

export const requestKey = createContextKey<RequestRecord | undefined>(undefined, { description: "the request's record" });

/** The longest client-given request id kept; longer ones are replaced. */
const MAX_REQUEST_ID_CHARS = 128;
const SAFE_REQUEST_ID = /^[A-Za-z0-9._~:/+=-]+$/;

/**
 * The id of a request: the client's x-request-id when it is 1-128 characters of letters, digits and
 * `._~:/+=-` (nothing that could break a log line or a header), else a new UUID.
 */
export function requestIdFrom(header: string | string[] | undefined): string {
  const given = Array.isArray(header) ? header[0] : header;
  if (given !== undefined && given.length > 0 && given.length <= MAX_REQUEST_ID_CHARS && SAFE_REQUEST_ID.test(given)) return given;
  return randomUUID();
}

/**
 * The context values of a call: the peer address, and the request's record (when it has one) linked both
 * ways, so the layers of the call find the record and the access line finds the call's principal.
 */
export function callContextValues(req: Parameters<typeof peerContextValues>[0], record: RequestRecord | undefined): ContextValues {
  const values = peerContextValues(req);
  if (record) {
    values.set(requestKey, record);
    record.values = values;
  }
  return values;
}

/**
 * A Node request's headers as the call sees them (Headers, repeated ones appended), without those `skip`
 * names; HTTP/2 pseudo-headers (":path") are never included.
 */
export function callHeaders(raw: Record<string, string | string[] | undefined>, skip?: (name: string) => boolean): Headers {
  const out = new Headers();
  for (const name in raw) {
    if (name.charCodeAt(0) === 58 /* ":" */ || skip?.(name)) continue;
    const value = raw[name];
    if (value === undefined) continue;
    if (Array.isArray(value)) for (const v of value) out.append(name, v);
    else out.append(name, value);
  }
  return out;
}
