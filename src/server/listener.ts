// One port for everything. Each new connection is classified by its first bytes and handed to the server
// that speaks it: a TLS ClientHello goes to the TLS server (HTTP/2 or HTTP/1.1 by ALPN), the HTTP/2
// connection preface to the cleartext HTTP/2 server (h2c, gRPC), anything else to the HTTP/1.1 server.
// All of them run the same request handler.
//
// No client may hold a connection without sending what it owes (slowloris): the first bytes and every
// request's headers within the headers timeout, the whole request (HTTP/1.1 body, HTTP/2 END_STREAM) within
// the request timeout, a next request within the idle timeout; and one address holds a bounded number of
// connections. Connections handed over with emit("connection") escape Node's own timeouts unless the servers
// are told to track them (see startTracking), so each limit here is enforced, and tested, on every path.
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import type { AddressInfo } from "node:net";
import { setTrailerStatus } from "@connectrpc/connect/protocol-grpc";
import { DEFAULT_LIMITS, type ConnectionLimits } from "../config.js";
import { registry } from "../kernel/descriptors.js";
import { malformedHttpRequest, requestHeadersTooLarge, requestTimedOut, toPublicError, toRestError } from "../kernel/errors/index.js";
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
  /** Timeouts and the per-address cap (config.connections, config.requestTimeoutMs); unset: DEFAULT_LIMITS. */
  limits?: Partial<ConnectionLimits & { requestTimeoutMs: number }> | undefined;
  /**
   * Requests whose body streams (registry blob uploads, of any size): instead of arriving whole within the
   * request timeout, such a body must only never stall for that long (an idle timeout). Default: none.
   */
  streamsBody?: ((method: string, path: string) => boolean) | undefined;
}

export interface Listener {
  address: AddressInfo;
  /** Stops accepting connections, lets in-flight requests finish (up to graceMs), then closes the rest. */
  close(graceMs?: number): Promise<void>;
  /** The connections open now, whatever their protocol or state. */
  connections(): number;
}

const H2_PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const MAX_HEADER_BYTES = 64 * 1024;

/**
 * A malformed HTTP/1.1 request, or one whose headers are over the limit: answered, when the socket still can
 * be, with a google.rpc.Status as every other REST error (431 REQUEST_HEADERS_TOO_LARGE or 400
 * MALFORMED_HTTP_REQUEST), then closed.
 */
function answerClientError(err: Error & { code?: string }, socket: net.Socket, domain: string, responding: boolean): void {
  // A response under way (an earlier pipelined request's) cannot be followed by another one: just close.
  if (!socket.writable || socket.destroyed || responding) {
    socket.destroy();
    return;
  }
  const refusal =
    err.code === "HPE_HEADER_OVERFLOW"
      ? requestHeadersTooLarge(MAX_HEADER_BYTES)
      : err.code === "ERR_HTTP_REQUEST_TIMEOUT"
        ? requestTimedOut()
        : malformedHttpRequest();
  const rest = toRestError(refusal, domain, registry);
  const body = Buffer.from(rest.body);
  socket.end(
    `HTTP/1.1 ${rest.status} ${http.STATUS_CODES[rest.status] ?? ""}\r\nconnection: close\r\ncontent-type: application/json\r\ncontent-length: ${body.byteLength}\r\n\r\n${rest.body}`,
  );
}
const TLS_HANDSHAKE = 0x16;

/**
 * Node's HTTP/1.1 servers enforce headersTimeout and requestTimeout (answering 408) only over the connections
 * they track, and start tracking when they start listening themselves, which these never do: they are handed
 * their connections. Without this, a connection sending half its headers, or a body a byte at a time, was
 * held for as long as it liked. (Checked on Node 20: see test/integration/listener.test.ts, "slow clients".)
 */
function startTracking(server: http.Server | http2.Http2SecureServer): void {
  server.emit("listening");
}

/**
 * A stream whose request has not ended (END_STREAM) within the request timeout: answered, when no response
 * has started, with DEADLINE_EXCEEDED (gRPC: in trailers; anything else: 408 with a google.rpc.Status), then
 * reset with NO_ERROR so that the client stops sending (RFC 9113, section 8.1).
 */
function expireStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, domain: string): void {
  if (stream.destroyed || stream.closed) return;
  if (!stream.headersSent) {
    if (/^application\/grpc(?!-web)/i.test(headers["content-type"] ?? "")) {
      const trailer = new Headers();
      setTrailerStatus(trailer, toPublicError(requestTimedOut(), domain));
      stream.respond({ ":status": 200, "content-type": "application/grpc", ...Object.fromEntries(trailer) }, { endStream: true });
    } else {
      const rest = toRestError(requestTimedOut(), domain, registry);
      stream.respond({ ":status": rest.status, "content-type": "application/json" });
      stream.end(rest.body);
    }
  }
  stream.close(http2.constants.NGHTTP2_NO_ERROR);
}

export async function listen(handler: RequestHandler, opts: ListenOptions): Promise<Listener> {
  const given = opts.limits ?? {};
  const requestMs = given.requestTimeoutMs ?? DEFAULT_LIMITS.requestTimeoutMs;
  // Node requires headersTimeout <= requestTimeout; the headers are part of the request.
  const headersMs = Math.min(given.headersTimeoutMs ?? DEFAULT_LIMITS.connections.headersTimeoutMs, requestMs);
  const idleMs = given.idleTimeoutMs ?? DEFAULT_LIMITS.connections.idleTimeoutMs;
  const maxPerAddress = given.maxPerAddress ?? DEFAULT_LIMITS.connections.maxPerAddress;
  // How often Node looks for HTTP/1.1 requests past their time: a timeout is enforced up to this late.
  const checkEveryMs = Math.max(10, Math.min(1_000, Math.floor(headersMs / 4)));
  const streamsBody = opts.streamsBody;
  // With streaming bodies, Node's whole-request timeout (which cannot spare one request) is replaced by this
  // listener's own, per request (see deadlineOf below); without, Node's stays.
  const nodeTimeouts = { headersTimeout: headersMs, requestTimeout: streamsBody ? 0 : requestMs, keepAliveTimeout: idleMs, connectionsCheckingInterval: checkEveryMs };

  let closing = false;
  // HTTP/1.1 connections (cleartext, and over TLS once they made a request), with the requests each has under
  // way, and the timer closing it when no next request has come: an idle one is closed when the server
  // closes. (Node's own closeIdleConnections() is not used: its tracking of idle connections is not
  // documented for connections handed over.)
  type H1State = { responses: Set<http.ServerResponse>; awaiting?: NodeJS.Timeout | undefined };
  const h1Conns = new Map<net.Socket, H1State>();
  const h1State = (socket: net.Socket) => {
    let state = h1Conns.get(socket);
    if (!state) {
      const created: H1State = { responses: new Set() };
      h1Conns.set(socket, created);
      socket.once("close", () => {
        clearTimeout(created.awaiting);
        h1Conns.delete(socket);
      });
      state = created;
    }
    return state;
  };
  const serve: RequestHandler = (req, res) => {
    if (req.httpVersionMajor === 1) {
      // While closing, an HTTP/1.1 connection closes after the response it is sending (no keep-alive).
      if (closing) (res as http.ServerResponse).shouldKeepAlive = false;
      const socket = req.socket;
      const state = h1State(socket);
      clearTimeout(state.awaiting);
      state.responses.add(res as http.ServerResponse);
      if (streamsBody && !(req as http.IncomingMessage).complete) deadlineOf(req as http.IncomingMessage, res as http.ServerResponse, streamsBody);
      res.once("close", () => {
        state.responses.delete(res as http.ServerResponse);
        if (state.responses.size > 0) return;
        if (closing) return void socket.destroy();
        // Node closes a keep-alive connection idle for idleMs; this one closes it when what came since is no
        // request's headers either (a client sending blank lines, which start no request, to keep it open).
        clearTimeout(state.awaiting);
        state.awaiting = setTimeout(() => socket.destroy(), idleMs + headersMs + checkEveryMs);
        state.awaiting.unref();
      });
    }
    handler(req, res);
  };
  /**
   * An HTTP/1.1 request's body must arrive within the request timeout, as Node would enforce (408, then the
   * connection closed), unless it streams: then it must never stall for the request timeout (the socket's
   * idle timeout, reset by every byte).
   */
  const deadlineOf = (req: http.IncomingMessage, res: http.ServerResponse, streams: (method: string, path: string) => boolean) => {
    const socket = req.socket;
    const path = (req.url ?? "/").split("?", 1)[0]!;
    if (streams(req.method ?? "GET", path)) {
      const stalled = () => socket.destroy();
      socket.setTimeout(requestMs);
      socket.on("timeout", stalled);
      const done = () => {
        socket.setTimeout(0);
        socket.off("timeout", stalled);
      };
      req.once("end", done);
      req.once("close", done);
      return;
    }
    const timer = setTimeout(() => {
      if (req.complete) return;
      const err = Object.assign(new Error("request timeout"), { code: "ERR_HTTP_REQUEST_TIMEOUT" });
      answerClientError(err, socket, opts.errorDomain, res.headersSent);
    }, requestMs);
    timer.unref();
    const done = () => clearTimeout(timer);
    req.once("end", done);
    req.once("close", done);
  };
  const closeIdleH1 = () => {
    for (const [socket, state] of h1Conns) if (state.responses.size === 0) socket.destroy();
  };
  const h1 = http.createServer({ ...nodeTimeouts, maxHeaderSize: MAX_HEADER_BYTES }, serve);
  startTracking(h1);
  const h2c = http2.createServer({ settings: { maxHeaderListSize: MAX_HEADER_BYTES } }, serve);
  const tls = opts.tls
    ? http2.createSecureServer({ ...opts.tls, allowHTTP1: true, handshakeTimeout: headersMs, settings: { maxHeaderListSize: MAX_HEADER_BYTES } }, serve)
    : undefined;
  if (tls) {
    // The HTTP/1.1 side of the TLS server takes Node's HTTP/1.1 timeouts from these properties.
    Object.assign(tls, nodeTimeouts);
    startTracking(tls);
  }

  const sockets = new Set<net.Socket>();
  const sessions = new Set<http2.Http2Session>();
  for (const s of [h2c, tls]) {
    s?.on("session", (session) => {
      sessions.add(session);
      session.once("close", () => sessions.delete(session));
      watchSession(session);
      if (closing) session.close(); // a connection accepted before the close, classified after it
    });
    s?.on("stream", (stream, headers) => {
      // A request must end (END_STREAM) within the request timeout, as an HTTP/1.1 body must arrive; a
      // streaming body must only never stall that long.
      if (stream.endAfterHeaders) return;
      if (streamsBody?.(String(headers[":method"] ?? ""), String(headers[":path"] ?? "/").split("?", 1)[0]!)) {
        stream.setTimeout(requestMs, () => expireStream(stream, headers, opts.errorDomain));
        return;
      }
      const timer = setTimeout(() => expireStream(stream, headers, opts.errorDomain), requestMs);
      const done = () => clearTimeout(timer);
      stream.once("end", done);
      stream.once("close", done);
    });
  }
  /**
   * An HTTP/2 connection is closed (GOAWAY, then destroyed if the client lingers) when it has had no stream
   * open for the idle timeout, or, new, has opened none within the headers timeout. PINGs do not count:
   * they keep no request going.
   */
  const watchSession = (session: http2.Http2Session) => {
    let open = 0;
    let timer: NodeJS.Timeout | undefined;
    const arm = (ms: number) => {
      timer = setTimeout(() => {
        session.close();
        setTimeout(() => session.destroy(), headersMs).unref();
      }, ms);
      timer.unref();
    };
    arm(headersMs);
    session.on("stream", (stream: http2.Http2Stream) => {
      open += 1;
      clearTimeout(timer);
      stream.once("close", () => {
        open -= 1;
        if (open === 0 && !session.closed && !session.destroyed) arm(idleMs);
      });
    });
    session.once("close", () => clearTimeout(timer));
  };
  for (const s of [h1, h2c, tls]) {
    s?.on("clientError", (err: Error, socket: net.Socket) => {
      // As Node does: an answer only where no response has started writing to the connection.
      const responding = [...(h1Conns.get(socket)?.responses ?? [])].some((res) => res.headersSent);
      answerClientError(err, socket, opts.errorDomain, responding);
    });
  }

  // Open connections per client address, and the refusals of those over the cap (a warning a minute at most).
  const perAddress = new Map<string, number>();
  let refused = 0;
  let lastWarning = 0;
  const admit = (socket: net.Socket): boolean => {
    const address = socket.remoteAddress ?? "";
    const held = perAddress.get(address) ?? 0;
    if (maxPerAddress > 0 && held >= maxPerAddress) {
      refused += 1;
      if (Date.now() - lastWarning > 60_000) {
        log.warn("connections refused: too many from one address", { address, limit: maxPerAddress, refused });
        lastWarning = Date.now();
        refused = 0;
      }
      socket.destroy();
      return false;
    }
    perAddress.set(address, held + 1);
    socket.once("close", () => {
      const left = (perAddress.get(address) ?? 1) - 1;
      if (left > 0) perAddress.set(address, left);
      else perAddress.delete(address);
    });
    return true;
  };

  // noDelay: the HTTP servers turn Nagle's algorithm off only on connections they accept themselves; on these,
  // handed over, a response written in several pieces (gRPC: headers, data, trailers) waited for the peer's
  // delayed ACK, about 40 ms.
  const front = net.createServer({ pauseOnConnect: true, noDelay: true }, (socket) => {
    socket.on("error", () => socket.destroy());
    if (!admit(socket)) return;
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    // The bytes that tell the protocol must come within the headers timeout, however slowly they trickle.
    const sniffing = setTimeout(() => socket.destroy(), headersMs);
    socket.once("close", () => clearTimeout(sniffing));
    sniff(socket, (kind) => {
      clearTimeout(sniffing);
      if (kind === "tls") {
        if (!tls) return socket.destroy();
        tls.emit("connection", socket);
      } else if (kind === "h2c") {
        h2c.emit("connection", socket);
      } else {
        h1State(socket);
        h1.emit("connection", socket);
        socket.resume();
      }
    });
  });

  const address = await listenOn(front, opts.port, opts.host);
  log.info("listening", { host: address.address, port: address.port, tls: Boolean(tls) });

  return {
    address,
    connections: () => sockets.size,
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
