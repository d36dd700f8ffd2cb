// What an operator reads about the requests a server answers, on every protocol: /metrics (Prometheus
// text: requests by service, method, protocol and code, latency, in flight, the database, event delivery,
// the process), and the logs (one access line per request; the request id a client sent, or one made for
// it, returned in x-request-id and in the ErrorInfo of every error; a client hanging up is an info line).
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import { create, fromBinary, toBinary, type DescMethodUnary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from "@connectrpc/connect-node";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { PingRequestSchema, PingService } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { registry } from "../../src/kernel/descriptors.js";
import { addLogTap } from "../../src/kernel/log.js";
import { bindPartial } from "../../src/kernel/module.js";
import { listenMetrics } from "../../src/server/metrics-route.js";
import { subscriptions } from "../../src/db/schema/index.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { until } from "../support/poll.js";
import { startSink } from "../support/sink.js";
import { grpcFrame, rawGrpc } from "../support/raw-rpc.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { protocols, restRequestOf, type Protocol } from "./harness.js";

const METRICS_TOKEN = "metrics-token-for-tests-0123456789abcdef";
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const PING = "chainguard.platform.ping.v2.PingService";
const GROUPS = "chainguard.platform.iam.v2.GroupsService";

let server: TestServer;
let world: World;
type Line = Record<string, unknown>;
const lines: Line[] = [];
let untap: () => void;
const holds = new Set<() => void>();

beforeAll(async () => {
  untap = addLogTap((l) => lines.push(JSON.parse(l) as Line));
  server = await startTestServer({
    metricsToken: METRICS_TOKEN,
    overrides: [
      // Ping holds its answer while x-test-hold is sent, until the client goes away (or 20 s pass).
      bindPartial(PingService, {
        async ping(_req, ctx) {
          if (ctx.requestHeader.get("x-test-hold")) {
            await new Promise<void>((resolve) => {
              const t = setTimeout(resolve, 20_000);
              const done = () => {
                clearTimeout(t);
                resolve();
              };
              holds.add(done);
              ctx.signal.addEventListener("abort", done);
            });
          }
          return { response: "pong" };
        },
      }),
    ],
  });
  world = await seedWorld(server, "observability");
});
afterAll(async () => {
  for (const release of holds) release();
  untap?.();
  await server?.close();
});

/** The protocol label of each of the harness's protocols. */
const labelOf: Record<Protocol, string> = { grpc: "grpc", "grpc-web": "grpc-web", "connect-json": "connect", "connect-binary-h2": "connect", rest: "rest" };

interface Answer {
  /** x-request-id of the response. */
  requestId: string | null;
  /** The error's code and its ErrorInfo metadata, when it failed. */
  error?: { code: Code; reason: string; metadata: Record<string, string> };
}

/** One unary call over one protocol, reading the response's x-request-id and the error's ErrorInfo. */
async function exchange<M extends DescMethodUnary>(protocol: Protocol, method: M, headers: Record<string, string>, request: Record<string, unknown> = {}): Promise<Answer> {
  if (protocol === "rest") {
    const { verb, path, body } = restRequestOf(method, create(method.input, request));
    const res = await fetch(server.baseUrl + path, { method: verb, headers: { ...headers, ...(body ? { "content-type": "application/json" } : {}) }, ...(body ? { body } : {}) });
    const json = (await res.json()) as { code?: number; details?: Array<{ "@type": string; reason?: string; metadata?: Record<string, string> }> };
    const requestId = res.headers.get("x-request-id");
    if (res.ok) return { requestId };
    const info = json.details?.find((d) => d["@type"].endsWith(ErrorInfoSchema.typeName));
    return { requestId, error: { code: json.code as Code, reason: info?.reason ?? "", metadata: info?.metadata ?? {} } };
  }
  const baseUrl = server.baseUrl;
  const transport =
    protocol === "grpc"
      ? createGrpcTransport({ baseUrl })
      : protocol === "grpc-web"
        ? createGrpcWebTransport({ baseUrl, httpVersion: "1.1" })
        : createConnectTransport({ baseUrl, httpVersion: protocol === "connect-json" ? "1.1" : "2", useBinaryFormat: protocol !== "connect-json", jsonOptions: { registry } });
  try {
    const res = await transport.unary(method, undefined, undefined, headers, create(method.input, request));
    return { requestId: res.header.get("x-request-id") };
  } catch (err) {
    const e = ConnectError.from(err);
    const info = e.findDetails(ErrorInfoSchema)[0];
    return { requestId: e.metadata.get("x-request-id"), error: { code: e.code, reason: info?.reason ?? "", metadata: info?.metadata ?? {} } };
  }
}

/** The access lines of a request id, once the server has written them. */
async function accessLines(requestId: string): Promise<Line[]> {
  await until("the access line", async () => lines.filter((l) => l.msg === "request" && l.requestId === requestId).length, (n) => n > 0, 10_000);
  // A second line would come right after the first, if there were one.
  await new Promise((r) => setTimeout(r, 50));
  return lines.filter((l) => l.msg === "request" && l.requestId === requestId);
}

async function scrape(headers: Record<string, string> = { authorization: `Bearer ${METRICS_TOKEN}` }): Promise<Map<string, number>> {
  const res = await fetch(`${server.baseUrl}/metrics`, { headers });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toMatch(/^text\/plain; version=0\.0\.4/);
  return parseExposition(await res.text());
}

/** Prometheus text: series ("name{labels}") to value. */
function parseExposition(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const at = line.lastIndexOf(" ");
    out.set(line.slice(0, at), Number(line.slice(at + 1)));
  }
  return out;
}

const series = (name: string, labels: Record<string, string>) => `${name}{${Object.entries(labels).map(([k, v]) => `${k}="${v}"`).join(",")}}`;

describe("/metrics", () => {
  it("counts and times the calls of every protocol by service, method, protocol and code", async () => {
    const before = await scrape();
    for (const protocol of protocols) {
      expect((await exchange(protocol, PingService.method.ping, {})).error).toBeUndefined();
      expect((await exchange(protocol, GroupsService.method.getGroup, {}, { uid: world.org })).error?.code).toBe(Code.Unauthenticated);
    }
    const unknown = await fetch(`${server.baseUrl}/registry/v2/nothing-here`);
    expect(unknown.status).toBe(404);
    const after = await scrape();
    const delta = (s: string) => (after.get(s) ?? 0) - (before.get(s) ?? 0);
    for (const protocol of ["grpc", "grpc-web", "connect", "rest"]) {
      // Two of the harness's protocols are Connect (JSON over HTTP/1.1, binary over HTTP/2).
      const n = protocol === "connect" ? 2 : 1;
      expect(delta(series("apiserver_requests_total", { service: PING, method: "Ping", protocol, code: "OK" })), `${protocol} Ping OK`).toBe(n);
      expect(delta(series("apiserver_requests_total", { service: GROUPS, method: "GetGroup", protocol, code: "UNAUTHENTICATED" })), `${protocol} GetGroup`).toBe(n);
      expect(delta(series("apiserver_request_duration_seconds_count", { service: PING, method: "Ping", protocol })), `${protocol} Ping timed`).toBe(n);
      expect(after.has(series("apiserver_request_duration_seconds_bucket", { le: "0.005", service: PING, method: "Ping", protocol }))).toBe(true);
      // In flight as it is read: the scrape itself (GET /metrics on the API port: rest).
      expect(after.get(series("apiserver_requests_in_flight", { protocol })), `${protocol} in flight`).toBe(protocol === "rest" ? 1 : 0);
    }
    // A path that is no route is folded into one label value, whatever the path.
    expect(delta(series("apiserver_requests_total", { service: "unknown", method: "unknown", protocol: "rest", code: "NOT_FOUND" }))).toBe(1);
    // The process's default metrics.
    expect(after.has("process_cpu_user_seconds_total")).toBe(true);
    expect(after.has("nodejs_eventloop_lag_seconds")).toBe(true);
  });

  it("counts the database's query errors, and on PostgreSQL its pool", async () => {
    const before = await scrape();
    await expect(server.database.db.execute(sql`select 1 / 0`)).rejects.toThrow();
    const after = await scrape();
    const other = series("apiserver_db_query_errors_total", { kind: "other" });
    expect((after.get(other) ?? 0) - (before.get(other) ?? 0)).toBe(1);
    if (server.database.kind === "postgres") {
      expect(after.get("apiserver_db_pool_size")).toBe(5); // the test database's pool
      expect(after.get("apiserver_db_pool_in_use")).toBeGreaterThanOrEqual(0);
      expect(after.get("apiserver_db_pool_waiting")).toBe(0);
      expect(after.get("apiserver_db_pool_acquire_timeouts_total")).toBe(0);
    }
  });

  it("on the API port, only to a request bearing METRICS_TOKEN", async () => {
    const none = await fetch(`${server.baseUrl}/metrics`);
    expect(none.status).toBe(401);
    expect(none.headers.get("www-authenticate")).toBe("Bearer");
    const wrong = await fetch(`${server.baseUrl}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}x` } });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("www-authenticate")).toBe('Bearer error="invalid_token"');
    expect(await wrong.text()).not.toContain("apiserver_");
  });

  it("on the metrics listener, with no token, and nothing else there", async () => {
    const listener = await listenMetrics(server.metrics, { host: "127.0.0.1", port: 0 });
    try {
      const base = `http://127.0.0.1:${listener.address.port}`;
      const res = await fetch(`${base}/metrics`);
      expect(res.status).toBe(200);
      expect(await res.text()).toMatch(/^apiserver_requests_total\{/m);
      expect((await fetch(`${base}/`)).status).toBe(404);
      // Read-only: HEAD answers without a body; any other method is refused with Allow.
      const head = await fetch(`${base}/metrics`, { method: "HEAD" });
      expect(head.status).toBe(200);
      expect(await head.text()).toBe("");
      const post = await fetch(`${base}/metrics`, { method: "POST", body: "x" });
      expect(post.status).toBe(405);
      expect(post.headers.get("allow")).toBe("GET, HEAD");
      // On the API port too, once the token is accepted.
      const api = await fetch(`${server.baseUrl}/metrics`, { method: "DELETE", headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
      expect(api.status).toBe(405);
      expect(api.headers.get("allow")).toBe("GET, HEAD");
    } finally {
      await listener.close();
    }
  });

  it("without METRICS_TOKEN, /metrics is no route of the API port", async () => {
    const plain = await startTestServer();
    try {
      const res = await fetch(`${plain.baseUrl}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
      expect(res.status).toBe(404);
      expect(await res.text()).toContain("ROUTE_NOT_FOUND");
    } finally {
      await plain.close();
    }
  });

  it("reads event delivery from the worker: backlog, outcomes, in flight", async () => {
    const withEvents = await startTestServer({ delivery: { retryBaseMs: 50, retryMaxMs: 200, pollMs: 50, timeoutMs: 2_000 } });
    const receiver = await startSink();
    try {
      const metricsOf = async () => parseExposition((await withEvents.metrics.render()).body);
      const got = await metricsOf();
      expect(got.get(series("apiserver_events_delivery_backlog", { state: "pending" }))).toBe(0);
      expect(got.get(series("apiserver_events_delivery_backlog", { state: "due" }))).toBe(0);
      for (const outcome of ["delivered", "retried", "failed"]) expect(got.get(series("apiserver_events_deliveries_total", { outcome }))).toBe(0);
      expect(got.get("apiserver_events_delivery_attempts_total")).toBe(0);
      expect(got.get("apiserver_events_deliveries_in_flight")).toBe(0);
      // A registry per server: this one has counted none of the other server's requests.
      expect(got.has(series("apiserver_requests_total", { service: PING, method: "Ping", protocol: "grpc", code: "OK" }))).toBe(false);

      // One event, refused once by its sink, then delivered.
      const w = await seedWorld(withEvents, "metrics-events");
      await withEvents.database.db.insert(subscriptions).values({ uid: newChildUid(w.org), groupUid: w.org, sink: receiver.url });
      receiver.answer = (_req, index) => (index === 0 ? 500 : 200);
      const created = await fetch(`${withEvents.baseUrl}/registry/v2/repos/${w.org}`, {
        method: "POST",
        headers: { ...w.auth("owner"), "content-type": "application/json" },
        body: JSON.stringify({ name: "metrics-events" }),
      });
      expect(created.status).toBe(200);
      await receiver.waitFor(2);
      const after = await until(
        "the delivery counted",
        metricsOf,
        (m) => m.get(series("apiserver_events_deliveries_total", { outcome: "delivered" })) === 1 && m.get(series("apiserver_events_delivery_backlog", { state: "pending" })) === 0,
        10_000,
      );
      expect(after.get(series("apiserver_events_deliveries_total", { outcome: "retried" }))).toBe(1);
      expect(after.get(series("apiserver_events_deliveries_total", { outcome: "failed" }))).toBe(0);
      expect(after.get("apiserver_events_delivery_attempts_total")).toBe(2);
    } finally {
      await receiver.close();
      await withEvents.close();
    }
  });
});

describe.each(protocols)("request ids and access lines [%s]", (protocol) => {
  it("keeps the client's x-request-id: in the response header, and one access line", async () => {
    const id = `test-${protocol}-${Date.now()}`;
    const answer = await exchange(protocol, PingService.method.ping, { "x-request-id": id });
    expect(answer.error).toBeUndefined();
    expect(answer.requestId).toBe(id);
    const got = await accessLines(id);
    expect(got).toHaveLength(1);
    expect(got[0]).toMatchObject({ level: "info", protocol: labelOf[protocol], method: `${PING}/Ping`, code: "OK", status: 200 });
    expect(typeof got[0]!.time).toBe("string");
    expect(got[0]!.durationMs).toBeTypeOf("number");
    expect(got[0]!.uid).toBeUndefined();
  });

  it("names the caller's identity, and the route of a REST call", async () => {
    const id = `caller-${protocol}-${Date.now()}`;
    const answer = await exchange(protocol, GroupsService.method.getGroup, { "x-request-id": id, ...world.auth("owner") }, { uid: world.org });
    expect(answer.error).toBeUndefined();
    const [line] = await accessLines(id);
    expect(line).toMatchObject({ method: `${GROUPS}/GetGroup`, code: "OK", uid: world.identity.owner });
    if (protocol === "rest") expect(line).toMatchObject({ route: "/iam/v2/groups/{uid=**}", httpMethod: "GET", bytesOut: expect.any(Number) });
    if (protocol === "grpc" || protocol === "grpc-web" || protocol === "connect-json") expect(line!.bytesOut).toBeGreaterThan(0);
    // gRPC clients send no content-length: the unary path counts what it read (an envelope and the uid).
    if (protocol === "grpc") expect(line!.bytesIn).toBeGreaterThan(5 + world.org.length);
  });

  it("puts the request id in the ErrorInfo of an error, and logs the code", async () => {
    const id = `error-${protocol}-${Date.now()}`;
    const answer = await exchange(protocol, GroupsService.method.getGroup, { "x-request-id": id }, { uid: world.org });
    expect(answer.error?.code).toBe(Code.Unauthenticated);
    expect(answer.error?.metadata.requestId).toBe(id);
    expect(answer.requestId).toBe(id);
    const [line] = await accessLines(id);
    expect(line).toMatchObject({ code: "UNAUTHENTICATED", protocol: labelOf[protocol] });
    expect(line!.status).toBe(protocol === "rest" || protocol.startsWith("connect") ? 401 : 200);
  });

  it("makes an id when the client sends none, or one it cannot keep", async () => {
    const none = await exchange(protocol, GroupsService.method.getGroup, {}, { uid: world.org });
    expect(none.requestId).toMatch(UUID);
    expect(none.error?.metadata.requestId).toBe(none.requestId);
    expect(await accessLines(none.requestId!)).toHaveLength(1);
    for (const bad of ["has spaces in it", "x".repeat(129), "quote\"d"]) {
      const answer = await exchange(protocol, PingService.method.ping, { "x-request-id": bad });
      expect(answer.requestId).toMatch(UUID);
    }
  });
});

describe("errors of the protocol layer carry the request id too", () => {
  it("REST: a path that is no route", async () => {
    const res = await fetch(`${server.baseUrl}/registry/v2/nothing-here`, { headers: { "x-request-id": "rest-route-1" } });
    expect(res.status).toBe(404);
    expect(res.headers.get("x-request-id")).toBe("rest-route-1");
    const body = (await res.json()) as { details: Array<{ reason?: string; metadata?: Record<string, string> }> };
    expect(body.details[0]).toMatchObject({ reason: "ROUTE_NOT_FOUND", metadata: { requestId: "rest-route-1" } });
    expect((await accessLines("rest-route-1"))[0]).toMatchObject({ protocol: "rest", method: "unknown/unknown", code: "NOT_FOUND", status: 404 });
  });

  it("Connect: a content type no protocol reads", async () => {
    const res = await fetch(`${server.baseUrl}/${PING}/Ping`, { method: "POST", headers: { "content-type": "text/plain", "x-request-id": "connect-415" }, body: "{}" });
    expect(res.status).toBe(415);
    expect(res.headers.get("x-request-id")).toBe("connect-415");
    const body = (await res.json()) as { details: Array<{ debug?: { reason?: string; metadata?: Record<string, string> } }> };
    expect(body.details[0]!.debug).toMatchObject({ reason: "UNSUPPORTED_MEDIA_TYPE", metadata: { requestId: "connect-415" } });
    expect((await accessLines("connect-415"))[0]).toMatchObject({ code: "UNIMPLEMENTED", status: 415 });
  });

  it("gRPC: a message that does not parse", async () => {
    const answer = await rawGrpc(server.baseUrl, `/${PING}/Ping`, grpcFrame(Buffer.from([0xff, 0xff, 0xff])), { "x-request-id": "grpc-garbage" });
    expect(answer.status).toBe(String(Code.InvalidArgument));
    expect(answer.fields["x-request-id"]).toBe("grpc-garbage");
    const info = answer.details!.details.find((d) => d.typeUrl.endsWith(ErrorInfoSchema.typeName))!;
    expect(fromBinary(ErrorInfoSchema, info.value).metadata.requestId).toBe("grpc-garbage");
    expect((await accessLines("grpc-garbage"))[0]).toMatchObject({ protocol: "grpc", code: "INVALID_ARGUMENT", status: 200 });
  });
});

describe("a client that hangs up early", () => {
  /** Lines of warn level or worse written since `from`. */
  const complaints = (from: number) => lines.slice(from).filter((l) => l.level === "warn" || l.level === "error");

  it("gRPC, the stream reset: an info access line, CANCELLED, no warning", async () => {
    const from = lines.length;
    const session = http2.connect(server.baseUrl);
    try {
      const stream = session.request({ ":method": "POST", ":path": `/${PING}/Ping`, "content-type": "application/grpc", te: "trailers", "x-test-hold": "1", "x-request-id": "hangup-grpc" });
      stream.on("error", () => {});
      stream.end(grpcFrame(toBinary(PingRequestSchema, create(PingRequestSchema))));
      await new Promise<void>((resolve) => stream.on("response", () => resolve()).on("close", () => resolve()).setTimeout(300, () => resolve()));
      stream.close(http2.constants.NGHTTP2_CANCEL);
      const [line] = await accessLines("hangup-grpc");
      expect(line).toMatchObject({ level: "info", code: "CANCELLED", clientClosed: true, protocol: "grpc" });
    } finally {
      session.close();
    }
    await new Promise((r) => setTimeout(r, 200));
    expect(complaints(from)).toEqual([]);
  });

  it.each(["connect", "rest"] as const)("%s over HTTP/1.1, the connection closed: an info access line, no warning", async (kind) => {
    const from = lines.length;
    const id = `hangup-${kind}`;
    const socket = net.connect(server.port, "127.0.0.1");
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    const target = kind === "connect" ? `/${PING}/Ping` : "/ping/v2/ping";
    const verb = kind === "connect" ? "POST" : "GET";
    const body = kind === "connect" ? "{}" : "";
    socket.write(`${verb} ${target} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nx-test-hold: 1\r\nx-request-id: ${id}\r\n\r\n${body}`);
    await new Promise((r) => setTimeout(r, 300));
    socket.destroy();
    const [line] = await accessLines(id);
    expect(line).toMatchObject({ level: "info", code: "CANCELLED", clientClosed: true });
    await new Promise((r) => setTimeout(r, 200));
    expect(complaints(from)).toEqual([]);
  });

  it.each([
    ["the answer held", "held"],
    ["the body never finished", "body"],
  ] as const)("Connect over HTTP/2, the stream reset (%s): an info access line, CANCELLED, no warning", async (_what, how) => {
    const from = lines.length;
    const id = `hangup-connect-h2-${how}`;
    const session = http2.connect(server.baseUrl);
    try {
      const headers = { ":method": "POST", ":path": `/${PING}/Ping`, "content-type": "application/json", "x-request-id": id };
      const stream = session.request(how === "held" ? { ...headers, "x-test-hold": "1" } : { ...headers, "content-length": "1000" });
      stream.on("error", () => {});
      if (how === "held") stream.end("{}");
      else stream.write('{"x": "');
      await new Promise((r) => setTimeout(r, 300));
      stream.close(http2.constants.NGHTTP2_CANCEL);
      const [line] = await accessLines(id);
      expect(line).toMatchObject({ level: "info", code: "CANCELLED", clientClosed: true, protocol: "connect" });
    } finally {
      session.close();
    }
    await new Promise((r) => setTimeout(r, 200));
    expect(complaints(from)).toEqual([]);
  });

  it("an HTTP/1.1 request whose body never finishes: an info access line, no warning", async () => {
    const from = lines.length;
    const req = http.request(`${server.baseUrl}/iam/v2/groups/${world.org}`, { method: "POST", headers: { "content-type": "application/json", "content-length": "1000", "x-request-id": "hangup-body", ...world.auth("owner") } });
    req.on("error", () => {});
    req.write('{"name": "');
    await new Promise((r) => setTimeout(r, 300));
    req.destroy();
    const [line] = await accessLines("hangup-body");
    expect(line).toMatchObject({ level: "info", code: "CANCELLED", clientClosed: true });
    await new Promise((r) => setTimeout(r, 200));
    expect(complaints(from)).toEqual([]);
  });
});
