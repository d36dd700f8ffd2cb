// Before against after, paired: the server of BENCH_BEFORE_ROOT (the code before a change) and this one, on
// the same scratch database, on the registry and IAM calls of registry-calls.ts, measured in short
// alternating pairs on each target, and each pair's ratio of server CPU per request taken; the median ratio
// and its quartiles are the result.
//
//   BENCH_BEFORE_ROOT=/tmp/before npm run bench -- ab [--pairs 15] [--seconds 1] [--tags 100000] [--only TEXT]
//
// Why pairs: on a shared machine one target's CPU per request moved by 1.5x between the rounds of one
// registry run (bench/README.md), more than a change worth making; a round of the registry benchmark
// measures some thirty targets, so the two sides of one comparison stand half a minute apart. Here they stand
// a second apart, in alternating order (after-before, then before-after), so a drift of the machine moves both
// sides of a pair alike and cancels in its ratio.
import postgres from "postgres";
import { openPostgres } from "../src/db/client.js";
import { setLogLevel } from "../src/kernel/log.js";
import { BENCH_APPLICATION, processCpu } from "./cpu.js";
import { withScratchDatabase } from "./database.js";
import { measure, say } from "./load.js";
import { startApiServer } from "./processes.js";
import { BENCH_ISSUER, seedRegistryCalls } from "./registry-calls.js";

export interface AbOptions {
  pairs: number;
  seconds: number;
  concurrency: number;
  tags: number;
  /** Only the targets whose name contains this (case-insensitive). */
  only?: string;
}

const quantile = (sorted: readonly number[], q: number) => {
  const at = (sorted.length - 1) * q;
  const lo = Math.floor(at);
  return sorted[lo]! + (sorted[Math.ceil(at)]! - sorted[lo]!) * (at - lo);
};

export async function benchAb(opts: AbOptions): Promise<void> {
  const beforeRoot = process.env.BENCH_BEFORE_ROOT;
  if (!beforeRoot) throw new Error("ab: set BENCH_BEFORE_ROOT to the checkout of the code before the change");
  setLogLevel("warn");
  await withScratchDatabase("bench_ab", async (url) => {
    const database = await openPostgres(url, { max: 2 });
    const sqlc = postgres(url, { max: 2, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
    const env = { DATABASE_URL: url, ISSUER_URL: BENCH_ISSUER, SERVER_MODE: "production", LOG_LEVEL: "warn", METRICS_ADDR: "off" };
    const servers: { stop(): Promise<void> }[] = [];
    try {
      const { targets } = await seedRegistryCalls(sqlc, database, opts.tags);
      const after = await startApiServer(env, { quiet: true });
      servers.push(after);
      const before = await startApiServer(env, { quiet: true, root: beforeRoot });
      servers.push(before);
      const sides = { after, before };
      const only = opts.only?.toLowerCase();
      const rows: string[] = [];
      for (const [name, sender] of targets.filter(([n]) => !only || n.toLowerCase().includes(only))) {
        // One sender per side for all its pairs: a new one per measurement opened new keep-alive connections
        // each time while the old ones idled, past the server's limit per client address (256).
        const sends = { after: sender(after.port)(), before: sender(before.port)() };
        const cpuOf = async (side: "after" | "before", seconds: number) => {
          const server = sides[side];
          const r = await measure(`${side}: ${name}`, () => sends[side], {
            concurrency: opts.concurrency,
            seconds,
            warmupSeconds: 0.3,
            cpu: [processCpu("server", server.serverPid)],
          });
          if (r.errors > 0) throw new Error(`ab: ${side}: ${name}: ${r.errors} errors`);
          return r.cpu.server!;
        };
        // Warm both (JIT, statement caches), then the pairs.
        await cpuOf("after", 2);
        await cpuOf("before", 2);
        const ratios: number[] = [];
        const afters: number[] = [];
        const befores: number[] = [];
        for (let i = 0; i < opts.pairs; i++) {
          const first = i % 2 === 0 ? "after" : "before";
          const a = first === "after" ? await cpuOf("after", opts.seconds) : undefined;
          const b = await cpuOf("before", opts.seconds);
          const a2 = a ?? (await cpuOf("after", opts.seconds));
          afters.push(a2);
          befores.push(b);
          ratios.push(a2 / b);
          say(`  ${name}, pair ${i + 1}: after ${a2.toFixed(3)} ms, before ${b.toFixed(3)} ms, ratio ${(a2 / b).toFixed(3)}`);
        }
        const s = (xs: number[]) => [...xs].sort((x, y) => x - y);
        const r = s(ratios);
        const cheaper = ratios.filter((x) => x < 1).length;
        rows.push(
          `${name.padEnd(30)} ${quantile(s(befores), 0.5).toFixed(3).padStart(9)} ${quantile(s(afters), 0.5).toFixed(3).padStart(9)}   ${quantile(r, 0.5).toFixed(3)}  [${quantile(r, 0.25).toFixed(3)}, ${quantile(r, 0.75).toFixed(3)}]   ${cheaper}/${ratios.length}`,
        );
      }
      say(`\nBefore (${beforeRoot}) against after, server CPU per request, ${opts.pairs} pairs of ${opts.seconds} s, ${opts.concurrency} clients, ${opts.tags} tags, load average ${(await import("node:os")).loadavg()[0]!.toFixed(2)} at the end:`);
      say(`${"target".padEnd(30)} ${"before ms".padStart(9)} ${"after ms".padStart(9)}   ratio  [quartiles]       pairs cheaper after`);
      for (const row of rows) say(row);
    } finally {
      for (const s of servers) await s.stop();
      await sqlc.end({ timeout: 5 });
      await database.close();
    }
  });
}
