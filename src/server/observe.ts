// Where every request is seen, whatever its protocol or route (app.ts calls `begin` first for each): its
// request id is settled and sent back (x-request-id), it is counted in flight, and when its response ends
// (or the client goes away) it is counted and timed (metrics.ts) and logged in one access line:
//
//   {"level":"info","time":..,"msg":"request","requestId":..,"protocol":"grpc","method":"<service>/<Method>",
//    "route":<REST template>,"httpMethod":"POST","path":..,"code":"NOT_FOUND","status":200,"durationMs":1.2,
//    "uid":<caller's identity>,"bytesIn":..,"bytesOut":..}
//
// A client that hangs up before the end is the line's "clientClosed": true with code CANCELLED, at info level:
// nothing went wrong on the server.
import type http from "node:http";
import type http2 from "node:http2";
import { performance } from "node:perf_hooks";
import { Code } from "@connectrpc/connect";
import { codeFromHttpStatus } from "@connectrpc/connect/protocol-connect";
import { accessKey } from "../kernel/auth/principal.js";
import { log, logs } from "../kernel/log.js";
import { requestIdFrom, type Protocol, type RequestRecord } from "../kernel/request.js";
import { codeName, type Metrics } from "./metrics.js";

type Req = http.IncomingMessage | http2.Http2ServerRequest;
type Res = http.ServerResponse | http2.Http2ServerResponse;

/** The response header carrying the request id, on every protocol. */
const REQUEST_ID_HEADER = "x-request-id";

/** The longest path an access line quotes. */
const MAX_LOGGED_PATH = 256;

const kObserved = Symbol("observed request");
interface Observed extends RequestRecord {
  readonly req: Req;
}
type ObservedRes = Res & { [kObserved]?: Observed };

export interface Observer {
  /** Starts the record of a request: its id (sent back now), protocol and labels (refined later by the layers). */
  begin(req: Req, res: Res, protocol: Protocol, service: string, method: string): RequestRecord;
}

export function createObserver(metrics: Metrics): Observer {
  // One listener for every response (no closure per request): the record rides on the response.
  function onClose(this: ObservedRes): void {
    const record = this[kObserved];
    if (!record) return;
    this[kObserved] = undefined;
    // A close listener that throws would take the process down: the access line is never worth that.
    try {
      finish(record, this);
    } catch (err) {
      log.error("access line not written", { requestId: record.id, err });
    }
  }

  function finish(record: Observed, res: Res): void {
    const durationMs = performance.now() - record.start;
    const clientClosed = !finished(res);
    const status = res.statusCode;
    const code: Code = clientClosed ? Code.Canceled : (record.code ?? (status === 200 ? (0 as Code) : codeFromHttpStatus(status)));
    metrics.finished(record.protocol, record.service, record.method, code, durationMs / 1000);
    if (!logs("info")) return;
    const req = record.req;
    const line: Record<string, unknown> = {
      requestId: record.id,
      protocol: record.protocol,
      method: `${record.service}/${record.method}`,
      httpMethod: req.method,
      path: pathOf(req.url),
      code: codeName(code),
      status,
      durationMs: Math.round(durationMs * 1000) / 1000,
    };
    if (record.route !== undefined) line.route = record.route;
    const uid = record.values?.get(accessKey)?.actingAs;
    if (uid !== undefined) line.uid = uid;
    const bytesIn = record.bytesIn ?? Number(req.headers["content-length"]);
    if (bytesIn >= 0) line.bytesIn = bytesIn;
    const bytesOut = record.bytesOut ?? Number(res.getHeader("content-length"));
    if (bytesOut >= 0) line.bytesOut = bytesOut;
    if (clientClosed) line.clientClosed = true;
    log.info("request", line);
  }

  return {
    begin(req, res, protocol, service, method) {
      const record: Observed = {
        id: requestIdFrom(req.headers[REQUEST_ID_HEADER]),
        start: performance.now(),
        protocol,
        service,
        method,
        route: undefined,
        code: undefined,
        bytesIn: undefined,
        bytesOut: undefined,
        values: undefined,
        req,
      };
      res.setHeader(REQUEST_ID_HEADER, record.id);
      metrics.started(protocol);
      (res as ObservedRes)[kObserved] = record;
      (res as http.ServerResponse).on("close", onClose);
      return record;
    },
  };
}

/**
 * Whether the response was sent to its end. An HTTP/2 response reports itself finished once its stream
 * closes, reset by the client or not: the stream says whether it was cut off (aborted) before its end.
 */
function finished(res: Res): boolean {
  const stream = (res as http2.Http2ServerResponse).stream as http2.ServerHttp2Stream | undefined;
  return stream ? !stream.aborted : res.writableFinished;
}

function pathOf(url: string | undefined): string {
  const path = (url ?? "/").split("?", 1)[0]!;
  return path.length <= MAX_LOGGED_PATH ? path : `${path.slice(0, MAX_LOGGED_PATH)}…`;
}

/** Errors of writing a response to a client that is gone: nothing the server did wrong. */
const CLIENT_GONE_CODES = new Set(["ERR_STREAM_PREMATURE_CLOSE", "ERR_STREAM_DESTROYED", "ERR_HTTP2_INVALID_STREAM", "ERR_HTTP2_STREAM_ERROR", "ERR_STREAM_WRITE_AFTER_END", "ECONNRESET", "EPIPE", "ABORT_ERR"]);

/** Whether a failure to answer comes from the client having gone away (the request aborted, the stream reset). */
export function isClientGone(err: unknown, res: Res): boolean {
  if (!finished(res) && (res.destroyed || (res as http2.Http2ServerResponse).stream?.destroyed)) return true;
  const code = (err as { code?: unknown } | null)?.code;
  return (typeof code === "string" && CLIENT_GONE_CODES.has(code)) || (err as Error | null)?.name === "AbortError";
}
