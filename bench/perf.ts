// The server and the peers side by side under Linux `perf`: where each process's CPU goes, every thread
// (the main thread, V8's garbage-collector helpers, libuv's pool) and the kernel's work for it included, which
// the V8 profiler (bench/profile.ts) cannot show: it samples the main thread's JavaScript only, and counts the
// time a socket write waits for a woken PostgreSQL backend as the write's.
//
//   npm run bench -- perf [--tags 100000] [--seconds 5] [--concurrency 16] [--only TEXT] [--top N]
//
// On the registry's data (bench/registry-calls.ts), each call is measured on the server, then on its peer
// (grpc-js for gRPC, Fastify for REST: bench/peer-*.ts), each loaded alone while `perf record` samples its
// process (after a second of the same load, unrecorded), two rounds. All three run under tsx with
// --perf-basic-prof, so JavaScript frames carry names.
// Each process's samples are grouped by what ran (optimized JavaScript, V8's runtime, its builtins and inline
// caches, the garbage collector, the kernel, libc and node's C++), as shares and as ms of CPU per request.
// Needs the `perf` tool and permission to sample another process (root, or kernel.perf_event_paranoid <= 1).
import { spawn, spawnSync } from "node:child_process";
import { rmSync } from "node:fs";
import postgres from "postgres";
import { openPostgres } from "../src/db/client.js";
import { setLogLevel } from "../src/kernel/log.js";
import { JWKS_PATH } from "../src/server/oidc-routes.js";
import { BENCH_APPLICATION, processCpu } from "./cpu.js";
import { withScratchDatabase } from "./database.js";
import { measure } from "./load.js";
import { startApiServer, startPeers } from "./processes.js";
import { BENCH_ISSUER, seedRegistryCalls } from "./registry-calls.js";

export interface PerfOptions {
  tags: number;
  seconds: number;
  concurrency: number;
  /** Only the calls whose name contains this (case-insensitive). */
  only?: string;
  /** Also list each process's N symbols with the most samples (default none). */
  top?: number;
}

/** What ran, from a sample's object (dso) and symbol as `perf report` names them. */
export function categoryOf(dso: string, symbol: string): string {
  if (dso.startsWith("[JIT]")) return symbol.startsWith("JS:*") ? "optimized JavaScript" : "other JavaScript (interpreted, baseline)";
  if (dso.includes("kernel")) return "kernel";
  if (/Scaveng|ConcurrentMarking|MarkCompact|Sweep|GCTracer|Marking|Evacuat|Heap::/.test(symbol)) return "garbage collector";
  if (symbol.startsWith("Builtins_")) return /IC/.test(symbol) ? "V8 builtins: inline caches" : "V8 builtins";
  if (symbol.startsWith("v8::")) return "V8 runtime (strings, lookups, allocation, dates)";
  return "libc, node's C++, nghttp2, other";
}

/** The lines of `perf report --sort dso,sym` text ("  1.05%  node  [.] v8::String::WriteUtf8"), in its order. */
function reportLines(report: string): { share: number; dso: string; symbol: string }[] {
  const out: { share: number; dso: string; symbol: string }[] = [];
  for (const line of report.split("\n")) {
    // The JIT's object is named "[JIT] tid N"; perf pads names into columns.
    const m = /^\s*([\d.]+)%\s+(\[[^\]]+\]|\S+(?: tid \d+)?)\s+\[[.k]\]\s+(.*)$/.exec(line);
    if (m) out.push({ share: Number(m[1]) / 100, dso: m[2]!.trim(), symbol: m[3]!.trim() });
  }
  return out;
}

/** Shares of samples by category from `perf report --sort dso,sym` text. */
export function categoryShares(report: string): Map<string, number> {
  const shares = new Map<string, number>();
  for (const { share, dso, symbol } of reportLines(report)) {
    const category = categoryOf(dso, symbol);
    shares.set(category, (shares.get(category) ?? 0) + share);
  }
  return shares;
}

function perfAvailable(): boolean {
  const r = spawnSync("perf", ["--version"], { encoding: "utf8" });
  return r.status === 0;
}

interface Sampled {
  shares: Map<string, number>;
  /** The symbols with the most samples, as "<share>  <symbol>". */
  top: string[];
}

/** `perf record` of one process while `during` runs (for `seconds`), then its report's shares and top symbols. */
async function record(pid: number, seconds: number, during: () => Promise<void>, top: number): Promise<Sampled> {
  const out = `/tmp/bench-perf-${pid}-${Date.now()}.data`;
  const rec = spawn("perf", ["record", "-F", "1999", "-p", String(pid), "-o", out, "--", "sleep", String(seconds)], { stdio: ["ignore", "ignore", "pipe"] });
  let stderr = "";
  rec.stderr!.on("data", (c: Buffer) => (stderr += c.toString()));
  const exited = new Promise<number | null>((resolve) => rec.once("exit", resolve));
  try {
    await during();
    const code = await exited;
    if (code !== 0) throw new Error(`perf record failed (${code}): ${stderr.trim()}`);
    const report = spawnSync("perf", ["report", "-i", out, "--no-children", "--sort", "dso,sym", "--stdio", "-g", "none", "--percent-limit", "0"], {
      encoding: "utf8",
      maxBuffer: 64 * 1024 * 1024,
    });
    if (report.status !== 0) throw new Error(`perf report failed: ${report.stderr}`);
    const lines = reportLines(report.stdout).slice(0, top);
    return { shares: categoryShares(report.stdout), top: lines.map((l) => `${(l.share * 100).toFixed(2).padStart(6)}%  ${l.symbol.slice(0, 110)}`) };
  } finally {
    // A measurement that failed leaves perf running: stop it before its file is removed.
    if (rec.exitCode === null && rec.signalCode === null) rec.kill("SIGINT");
    await exited;
    rmSync(out, { force: true });
  }
}

export async function benchPerf(opts: PerfOptions): Promise<void> {
  if (!perfAvailable()) {
    console.error("bench perf needs Linux `perf` (e.g. apt-get install linux-perf) and permission to sample other processes");
    process.exitCode = 1;
    return;
  }
  setLogLevel("warn");
  await withScratchDatabase("bench_perf", async (url) => {
    const database = await openPostgres(url, { max: 2 });
    const sqlc = postgres(url, { max: 2, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
    const stops: (() => Promise<void>)[] = [];
    // Named JavaScript frames (/tmp/perf-<pid>.map), for the server and the peers alike.
    const nodeOptions = process.env.NODE_OPTIONS;
    process.env.NODE_OPTIONS = `${nodeOptions ?? ""} --perf-basic-prof`.trim();
    const pids: number[] = [];
    try {
      const { targets } = await seedRegistryCalls(sqlc, database, opts.tags);
      const api = await startApiServer({ DATABASE_URL: url, ISSUER_URL: BENCH_ISSUER, SERVER_MODE: "production", LOG_LEVEL: "warn" }, { quiet: true });
      stops.push(() => api.stop());
      const { fastify, grpc: grpcPeer } = await startPeers({ databaseUrl: url, issuer: BENCH_ISSUER, jwksUrl: `http://127.0.0.1:${api.port}${JWKS_PATH}` });
      stops.push(() => fastify.stop(), () => grpcPeer.stop());
      // Each node process writes a map: the servers' and the tsx launchers' above them.
      pids.push(api.serverPid, grpcPeer.pid, fastify.pid, api.process.pid!, grpcPeer.process.pid!, fastify.process.pid!);

      const only = opts.only?.toLowerCase();
      const calls = targets.filter(([name]) => !name.startsWith("Ping") && (!only || name.toLowerCase().includes(only)));
      for (const [name, sender] of calls) {
        const rest = name.includes("(REST)");
        const sides = [
          { label: "this server", pid: api.serverPid, port: api.port },
          { label: rest ? "Fastify peer" : "grpc-js peer", pid: rest ? fastify.pid : grpcPeer.pid, port: rest ? fastify.port : grpcPeer.port },
        ];
        const results = new Map<string, SideResults>();
        for (let round = 0; round < 2; round++) {
          for (const side of sides) {
            let cpu = 0;
            let rps = 0;
            // A second of the same load first, unrecorded, so the samples are of warm code.
            await measure(name, sender(side.port), { concurrency: opts.concurrency, seconds: 1, warmupSeconds: 0 });
            const sampled = await record(side.pid, opts.seconds, async () => {
              const r = await measure(name, sender(side.port), { concurrency: opts.concurrency, seconds: opts.seconds, warmupSeconds: 0, cpu: [processCpu("server", side.pid)] });
              if (r.errors > 0) throw new Error(`${side.label}: ${r.errors} errors on ${name}`);
              cpu = r.cpu.server!;
              rps = r.rps;
            }, opts.top ?? 0);
            const entry = results.get(side.label) ?? { cpu: [], rps: [], shares: [], top: [] };
            entry.cpu.push(cpu);
            entry.rps.push(rps);
            entry.shares.push(sampled.shares);
            entry.top = sampled.top; // the last round's
            results.set(side.label, entry);
          }
        }
        print(name, results);
      }
    } finally {
      process.env.NODE_OPTIONS = nodeOptions;
      for (const stop of stops.reverse()) await stop();
      for (const pid of pids) rmSync(`/tmp/perf-${pid}.map`, { force: true });
      await sqlc.end({ timeout: 5 });
      await database.close();
    }
  });
}

/** One process's measurements of one call, a value per round (its top symbols: the last round's). */
interface SideResults {
  cpu: number[];
  rps: number[];
  shares: Map<string, number>[];
  top: string[];
}

function print(name: string, results: Map<string, SideResults>): void {
  const labels = [...results.keys()];
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  console.log(`\n${name}, two rounds, each process loaded alone (mean of the rounds)`);
  console.log(`  ${"".padEnd(50)}${labels.map((l) => l.padStart(24)).join("")}`);
  console.log(`  ${"req/s".padEnd(50)}${labels.map((l) => mean(results.get(l)!.rps).toFixed(0).padStart(24)).join("")}`);
  console.log(`  ${"CPU per request, ms (every thread)".padEnd(50)}${labels.map((l) => mean(results.get(l)!.cpu).toFixed(3).padStart(24)).join("")}`);
  const categories = [...new Set(labels.flatMap((l) => results.get(l)!.shares.flatMap((s) => [...s.keys()])))];
  const shareOf = (l: string, c: string) => mean(results.get(l)!.shares.map((s) => s.get(c) ?? 0));
  categories.sort((a, b) => shareOf(labels[0]!, b) - shareOf(labels[0]!, a));
  for (const c of categories) {
    const cells = labels.map((l) => {
      const share = shareOf(l, c);
      return `${(share * 100).toFixed(1)}%  ${(share * mean(results.get(l)!.cpu)).toFixed(3)} ms`.padStart(24);
    });
    console.log(`  ${c.padEnd(50)}${cells.join("")}`);
  }
  for (const l of labels) {
    const top = results.get(l)!.top;
    if (top.length === 0) continue;
    console.log(`  ${l}, top symbols (second round):`);
    for (const line of top) console.log(`    ${line}`);
  }
}
