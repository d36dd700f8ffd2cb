// Cold start: the time from spawning a server process to its first answered ping (GET /ping/v2/ping over
// HTTP/1.1, polled every 2 ms from the moment of the spawn), several times per target, interleaved so that the
// machine's load spreads over all of them. Targets, in the same run:
//   - a bare node:http server (node -e, nothing but the listener): what starting node itself costs here;
//   - the compiled server (`npm run build` into a scratch directory, `node dist/server.js`) on PostgreSQL
//     with the migrations already applied, production mode: what an operator's restart costs; and the same
//     from the unbundled build (`node dist/src/main.js`: tsc's output, one file per module);
//   - the compiled server on the embedded database (PGlite), data directory already initialized and migrated,
//     and on a fresh data directory (initdb and every migration);
//   - the development entry (`node --import tsx src/main.ts`, as `npm start` runs it but in one process,
//     compiling TypeScript as it loads) on PostgreSQL.
// Each spawn is stopped (SIGTERM) and waited for before the next. One untimed start of each target first.
// Beside the wall time, the CPU time the process used until that first answer (user + system, from /proc, in
// steps of 10 ms): on a machine other jobs share, the wall time grows with their load; the CPU time much less.
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { build } from "../scripts/build.js";
import { openPostgres } from "../src/db/client.js";
import { withScratchDatabase } from "./database.js";
import { cpuSecondsOf, freePort } from "./processes.js";

const root = new URL("..", import.meta.url).pathname;
const POLL_MS = 2;
const TIMEOUT_MS = 120_000;

interface Target {
  name: string;
  command: string;
  args: string[];
  env: Record<string, string>;
  /** Runs before each start, untimed (a fresh data directory). */
  before?: () => void;
}

/** One GET of /ping/v2/ping; true when it answers 200. A refused connection fails at once. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const req = http.get({ host: "127.0.0.1", port, path: "/ping/v2/ping", agent: false }, (res) => {
      res.resume();
      res.once("end", () => resolve(res.statusCode === 200));
    });
    req.once("error", () => resolve(false));
  });
}

interface Start {
  /** From the spawn to the first answer. */
  wallMs: number;
  /** CPU time of the process by then. */
  cpuMs: number;
}

/** Spawns the target, polls until the first ping answers; resolves with the times it took. */
async function startOnce(t: Target): Promise<Start> {
  t.before?.();
  const port = await freePort();
  const started = performance.now();
  const child = spawn(t.command, t.args, {
    cwd: root,
    env: { ...process.env, NODE_OPTIONS: "", PORT: String(port), HOST: "127.0.0.1", LOG_LEVEL: "warn", ...t.env },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`${t.name}: exited with ${child.exitCode} before answering`);
      if (await ping(port)) return { wallMs: performance.now() - started, cpuMs: 1000 * cpuSecondsOf(child.pid!) };
      if (performance.now() - started > TIMEOUT_MS) throw new Error(`${t.name}: no answer in ${TIMEOUT_MS} ms`);
      await new Promise((r) => setTimeout(r, POLL_MS));
    }
  } finally {
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 15_000);
    await exited;
    clearTimeout(timer);
  }
}

const BARE = `
const http = require("node:http");
http.createServer((req, res) => res.writeHead(200, { "content-type": "application/json" }).end('{"response":"pong"}'))
  .listen(Number(process.env.PORT), process.env.HOST);
process.on("SIGTERM", () => process.exit(0));
`;

const median = (xs: readonly number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

export async function benchColdStart(opts: { runs: number }): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), "bench-cold-"));
  try {
    process.stderr.write("cold-start: building into a scratch directory...\n");
    const dist = build(join(work, "dist"));
    await withScratchDatabase("bench_cold", async (url) => {
      // The migrations applied once, before any measured start (as on a server restarted by its operator).
      await (await openPostgres(url, { max: 1 })).close();
      // A client-secret key, as production has one (without it the server warns at every start).
      const production = { SERVER_MODE: "production", ISSUER_URL: "https://apiserver.bench", DATABASE_URL: url, IDP_SECRET_KEY: randomBytes(32).toString("base64") };
      const embeddedDir = join(work, "embedded");
      const freshDir = join(work, "fresh");
      const main = join(dist, "server.js");
      const targets: Target[] = [
        { name: "bare node:http (node -e)", command: process.execPath, args: ["-e", BARE], env: {} },
        { name: "compiled server, PostgreSQL (migrated)", command: process.execPath, args: [main], env: production },
        { name: "compiled, unbundled (dist/src/main.js), PostgreSQL", command: process.execPath, args: [join(dist, "src/main.js")], env: production },
        { name: "compiled server, embedded PGlite (migrated data dir)", command: process.execPath, args: [main], env: { ...production, DATABASE_URL: "", DATA_DIR: embeddedDir } },
        {
          name: "compiled server, embedded PGlite (fresh data dir)",
          command: process.execPath,
          args: [main],
          env: { ...production, DATABASE_URL: "", DATA_DIR: freshDir },
          before: () => rmSync(freshDir, { recursive: true, force: true }),
        },
        { name: "development: node --import tsx src/main.ts, PostgreSQL", command: process.execPath, args: ["--import", "tsx", join(root, "src/main.ts")], env: production },
      ];
      // Untimed: the first start of each (file caches; the embedded target's data directory is created here).
      for (const t of targets) await startOnce(t);
      const times = new Map<Target, Start[]>(targets.map((t) => [t, []]));
      for (let i = 0; i < opts.runs; i++) {
        for (const t of targets) times.get(t)!.push(await startOnce(t));
        process.stderr.write(`cold-start: run ${i + 1}/${opts.runs}\n`);
      }
      const bare = median(times.get(targets[0]!)!.map((s) => s.wallMs));
      const rows = targets.map((t) => {
        const ms = times.get(t)!.map((s) => s.wallMs);
        const cpu = median(times.get(t)!.map((s) => s.cpuMs));
        return `| ${t.name} | ${median(ms).toFixed(0)} | ${Math.min(...ms).toFixed(0)} | ${Math.max(...ms).toFixed(0)} | ${(median(ms) / bare).toFixed(1)} | ${cpu.toFixed(0)} |`;
      });
      console.log(`\nCold start, spawn to first answered GET /ping/v2/ping, ${opts.runs} runs each (ms)\n`);
      console.log("| target | median | min | max | × bare node:http | CPU ms (median) |\n|---|---:|---:|---:|---:|---:|\n" + rows.join("\n"));
    });
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}
