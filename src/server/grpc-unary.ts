// gRPC unary calls, answered directly over node:http2: the request's one message is read and decoded, the
// method runs in process through the same interceptors as on every protocol (kernel/invoke.ts), and the
// answer is written as one DATA frame (encoded by kernel/binary.ts) and the trailers. Connect's gRPC handler
// does the same work through a chain of async iterables, response streams and per-call objects that cost
// about as much as the method itself (bench/LOG.md, "Per-request cost").
//
// Only the plain case is taken here: HTTP/2, POST, `application/grpc` or `application/grpc+proto`, no request
// compression, a well-formed grpc-timeout if any, and a body that is exactly one uncompressed message of at
// most the size limit that decodes. Anything else (compression, JSON, a malformed envelope, an oversized or
// undecodable message, a streaming method) goes to Connect's handler with the bytes already read, so its
// answers, and protocol-errors' rules over them, stay the one definition of those cases.
import http2 from "node:http2";
import { fromBinary, type DescMethodUnary, type Message } from "@bufbuild/protobuf";
import { Code, ConnectError, type Interceptor } from "@connectrpc/connect";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { errorDomainOf } from "../kernel/errors/index.js";
import { createBinaryEncoder } from "../kernel/binary.js";
import { CallControl, cappedGrpcTimeoutMs, CLIENT_GONE, invokeInProcess, type UnaryImplSpec } from "../kernel/invoke.js";
import { callContextValues, callHeaders, type RequestRecord } from "../kernel/request.js";
import { log } from "../kernel/log.js";
import { isClientGone } from "./observe.js";
import { encodeGrpcMessage, publicError } from "./protocol-errors.js";

const http2constants = http2.constants;

const CONTENT_TYPE = /^application\/grpc(\+proto)?$/i;
const RESPONSE_CONTENT_TYPE = "application/grpc+proto";


export interface GrpcUnaryOptions {
  interceptors: readonly Interceptor[];
  serviceDomain: string;
  /** The largest request message (the router's readMaxBytes). */
  maxRequestBytes: number;
  /** The server's deadline: a client's grpc-timeout at least this long is left to the deadline interceptor. */
  requestTimeoutMs: number;
}

/** The request body when the plain path does not take the call: Connect's handler reads it from here. */
export type Fallback = (body: AsyncIterable<Uint8Array>) => void;

export interface GrpcUnary {
  /**
   * Whether the plain path may take this request to this method ("<service>/<method>"): by its headers only;
   * the body may still send it to Connect.
   */
  takes(req: http2.Http2ServerRequest, procedure: string): boolean;
  handle(req: http2.Http2ServerRequest, res: http2.Http2ServerResponse, procedure: string, record: RequestRecord, fallback: Fallback): void;
}

type Read = { kind: "whole"; bytes: Buffer } | { kind: "partial"; chunks: Buffer[] } | { kind: "gone" };

/**
 * Reads the body, up to `max` bytes: whole, or (past `max`) the chunks read so far with the rest left in the
 * stream (paused), or nothing when the client went away.
 */
function readBody(req: http2.Http2ServerRequest, max: number): Promise<Read> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = (read: Read) => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onGone);
      req.off("aborted", onGone);
      resolve(read);
    };
    const onData = (chunk: Buffer) => {
      chunks.push(chunk);
      size += chunk.byteLength;
      if (size > max) {
        req.pause();
        done({ kind: "partial", chunks });
      }
    };
    const onEnd = () => done({ kind: "whole", bytes: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size) });
    const onGone = () => done({ kind: "gone" });
    req.on("data", onData);
    req.once("end", onEnd);
    req.once("error", onGone);
    req.once("aborted", onGone);
  });
}

async function* chunksThenRest(chunks: readonly Uint8Array[], rest: AsyncIterable<Uint8Array>): AsyncIterable<Uint8Array> {
  yield* chunks;
  yield* rest;
}

async function* single(bytes: Uint8Array): AsyncIterable<Uint8Array> {
  yield bytes;
}

/** The message of a body that is exactly one uncompressed envelope; undefined for anything else. */
function soleMessage(body: Buffer): Buffer | undefined {
  if (body.byteLength < 5 || body[0] !== 0) return undefined;
  return body.readUInt32BE(1) === body.byteLength - 5 ? body.subarray(5) : undefined;
}

function headerObject(headers: Headers): Record<string, string> {
  const out: Record<string, string> = {};
  headers.forEach((value, name) => {
    out[name] = value;
  });
  return out;
}

export function createGrpcUnary(specs: ReadonlyMap<string, UnaryImplSpec>, opts: GrpcUnaryOptions): GrpcUnary {
  const { interceptors, maxRequestBytes, requestTimeoutMs, serviceDomain } = opts;
  const encoder = createBinaryEncoder();

  /** The error's trailers: status, the gRPC form of its message, details and the metadata the call set. */
  function errorTrailers(error: ConnectError, method: DescMethodUnary, record: RequestRecord, trailer: Headers): Record<string, string> {
    const completed = publicError(error, errorDomainOf(method, serviceDomain), maxRequestBytes, record);
    setTrailerStatus(trailer, completed);
    trailer.set("grpc-message", encodeGrpcMessage(completed.rawMessage));
    return headerObject(trailer);
  }

  async function serve(spec: UnaryImplSpec, req: http2.Http2ServerRequest, res: http2.Http2ServerResponse, record: RequestRecord, fallback: Fallback): Promise<void> {
    const read = await readBody(req, maxRequestBytes + 5);
    if (read.kind === "gone") return;
    if (read.kind === "partial") return fallback(chunksThenRest(read.chunks, req));
    record.bytesIn = read.bytes.byteLength;
    const bytes = soleMessage(read.bytes);
    let message: Message | undefined;
    if (bytes) {
      try {
        message = fromBinary(spec.method.input, bytes) as Message;
      } catch {
        message = undefined;
      }
    }
    if (!message) return fallback(single(read.bytes));

    const control = new CallControl();
    const onClose = () => {
      if (!res.writableEnded) control.abort(CLIENT_GONE);
    };
    res.once("close", onClose);
    const values = callContextValues(req, record);
    try {
      const result = await invokeInProcess(
        spec,
        {
          method: spec.method,
          protocolName: "grpc",
          requestMethod: "POST",
          url: `http://${req.headers[":authority"] ?? "localhost"}${req.url}`,
          control,
          requestHeader: callHeaders(req.headers),
          contextValues: values,
          timeoutMs: cappedGrpcTimeoutMs(req.headers["grpc-timeout"], requestTimeoutMs),
          responseHeader: { "content-type": RESPONSE_CONTENT_TYPE },
        },
        message,
        interceptors,
      );
      if (res.writableEnded || res.destroyed) return;
      let frame: Buffer | undefined;
      let error = result.ok ? undefined : result.error;
      if (result.ok) {
        try {
          // The message encoded behind five reserved bytes: the envelope (uncompressed, its length).
          frame = encoder.encode(spec.method.output, result.output, 5);
          frame[0] = 0;
          frame.writeUInt32BE(frame.byteLength - 5, 1);
        } catch (err) {
          // An answer that does not encode is the server's fault, answered as Connect answers it.
          log.error("rpc response did not encode", { requestId: record.id, procedure: `${record.service}/${record.method}`, err });
          error = new ConnectError("internal error", Code.Internal, undefined, undefined, err);
        }
      }
      res.writeHead(200, headerObject(result.responseHeader));
      if (frame && !error) {
        result.responseTrailer.set("grpc-status", "0");
        record.code = 0 as Code; // OK (Connect's Code has no name for it)
        record.bytesOut = frame.byteLength;
        res.addTrailers(headerObject(result.responseTrailer));
        res.end(frame);
      } else {
        res.addTrailers(errorTrailers(error!, spec.method, record, result.responseTrailer));
        record.bytesOut = 0;
        res.end();
      }
    } finally {
      res.off("close", onClose);
    }
  }

  return {
    takes(req, procedure) {
      if (!specs.has(procedure)) return false;
      if (req.httpVersionMajor !== 2 || req.method !== "POST") return false;
      const type = req.headers["content-type"];
      if (type === undefined || !CONTENT_TYPE.test(type)) return false;
      const encoding = req.headers["grpc-encoding"];
      if (encoding !== undefined && encoding !== "identity") return false;
      return !Number.isNaN(cappedGrpcTimeoutMs(req.headers["grpc-timeout"], requestTimeoutMs));
    },
    handle(req, res, procedure, record, fallback) {
      serve(specs.get(procedure)!, req, res, record, fallback).catch((err: unknown) => {
        // Writing the answer failed: a client that went away is the access line's "clientClosed" (info);
        // anything else is a fault. Either way nothing more can be sent.
        if (!isClientGone(err, res)) log.warn("rpc response failed", { requestId: record.id, procedure, err });
        if (!res.writableEnded) res.stream.close(http2constants.NGHTTP2_INTERNAL_ERROR);
      });
    },
  };
}
