// What the server knows about one request while it runs: its id (kept from a client's x-request-id, else
// made here), its protocol and method, and what became of it. One object per request, created where the
// request arrives (server/observe.ts) and carried to the code that learns more about it in the call's
// context values: the error boundary (the code of an error, and the id every error's ErrorInfo carries), the
// protocol layer (its own errors, gRPC statuses), the REST gateway (the route). At the end it is the access
// log line and the request's metrics.
import { randomUUID } from "node:crypto";
import { inspect } from "node:util";
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

// Headers' methods, called on the instance (the DOM typings declare them as properties, which a subclass
// cannot reach through super).
const base = Headers.prototype;

/** A header name as Headers accepts it (an HTTP token). */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A value Headers would refuse (NUL, CR, LF) or trim (leading or trailing HTTP whitespace). */
const VALUE_TO_CHECK = /[\0\r\n]|^[\t ]|[\t ]$/;

/**
 * A Node request's headers as the call's Headers. Most calls only get() a few of them (the authorization,
 * a deadline), so they are read from the request's own header object until something else is asked of them
 * (set, delete, iteration): only then are they copied, once, into the Headers itself. Copying them first, an
 * append per header (each validated), cost 2 µs a call. get() and has() answer what the copy would: the same
 * names left out, repeated values joined with ", ", the `extra` names (set after the request's own) winning.
 * Every other method of Headers is overridden to copy first (test/unit/request-headers.test.ts checks that
 * none is missed, so a method a later Node adds fails that test rather than reading an empty copy).
 */
class RequestHeaders extends (Headers as new () => object) {
  #raw: Record<string, string | string[] | undefined> | undefined;
  readonly #skip: ((name: string) => boolean) | undefined;
  readonly #extra: ReadonlyMap<string, string> | undefined;

  constructor(raw: Record<string, string | string[] | undefined>, skip: ((name: string) => boolean) | undefined, extra: ReadonlyMap<string, string> | undefined) {
    super();
    this.#raw = raw;
    this.#skip = skip;
    this.#extra = extra;
  }

  /**
   * The request's value of `name` as the copy would hold it; null when it has none; undefined when only the
   * copy can tell (a name Headers refuses, as a pseudo-header's: the copy's get throws).
   */
  #read(name: string): string | null | undefined {
    if (!HEADER_NAME.test(name)) return undefined;
    const key = name.toLowerCase();
    const extra = this.#extra?.get(key);
    if (extra !== undefined) return extra;
    if (this.#skip?.(key)) return null;
    const value = this.#raw![key];
    if (typeof value === "string") return VALUE_TO_CHECK.test(value) ? undefined : value;
    // Repeated values: the copy trims and joins each. Anything else (what an object inherits) is no header.
    return Array.isArray(value) ? undefined : null;
  }

  #copy(): void {
    const raw = this.#raw;
    if (raw === undefined) return;
    this.#raw = undefined;
    for (const name in raw) {
      if (name.charCodeAt(0) === 58 /* ":" */ || this.#skip?.(name) || this.#extra?.has(name)) continue;
      const value = raw[name];
      if (value === undefined) continue;
      if (Array.isArray(value)) for (const v of value) base.append.call(this as unknown as Headers, name, v);
      else base.append.call(this as unknown as Headers, name, value);
    }
    if (this.#extra) for (const [name, value] of this.#extra) base.set.call(this as unknown as Headers, name, value);
  }

  get(name: string): string | null {
    if (this.#raw !== undefined) {
      const value = this.#read(name);
      if (value !== undefined) return value;
      this.#copy();
    }
    return base.get.call(this as unknown as Headers, name);
  }

  has(name: string): boolean {
    if (this.#raw !== undefined) {
      const value = this.#read(name);
      if (value !== undefined) return value !== null;
      this.#copy();
    }
    return base.has.call(this as unknown as Headers, name);
  }

  set(name: string, value: string): void {
    this.#copy();
    base.set.call(this as unknown as Headers, name, value);
  }

  append(name: string, value: string): void {
    this.#copy();
    base.append.call(this as unknown as Headers, name, value);
  }

  delete(name: string): void {
    this.#copy();
    base.delete.call(this as unknown as Headers, name);
  }

  getSetCookie(): string[] {
    this.#copy();
    return base.getSetCookie.call(this as unknown as Headers);
  }

  forEach(callback: (value: string, key: string, parent: Headers) => void, thisArg?: unknown): void {
    this.#copy();
    base.forEach.call(this as unknown as Headers, callback, thisArg);
  }

  keys(): ReturnType<Headers["keys"]> {
    this.#copy();
    return base.keys.call(this as unknown as Headers);
  }

  values(): ReturnType<Headers["keys"]> {
    this.#copy();
    return base.values.call(this as unknown as Headers);
  }

  entries(): ReturnType<Headers["entries"]> {
    this.#copy();
    return base.entries.call(this as unknown as Headers);
  }

  [Symbol.iterator](): ReturnType<Headers["entries"]> {
    this.#copy();
    return base[Symbol.iterator].call(this as unknown as Headers);
  }

  /** What util.inspect (and so console.log or a logger) shows: the headers, not the copy not yet made. */
  [inspect.custom](...args: unknown[]): unknown {
    this.#copy();
    return (base as unknown as Record<symbol, (...a: unknown[]) => unknown>)[inspect.custom]!.apply(this, args);
  }
}

/**
 * A Node request's headers as the call sees them (Headers, repeated ones appended), without those `skip`
 * names, and with the `extra` ones set over the request's; HTTP/2 pseudo-headers (":path") are never included.
 */
export function callHeaders(
  raw: Record<string, string | string[] | undefined>,
  skip?: (name: string) => boolean,
  extra?: ReadonlyMap<string, string>,
): Headers {
  return new RequestHeaders(raw, skip, extra) as unknown as Headers;
}
