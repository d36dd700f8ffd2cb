// Errors that Connect raises itself, before any interceptor runs (a request body that does not decode, for
// example), reach clients without the ErrorInfo every error must carry. This wraps each RPC handler and
// completes such errors into their public form (kernel/errors/public.ts), for the Connect unary protocol,
// gRPC (trailers) and gRPC-web (the trailer frame at the end of the body).
import { Code, ConnectError } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { trailerFlag, trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { errorDomainOf, hasErrorInfo, invalidArgument, toPublicError } from "../kernel/errors/index.js";

const CONNECT_UNARY = /^application\/(json|proto)(;|$)/i;
const GRPC = /^application\/grpc(\+|;|$)/i;
const GRPC_WEB = /^application\/grpc-web(-text)?(\+|;|$)/i;

/**
 * Whether the protocol layer failed to decode the request. Connect reports a request message that does not
 * parse as INTERNAL "parse binary: ..." (as grpc-go does); on a server the only message parsed is the
 * client's, so that is bad input, not a server fault.
 */
function isUndecodableRequest(err: ConnectError): boolean {
  return err.code === Code.InvalidArgument || (err.code === Code.Internal && err.rawMessage.startsWith("parse binary:"));
}

/** The public form of an error raised by the protocol layer: undecodable input names the body. */
function complete(err: ConnectError, domain: string): ConnectError {
  if (hasErrorInfo(err) || !isUndecodableRequest(err)) return toPublicError(err, domain);
  return toPublicError(invalidArgument({ field: "body", description: err.rawMessage }), domain);
}

async function readAll(body: AsyncIterable<Uint8Array>): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  for await (const c of body) chunks.push(c);
  return Buffer.concat(chunks);
}

async function patchConnectUnary(res: UniversalServerResponse, domain: string): Promise<UniversalServerResponse> {
  // A compressed body is a large error, which only handlers produce (through the boundary, so complete
  // already); the protocol layer's own errors are short and never compressed. Pass it through untouched.
  const encoding = res.header?.get("content-encoding");
  if (encoding && encoding !== "identity") return res;
  const bytes = await readAll(res.body!);
  const passThrough = { ...res, body: (async function* () { yield bytes; })() };
  let err: ConnectError;
  try {
    err = errorFromJsonBytes(bytes, undefined, new ConnectError("undecodable error", Code.Unknown));
  } catch {
    return passThrough;
  }
  if (hasErrorInfo(err)) return passThrough;
  const body = errorToJsonBytes(complete(err, domain), {});
  const header = new Headers(res.header);
  if (header.has("content-length")) header.set("content-length", String(body.byteLength));
  return { ...res, header, body: (async function* () { yield body; })() };
}

function patchGrpcHeaders(headers: Headers | undefined, domain: string): void {
  if (!headers || headers.has("grpc-status-details-bin")) return;
  const err = findTrailerError(headers);
  if (err) setTrailerStatus(headers, complete(err, domain));
}

function patchGrpc(res: UniversalServerResponse, domain: string): UniversalServerResponse {
  patchGrpcHeaders(res.header, domain); // trailers-only responses
  const body = res.body;
  if (!body) return res;
  return {
    ...res,
    body: (async function* () {
      yield* body;
      patchGrpcHeaders(res.trailer, domain); // written by the adapter after the body ends
    })(),
  };
}

/**
 * A gRPC-web trailer frame, completed when it reports an error without details; undefined to keep the frame
 * as it is (anything unexpected included: the frame then passes through untouched).
 */
function completeTrailerFrame(data: Uint8Array, domain: string): Uint8Array | undefined {
  let trailer: Headers;
  try {
    trailer = trailerParse(data);
  } catch {
    return undefined;
  }
  if (trailer.has("grpc-status-details-bin")) return undefined;
  const err = findTrailerError(trailer);
  if (!err) return undefined;
  const body = trailerSerialize(setTrailerStatus(new Headers(), complete(err, domain)));
  const frame = new Uint8Array(5 + body.byteLength);
  frame[0] = trailerFlag;
  new DataView(frame.buffer).setUint32(1, body.byteLength);
  frame.set(body, 5);
  return frame;
}

/**
 * gRPC-web (binary): the body is a sequence of frames [flags:1][length:4][data]; the last, flagged as a
 * trailer, carries the status. Frames are passed on as soon as they are complete (streams are not held
 * back); only an error trailer frame without details is rewritten. gRPC-web-text (base64) passes unchanged.
 */
function patchGrpcWeb(res: UniversalServerResponse, domain: string): UniversalServerResponse {
  patchGrpcHeaders(res.header, domain);
  const body = res.body;
  if (!body || /grpc-web-text/i.test(res.header?.get("content-type") ?? "")) return res;
  return {
    ...res,
    body: (async function* () {
      let pending = new Uint8Array(0);
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
          // Only an uncompressed trailer frame (flags exactly 0x80) can be read here; a compressed one is
          // large, so it came from a handler through the boundary and is complete already.
          const patched = frame[0] === trailerFlag ? completeTrailerFrame(frame.subarray(5), domain) : undefined;
          out.push(patched ?? frame);
          offset += 5 + length;
        }
        pending = joined.slice(offset);
        for (const f of out) yield f;
      }
      if (pending.byteLength > 0) yield pending;
    })(),
  };
}

export function withPublicErrors(handler: UniversalHandler, serviceDomain: string): UniversalHandler {
  const domain = errorDomainOf(handler.method, serviceDomain);
  const wrapped = async (req: UniversalServerRequest): Promise<UniversalServerResponse> => {
    const res = await handler(req);
    const contentType = req.header.get("content-type") ?? "";
    if (GRPC_WEB.test(contentType)) return patchGrpcWeb(res, domain);
    if (GRPC.test(contentType)) return patchGrpc(res, domain);
    if (res.status !== 200 && res.body && CONNECT_UNARY.test(contentType)) return patchConnectUnary(res, domain);
    return res;
  };
  return Object.assign(wrapped, handler);
}
