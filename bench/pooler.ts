// What named statements save, and what a transaction-mode pooler costs: GetRepo and a ListTags page (50 of
// 10,000 tags) over gRPC against three servers on one seeded database, in alternating rounds:
//   - direct, session mode: the hot statements are named statements of each connection (the default);
//   - direct, DATABASE_POOL_MODE=transaction: every statement unnamed (parsed and planned on every call),
//     no pooler, so the difference with the first is the named statements' saving alone;
//   - through PgBouncer (Debian's /usr/sbin/pgbouncer, transaction mode, 10 server connections), unnamed:
//     the difference with the second is the pooler's own cost.
// Each row reports req/s, p50, and CPU per request of the server process, of PostgreSQL's backends serving
// it, and of PgBouncer (bench/cpu.ts), medians of the rounds.
//
//   npm run bench -- pooler [--seconds 3] [--concurrency 16] [--rounds 3]   (PostgreSQL and PgBouncer)
import { loadavg } from "node:os";
import postgres from "postgres";
import { openPostgres } from "../src/db/client.js";
import { setLogLevel } from "../src/kernel/log.js";
import { startPgbouncer } from "../test/support/pgbouncer.js";
import { medianOf } from "./compare.js";
import { BENCH_APPLICATION, backendsCpu, processCpu } from "./cpu.js";
import { withScratchDatabase } from "./database.js";
import { measure, say, textTable, type Result } from "./load.js";
import { startApiServer } from "./processes.js";
import { BENCH_ISSUER, seedRegistryCalls } from "./registry-calls.js";

export interface PoolerBenchOptions {
  seconds: number;
  concurrency: number;
  rounds: number;
}

const TAGS = 10_000;
const CALLS = ["GetRepo (gRPC)", "ListTags page 1 (gRPC)"];

export async function benchPooler(opts: PoolerBenchOptions): Promise<void> {
  setLogLevel("warn");
  await withScratchDatabase("bench_pooler", (url, name) => measureOn(url, name, opts));
}

async function measureOn(url: string, name: string, opts: PoolerBenchOptions): Promise<void> {
  const loadBefore = loadavg()[0]!;
  say(`pooler benchmark on scratch database ${name}; load average ${loadBefore.toFixed(2)}`);
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    const database = await openPostgres(url, { max: 4 });
    cleanups.push(() => database.close());
    const sqlc = postgres(url, { max: 4, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
    cleanups.push(() => sqlc.end({ timeout: 5 }));
    const calls = await seedRegistryCalls(sqlc, database, TAGS);
    const bouncer = await startPgbouncer({ poolMode: "transaction", poolSize: 10, target: url, connectQuery: "SET statement_timeout = 10000; SET jit = off" });
    cleanups.push(() => bouncer.stop());
    const env = { SERVER_MODE: "production", ISSUER_URL: BENCH_ISSUER, LOG_LEVEL: "warn", METRICS_ADDR: "off", EVENTS_DELIVERY: "false" };
    const servers = [
      { label: "direct, named statements", api: await startApiServer({ ...env, DATABASE_URL: url }), pooler: false },
      { label: "direct, unnamed (DATABASE_POOL_MODE=transaction)", api: await startApiServer({ ...env, DATABASE_URL: url, DATABASE_POOL_MODE: "transaction", DATABASE_LISTEN_URL: url }), pooler: false },
      { label: "PgBouncer transaction mode, unnamed", api: await startApiServer({ ...env, DATABASE_URL: bouncer.via(url), DATABASE_POOL_MODE: "transaction", DATABASE_LISTEN_URL: url }), pooler: true },
    ];
    for (const s of servers) cleanups.push(() => s.api.stop());

    const results = new Map<string, Result[]>();
    for (let round = 0; round < opts.rounds; round++) {
      for (const call of CALLS) {
        const sender = calls.targets.find(([n]) => n === call)![1];
        for (const s of servers) {
          const r = await measure(`${call}: ${s.label}`, sender(s.api.port), {
            seconds: opts.seconds,
            concurrency: opts.concurrency,
            warmupSeconds: 1,
            cpu: [processCpu("server", s.api.serverPid), backendsCpu("postgres", sqlc, { not: BENCH_APPLICATION }), processCpu("pgbouncer", bouncer.pid)],
          });
          results.set(r.name, [...(results.get(r.name) ?? []), r]);
          say(`  round ${round + 1}: ${r.name}: ${r.rps.toFixed(0)} req/s${r.errors ? `, ${r.errors} errors` : ""}`);
        }
      }
    }
    const rows = [...results.values()].map((rs) => medianOf(rs));
    console.log(
      `\nPooler: ${TAGS} tags, ${opts.concurrency} clients, ${opts.seconds}s x ${opts.rounds} rounds (medians), node ${process.version}, ` +
        `${new Date().toISOString()}, load average ${loadBefore.toFixed(2)} at the start\n`,
    );
    console.log(
      textTable(
        ["call: server", "req/s", "p50 ms", "server CPU ms/req", "PostgreSQL CPU ms/req", "PgBouncer CPU ms/req", "errors"],
        rows.map((r) => [r.name, r.rps.toFixed(0), r.p50.toFixed(2), r.cpu.server!.toFixed(3), r.cpu.postgres!.toFixed(3), r.cpu.pgbouncer!.toFixed(3), String(r.errors)]),
      ),
    );
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  }
}
