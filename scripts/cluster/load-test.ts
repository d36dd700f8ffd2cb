// `npm run cluster -- test`: a mixed read/write load over gRPC (h2c) and REST (HTTP/1.1) through HAProxy and
// straight at the servers, for a bounded time, while the cluster is disrupted: each server restarted in turn
// (SIGTERM, exit, start, healthy), the replica stopped and started, the replica's replay paused so that it
// lags, then resumed. It checks what a client would see: no failed request but UNAVAILABLE before a request
// started (retried, counted apart), no read older than the reader's own write, every event delivered once.
import { createHash, randomBytes } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { Code, ConnectError, createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { inArray } from "drizzle-orm";
import postgres from "postgres";
import { ReposService, RepoSchema } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { openPostgres } from "../../src/db/client.js";
import { eventDeliveries } from "../../src/db/schema/index.js";
import { bootstrap } from "../../src/iam/bootstrap.js";
import { createKeyStore, mintToken } from "../../src/kernel/auth/index.js";
import { startSink, type TestSink } from "../../test/support/sink.js";
import {
  frontendUrl,
  metricsUrl,
  primaryUrl,
  replicaInstance,
  replicaUrl,
  serverUrl,
  startServer,
  stopServer,
  type ClusterState,
} from "./topology.js";

export interface TestOptions {
  /** How long the load runs at least (it also lasts until every disruption is done). */
  seconds: number;
  /** Concurrent clients, each with an organization and identity of its own (default 6). */
  clients?: number;
  say?: (line: string) => void;
}

export interface Report {
  seconds: number;
  requests: { total: number; grpc: number; rest: number; writes: number; reads: number };
  failures: string[];
  /** Calls answered UNAVAILABLE (or refused) before they started, retried. */
  retried: number;
  ryw: { checks: number; crossServer: number; violations: string[] };
  /** Reads as the servers counted them (undefined: the servers report no replica metrics). */
  replicaReads: { replica: number; primary: number } | undefined;
  failover: { replicaStopFallbackMs?: number; replicaRestartRejoinMs?: number; pauseOutMs?: number; resumeRejoinMs?: number };
  restarts: { server: number; exitMs: number; healthyMs: number }[];
  events: { expected: number; received: number; duplicates: number; missing: number; mutations: number; byServer: number[] };
  /** Blobs pushed through one server and read back through the next one (the shared S3 store). */
  blobs: { pushed: number; readElsewhere: number; problems: string[] };
  /** The checks that failed (empty: passed). */
  failed: string[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A repo a client made, with what it last wrote to it, when and through what. */
interface Repo {
  uid: string;
  description: string;
  writtenAt: number;
  writtenVia: string;
}

const written = (repo: Repo) => `written through ${repo.writtenVia} ${Date.now() - repo.writtenAt} ms before`;

/** A call that may be retried: UNAVAILABLE (gRPC), 503 (REST), or a connection refused or lost before an answer. */
class Retryable extends Error {}

interface Metrics {
  reads: { primary: number; replica: number };
  /** apiserver_events_deliveries_total{outcome="delivered"}: events this process delivered. */
  delivered: number;
  /** apiserver_db_replica_up (the lowest), apiserver_db_replica_lag_seconds (the highest), when reported. */
  up?: number;
  lag?: number;
}

/** The replica figures of a Prometheus exposition (undefined values when not reported). */
export function parseMetrics(text: string): Metrics {
  const out: Metrics = { reads: { primary: 0, replica: 0 }, delivered: 0 };
  for (const line of text.split("\n")) {
    if (line.startsWith("#")) continue;
    const m = /^(apiserver_db_reads_total|apiserver_db_replica_up|apiserver_db_replica_lag_seconds|apiserver_events_deliveries_total)(?:\{([^}]*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const value = Number(m[3]);
    if (m[1] === "apiserver_db_reads_total") {
      const target = /target="([^"]*)"/.exec(m[2] ?? "")?.[1];
      if (target === "primary" || target === "replica") out.reads[target] += value;
    } else if (m[1] === "apiserver_events_deliveries_total") {
      if (/outcome="delivered"/.test(m[2] ?? "")) out.delivered += value;
    } else if (m[1] === "apiserver_db_replica_up") out.up = Math.min(out.up ?? value, value);
    else out.lag = Math.max(out.lag ?? value, value);
  }
  return out;
}

export async function runClusterTest(state: ClusterState, opts: TestOptions): Promise<Report> {
  const say = opts.say ?? (() => {});
  const n = state.ports.servers.length;
  const runId = randomBytes(3).toString("hex");
  const report: Report = {
    seconds: opts.seconds,
    requests: { total: 0, grpc: 0, rest: 0, writes: 0, reads: 0 },
    failures: [],
    retried: 0,
    ryw: { checks: 0, crossServer: 0, violations: [] },
    replicaReads: undefined,
    failover: {},
    restarts: [],
    events: { expected: 0, received: 0, duplicates: 0, missing: 0, mutations: 0, byServer: Array.from({ length: n }, () => 0) },
    blobs: { pushed: 0, readElsewhere: 0, problems: [] },
    failed: [],
  };

  // The test's own access, straight to the primary: organizations and tokens for its clients, and at the end
  // the deliveries the servers recorded.
  const direct = await openPostgres(primaryUrl(state), { max: 2 });
  const keys = await createKeyStore(direct.db);
  const sink: TestSink = await startSink("/events");
  const servers = new Set<number>(Array.from({ length: n }, (_, i) => i));
  const grpcFrontend = createClient(ReposService, createGrpcTransport({ baseUrl: frontendUrl(state) }));
  const grpcServer = Array.from({ length: n }, (_, i) => createClient(ReposService, createGrpcTransport({ baseUrl: serverUrl(state, i) })));

  // Metrics: every server's counters, sampled; a restarted server starts from zero, so each process's last
  // sample is kept (by pid) and summed at the end.
  const lastSample = new Map<string, Metrics>();
  let reportsReplica = false;
  const sampleAll = async (): Promise<Metrics[]> => {
    const out: Metrics[] = [];
    await Promise.all(
      [...servers].map(async (i) => {
        try {
          const res = await fetch(metricsUrl(state, i), { signal: AbortSignal.timeout(1_000) });
          if (res.status !== 200) return;
          const m = parseMetrics(await res.text());
          if (m.up !== undefined) reportsReplica = true;
          lastSample.set(`${i}:${state.pids.servers[i]}`, m);
          out.push(m);
        } catch {
          // A server that is restarting.
        }
      }),
    );
    return out;
  };
  const replicaReadsNow = async () => (await sampleAll()).reduce((s, m) => s + m.reads.replica, 0);
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      await sampleAll();
      await sleep(500);
    }
  })();

  // One organization and identity per client, each with a subscription to the sink (made through the frontend).
  const clientCount = opts.clients ?? 6;
  const clients = await Promise.all(
    Array.from({ length: clientCount }, async (_, c) => {
      const made = await bootstrap(direct.db, { issuer: state.issuer, subject: `cluster-${runId}-${c}`, organization: `load-${runId}-${c}` });
      const { token } = await mintToken(keys, { issuer: state.issuer, subject: made.identity, audience: state.issuer, ttlSeconds: 3600 });
      const res = await fetch(`${frontendUrl(state)}/events/v2/subscriptions/${made.group}`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify({ sink: sink.url }),
      });
      if (res.status !== 200) throw new Error(`CreateSubscription: ${res.status} ${await res.text()}`);
      const subscription = ((await res.json()) as { uid: string }).uid;
      return { c, org: made.group, token, subscription };
    }),
  );
  say(`${clientCount} clients, each its own organization and a subscription to ${sink.url}`);

  const failure = (what: string) => {
    if (report.failures.length < 50) report.failures.push(what);
    else report.failures.length++;
  };

  /** Runs `call`, retrying what the protocol lets a client retry; counts the request(s). */
  async function attempt<T>(label: string, call: () => Promise<T>): Promise<T | undefined> {
    for (let tries = 0; ; tries++) {
      report.requests.total++;
      try {
        return await call();
      } catch (err) {
        if (err instanceof Retryable && tries < 10) {
          report.retried++;
          await sleep(100 * (tries + 1));
          continue;
        }
        failure(`${label}: ${err instanceof Error ? err.message : String(err)} [at ${((Date.now() - loadStart) / 1000).toFixed(1)} s, ${phase}]`);
        return undefined;
      }
    }
  }

  const grpcCall = async <T>(fn: () => Promise<T>): Promise<T> => {
    report.requests.grpc++;
    try {
      return await fn();
    } catch (err) {
      const e = ConnectError.from(err);
      // UNAVAILABLE, and an HTTP/2 stream refused (REFUSED_STREAM: not processed, RFC 9113 section 8.7; gRPC's
      // HTTP/2 mapping makes it UNAVAILABLE, Connect reports it INTERNAL): a closing server's, retried.
      if (e.code === Code.Unavailable || /NGHTTP2_REFUSED_STREAM/.test(e.rawMessage)) throw new Retryable(e.message);
      throw new Error(`${Code[e.code]}: ${e.rawMessage}`);
    }
  };
  const rest = async (base: string, path: string, token: string, init: { method?: string; body?: unknown } = {}): Promise<unknown> => {
    report.requests.rest++;
    let res: Response;
    try {
      res = await fetch(`${base}${path}`, {
        method: init.method ?? "GET",
        headers: { authorization: `Bearer ${token}`, ...(init.body ? { "content-type": "application/json" } : {}) },
        body: init.body ? JSON.stringify(init.body) : null,
        signal: AbortSignal.timeout(15_000),
      });
    } catch (err) {
      // No answer: refused or reset before a response (fetch's "fetch failed" with the socket's cause).
      const cause = (err as { cause?: { code?: string } }).cause?.code ?? "";
      if (/ECONNREFUSED|ECONNRESET|UND_ERR_SOCKET|EPIPE/.test(cause)) throw new Retryable(cause);
      throw err;
    }
    const text = await res.text();
    if (res.status === 503) throw new Retryable(`503 ${text.slice(0, 200)}`);
    if (res.status !== 200) throw new Error(`${init.method ?? "GET"} ${path}: ${res.status} ${text.slice(0, 300)}`);
    return JSON.parse(text) as unknown;
  };
  const headers = (token: string) => ({ headers: { authorization: `Bearer ${token}` }, timeoutMs: 15_000 });
  const pick = (not?: number): number | undefined => {
    const up = [...servers].filter((i) => i !== not);
    return up[Math.floor(Math.random() * up.length)];
  };

  // The load: each client creates repos, changes their description, and reads them back, through the frontend
  // and (for the cross-server check) straight at one server and then another.
  const deadline = Date.now() + opts.seconds * 1_000;
  const loadStart = Date.now();
  let disruptionsDone = false;
  /** What the disruptions are doing, for the violations' messages. */
  let phase = "steady";
  const violation = (what: string) => {
    const line = `${what} [at ${((Date.now() - loadStart) / 1000).toFixed(1)} s, ${phase}]`;
    if (report.ryw.violations.length < 200) report.ryw.violations.push(line);
    else report.ryw.violations.length++;
  };
  const loads = clients.map(async ({ c, org, token }) => {
    const repos: Repo[] = [];
    let step = 0;
    const frontend = frontendUrl(state);
    while (Date.now() < deadline || !disruptionsDone) {
      step++;
      const viaGrpc = step % 2 === 0;
      const r = Math.random();
      if (repos.length < 3 || r < 0.1) {
        // Create through the frontend, then read it back through the frontend.
        const name = `r-${c}-${step}`;
        let firstTry = true;
        const made = await attempt("CreateRepo", async () => {
          const again = !firstTry;
          firstTry = false;
          try {
            if (viaGrpc) return (await grpcCall(() => grpcFrontend.createRepo({ parent: org, repo: create(RepoSchema, { name, description: "v0" }) }, headers(token)))).uid;
            return ((await rest(frontend, `/registry/v2/repos/${org}`, token, { method: "POST", body: { name, description: "v0" } })) as { uid: string }).uid;
          } catch (err) {
            // A retry that finds the repo made: the UNAVAILABLE came after the write had committed.
            if (again && /ALREADY_EXISTS|AlreadyExists|409/.test(String(err))) throw new Error(`CreateRepo ${name} answered UNAVAILABLE after it committed`);
            throw err;
          }
        });
        report.requests.writes++;
        if (!made) continue;
        report.events.mutations++;
        repos.push({ uid: made, description: "v0", writtenAt: Date.now(), writtenVia: `the frontend over ${viaGrpc ? "gRPC" : "REST"}` });
        await readBack(repos.at(-1)!, !viaGrpc, frontend, undefined);
      } else if (r < 0.35) {
        // Read-your-writes across servers: change the description through one server, read through another.
        const repo = repos[Math.floor(Math.random() * repos.length)]!;
        const description = `v${step}`;
        let writer: number | undefined;
        const done = await attempt("UpdateRepo", async () => {
          writer = pick();
          if (writer === undefined) throw new Retryable("no server up");
          if (viaGrpc) await grpcCall(() => grpcServer[writer!]!.updateRepo({ repo: create(RepoSchema, { uid: repo.uid, description }), updateMask: { paths: ["description"] } }, headers(token)));
          else await rest(serverUrl(state, writer), `/registry/v2/repos/${repo.uid}`, token, { method: "PATCH", body: { description } });
          return true;
        });
        report.requests.writes++;
        if (!done) continue;
        report.events.mutations++;
        repo.description = description;
        repo.writtenAt = Date.now();
        repo.writtenVia = `server ${writer! + 1} over ${viaGrpc ? "gRPC" : "REST"}`;
        await readBack(repo, !viaGrpc, undefined, writer);
      } else if (r < 0.7) {
        await readBack(repos[Math.floor(Math.random() * repos.length)]!, viaGrpc, frontend, undefined);
      } else {
        // A list of the organization's repos: every repo the client made is in it.
        const page = await attempt("ListRepos", async () => {
          if (viaGrpc) return (await grpcCall(() => grpcFrontend.listRepos({ uidp: { childrenOf: org }, pageSize: 200 }, headers(token)))).repos.map((x) => x.uid);
          return ((await rest(frontend, `/registry/v2/repos?uidp.children_of=${org}&page_size=200`, token)) as { repos: { uid: string }[] }).repos.map((x) => x.uid);
        });
        report.requests.reads++;
        if (!page) continue;
        report.ryw.checks++;
        const seen = new Set(page);
        const lost = repos.filter((x) => !seen.has(x.uid));
        if (lost.length > 0) violation(`ListRepos of ${org} lacks ${lost.length} repo(s) the client made, first ${lost[0]!.uid}`);
      }
    }

    /** Reads `repo` (through `base`, or straight at a server other than `notServer`) and checks it is as written. */
    async function readBack(repo: Repo, grpc: boolean, base: string | undefined, notServer: number | undefined): Promise<void> {
      let via = `the frontend over ${grpc ? "gRPC" : "REST"}`;
      const got = await attempt("GetRepo", async () => {
        let target = base;
        let client = grpcFrontend;
        if (!target) {
          const reader = pick(notServer);
          if (reader === undefined) throw new Retryable("no other server up");
          via = `server ${reader + 1} over ${grpc ? "gRPC" : "REST"}`;
          target = serverUrl(state, reader);
          client = grpcServer[reader]!;
          report.ryw.crossServer++;
        }
        if (grpc) return (await grpcCall(() => client.getRepo({ uid: repo.uid }, headers(token)))).description;
        return ((await rest(target, `/registry/v2/repos/${repo.uid}`, token)) as { description?: string }).description ?? "";
      });
      report.requests.reads++;
      if (got === undefined) {
        if (/NOT_FOUND|NotFound|: 404 /.test(report.failures.at(-1) ?? "")) {
          violation(`GetRepo ${repo.uid}: not found after the client made it (${written(repo)}; read through ${via})`);
        }
        return;
      }
      report.ryw.checks++;
      if (got !== repo.description) violation(`GetRepo ${repo.uid}: description ${JSON.stringify(got)}, written ${JSON.stringify(repo.description)} (${written(repo)}; read through ${via})`);
    }
  });

  // The disruptions, one after another, while the load runs.
  const disruptions = (async () => {
    try {
      await sleep(Math.min(3_000, opts.seconds * 100));
      for (let i = 0; i < n; i++) {
        servers.delete(i);
        const t0 = Date.now();
        phase = `server ${i + 1} restarting`;
        say(`server ${i + 1}: SIGTERM`);
        await stopServer(state, i);
        const exitMs = Date.now() - t0;
        await startServer(state, i);
        servers.add(i);
        report.restarts.push({ server: i + 1, exitMs, healthyMs: Date.now() - t0 });
        say(`server ${i + 1}: exited after ${exitMs} ms, healthy again after ${Date.now() - t0} ms`);
      }
      phase = "steady";
      await sleep(2_000);

      const replica = replicaInstance(state);
      const allReport = async (test: (m: Metrics) => boolean): Promise<boolean> => {
        const ms = await sampleAll();
        return ms.length === servers.size && ms.every(test);
      };
      const waitUntil = async (test: () => Promise<boolean>, ms: number): Promise<number | undefined> => {
        const t0 = Date.now();
        while (Date.now() - t0 < ms) {
          if (await test()) return Date.now() - t0;
          await sleep(100);
        }
        return undefined;
      };
      say("replica: stop");
      phase = "replica stopped";
      const t1 = Date.now();
      await replica.stop();
      if (reportsReplica) {
        // Reads fall back once every server has taken the replica out of rotation.
        const out = await waitUntil(() => allReport((m) => m.up === 0), 15_000);
        if (out !== undefined) report.failover.replicaStopFallbackMs = Date.now() - t1;
      }
      await sleep(3_000);
      say("replica: start");
      await replica.start();
      phase = "replica started";
      const t2 = Date.now();
      if (reportsReplica) {
        const before = await replicaReadsNow();
        const back = await waitUntil(async () => (await allReport((m) => m.up === 1)) && (await replicaReadsNow()) > before, 30_000);
        if (back !== undefined) report.failover.replicaRestartRejoinMs = Date.now() - t2;
      } else await sleep(3_000);

      say("replica: pause replay");
      const rsql = postgres(replicaUrl(state), { max: 1, onnotice: () => {} });
      try {
        await rsql`select pg_wal_replay_pause()`;
        phase = "replay paused";
        const t3 = Date.now();
        if (reportsReplica) {
          const out = await waitUntil(() => allReport((m) => m.up === 0 || (m.lag ?? 0) > 2), 20_000);
          if (out !== undefined) report.failover.pauseOutMs = Date.now() - t3;
          await sleep(1_000);
        } else await sleep(4_000);
        say("replica: resume replay");
        await rsql`select pg_wal_replay_resume()`;
        phase = "replay resumed";
        const t4 = Date.now();
        if (reportsReplica) {
          const before = await replicaReadsNow();
          const back = await waitUntil(async () => (await allReport((m) => m.up === 1 && (m.lag ?? 0) <= 2)) && (await replicaReadsNow()) > before, 30_000);
          if (back !== undefined) report.failover.resumeRejoinMs = Date.now() - t4;
        } else await sleep(2_000);
      } finally {
        await rsql.end({ timeout: 1 });
      }
    } finally {
      phase = "after the disruptions";
      disruptionsDone = true;
    }
  })();

  const started = Date.now();
  await Promise.all([disruptions, ...loads]);
  report.seconds = Math.round((Date.now() - started) / 1000);
  say(`load done after ${report.seconds} s: ${report.requests.total} requests`);

  // Events: every delivery the servers recorded for the clients' subscriptions has come once, no more.
  const subscriptionUids = clients.map((c) => c.subscription);
  const pendingLeft = async () => {
    const rows = await direct.db.select({ eventId: eventDeliveries.eventId, state: eventDeliveries.state }).from(eventDeliveries).where(inArray(eventDeliveries.subscriptionUid, subscriptionUids));
    return rows;
  };
  let rows = await pendingLeft();
  const end = Date.now() + 60_000;
  while (rows.some((r) => r.state !== "delivered") && Date.now() < end) {
    await sleep(500);
    rows = await pendingLeft();
  }
  await sleep(1_000);
  const counts = sink.idCounts();
  const expected = new Set(rows.map((r) => r.eventId));
  report.events.expected = expected.size;
  report.events.received = counts.size;
  report.events.duplicates = [...counts.values()].reduce((s, k) => s + (k - 1), 0);
  report.events.missing = [...expected].filter((id) => !counts.has(id)).length;

  sampling = false;
  await sampler;
  await sampleAll();
  for (const [key, m] of lastSample) report.events.byServer[Number(key.split(":")[0])]! += m.delivered;
  if (reportsReplica) {
    const reads = { replica: 0, primary: 0 };
    for (const m of lastSample.values()) {
      reads.replica += m.reads.replica;
      reads.primary += m.reads.primary;
    }
    report.replicaReads = reads;
  }
  // The registry's blobs: one pushed through each server is read through the next (the shared S3 store).
  const { org, token } = clients[0]!;
  for (let i = 0; i < n; i++) {
    const blob = randomBytes(64 * 1024);
    const digest = `sha256:${createHash("sha256").update(blob).digest("hex")}`;
    const name = `${org}/blobs-${runId}`;
    const auth = { authorization: `Bearer ${token}` };
    const put = await fetch(`${serverUrl(state, i)}/v2/${name}/blobs/uploads/?digest=${digest}`, { method: "POST", headers: { ...auth, "content-type": "application/octet-stream" }, body: blob });
    if (put.status !== 201) {
      report.blobs.problems.push(`push through server ${i + 1}: ${put.status} ${(await put.text()).slice(0, 200)}`);
      continue;
    }
    report.blobs.pushed++;
    const other = (i + 1) % n;
    const got = await fetch(`${serverUrl(state, other)}/v2/${name}/blobs/${digest}`, { headers: auth });
    const body = Buffer.from(await got.arrayBuffer());
    if (got.status === 200 && body.equals(blob)) report.blobs.readElsewhere++;
    else report.blobs.problems.push(`blob pushed through server ${i + 1}, read through server ${other + 1}: ${got.status}, ${body.length} bytes`);
  }

  await sink.close();
  await direct.close();

  // The checks.
  const { failed } = report;
  if (report.failures.length > 0) failed.push(`${report.failures.length} request(s) failed`);
  if (report.ryw.violations.length > 0) failed.push(`${report.ryw.violations.length} read-your-writes violation(s)`);
  if (report.ryw.checks === 0) failed.push("no read-your-writes check ran");
  if (report.restarts.length !== n) failed.push(`${report.restarts.length} of ${n} servers restarted`);
  if (rows.some((r) => r.state !== "delivered")) failed.push(`${rows.filter((r) => r.state !== "delivered").length} event deliveries not done after a minute`);
  if (report.events.duplicates > 0) failed.push(`${report.events.duplicates} event(s) delivered more than once`);
  if (report.events.missing > 0) failed.push(`${report.events.missing} event(s) never delivered`);
  if (report.events.expected < report.events.mutations) failed.push(`${report.events.expected} deliveries recorded for ${report.events.mutations} writes`);
  // Every server took part in delivering (counted from samples, so only where there were enough events).
  if (report.events.expected >= 30 * n && report.events.byServer.some((k) => k === 0)) failed.push(`a server delivered no event (${report.events.byServer.join(", ")})`);
  if (report.replicaReads && report.replicaReads.replica === 0) failed.push("the replica served no read");
  if (report.blobs.problems.length > 0) failed.push(`shared blobs: ${report.blobs.problems.join("; ")}`);
  return report;
}

export function printReport(r: Report, out: (line: string) => void): void {
  const pct = (a: number, b: number) => (b === 0 ? "-" : `${((100 * a) / b).toFixed(1)}%`);
  const ms = (v: number | undefined) => (v === undefined ? "n/a" : `${v} ms`);
  const rows: [string, string][] = [
    ["duration", `${r.seconds} s`],
    ["requests", `${r.requests.total} (gRPC ${r.requests.grpc}, REST ${r.requests.rest}; ${r.requests.writes} writes, ${r.requests.reads} reads)`],
    ["failures", String(r.failures.length)],
    ["UNAVAILABLE before start, retried", String(r.retried)],
    ["read-your-writes checks", `${r.ryw.checks} (${r.ryw.crossServer} across servers)`],
    ["read-your-writes violations", String(r.ryw.violations.length)],
    [
      "reads served by the replica",
      r.replicaReads ? `${r.replicaReads.replica} of ${r.replicaReads.replica + r.replicaReads.primary} (${pct(r.replicaReads.replica, r.replicaReads.replica + r.replicaReads.primary)})` : "n/a (the servers report no replica metrics)",
    ],
    ["replica stopped: reads on the primary after", ms(r.failover.replicaStopFallbackMs)],
    ["replica started: serving reads again after", ms(r.failover.replicaRestartRejoinMs)],
    ["replay paused: replica out of rotation after", ms(r.failover.pauseOutMs)],
    ["replay resumed: serving reads again after", ms(r.failover.resumeRejoinMs)],
    ...r.restarts.map((x): [string, string] => [`server ${x.server} restart (exit / healthy)`, `${x.exitMs} ms / ${x.healthyMs} ms`]),
    ["events delivered", `${r.events.received} of ${r.events.expected} (${r.events.duplicates} duplicates, ${r.events.missing} missing; ${r.events.mutations} writes)`],
    ["events delivered per server (sampled metrics)", r.events.byServer.join(", ")],
    ["blobs pushed through one server, read through another", `${r.blobs.readElsewhere} of ${r.blobs.pushed} (S3 store shared by the servers)`],
  ];
  const width = Math.max(...rows.map(([k]) => k.length));
  out("");
  for (const [k, v] of rows) out(`${k.padEnd(width)}  ${v}`);
  for (const f of r.failures.slice(0, 10)) out(`  failure: ${f}`);
  for (const v of r.ryw.violations.slice(0, 10)) out(`  read-your-writes: ${v}`);
  const byPhase = new Map<string, number>();
  for (const v of r.ryw.violations) {
    const phase = /, ([^,\]]+)\]$/.exec(v)?.[1] ?? "?";
    byPhase.set(phase, (byPhase.get(phase) ?? 0) + 1);
  }
  if (byPhase.size > 0) out(`  read-your-writes violations by phase: ${[...byPhase].map(([p, k]) => `${p} ${k}`).join(", ")}`);
  out("");
  out(r.failed.length === 0 ? "PASS" : `FAIL: ${r.failed.join("; ")}`);
}
