// Where the server's CPU goes for one kind of call: the registry's data (bench/registry.ts's seed) and 30,000
// generated advisories (bench/advisories.ts's) on a
// scratch PostgreSQL database, the server under `node --cpu-prof`, loaded with one call at a time per target
// (16 clients), and its profile summarised: self time by package (node_modules/<package>, the server's own
// src/<dir>, node's internals, V8's garbage collector on the main thread) and the top functions.
//
//   npm run bench -- profile [--tags 100000] [--seconds 10] [--concurrency 16] [--only advisories] [--built]
//
// --built profiles the bundled server production runs (scripts/build.ts, built into a temporary directory):
// its functions keep their names and lines, where under tsx every module reports line 1.
//
// One server process per target, so each profile holds one kind of call. The profiles stay in a temporary
// directory (printed), to open in Chrome's DevTools or speedscope.
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";
import { ListAdvisoriesRequestSchema } from "../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { openPostgres } from "../src/db/client.js";
import { setLogLevel } from "../src/kernel/log.js";
import { BENCH_APPLICATION, processCpu } from "./cpu.js";
import { withScratchDatabase } from "./database.js";
import { grpcMessageSender, measure } from "./load.js";
import { startApiServer } from "./processes.js";
import { generateRows } from "./advisories.js";
import { BENCH_ISSUER, seedRegistryCalls, type Target } from "./registry-calls.js";
import { build } from "../scripts/build.js";

const PAGE = 50;

export interface ProfileOptions {
  tags: number;
  seconds: number;
  concurrency: number;
  /** Only the targets whose name contains this (case-insensitive). */
  only?: string;
  /** Profile the bundled server (scripts/build.ts) instead of src/ under tsx. */
  built?: boolean;
  /** How many functions each listing shows (default 15). */
  top?: number;
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface CpuProfile {
  /** Microseconds of the monotonic clock (process.hrtime's). */
  startTime: number;
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** The package a script belongs to: node_modules/<package>, src/<dir>, node's internals, or V8's own. */
export function packageOf(url: string, functionName: string): string {
  if (!url) return functionName.startsWith("(") ? functionName : "(native)";
  const modules = url.lastIndexOf("/node_modules/");
  if (modules >= 0) {
    const rest = url.slice(modules + "/node_modules/".length).split("/");
    return rest[0]!.startsWith("@") ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith("node:")) return "node (core)";
  const src = /\/(src|gen|bench)\/(.*)$/.exec(url);
  if (src) return src[1] === "src" ? `src/${src[2]!.split("/")[0]!.replace(/\.ts$/, "")}` : src[1]!;
  return url;
}

/**
 * Self time by package and by function, in ms, idle time left out; only the samples taken between `from` and
 * `to` (microseconds of the monotonic clock), so start-up and warm-up do not count.
 */
export function summarize(
  profile: CpuProfile,
  from: number,
  to: number,
): { total: number; byPackage: [string, number][]; byFunction: [string, number][]; inclusive: [string, number][] } {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);
  const self = new Map<number, number>();
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    at += delta;
    if (at >= from && at <= to) self.set(id, (self.get(id) ?? 0) + delta / 1000);
  });
  const packages = new Map<string, number>();
  const functions = new Map<string, number>();
  // Inclusive time: a sample counts once for every distinct function on its stack.
  const inclusive = new Map<string, number>();
  const nameOf = (id: number) => {
    const { functionName, url, lineNumber } = byId.get(id)!.callFrame;
    return `${functionName || "(anonymous)"} ${packageOf(url, functionName)}${url ? `:${lineNumber + 1}` : ""}`;
  };
  let total = 0;
  for (const [id, ms] of self) {
    const { functionName, url } = byId.get(id)!.callFrame;
    if (functionName === "(idle)") continue;
    total += ms;
    const pkg = packageOf(url, functionName);
    packages.set(pkg, (packages.get(pkg) ?? 0) + ms);
    const fn = nameOf(id);
    functions.set(fn, (functions.get(fn) ?? 0) + ms);
    const onStack = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) onStack.add(nameOf(at));
    for (const name of onStack) inclusive.set(name, (inclusive.get(name) ?? 0) + ms);
  }
  const sorted = (m: Map<string, number>) => [...m].sort((a, b) => b[1] - a[1]);
  return { total, byPackage: sorted(packages), byFunction: sorted(functions), inclusive: sorted(inclusive) };
}

export async function benchProfile(opts: ProfileOptions): Promise<void> {
  setLogLevel("warn");
  await withScratchDatabase("bench_profile", async (url) => {
    const database = await openPostgres(url, { max: 2 });
    const sqlc = postgres(url, { max: 2, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
    try {
      const { auth, targets: registryTargets } = await seedRegistryCalls(sqlc, database, opts.tags);
      // Advisories too (bench/advisories.ts's generated rows), for the index lookups of ListAdvisories.
      await generateRows(sqlc, 30_000);
      const [one] = await sqlc<{ id: string }[]>`select advisory_id as id from advisories order by uid limit 1`;
      const targets: Target[] = [
        ...registryTargets,
        [
          "ListAdvisories advisory_ids (1) (gRPC)",
          (port) => grpcMessageSender(port, "/chainguard.platform.vulnerabilities.v2.AdvisoriesService/ListAdvisories", ListAdvisoriesRequestSchema, { advisoryIds: [one!.id], pageSize: PAGE }, auth),
        ],
        [
          "ListAdvisories artifact_names (1): 30 rows (gRPC)",
          (port) => grpcMessageSender(port, "/chainguard.platform.vulnerabilities.v2.AdvisoriesService/ListAdvisories", ListAdvisoriesRequestSchema, { artifactNames: ["pkg-42"], pageSize: PAGE }, auth),
        ],
      ];
      const only = opts.only?.toLowerCase();
      const built = opts.built ? build(mkdtempSync(join(tmpdir(), "bench-profile-build-"))) : undefined;
      for (const [name, sender] of targets.filter(([n]) => !only || n.toLowerCase().includes(only))) {
        const dir = mkdtempSync(join(tmpdir(), "bench-profile-"));
        const api = await startApiServer(
          { DATABASE_URL: url, ISSUER_URL: BENCH_ISSUER, SERVER_MODE: "production", LOG_LEVEL: "warn" },
          { nodeArgs: ["--cpu-prof", `--cpu-prof-dir=${dir}`], ...(built ? { built } : {}) },
        );
        let result;
        const warmupSeconds = 2;
        const from = Number(process.hrtime.bigint() / 1000n) + warmupSeconds * 1e6;
        let to = Infinity;
        try {
          result = await measure(name, sender(api.port), {
            concurrency: opts.concurrency,
            seconds: opts.seconds,
            warmupSeconds,
            cpu: [processCpu("server", api.serverPid)],
          });
          to = Number(process.hrtime.bigint() / 1000n);
        } finally {
          await api.stop();
        }
        const file = readdirSync(dir).find((f) => f.endsWith(".cpuprofile"));
        console.log(`\n${name}: ${result.rps.toFixed(0)} req/s, server CPU ${result.cpu.server!.toFixed(3)} ms/req, ${result.errors} errors; profile ${file ? join(dir, file) : "(none written)"}`);
        if (!file) continue;
        const { total, byPackage, byFunction, inclusive } = summarize(JSON.parse(readFileSync(join(dir, file), "utf8")) as CpuProfile, from, to);
        console.log(`  main thread, not idle, over the measured window: ${(total / 1000).toFixed(1)} s sampled; self time by package:`);
        for (const [pkg, ms] of byPackage.slice(0, 14)) console.log(`    ${((ms / total) * 100).toFixed(1).padStart(5)}%  ${pkg}`);
        console.log("  top functions (self time):");
        for (const [fn, ms] of byFunction.slice(0, 15)) console.log(`    ${((ms / total) * 100).toFixed(1).padStart(5)}%  ${fn}`);
        console.log("  top functions with what they call (total time; the root and its runners left out):");
        const roots = /^\((root|program|garbage collector)\)|^(processTicksAndRejections|runMicrotasks) /;
        for (const [fn, ms] of inclusive.filter(([f]) => !roots.test(f)).slice(0, opts.top ?? 15)) console.log(`    ${((ms / total) * 100).toFixed(1).padStart(5)}%  ${fn}`);
      }
    } finally {
      await sqlc.end({ timeout: 5 });
      await database.close();
    }
  });
}
