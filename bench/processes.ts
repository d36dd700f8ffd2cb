// Starting the server under test and the bare baseline as child processes, so the load generator does not
// share their event loop.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { PeerConfig } from "./peer-reads.js";

const ownRoot = new URL("..", import.meta.url).pathname;
const root = ownRoot;
const tsx = join(root, "node_modules", ".bin", "tsx");

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

export interface Child {
  process: ChildProcess;
  stop(): Promise<void>;
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
  await exited;
  clearTimeout(timer);
}

/**
 * The pid of the node process running the server: the `tsx` command runs it in a child process of its own
 * (Linux: read from /proc; elsewhere, the spawned process itself).
 */
export function serverPidOf(child: ChildProcess): number {
  const pid = child.pid!;
  try {
    const [first] = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/);
    return first ? Number(first) : pid;
  } catch {
    return pid;
  }
}

export { cpuSecondsOf } from "./cpu.js";

/** The resident set size of a process in bytes, from /proc/<pid>/status (Linux). */
export function residentBytes(pid: number): number {
  const kib = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  if (kib === undefined) throw new Error(`no VmRSS for process ${pid}`);
  return Number(kib) * 1024;
}

/**
 * Starts the API server (`src/main.ts`) on a free port; resolves when /healthz answers, with the pid of the
 * process that serves (for its memory).
 */
export async function startApiServer(
  env: Record<string, string> = {},
  opts: { quiet?: boolean; nodeArgs?: string[]; root?: string; built?: string; port?: number } = {},
): Promise<Child & { port: number; serverPid: number }> {
  // root: another checkout's server (e.g. the code before a change, to measure both in one run).
  const root = opts.root ?? ownRoot;
  const tsx = join(root, "node_modules", ".bin", "tsx");
  // port: chosen by the caller when the server must know its own address before it starts (ISSUER_URL).
  const port = opts.port ?? (await freePort());
  const dataDir = mkdtempSync(join(tmpdir(), "bench-data-"));
  // quiet: the server's stdout (development mode prints a login token there) is dropped; its log (stderr) stays.
  // nodeArgs (e.g. --cpu-prof, which NODE_OPTIONS refuses): node runs the server itself, with tsx as a loader.
  // built: a build's bundled server (scripts/build.ts: <dir>/server.js), run by node as production runs it.
  const [command, args] = opts.built
    ? [process.execPath, [...(opts.nodeArgs ?? []), join(opts.built, "server.js")]]
    : opts.nodeArgs
      ? [process.execPath, [...opts.nodeArgs, "--import", "tsx", join(root, "src/main.ts")]]
      : [tsx, [join(root, "src/main.ts")]];
  const child = spawn(command, args, {
    env: { ...process.env, PORT: String(port), HOST: "127.0.0.1", DATA_DIR: dataDir, LOG_LEVEL: "warn", ...env },
    stdio: ["ignore", opts.quiet ? "ignore" : "inherit", "inherit"],
  });
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
    try {
      const res = await fetch(`http://127.0.0.1:${port}/healthz`);
      if (res.ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error("server did not start in time");
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    process: child,
    port,
    serverPid: serverPidOf(child),
    async stop() {
      await stopChild(child);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/**
 * A benchmark helper script (bench/<name>.ts) in a child process, spoken to in lines: `send` writes one to
 * its stdin, `next` resolves with the next one it prints. `pid` is the node process running the script (for
 * its CPU time).
 */
export interface ScriptChild extends Child {
  pid: number;
  send(line: string): void;
  next(): Promise<string>;
}

export async function startScript(script: string, args: string[] = []): Promise<ScriptChild> {
  const child = spawn(tsx, [join(root, script), ...args], { stdio: ["pipe", "pipe", "inherit"] });
  const lines: string[] = [];
  const waiting: ((line: string) => void)[] = [];
  let exited: Error | undefined;
  const failures: ((err: Error) => void)[] = [];
  let buffered = "";
  child.stdout!.setEncoding("utf8");
  child.stdout!.on("data", (chunk: string) => {
    buffered += chunk;
    for (let i = buffered.indexOf("\n"); i >= 0; i = buffered.indexOf("\n")) {
      const line = buffered.slice(0, i);
      buffered = buffered.slice(i + 1);
      const resolve = waiting.shift();
      if (resolve) {
        failures.shift();
        resolve(line);
      } else lines.push(line);
    }
  });
  child.once("exit", (code) => {
    exited = new Error(`${script} exited with ${code}`);
    for (const fail of failures.splice(0)) fail(exited);
    waiting.length = 0;
  });
  const next = () =>
    new Promise<string>((resolve, reject) => {
      const line = lines.shift();
      if (line !== undefined) return resolve(line);
      if (exited) return reject(exited);
      waiting.push(resolve);
      failures.push(reject);
    });
  // The first line says the script is ready; only then is the node process running it there to be found.
  const first = await next();
  lines.unshift(first);
  return {
    process: child,
    pid: serverPidOf(child),
    send: (line) => child.stdin!.write(line + "\n"),
    next,
    stop: () => stopChild(child),
  };
}

export interface PeerChild extends ScriptChild {
  port: number;
}

/** A peer script (bench/peer-*.ts) on `config`, once it prints the port it listens on. */
async function startPeer(script: string, config: PeerConfig): Promise<PeerChild> {
  const child = await startScript(script, [JSON.stringify(config)]);
  try {
    return { ...child, port: (JSON.parse(await child.next()) as { port: number }).port };
  } catch (err) {
    await child.stop();
    throw err;
  }
}

/** The two peers, each its own process: Fastify (bench/peer-fastify.ts) and grpc-js (bench/peer-grpc.ts). */
export async function startPeers(config: PeerConfig): Promise<{ fastify: PeerChild; grpc: PeerChild }> {
  const fastify = await startPeer("bench/peer-fastify.ts", config);
  try {
    return { fastify, grpc: await startPeer("bench/peer-grpc.ts", config) };
  } catch (err) {
    await fastify.stop();
    throw err;
  }
}

/** Starts the bare node:http / node:http2 baseline; resolves with its ports. */
export interface BarePorts {
  http1: number;
  http2: number;
  connectHttp1: number;
  connectHttp2: number;
}

export async function startBareServer(): Promise<Child & BarePorts & { pid: number }> {
  const child = spawn(tsx, [join(root, "bench/bare-server.ts")], { stdio: ["ignore", "pipe", "inherit"] });
  const ports = await new Promise<BarePorts>((resolve, reject) => {
    child.once("exit", (code) => reject(new Error(`bare server exited with ${code}`)));
    child.stdout!.once("data", (chunk: Buffer) => resolve(JSON.parse(chunk.toString()) as BarePorts));
  });
  return { process: child, ...ports, pid: serverPidOf(child), stop: () => stopChild(child) };
}
