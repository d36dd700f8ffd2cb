// Event fan-out on real PostgreSQL: what a write costs its caller as the subscriptions on its group grow, and
// what delivering each of its events then costs.
//
//   [BENCH_BEFORE_ROOT=<checkout>] npm run bench -- fan-out [--seconds 3] [--concurrency 4] [--rounds 3]
//
// Setup, per side (this checkout, and the code before a change when BENCH_BEFORE_ROOT names one), on a scratch
// database of its own (each side's migrations): an organization with four child groups holding 0, 1, 100 and
// 1,000 subscriptions, and a repo in each. Every sink is a path of bench/sink-server.ts (node:http answering
// 204). A writer server (src/main.ts, development mode) runs with EVENTS_DELIVERY=false, so what is measured
// is the write alone.
//
// Writes: UpdateRepo over REST (PATCH) on the repo of each group, `concurrency` clients for `seconds`, in
// `rounds` rounds; in each round the sizes in turn, and for each size the sides in alternating order. Each
// measurement prints p50/p99, req/s, the writer's CPU per call and its PostgreSQL backends' (told apart by
// PGAPPNAME). After each, the outbox is truncated (its deliveries and waiting expansions with it).
//
// Delivery at 1,000 subscriptions: a delivery server (the default EVENTS_DELIVERY=true, PGAPPNAME of its own)
// runs idle beside the writer; 30 writes are made on the 1,000-subscription group, one after another; the
// clock runs from the first write until the sink has had all 30,000 requests and no delivery (nor event
// waiting to be expanded) is left. Its CPU, and its backends', divided by the deliveries: the delivery CPU per
// delivered event (expansion included where the delivery server does it); and the writer's with its
// backends' over the same time (the 30 writes, with the fan-out where the writer's transaction does it).
import { loadavg } from "node:os";
import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import type { Db } from "../src/db/client.js";
import * as schema from "../src/db/schema/index.js";
import { setLogLevel } from "../src/kernel/log.js";
import { newChildUid } from "../src/kernel/uidp.js";
import { BENCH_APPLICATION, backendsCpu, cpuSecondsOf, processCpu, backendPids } from "./cpu.js";
import { ownedOrganization, withScratchDatabase } from "./database.js";
import { http1Sender, measure, say, textTable, type Result } from "./load.js";
import { startApiServer, startScript } from "./processes.js";

export interface FanOutOptions {
  seconds: number;
  concurrency: number;
  rounds: number;
}

const ISSUER = "https://bench.fan-out.invalid";
const SIZES = [0, 1, 100, 1000] as const;
const DELIVERY_EVENTS = 30;
const WRITER = "bench-writer";
const DELIVERER = "bench-delivery";
const STALL_MS = 60_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

interface Side {
  name: "after" | "before";
  root: string | undefined;
  url: string;
  sqlc: postgres.Sql;
  writer: { port: number; serverPid: number; stop(): Promise<void> };
  auth: Record<string, string>;
  /** The repo of the group with each number of subscriptions. */
  repos: Map<number, { uid: string; group: string }>;
}

export async function benchFanOut(opts: FanOutOptions): Promise<void> {
  setLogLevel("warn");
  const beforeRoot = process.env.BENCH_BEFORE_ROOT || undefined;
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    const sink = await startScript("bench/sink-server.ts");
    cleanups.push(() => sink.stop());
    const sinkUrl = `http://127.0.0.1:${(JSON.parse(await sink.next()) as { port: number }).port}`;
    const sinkStats = async () => (await (await fetch(`${sinkUrl}/stats`)).json()) as { requests: number; distinct: number };

    await withScratchDatabase("bench_fanout", async (afterUrl) => {
      const withBefore = async (body: (beforeUrl: string | undefined) => Promise<void>) =>
        beforeRoot ? withScratchDatabase("bench_fanout_before", (u) => body(u)) : body(undefined);
      await withBefore(async (beforeUrl) => {
        // The servers and connections on the scratch databases end before the databases are dropped.
        const scoped: (() => Promise<unknown>)[] = [];
        try {
          const sides: Side[] = [await setUp("after", undefined, afterUrl, sinkUrl, scoped)];
          if (beforeUrl) sides.push(await setUp("before", beforeRoot, beforeUrl, sinkUrl, scoped));

          // Writes, interleaved.
          const results = new Map<string, Result[]>();
          const key = (side: Side, size: number) => `${side.name}:${size}`;
          for (let round = 0; round < opts.rounds; round++) {
            for (const size of SIZES) {
              const order = (round + SIZES.indexOf(size)) % 2 === 0 ? sides : [...sides].reverse();
              for (const side of order) {
                const { uid } = side.repos.get(size)!;
                const body = JSON.stringify({ uid, name: `fan-out-${size}`, description: "a write the subscriptions hear of" });
                const r = await measure(`${side.name}: UpdateRepo, ${size} subscriptions`, http1Sender(side.writer.port, "PATCH", `/registry/v2/repos/${uid}`, body, side.auth), {
                  concurrency: opts.concurrency,
                  seconds: opts.seconds,
                  warmupSeconds: 0.5,
                  cpu: [processCpu("server", side.writer.serverPid), backendsCpu("postgres", side.sqlc, { only: WRITER })],
                });
                if (r.errors > 0) throw new Error(`${r.name}: ${r.errors} errors`);
                say(`  round ${round + 1}: ${r.name}: p50 ${r.p50.toFixed(2)} ms, ${r.rps.toFixed(0)}/s, server ${r.cpu.server!.toFixed(3)} ms, PostgreSQL ${r.cpu.postgres!.toFixed(3)} ms`);
                results.set(key(side, size), [...(results.get(key(side, size)) ?? []), r]);
                await side.sqlc`truncate outbox_events cascade`;
              }
            }
          }

          // Delivery at 1,000 subscriptions, one side after the other.
          const deliveries: { side: Side; seconds: number; server: number; postgres: number; writes: number; requests: number; duplicates: number }[] = [];
          for (const side of sides) deliveries.push({ side, ...(await deliver(side, sinkUrl, sinkStats)) });

          console.log(
            `\nEvent fan-out: UpdateRepo over REST, ${opts.concurrency} clients, ${opts.seconds} s x ${opts.rounds} rounds (medians), node ${process.version}, load average ${loadavg()[0]!.toFixed(2)}\n`,
          );
          const rows: string[][] = [];
          for (const side of sides) {
            const base = median(results.get(key(side, 0))!.map((r) => r.p50));
            for (const size of SIZES) {
              const rs = results.get(key(side, size))!;
              const p50 = median(rs.map((r) => r.p50));
              rows.push([
                side.name,
                String(size),
                p50.toFixed(2),
                median(rs.map((r) => r.p99)).toFixed(2),
                (p50 / base).toFixed(2),
                median(rs.map((r) => r.rps)).toFixed(0),
                median(rs.map((r) => r.cpu.server!)).toFixed(3),
                median(rs.map((r) => r.cpu.postgres!)).toFixed(3),
              ]);
            }
          }
          console.log(textTable(["code", "subscriptions", "p50 ms", "p99 ms", "p50 × 0 subscriptions", "req/s", "writer CPU ms/call", "its PostgreSQL CPU ms/call"], rows));
          console.log(`\nDelivering ${DELIVERY_EVENTS} events to 1,000 subscriptions each (a delivery server beside the writer):\n`);
          console.log(
            textTable(
              ["code", "deliveries", "seconds", "deliveries/s", "delivery server CPU ms/delivery", "its PostgreSQL CPU ms/delivery", "the writes' CPU ms/delivery", "all CPU ms/delivery", "duplicates"],
              deliveries.map((d) => [
                d.side.name,
                String(d.requests),
                d.seconds.toFixed(2),
                (d.requests / d.seconds).toFixed(0),
                ((d.server * 1000) / d.requests).toFixed(3),
                ((d.postgres * 1000) / d.requests).toFixed(3),
                ((d.writes * 1000) / d.requests).toFixed(3),
                (((d.server + d.postgres + d.writes) * 1000) / d.requests).toFixed(3),
                String(d.duplicates),
              ]),
            ),
          );
        } finally {
          for (const c of scoped.reverse()) await c().catch(() => {});
        }
      });
    });
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  }
}

/** A side's writer server (its own migrations applied by it) and its data. */
async function setUp(name: Side["name"], root: string | undefined, url: string, sinkUrl: string, cleanups: (() => Promise<unknown>)[]): Promise<Side> {
  const env = { DATABASE_URL: url, ISSUER_URL: ISSUER, SERVER_MODE: "development", LOG_LEVEL: "warn", METRICS_ADDR: "off", EVENTS_DELIVERY: "false", PGAPPNAME: WRITER };
  const writer = await startApiServer(env, { quiet: true, root });
  cleanups.push(() => writer.stop());
  const sqlc = postgres(url, { max: 2, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
  cleanups.push(() => sqlc.end({ timeout: 5 }));
  // Seeded without migrating (the writer applied its side's migrations).
  const db = drizzle(sqlc, { schema }) as unknown as Db;
  const { org, auth } = await ownedOrganization(db, ISSUER, 3600);
  const repos = new Map<number, { uid: string; group: string }>();
  for (const size of SIZES) {
    const group = newChildUid(org);
    await sqlc`insert into groups (uid, parent_uid, name) values (${group}, ${org}, ${`subscribed-${size}`})`;
    const res = await fetch(`http://127.0.0.1:${writer.port}/registry/v2/repos/${group}`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ name: `fan-out-${size}` }),
    });
    if (!res.ok) throw new Error(`${name}: CreateRepo: ${res.status} ${await res.text()}`);
    const uid = String(((await res.json()) as { uid: string }).uid);
    const subs = Array.from({ length: size }, () => newChildUid(group));
    if (subs.length > 0) {
      await sqlc`insert into subscriptions (uid, group_uid, sink) select u, ${group}, ${`${sinkUrl}/`} || u from unnest(${subs}::text[]) u`;
    }
    repos.set(size, { uid, group });
  }
  await sqlc`truncate outbox_events cascade`;
  await sqlc.unsafe("vacuum analyze subscriptions, groups, repos");
  say(`  ${name}: writer on port ${writer.port}${root ? ` (${root})` : ""}, groups with ${SIZES.join(" / ")} subscriptions`);
  return { name, root, url, sqlc, writer, auth, repos };
}

/** DELIVERY_EVENTS writes on the 1,000-subscription group, delivered by a server of their own. */
async function deliver(side: Side, sinkUrl: string, sinkStats: () => Promise<{ requests: number; distinct: number }>) {
  const env = { DATABASE_URL: side.url, ISSUER_URL: ISSUER, SERVER_MODE: "development", LOG_LEVEL: "warn", METRICS_ADDR: "off", PGAPPNAME: DELIVERER, SHUTDOWN_GRACE_MS: "2000" };
  const server = await startApiServer(env, { quiet: true, root: side.root });
  try {
    await sleep(1000); // started, found nothing to do
    await fetch(`${sinkUrl}/reset`, { method: "POST" });
    const backends = async (who = DELIVERER) => {
      const cpu = new Map<number, number>();
      for (const pid of await backendPids(side.sqlc, { only: who })) {
        try {
          cpu.set(pid, cpuSecondsOf(pid));
        } catch {
          // gone since
        }
      }
      return cpu;
    };
    const cpu0 = cpuSecondsOf(server.serverPid);
    const backends0 = await backends();
    const writerCpu0 = cpuSecondsOf(side.writer.serverPid);
    const writerBackends0 = await backends(WRITER);
    const expected = DELIVERY_EVENTS * 1000;
    const { uid } = side.repos.get(1000)!;
    const t0 = performance.now();
    for (let i = 0; i < DELIVERY_EVENTS; i++) {
      const res = await fetch(`http://127.0.0.1:${side.writer.port}/registry/v2/repos/${uid}`, {
        method: "PATCH",
        headers: { ...side.auth, "content-type": "application/json" },
        body: JSON.stringify({ uid, name: "fan-out-1000", description: `delivery ${i}` }),
      });
      if (!res.ok) throw new Error(`${side.name}: UpdateRepo: ${res.status}`);
      await res.arrayBuffer();
    }
    let last = { requests: -1, at: performance.now() };
    for (;;) {
      const stats = await sinkStats();
      if (stats.requests >= expected) {
        const [left] = await side.sqlc<{ n: string }[]>`select count(*) as n from event_deliveries where state = 'pending'`;
        if (Number(left?.n) === 0) break;
      } else if (stats.requests !== last.requests) last = { requests: stats.requests, at: performance.now() };
      else if (performance.now() - last.at > STALL_MS) throw new Error(`${side.name}: no progress for ${STALL_MS / 1000}s at ${stats.requests} of ${expected}`);
      await sleep(20);
    }
    const seconds = (performance.now() - t0) / 1000;
    const serverCpu = cpuSecondsOf(server.serverPid) - cpu0;
    let postgresCpu = 0;
    for (const [pid, cpu1] of await backends()) postgresCpu += cpu1 - (backends0.get(pid) ?? 0);
    // The writes' share (the writer and its backends: where the fan-out ran before it moved to the worker).
    let writes = cpuSecondsOf(side.writer.serverPid) - writerCpu0;
    for (const [pid, cpu1] of await backends(WRITER)) writes += cpu1 - (writerBackends0.get(pid) ?? 0);
    const stats = await sinkStats();
    const [delivered] = await side.sqlc<{ n: string }[]>`select count(*) as n from event_deliveries where state = 'delivered'`;
    if (Number(delivered?.n) !== expected) throw new Error(`${side.name}: ${delivered?.n} deliveries delivered, expected ${expected}`);
    say(`  ${side.name}: delivered ${expected} in ${seconds.toFixed(2)} s`);
    await side.sqlc`truncate outbox_events cascade`;
    return { seconds, server: serverCpu, postgres: postgresCpu, writes, requests: stats.requests, duplicates: stats.requests - expected };
  } finally {
    await server.stop();
  }
}
