// Where Prometheus reads /metrics. By default on a listener of its own (METRICS_ADDR, 127.0.0.1:9464), off
// the API port: the figures (methods called, error rates, pool use) are the operator's, not the API's
// users'. An operator who can only scrape the API port sets METRICS_TOKEN: /metrics is then served there too,
// to requests bearing that token (Authorization: Bearer <token>), and refused (401) to any other.
import { createHash, timingSafeEqual } from "node:crypto";
import http from "node:http";
import type http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { bearerChallenge, bearerTokenOf } from "../kernel/authorization-header.js";
import { log } from "../kernel/log.js";
import { listenOn } from "./listener.js";
import type { Metrics } from "./metrics.js";

type Req = http.IncomingMessage | http2.Http2ServerRequest;
type Res = http.ServerResponse | http2.Http2ServerResponse;

async function serve(metrics: Metrics, req: Req, res: Res): Promise<void> {
  if (req.method !== "GET" && req.method !== "HEAD") {
    (res as http.ServerResponse).writeHead(405, { allow: "GET, HEAD", "content-type": "text/plain" }).end("method not allowed\n");
    return;
  }
  try {
    const { contentType, body } = await metrics.render();
    (res as http.ServerResponse).writeHead(200, { "content-type": contentType, "cache-control": "no-store" }).end(req.method === "HEAD" ? undefined : body);
  } catch (err) {
    log.warn("metrics: cannot render", { err });
    if (!res.headersSent) (res as http.ServerResponse).writeHead(500, { "content-type": "text/plain" }).end("metrics unavailable\n");
  }
}

const digest = (text: string) => createHash("sha256").update(text).digest();

/** /metrics on the API port, for requests bearing `token` (compared in constant time). */
export function createMetricsRoute(metrics: Metrics, token: string): (req: Req, res: Res) => Promise<void> {
  const expected = digest(token);
  return async (req, res) => {
    const presented = bearerTokenOf(req.headers.authorization);
    if (presented === undefined || !timingSafeEqual(digest(presented), expected)) {
      const challenge = bearerChallenge(req.headers.authorization);
      (res as http.ServerResponse).writeHead(401, { "www-authenticate": challenge, "content-type": "text/plain" }).end("a bearer token is needed\n");
      return;
    }
    await serve(metrics, req, res);
  };
}

export interface MetricsListener {
  address: AddressInfo;
  close(): Promise<void>;
}

/** The metrics listener: GET /metrics, and nothing else. */
export async function listenMetrics(metrics: Metrics, opts: { host: string; port: number }): Promise<MetricsListener> {
  const server = http.createServer((req, res) => {
    if ((req.url ?? "/").split("?", 1)[0] !== "/metrics") {
      res.writeHead(404, { "content-type": "text/plain" }).end("not found: metrics are at /metrics\n");
      return;
    }
    void serve(metrics, req, res);
  });
  const address = await listenOn(server, opts.port, opts.host);
  log.info("metrics listening", { host: address.address, port: address.port, path: "/metrics" });
  return {
    address,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
