// Errors that Connect raises itself, before any interceptor runs (a request body that does not decode, for
// example), reach clients without the ErrorInfo every error must carry. This wraps each RPC handler and
// completes such errors through the same boundary, for the Connect unary protocol and for gRPC. gRPC-web
// encodes its trailers inside the body and is left as Connect produces it.
import { Code, ConnectError } from "@connectrpc/connect";
import type { UniversalHandler, UniversalServerRequest, UniversalServerResponse } from "@connectrpc/connect/protocol";
import { errorFromJsonBytes, errorToJsonBytes } from "@connectrpc/connect/protocol-connect";
import { findTrailerError, setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { errorDomainOf, invalidArgument, toPublicError } from "../kernel/errors/index.js";

const CONNECT_UNARY = /^application\/(json|proto)(;|$)/i;
const GRPC = /^application\/grpc(\+|;|$)/i;

function carriesErrorInfo(err: ConnectError): boolean {
  return err.details.some((d) => ("desc" in d ? d.desc.typeName : d.type) === ErrorInfoSchema.typeName);
}

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
  if (carriesErrorInfo(err)) return err;
  const base = isUndecodableRequest(err) ? invalidArgument({ field: "body", description: err.rawMessage }) : err;
  return toPublicError(base, domain);
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
  if (carriesErrorInfo(err)) return passThrough;
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

export function withPublicErrors(handler: UniversalHandler, serviceDomain: string): UniversalHandler {
  const domain = errorDomainOf(handler.method, serviceDomain);
  const wrapped = async (req: UniversalServerRequest): Promise<UniversalServerResponse> => {
    const res = await handler(req);
    const contentType = req.header.get("content-type") ?? "";
    if (GRPC.test(contentType)) return patchGrpc(res, domain);
    if (res.status !== 200 && res.body && CONNECT_UNARY.test(contentType)) return patchConnectUnary(res, domain);
    return res;
  };
  return Object.assign(wrapped, handler);
}
