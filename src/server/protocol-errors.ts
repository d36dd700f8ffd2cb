// Every RPC response passes here on its way out, so that what the protocol layer writes follows the same
// rules as what handlers throw:
// - errors that Connect raises itself, before any interceptor runs, reach clients in their public form
//   (kernel/errors/public.ts) with the ErrorInfo every error must carry: an undecodable request is
//   INVALID_ARGUMENT (a Connect JSON body names the field from the request root, as the REST gateway does),
//   a body that does not decompress too; a request over the size limit is RESOURCE_EXHAUSTED
//   (PAYLOAD_TOO_LARGE, naming the limit); a Connect unary error answers the HTTP status of its final code,
//   and a 401 says how to authenticate (WWW-Authenticate, RFC 6750; gRPC and gRPC-web answer 200 and carry
//   their status in trailers, where the header means nothing);
// - a request refused with a bare HTTP status (405 wrong method, 415 content type, 505 HTTP/1.1 for a
//   bidirectional stream) gets a Connect error JSON body, with Allow on a 405;
// - gRPC (trailers, or the headers of a trailers-only response) and gRPC-web (the trailer frame at the end of
//   the body): grpc-message is percent-encoded as the gRPC protocol says, for every error (Connect encodes
//   it as a URI component, which gRPC clients show as `digest%3A ...`).
import { fromJson, type DescMessage, type JsonValue, type Registry } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { compressedFlag, getJsonOptions, type Compression, type UniversalHandler, type UniversalServerRequest, type UniversalServerResponse } from "@connectrpc/connect/protocol";
import { codeFromHttpStatus, codeToHttpStatus, errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError, headerEncoding, headerGrpcMessage, headerGrpcStatus, headerStatusDetailsBin, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { locateJsonError } from "../gateway/fields.js";
import {
  errorDomainOf,
  hasErrorInfo,
  httpVersionNotSupported,
  invalidArgument,
  methodNotAllowed,
  payloadTooLarge,
  toPublicError,
  unsupportedMediaType,
} from "../kernel/errors/index.js";
import { requestKey, type RequestRecord } from "../kernel/request.js";
import { bearerChallenge } from "../kernel/authorization-header.js";
import { parseJsonBody } from "../kernel/http-body.js";

const CONNECT_UNARY = /^application\/(json|proto)(;|$)/i;
const CONNECT_JSON = /^application\/json(;|$)/i;
const GRPC = /^application\/grpc(\+|;|$)/i;
const GRPC_WEB = /^application\/grpc-web(\+|;|$)/i;

export interface PublicErrorsOptions {
  /** Suffix of ErrorInfo.domain. */
  serviceDomain: string;
  /** For JSON request bodies (Any) when naming the field a body fails on. */
  registry: Registry;
  /** The compressions the router accepts: to read a compressed request body or gRPC-web trailer frame. */
  compression: readonly Compression[];
  /** The router's readMaxBytes: what a request may decompress to, and the limit a refusal names. */
  maxRequestBytes: number;
}

/**
 * Percent-encodes a grpc-message value as the gRPC over HTTP/2 protocol says: the UTF-8 bytes outside
 * 0x20-0x7E, and `%` itself, become %XX (upper-case hex); everything else is sent as it is.
 */
export function encodeGrpcMessage(message: string): string {
  if (/^[\x20-\x24\x26-\x7e]*$/.test(message)) return message;
  let out = "";
  for (const byte of Buffer.from(message, "utf8")) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25 ? String.fromCharCode(byte) : "%" + byte.toString(16).toUpperCase().padStart(2, "0");
  }
  return out;
}

/** What Connect wrote into grpc-message (encodeURIComponent), decoded; a value it did not write, as it is. */
function decodeConnectMessage(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}

/**
 * What Connect reports as INTERNAL (as grpc-go does) when the request cannot be read: a message that does not
 * parse, a body that does not decompress (a truncated gzip stream, anything but brotli under `br`), an
 * envelope flagged compressed with no encoding named. On a server the only bytes read are the client's, so
 * each is bad input, not a server fault.
 */
const undecodable = /^(parse binary:|decompression failed$|received compressed envelope, but do not know how to decompress$)/;

/** Whether the protocol layer failed to decode the request. */
function isUndecodableRequest(err: ConnectError): boolean {
  return err.code === Code.InvalidArgument || (err.code === Code.Internal && undecodable.test(err.rawMessage));
}

/**
 * The public form of an error the protocol layer wrote. Undecodable input is INVALID_ARGUMENT on the field
 * `located` names (a Connect JSON body), else on the body. RESOURCE_EXHAUSTED from the protocol layer is
 * its read limit (readMaxBytes, the only limit it enforces on a request): PAYLOAD_TOO_LARGE, as REST says.
 */
export function publicError(
  err: ConnectError,
  domain: string,
  maxRequestBytes: number,
  record: RequestRecord | undefined,
  located?: ConnectError,
  clientGone = false,
): ConnectError {
  const context = { requestId: record?.id };
  let out: ConnectError;
  if (hasErrorInfo(err)) out = toPublicError(err, domain, context);
  // The client went away while its request was read (its stream reset): the protocol layer's "internal
  // error" is the cancellation, nothing the server did wrong, and no error to log.
  else if (clientGone && (err.code === Code.Internal || err.code === Code.Unknown || err.code === Code.Canceled)) {
    out = toPublicError(new ConnectError("The client cancelled the request", Code.Canceled), domain, context);
  }
  else if (err.code === Code.ResourceExhausted) out = toPublicError(payloadTooLarge(maxRequestBytes), domain, context);
  else if (!isUndecodableRequest(err)) out = toPublicError(err, domain, context);
  else out = toPublicError(located ?? invalidArgument({ field: "body", description: err.rawMessage }), domain, context);
  if (record) record.code = out.code;
  return out;
}

function singleChunk(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  return (async function* () {
    yield bytes;
  })();
}

async function readAll(body: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  for await (const c of body) chunks.push(c);
  return Buffer.concat(chunks);
}

async function decompress(bytes: Uint8Array, encoding: string | null, compression: readonly Compression[], maxBytes: number): Promise<Uint8Array | undefined> {
  if (!encoding || encoding === "identity") return bytes;
  const c = compression.find((x) => x.name === encoding);
  return c ? c.decompress(bytes, maxBytes) : undefined;
}

/**
 * Why a Connect JSON request body does not decode, located as the REST gateway locates it: INVALID_ARGUMENT
 * naming the field path from the request root, or the body when the JSON is malformed. Undefined when the
 * body is empty or decodes (Connect's own message then stands).
 */
function locateJsonBodyError(input: DescMessage, bytes: Uint8Array, registry: Registry): ConnectError | undefined {
  let json: JsonValue | undefined;
  try {
    json = parseJsonBody(bytes);
  } catch (err) {
    return err instanceof ConnectError ? err : undefined;
  }
  if (json === undefined) return undefined;
  // Read with Connect's own options (unknown fields ignored), so the field found is the one Connect failed on.
  const options = getJsonOptions({ registry });
  try {
    fromJson(input, json, options);
    return undefined;
  } catch {
    return invalidArgument(locateJsonError(input, json, "", options));
  }
}

/**
 * Connect unary: an error body without ErrorInfo is completed, and answered with the HTTP status of the code
 * it ends with (a message that does not parse is written as INTERNAL, 500, and completed as INVALID_ARGUMENT).
 */
async function patchConnectUnary(
  res: UniversalServerResponse,
  domain: string,
  maxRequestBytes: number,
  record: RequestRecord | undefined,
  locate: () => Promise<ConnectError | undefined>,
  clientGone: () => boolean,
): Promise<UniversalServerResponse> {
  // A compressed body is a large error, which only handlers produce (through the boundary, so complete
  // already); the protocol layer's own errors are short and never compressed. Pass it through untouched.
  const encoding = res.header?.get("content-encoding");
  if (encoding && encoding !== "identity") return res;
  const bytes = await readAll(res.body!);
  const passThrough = { ...res, body: singleChunk(bytes) };
  let err: ConnectError;
  try {
    err = errorFromJsonBytes(bytes, undefined, new ConnectError("undecodable error", Code.Unknown));
  } catch {
    return passThrough;
  }
  if (hasErrorInfo(err)) return passThrough;
  const located = err.code === Code.InvalidArgument ? await locate().catch(() => undefined) : undefined;
  const completed = publicError(err, domain, maxRequestBytes, record, located, clientGone());
  const body = errorToJsonBytes(completed, {});
  const header = new Headers(res.header);
  if (header.has("content-length")) header.set("content-length", String(body.byteLength));
  return { ...res, status: codeToHttpStatus(completed.code), header, body: singleChunk(body) };
}

/** A bare HTTP status from the protocol layer (no body) as a Connect error with ErrorInfo. */
function refusal(req: UniversalServerRequest, res: UniversalServerResponse, handler: UniversalHandler, domain: string, record: RequestRecord | undefined): UniversalServerResponse {
  const path = new URL(req.url).pathname;
  let cause: ConnectError;
  if (res.status === 405) cause = methodNotAllowed(req.method, path, handler.allowedMethods);
  else if (res.status === 415) cause = unsupportedMediaType(req.header.get("content-type") ?? "", path);
  else if (res.status === 505) cause = httpVersionNotSupported(req.httpVersion, path);
  else cause = new ConnectError(`HTTP ${res.status}`, codeFromHttpStatus(res.status));
  const error = toPublicError(cause, domain, { requestId: record?.id });
  if (record) record.code = error.code;
  const body = errorToJsonBytes(error, {});
  const header = new Headers(res.header);
  error.metadata.forEach((value, name) => header.set(name, value));
  header.set("content-type", "application/json");
  header.set("content-length", String(body.byteLength));
  return { status: res.status, header, body: singleChunk(body) };
}

/**
 * gRPC status fields (trailers, or headers of a trailers-only response, or a gRPC-web trailer frame): an error
 * without details is completed, and grpc-message is re-encoded. Returns whether it reports an error.
 */
function patchGrpcStatus(fields: Headers | undefined, domain: string, maxRequestBytes: number, record: RequestRecord | undefined): boolean {
  if (!fields) return false;
  const status = fields.get(headerGrpcStatus);
  if (status === null) return false;
  if (record) record.code = Number(status) as Code;
  if (status === "0") return false;
  if (!fields.has(headerStatusDetailsBin)) {
    const err = findTrailerError(fields);
    // A fresh error: the one found carries every field as metadata, which setTrailerStatus would append again.
    if (err) setTrailerStatus(fields, publicError(new ConnectError(err.rawMessage, err.code), domain, maxRequestBytes, record));
  }
  const message = fields.get(headerGrpcMessage);
  if (message !== null) fields.set(headerGrpcMessage, encodeGrpcMessage(decodeConnectMessage(message)));
  return true;
}

function patchGrpc(res: UniversalServerResponse, domain: string, maxRequestBytes: number, record: RequestRecord | undefined): UniversalServerResponse {
  patchGrpcStatus(res.header, domain, maxRequestBytes, record); // trailers-only responses
  const body = res.body;
  if (!body) return res;
  return {
    ...res,
    body: (async function* () {
      let bytes = 0;
      for await (const chunk of body) {
        bytes += chunk.byteLength;
        yield chunk;
      }
      if (record) record.bytesOut = bytes;
      patchGrpcStatus(res.trailer, domain, maxRequestBytes, record); // written by the adapter after the body ends
    })(),
  };
}

/**
 * A gRPC-web trailer frame reporting an error, patched (and sent uncompressed); undefined to keep the frame as
 * it is (anything unexpected included: the frame then passes through untouched).
 */
async function patchTrailerFrame(
  frame: Uint8Array,
  domain: string,
  encoding: string | null,
  compression: readonly Compression[],
  maxRequestBytes: number,
  record: RequestRecord | undefined,
): Promise<Uint8Array | undefined> {
  let trailer: Headers;
  try {
    // A trailer frame this server wrote: its own size, whatever the request limit.
    const data = frame[0]! & compressedFlag ? await decompress(frame.subarray(5), encoding, compression, 0xffffffff) : frame.subarray(5);
    if (!data) return undefined;
    trailer = trailerParse(data);
  } catch {
    return undefined;
  }
  if (!patchGrpcStatus(trailer, domain, maxRequestBytes, record)) return undefined;
  const body = trailerSerialize(trailer);
  const out = new Uint8Array(5 + body.byteLength);
  out[0] = trailerFlag;
  new DataView(out.buffer).setUint32(1, body.byteLength);
  out.set(body, 5);
  return out;
}

/**
 * gRPC-web: the body is a sequence of frames [flags:1][length:4][data]; the last, flagged as a trailer,
 * carries the status. Frames are passed on as soon as they are complete (streams are not held back); only a
 * trailer frame reporting an error is rewritten. (Connect refuses gRPC-web-text with 415: see refusal.)
 */
function patchGrpcWeb(
  res: UniversalServerResponse,
  domain: string,
  compression: readonly Compression[],
  maxRequestBytes: number,
  record: RequestRecord | undefined,
): UniversalServerResponse {
  patchGrpcStatus(res.header, domain, maxRequestBytes, record);
  const body = res.body;
  if (!body) return res;
  const encoding = res.header?.get(headerEncoding) ?? null;
  return {
    ...res,
    body: (async function* () {
      let pending = new Uint8Array(0);
      let bytes = 0;
      for await (const chunk of body) {
        const joined = new Uint8Array(pending.byteLength + chunk.byteLength);
        joined.set(pending);
        joined.set(chunk, pending.byteLength);
        let offset = 0;
        const out: Uint8Array[] = [];
        while (joined.byteLength - offset >= 5) {
          const length = new DataView(joined.buffer, joined.byteOffset + offset + 1, 4).getUint32(0);
          if (joined.byteLength - offset < 5 + length) break;
          const frame = joined.subarray(offset, offset + 5 + length);
          const patched = frame[0]! & trailerFlag ? await patchTrailerFrame(frame, domain, encoding, compression, maxRequestBytes, record) : undefined;
          out.push(patched ?? frame);
          offset += 5 + length;
        }
        pending = joined.slice(offset);
        for (const f of out) {
          bytes += f.byteLength;
          yield f;
        }
      }
      if (pending.byteLength > 0) yield pending;
      if (record) record.bytesOut = bytes + pending.byteLength;
    })(),
  };
}

/**
 * The request with its body recorded as the handler reads it, for a Connect JSON request (the only one whose
 * decode error can name a field); `bytes` reads the record once the response is known.
 */
function recording(req: UniversalServerRequest): { req: UniversalServerRequest; bytes: () => Uint8Array } | undefined {
  const body = req.body;
  if (!CONNECT_JSON.test(req.header.get("content-type") ?? "") || body === null || typeof body !== "object" || !(Symbol.asyncIterator in body)) {
    return undefined;
  }
  const chunks: Uint8Array[] = [];
  const recorded = (async function* () {
    for await (const chunk of body as AsyncIterable<Uint8Array>) {
      chunks.push(chunk);
      yield chunk;
    }
  })();
  return { req: { ...req, body: recorded }, bytes: () => Buffer.concat(chunks) };
}

export function withPublicErrors(handler: UniversalHandler, opts: PublicErrorsOptions): UniversalHandler {
  const domain = errorDomainOf(handler.method, opts.serviceDomain);
  const { compression, registry, maxRequestBytes } = opts;
  const wrapped = async (req: UniversalServerRequest): Promise<UniversalServerResponse> => {
    const recorded = recording(req);
    const record = req.contextValues?.get(requestKey);
    const res = await handler(recorded?.req ?? req);
    const contentType = req.header.get("content-type") ?? "";
    if (res.status !== 200 && res.body === undefined) return refusal(req, res, handler, domain, record);
    if (GRPC_WEB.test(contentType)) return patchGrpcWeb(res, domain, compression, maxRequestBytes, record);
    if (GRPC.test(contentType)) return patchGrpc(res, domain, maxRequestBytes, record);
    if (res.status !== 200 && res.body && CONNECT_UNARY.test(contentType)) {
      const out = await patchConnectUnary(res, domain, maxRequestBytes, record, async () => {
        const bytes = recorded && (await decompress(recorded.bytes(), req.header.get("content-encoding"), compression, maxRequestBytes));
        return bytes && locateJsonBodyError(handler.method.input, bytes, registry);
      }, () => req.signal.aborted);
      if (out.status !== 401) return out;
      const header = new Headers(out.header);
      header.set("www-authenticate", bearerChallenge(req.header.get("authorization")));
      return { ...out, header };
    }
    return res;
  };
  return Object.assign(wrapped, handler);
}
