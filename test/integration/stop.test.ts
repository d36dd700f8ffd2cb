// Stopping a server process under load, on real PostgreSQL.
//   - SIGTERM: the server stops accepting, finishes what it has started, and exits 0. Every request sent
//     through the stop is either answered or refused before it started (the connection refused, or the
//     stream refused by HTTP/2 GOAWAY: REFUSED_STREAM, or a session already closing); none is cut mid-way.
//     Load runs over HTTP/2, where "not started" is part of the protocol (an HTTP/1.1 client cannot tell a
//     request the server never read from one cut mid-way: both are a reset connection).
//   - SIGTERM with SHUTDOWN_DRAIN_MS (behind a load balancer): health turns NOT_SERVING first (/healthz 503
//     DRAINING, gRPC health NOT_SERVING) while new connections and requests are still served for the drain
//     window; then the stop above, with nothing cut and exit 0.
//   - SIGKILL under write load: every write whose response arrived is in the database after a restart.
import http2 from "node:http2";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { Health, HealthCheckResponse_ServingStatus as ServingStatus } from "../../gen/health/v1/health_pb.js";
import { until } from "../support/poll.js";
import { call } from "../contract/harness.js";
import { createScratchDatabase, startServerProcess, type ScratchDatabase, type ServerProcess } from "../support/server-process.js";

type Outcome = { kind: "answered"; status: number; afterSignal: boolean; startedBefore: boolean } | { kind: "refused"; why: string } | { kind: "cut"; why: string };

/** One Connect (JSON) unary call over an HTTP/2 session, classified by what the client observed. */
function request(session: http2.ClientHttp2Session, path: string, body: object, token: string, signalled: () => boolean): Promise<Outcome> {
  const startedBefore = !signalled();
  return new Promise((resolve) => {
    let stream: http2.ClientHttp2Stream;
    try {
      stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/json", authorization: `Bearer ${token}` });
    } catch (err) {
      // The session is closing (GOAWAY received) or gone: nothing was sent.
      return resolve({ kind: "refused", why: (err as { code?: string }).code ?? String(err) });
    }
    let status = 0;
    const chunks: Buffer[] = [];
    stream.on("response", (headers) => (status = Number(headers[":status"])));
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => resolve({ kind: "answered", status, afterSignal: signalled(), startedBefore }));
    stream.on("error", (err: Error & { code?: string }) => {
      // REFUSED_STREAM: the server's GOAWAY says it never processed this stream.
      if (stream.rstCode === http2.constants.NGHTTP2_REFUSED_STREAM) return resolve({ kind: "refused", why: "REFUSED_STREAM" });
      resolve({ kind: "cut", why: `${err.code ?? ""} rst=${stream.rstCode} status=${status}` });
    });
    stream.end(JSON.stringify(body));
  });
}

/** Connects an HTTP/2 session; undefined when the connection is refused (nothing listens any more). */
function connect(baseUrl: string): Promise<http2.ClientHttp2Session | undefined> {
  return new Promise((resolve) => {
    const session = http2.connect(baseUrl);
    session.once("connect", () => resolve(session));
    session.once("error", () => resolve(undefined)); // before connect: refused or reset; no request was sent
    session.on("error", () => {}); // after connect: seen by the streams
  });
}

/**
 * Load on `server` until it has exited: `workers` HTTP/2 sessions, each sending ListGroups one after another
 * and reconnecting when its session ends, until a new connection is refused. `signal.sent` marks the
 * requests sent after the signal. Resolves with every request's outcome.
 */
function loadUntilExit(server: ServerProcess, workers: number, signal: { sent: boolean }): { outcomes: Outcome[]; done: Promise<void> } {
  const path = "/chainguard.platform.iam.v2.GroupsService/ListGroups";
  const signalled = () => signal.sent;
  let exited = false;
  void server.exited.then(() => (exited = true));
  const outcomes: Outcome[] = [];
  const worker = async () => {
    for (;;) {
      const session = await connect(server.baseUrl);
      if (!session) {
        if (exited) return;
        await new Promise((r) => setTimeout(r, 10));
        continue;
      }
      while (!session.closed && !session.destroyed) {
        const out = await request(session, path, { pageSize: 50 }, server.token, signalled);
        outcomes.push(out);
        if (out.kind !== "answered") break;
      }
      session.destroy();
    }
  };
  return { outcomes, done: Promise.all(Array.from({ length: workers }, worker)).then(() => {}) };
}

describe.skipIf(!process.env.DATABASE_URL)("stopping a server process (PostgreSQL)", () => {
  let scratch: ScratchDatabase;
  const started: ServerProcess[] = [];
  beforeAll(async () => {
    scratch = await createScratchDatabase();
  });
  afterAll(async () => {
    await Promise.all(started.map((s) => s.kill()));
    await scratch?.dispose();
  });

  it("SIGTERM under load: every request answered or refused before it started, then exit 0", async () => {
    const server = await startServerProcess(scratch.url, { SHUTDOWN_GRACE_MS: "10000" });
    started.push(server);
    const signal = { sent: false };
    const { outcomes, done } = loadUntilExit(server, 8, signal);
    await new Promise((r) => setTimeout(r, 1_000));
    signal.sent = true;
    server.child.kill("SIGTERM");
    await done;

    expect(await server.exited).toEqual({ code: 0, signal: null });
    const cut = outcomes.filter((o) => o.kind === "cut");
    expect(cut).toEqual([]);
    const answered = outcomes.filter((o) => o.kind === "answered");
    expect(answered.filter((o) => o.status !== 200)).toEqual([]);
    // The stop happened under load: requests in flight at the signal were answered after it.
    expect(answered.filter((o) => o.startedBefore && o.afterSignal).length).toBeGreaterThan(0);
    expect(server.logs()).toMatch(/"msg":"stopped"/);
  }, 60_000);

  it("SIGTERM with SHUTDOWN_DRAIN_MS: unhealthy first while still serving, then stops with nothing cut", async () => {
    const server = await startServerProcess(scratch.url, { SHUTDOWN_GRACE_MS: "10000", SHUTDOWN_DRAIN_MS: "4000" });
    started.push(server);
    const signal = { sent: false };
    let exited = false;
    void server.exited.then(() => (exited = true));
    const healthz = async () => {
      const res = await fetch(`${server.baseUrl}/healthz`);
      return { status: res.status, body: (await res.json()) as { status: string } };
    };
    expect(await healthz()).toEqual({ status: 200, body: { status: "SERVING" } });

    const { outcomes, done } = loadUntilExit(server, 4, signal);
    await new Promise((r) => setTimeout(r, 500));
    signal.sent = true;
    server.child.kill("SIGTERM");

    // Unhealthy at once, on both health checks...
    const drained = await until("healthz 503", healthz, (h) => h.status === 503, 5_000);
    expect(drained.body).toEqual({ status: "DRAINING" });
    const grpcHealth = await call("grpc", server.baseUrl, Health.method.check, { service: "" });
    expect(grpcHealth.message?.status).toBe(ServingStatus.NOT_SERVING);
    // ...while a new connection's request is still served.
    const during = await call("rest", server.baseUrl, GroupsService.method.listGroups, { uidp: { childrenOf: server.organization } }, { authorization: `Bearer ${server.token}` });
    expect(during.error).toBeUndefined();
    expect(exited).toBe(false);

    await done;
    expect(await server.exited).toEqual({ code: 0, signal: null });
    expect(outcomes.filter((o) => o.kind === "cut")).toEqual([]);
    expect(outcomes.filter((o) => o.kind === "answered" && o.status !== 200)).toEqual([]);
    expect(server.logs()).toMatch(/"msg":"stopped"/);
  }, 60_000);

  it("SIGKILL under write load loses no acknowledged write", async () => {
    const server = await startServerProcess(scratch.url);
    started.push(server);
    const acknowledged: string[] = [];
    let n = 0;
    const worker = async () => {
      for (;;) {
        const name = `g${n++}`;
        const out = await call("grpc", server.baseUrl, GroupsService.method.createGroup, { parent: server.organization, group: { name } }, {
          authorization: `Bearer ${server.token}`,
        });
        if (out.error) return; // the process is gone (or going)
        acknowledged.push(out.message.uid);
      }
    };
    const workers = Array.from({ length: 8 }, worker);
    while (acknowledged.length < 50) await new Promise((r) => setTimeout(r, 20));
    server.child.kill("SIGKILL");
    await Promise.all(workers);
    await server.exited;

    const restarted = await startServerProcess(scratch.url);
    started.push(restarted);
    const rows = await scratch.sql<{ uid: string }[]>`select uid from groups where uid in ${scratch.sql(acknowledged)}`;
    expect(rows.map((r) => r.uid).sort()).toEqual([...acknowledged].sort());
    // And the restarted server serves them.
    const last = acknowledged[acknowledged.length - 1]!;
    const out = await call("grpc", restarted.baseUrl, GroupsService.method.getGroup, { uid: last }, { authorization: `Bearer ${restarted.token}` });
    expect(out.error).toBeUndefined();
  }, 60_000);
});
