// One port for everything. Each new connection is classified by its first bytes and handed to the server
// that speaks it: a TLS ClientHello goes to the TLS server (HTTP/2 or HTTP/1.1 by ALPN), the HTTP/2
// connection preface to the cleartext HTTP/2 server (h2c, gRPC), anything else to the HTTP/1.1 server.
// All of them run the same request handler.
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { registry } from "../kernel/descriptors.js";
import { malformedHttpRequest, requestHeadersTooLarge, toRestError } from "../kernel/errors/index.js";
import { log } from "../kernel/log.js";

export type RequestHandler = (
  req: http.IncomingMessage | http2.Http2ServerRequest,
  res: http.ServerResponse | http2.Http2ServerResponse,
) => void;

export interface ListenOptions {
  port: number;
  host: string;
  tls?: { cert: Buffer; key: Buffer } | undefined;
  /** The service domain, for the ErrorInfo of requests refused before any handler saw them (config.serviceDomain). */
  errorDomain: string;
}

export interface Listener {
  address: AddressInfo;
  /** Stops accepting connections, lets in-flight requests finish (up to graceMs), then closes the rest. */
  close(graceMs?: number): Promise<void>;
}

const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const MAX_HEADER_BYTES = 64 * 1024;

/**
 * A malformed HTTP/1.1 request, or one whose headers are over the limit: answered, when the socket still can
 * be, with a google.rpc.Status as every other REST error (431 REQUEST_HEADERS_TOO_LARGE or 400
 * MALFORMED_HTTP_REQUEST), then closed.
 */
function answerClientError(err: Error & { code?: string }, socket: net.Socket, domain: string): void {
  if (!socket.writable || socket.destroyed) {
    socket.destroy();
    return;
  }
  const refusal = err.code === "HPE_HEADER_OVERFLOW" ? requestHeadersTooLarge(MAX_HEADER_BYTES) : malformedHttpRequest();
  const rest = toRestError(refusal, domain, registry);
  const body = Buffer.from(rest.body);
  socket.end(
    `HTTP/1.1 ${rest.status} ${http.STATUS_CODES[rest.status] ?? ""}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${body.byteLength}\r\n\r\n${rest.body}`,
  );
}
const TLS_HANDSHAKE = 0x16;
const SNIFF_TIMEOUT_MS = 10_000;

export async function listen(handler: RequestHandler, opts: ListenOptions): Promise<Listener> {
  // Headers up to 64 KiB, so an oversized bearer token reaches the authenticator (which refuses it with
  // 401) instead of being cut off by the HTTP parser.
  let closing = false;
  // While closing, an HTTP/1.1 connection closes after the response it is sending (no keep-alive).
  // HTTP/1.1 connections, with the requests each has under way: an idle one is closed when the server closes.
  // (Node's own closeIdleConnections() does nothing here: it tracks only connections of a server that
  // listens itself, and h1 is handed its connections by the front socket.)
  const h1Requests = new Map<net.Socket, number>();
  const h1 = http.createServer({ keepAliveTimeout: 65_000, maxHeaderSize: MAX_HEADER_BYTES }, (req, res) => {
    if (closing) res.shouldKeepAlive = false;
    const socket = req.socket;
    h1Requests.set(socket, (h1Requests.get(socket) ?? 0) + 1);
    res.once("close", () => {
      const left = (h1Requests.get(socket) ?? 1) - 1;
      h1Requests.set(socket, left);
      if (closing && left === 0) socket.destroy();
    });
    handler(req, res);
  });
  const closeIdleH1 = () => {
    for (const [socket, requests] of h1Requests) if (requests === 0) socket.destroy();
  };
  const h2c = http2.createServer({ settings: { maxHeaderListSize: MAX_HEADER_BYTES } }, handler);
  const tls = opts.tls
    ? http2.createSecureServer({ ...opts.tls, allowHTTP1: true, settings: { maxHeaderListSize: MAX_HEADER_BYTES } }, handler)
    : undefined;

  const sockets = new Set<net.Socket>();
  const sessions = new Set<http2.Http2Session>();
  for (const s of [h2c, tls]) {
    s?.on("session", (session) => {
      sessions.add(session);
      session.once("close", () => sessions.delete(session));
      if (closing) session.close(); // a connection accepted before the close, classified after it
    });
  }
  for (const s of [h1, h2c, tls]) s?.on("clientError", (err: Error, socket: net.Socket) => answerClientError(err, socket, opts.errorDomain));

  // noDelay: the HTTP servers turn Nagle's algorithm off only on connections they accept themselves; on these,
  // handed over, a response written in several pieces (gRPC: headers, data, trailers) waited for the peer's
  // delayed ACK, about 40 ms.
  const front = net.createServer({ pauseOnConnect: true, noDelay: true }, (socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    socket.setTimeout(SNIFF_TIMEOUT_MS, () => socket.destroy());
    sniff(socket, (kind) => {
      socket.setTimeout(0);
      if (kind === "tls") {
        if (!tls) return socket.destroy();
        tls.emit("connection", socket);
      } else if (kind === "h2c") {
        h2c.emit("connection", socket);
      } else {
        h1Requests.set(socket, 0);
        socket.once("close", () => h1Requests.delete(socket));
        h1.emit("connection", socket);
        socket.resume();
      }
    });
  });

  const address = await listenOn(front, opts.port, opts.host);
  log.info("listening", { host: address.address, port: address.port, tls: Boolean(tls) });

  return {
    address,
    async close(graceMs = 5_000) {
      closing = true;
      const closed = new Promise<void>((resolve) => front.close(() => resolve()));
      for (const session of sessions) session.close();
      // HTTP/1.1 connections close as soon as they are idle: those idle now, and those finishing a request.
      closeIdleH1();
      const deadline = setTimeout(() => {
        for (const socket of sockets) socket.destroy();
      }, graceMs);
      deadline.unref();
      await closed;
      clearTimeout(deadline);
      h1.close();
      h2c.close();
      tls?.close();
    },
  };
}

/**
 * Reads just enough of the connection to classify it, then puts the bytes back. The socket is left paused:
 * the HTTP/2 servers read the unshifted bytes themselves, and must not see a resumed socket.
 */
function sniff(socket: net.Socket, done: (kind: "tls" | "h2c" | "http1") => void): void {
  let buffered = Buffer.alloc(0);
  const onData = (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    const kind = classify(buffered);
    if (kind === undefined) return; // need more bytes
    socket.off("data", onData);
    socket.pause();
    socket.unshift(buffered);
    done(kind);
  };
  socket.on("data", onData);
  socket.resume();
}

function classify(bytes: Buffer): "tls" | "h2c" | "http1" | undefined {
  if (bytes.length === 0) return undefined;
  if (bytes[0] === TLS_HANDSHAKE) return "tls";
  const n = Math.min(bytes.length, H2_PREFACE.length);
  if (bytes.subarray(0, n).equals(H2_PREFACE.subarray(0, n))) {
    return bytes.length >= H2_PREFACE.length ? "h2c" : undefined;
  }
  return "http1";
}

/** Starts `server` listening on host:port; resolves with its address, rejects when listening fails (EADDRINUSE). */
export function listenOn(server: net.Server, port: number, host: string): Promise<AddressInfo> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve(server.address() as AddressInfo);
    });
  });
}
