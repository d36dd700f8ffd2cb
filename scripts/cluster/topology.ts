// The cluster on this machine (`npm run cluster -- up|down|status`): a PostgreSQL primary and a streaming
// replica of it (postgres.ts), PgBouncer in front of the primary, an S3-compatible server for the registry's
// blobs, three API servers, and HAProxy in front of them, all on 127.0.0.1, all under one state directory.
// What `up` starts is recorded in <dir>/cluster.json, so `down` (from any process) stops every process it
// started and removes the directory; a later `test` attaches to a running cluster through the same record.
import { spawn } from "node:child_process";
import { createServer } from "node:net";
import { chownSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import postgres from "postgres";
import { instance, localPostgresUnavailable, startPrimary, startReplica, destroyInstances, type PgInstance } from "./postgres.js";

/** The repository's root (where src/main.ts is). */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

export const PGBOUNCER = "/usr/sbin/pgbouncer";
export const HAPROXY = "/usr/sbin/haproxy";
/** The database the servers use, on the primary (and so on the replica). */
const DATABASE = "apiserver";
const S3_BUCKET = "registry";

export interface ClusterPorts {
  primary: number;
  replica: number;
  pgbouncer: number;
  /** HAProxy's one frontend: HTTP/1.1 and h2c (gRPC) on one port. */
  haproxy: number;
  /** HAProxy's statistics page (/stats). */
  haproxyStats: number;
  s3: number;
  /** The API servers' own ports (HAProxy's backends). */
  servers: number[];
  /** Each server's /metrics listener (METRICS_ADDR). */
  metrics: number[];
}

/** The defaults of `npm run cluster -- up` (docs/deployment.md). */
export const DEFAULT_PORTS: ClusterPorts = {
  primary: 55432,
  replica: 55433,
  pgbouncer: 56432,
  haproxy: 8800,
  haproxyStats: 8809,
  s3: 8810,
  servers: [8801, 8802, 8803],
  metrics: [9801, 9802, 9803],
};

export const DEFAULT_DIR = "/tmp/apiserver-cluster";

/** What `up` made, as written to <dir>/cluster.json. */
export interface ClusterState {
  dir: string;
  ports: ClusterPorts;
  /** PgBouncer's pool_mode: transaction, unless this checkout's server does not know DATABASE_POOL_MODE yet. */
  poolMode: "transaction" | "session";
  /** Where the registry's blobs live: the S3 server (s3rver) shared by the three servers. */
  storage: "s3";
  issuer: string;
  pids: { pgbouncer?: number; haproxy?: number; s3?: number; servers: (number | undefined)[] };
}

export interface UpOptions {
  dir?: string;
  ports?: ClusterPorts;
  /** Progress lines (default: stdout). */
  say?: (line: string) => void;
}

/** Why the cluster cannot run on this machine, or undefined when it can. */
export function clusterUnavailable(): string | undefined {
  const pg = localPostgresUnavailable();
  if (pg) return pg;
  if (!existsSync(PGBOUNCER)) return `no PgBouncer at ${PGBOUNCER} (apt-get install pgbouncer)`;
  if (!existsSync(HAPROXY)) return `no HAProxy at ${HAPROXY} (apt-get install haproxy)`;
  return undefined;
}

const stateFile = (dir: string) => join(dir, "cluster.json");

export function readState(dir = DEFAULT_DIR): ClusterState | undefined {
  if (!existsSync(stateFile(dir))) return undefined;
  return JSON.parse(readFileSync(stateFile(dir), "utf8")) as ClusterState;
}

function writeState(state: ClusterState): void {
  writeFileSync(stateFile(state.dir), JSON.stringify(state, null, 2) + "\n", { mode: 0o600 });
}

const asRoot = () => process.getuid?.() === 0;

/** The postgres user's ids (PgBouncer refuses to run as root: it runs as that user, like PostgreSQL). */
function postgresIds(): { uid: number; gid: number } {
  const s = statSync("/var/lib/postgresql");
  return { uid: s.uid, gid: s.gid };
}

function ownByPostgres(path: string): void {
  if (!asRoot()) return;
  const { uid, gid } = postgresIds();
  chownSync(path, uid, gid);
}

/** Whether process `pid` runs (and is not a zombie). */
export function alive(pid: number | undefined): boolean {
  if (!pid) return false;
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    return !/^\S+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return true;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Sends `signal` to pid and waits until it has ended (SIGKILL after `ms`). */
export async function stopPid(pid: number | undefined, signal: NodeJS.Signals = "SIGTERM", ms = 15_000): Promise<void> {
  if (!alive(pid)) return;
  try {
    process.kill(pid!, signal);
  } catch {
    return;
  }
  const end = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() > end) {
      try {
        process.kill(pid!, "SIGKILL");
      } catch {
        // ended meanwhile
      }
    }
    await sleep(50);
  }
}

/** Starts a long-lived process in its own session, its output appended to `log`; returns its pid. */
function daemon(command: string, args: string[], log: string, env: NodeJS.ProcessEnv = process.env): number {
  const fd = openSync(log, "a");
  const child = spawn(command, args, { cwd: repoRoot, env, detached: true, stdio: ["ignore", fd, fd] });
  closeSync(fd);
  child.unref();
  if (!child.pid) throw new Error(`could not start ${command}`);
  return child.pid;
}

async function waitFor(what: string, test: () => Promise<boolean>, ms = 60_000, log?: string): Promise<void> {
  const end = Date.now() + ms;
  while (!(await test().catch(() => false))) {
    if (Date.now() > end) {
      const tail = log && existsSync(log) ? "\n" + readFileSync(log, "utf8").split("\n").slice(-30).join("\n") : "";
      throw new Error(`${what}: not ready after ${ms} ms${tail}`);
    }
    await sleep(100);
  }
}

/** Whether GET url answers 200 within a second. */
export async function healthy(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(1_000) });
    await res.arrayBuffer();
    return res.status === 200;
  } catch {
    return false;
  }
}

/**
 * Whether the server of this checkout knows DATABASE_POOL_MODE. Until it does, it prepares named statements
 * and takes session advisory locks, which a transaction-mode PgBouncer breaks: PgBouncer then runs in session
 * mode (said by `up` and `status`).
 */
function serverKnowsPoolMode(): boolean {
  return readFileSync(join(repoRoot, "src", "config.ts"), "utf8").includes("DATABASE_POOL_MODE");
}

export function primaryUrl(state: ClusterState): string {
  return `postgres://postgres@127.0.0.1:${state.ports.primary}/${DATABASE}`;
}
export function replicaUrl(state: ClusterState): string {
  return `postgres://postgres@127.0.0.1:${state.ports.replica}/${DATABASE}`;
}
export function pgbouncerUrl(state: ClusterState): string {
  return `postgres://postgres@127.0.0.1:${state.ports.pgbouncer}/${DATABASE}`;
}
export function serverUrl(state: ClusterState, i: number): string {
  return `http://127.0.0.1:${state.ports.servers[i]}`;
}
export function frontendUrl(state: ClusterState): string {
  return `http://127.0.0.1:${state.ports.haproxy}`;
}
export function metricsUrl(state: ClusterState, i: number): string {
  return `http://127.0.0.1:${state.ports.metrics[i]}/metrics`;
}
export function replicaInstance(state: ClusterState): PgInstance {
  return instance("replica", join(state.dir, "pg", `replica-${state.ports.replica}`), state.ports.replica);
}
function primaryInstance(state: ClusterState): PgInstance {
  return instance("primary", join(state.dir, "pg", "primary"), state.ports.primary);
}

/** The environment of API server i: every setting the cluster gives it (docs/deployment.md lists them). */
export function serverEnv(state: ClusterState, i: number): NodeJS.ProcessEnv {
  return {
    ...process.env,
    PORT: String(state.ports.servers[i]),
    HOST: "127.0.0.1",
    // Development mode: each server makes sure the "local" organization exists and prints its owner's token;
    // the three share one issuer (the frontend's address) and one database, so they accept each other's tokens.
    SERVER_MODE: "development",
    ISSUER_URL: state.issuer,
    LOG_LEVEL: process.env.LOG_LEVEL ?? "warn",
    METRICS_ADDR: `127.0.0.1:${state.ports.metrics[i]}`,
    DATA_DIR: join(state.dir, `server-${i + 1}`),
    DATABASE_URL: pgbouncerUrl(state),
    DATABASE_POOL_MODE: state.poolMode,
    DATABASE_LISTEN_URL: primaryUrl(state),
    DATABASE_REPLICA_URLS: replicaUrl(state),
    REPLICA_MAX_LAG: "2s",
    SHUTDOWN_DRAIN_MS: "3000",
    // Every connection comes from HAProxy's one address.
    MAX_CONNECTIONS_PER_ADDRESS: "0",
    REGISTRY_STORAGE: "s3",
    REGISTRY_S3_BUCKET: S3_BUCKET,
    REGISTRY_S3_ENDPOINT: `http://127.0.0.1:${state.ports.s3}`,
    AWS_ACCESS_KEY_ID: "S3RVER",
    AWS_SECRET_ACCESS_KEY: "S3RVER",
    EVENTS_RETRY_BASE_MS: "200",
  };
}

/** Starts API server i (tsx src/main.ts) and waits until its /healthz answers 200. */
export async function startServer(state: ClusterState, i: number): Promise<number> {
  const log = join(state.dir, `server-${i + 1}.log`);
  mkdirSync(join(state.dir, `server-${i + 1}`), { recursive: true });
  const pid = daemon(process.execPath, ["--import", "tsx", "src/main.ts"], log, serverEnv(state, i));
  state.pids.servers[i] = pid;
  writeState(state);
  await waitFor(`server ${i + 1}`, async () => {
    if (!alive(pid)) throw new Error(`server ${i + 1} exited:\n${readFileSync(log, "utf8").split("\n").slice(-30).join("\n")}`);
    return healthy(`${serverUrl(state, i)}/healthz`);
  }, 120_000, log);
  return pid;
}

/** Stops API server i with SIGTERM and waits until it has exited. */
export async function stopServer(state: ClusterState, i: number): Promise<void> {
  await stopPid(state.pids.servers[i], "SIGTERM", 30_000);
  state.pids.servers[i] = undefined;
  writeState(state);
}

function pgbouncerConfig(state: ClusterState): string {
  const dir = join(state.dir, "pgbouncer");
  return [
    "[databases]",
    `${DATABASE} = host=127.0.0.1 port=${state.ports.primary} dbname=${DATABASE}`,
    "",
    "[pgbouncer]",
    "listen_addr = 127.0.0.1",
    `listen_port = ${state.ports.pgbouncer}`,
    "unix_socket_dir =",
    "auth_type = trust",
    `auth_file = ${join(dir, "users.txt")}`,
    `pool_mode = ${state.poolMode}`,
    "max_client_conn = 1000",
    "default_pool_size = 40",
    // The server's connections set these as startup parameters, which PgBouncer 1.18 does not pass on: the
    // database carries them instead (ALTER DATABASE in up()).
    "ignore_startup_parameters = extra_float_digits,statement_timeout,jit,options",
    `logfile = ${join(dir, "pgbouncer.log")}`,
    `pidfile = ${join(dir, "pgbouncer.pid")}`,
    "",
  ].join("\n");
}

function haproxyConfig(state: ClusterState): string {
  const { ports } = state;
  return [
    "global",
    "  maxconn 4096",
    "defaults",
    "  mode http",
    "  timeout connect 2s",
    "  timeout client 60s",
    "  timeout server 60s",
    "  timeout http-keep-alive 10s",
    // A request whose connection to a server failed, or which a closing server dropped unanswered, goes to
    // another server: never one that was answered.
    "  retries 3",
    "  option redispatch 1",
    "  retry-on conn-failure empty-response",
    "frontend api",
    // One port for HTTP/1.1 (REST, Connect, gRPC-web) and h2c with prior knowledge (gRPC): HAProxy tells
    // them apart by the HTTP/2 preface.
    `  bind 127.0.0.1:${ports.haproxy}`,
    "  default_backend servers",
    "backend servers",
    "  balance roundrobin",
    // Health checks over HTTP/1.1 (HAProxy 2.6's checks over h2 fail at once with "Socket error" against
    // this server), every 500 ms: a draining server (503) is out after two of them.
    "  option httpchk",
    "  http-check connect proto h1",
    "  http-check send meth GET uri /healthz ver HTTP/1.1 hdr host cluster",
    "  http-check expect status 200",
    // Requests reach the servers over h2c, whatever the client used.
    "  default-server proto h2 check inter 500ms fall 2 rise 2",
    ...ports.servers.map((p, i) => `  server s${i + 1} 127.0.0.1:${p}`),
    "frontend stats",
    `  bind 127.0.0.1:${ports.haproxyStats}`,
    "  stats enable",
    "  stats uri /stats",
    "",
  ].join("\n");
}

/** The ports of `ports` that something on 127.0.0.1 already listens on. */
async function takenPorts(ports: ClusterPorts): Promise<number[]> {
  const all = [ports.primary, ports.replica, ports.pgbouncer, ports.haproxy, ports.haproxyStats, ports.s3, ...ports.servers, ...ports.metrics];
  const taken = await Promise.all(
    all.map(
      (port) =>
        new Promise<boolean>((resolve) => {
          const probe = createServer();
          probe.once("error", () => resolve(true));
          probe.listen({ port, host: "127.0.0.1", exclusive: true }, () => probe.close(() => resolve(false)));
        }),
    ),
  );
  return all.filter((_, i) => taken[i]);
}

/** Brings the whole topology up under `dir`, and returns its record. */
export async function up(opts: UpOptions = {}): Promise<ClusterState> {
  const say = opts.say ?? ((l: string) => process.stdout.write(l + "\n"));
  const dir = resolve(opts.dir ?? DEFAULT_DIR);
  const why = clusterUnavailable();
  if (why) throw new Error(`the cluster cannot run here: ${why}`);
  const existing = readState(dir);
  if (existing && (existing.pids.servers.some(alive) || alive(existing.pids.haproxy))) {
    throw new Error(`a cluster already runs under ${dir} (npm run cluster -- status; npm run cluster -- down)`);
  }
  if (existsSync(dir)) await down(dir, () => {});
  const ports = opts.ports ?? DEFAULT_PORTS;
  const taken = await takenPorts(ports);
  if (taken.length > 0) throw new Error(`port${taken.length > 1 ? "s" : ""} ${taken.join(", ")} of 127.0.0.1 already in use (another cluster, or another program): stop it, or run the cluster elsewhere`);
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  ownByPostgres(dir);
  const state: ClusterState = {
    dir,
    ports,
    poolMode: serverKnowsPoolMode() ? "transaction" : "session",
    storage: "s3",
    issuer: `http://127.0.0.1:${ports.haproxy}`,
    pids: { servers: ports.servers.map(() => undefined) },
  };
  writeState(state);
  try {
    say(`postgresql: primary on ${ports.primary}`);
    const primary = await startPrimary({ dir: join(dir, "pg"), port: ports.primary });
    const admin = postgres(primary.url(), { max: 1, onnotice: () => {} });
    try {
      await admin.unsafe(`create database ${DATABASE}`);
      // What the servers set as startup parameters (db/client.ts), which PgBouncer does not pass on.
      await admin.unsafe(`alter database ${DATABASE} set statement_timeout = '10s'`);
      await admin.unsafe(`alter database ${DATABASE} set jit = off`);
    } finally {
      await admin.end();
    }
    // The migrations, straight on the primary: their session advisory lock would not hold through a
    // transaction-mode pooler. The servers then find nothing to apply.
    say("migrations on the primary");
    const { openPostgres } = await import("../../src/db/client.js");
    await (await openPostgres(primaryUrl(state), { max: 1 })).close();
    say(`postgresql: streaming replica on ${ports.replica} (pg_basebackup)`);
    await startReplica(primary, { dir: join(dir, "pg"), port: ports.replica });

    say(`pgbouncer (${state.poolMode} mode) on ${ports.pgbouncer}`);
    const bouncerDir = join(dir, "pgbouncer");
    mkdirSync(bouncerDir, { recursive: true });
    writeFileSync(join(bouncerDir, "users.txt"), '"postgres" ""\n');
    writeFileSync(join(bouncerDir, "pgbouncer.ini"), pgbouncerConfig(state));
    for (const f of ["", "users.txt", "pgbouncer.ini"]) ownByPostgres(join(bouncerDir, f));
    const bouncerArgs = ["-d", join(bouncerDir, "pgbouncer.ini")];
    const bouncerLog = join(bouncerDir, "start.log");
    // -d: PgBouncer puts itself in the background and writes its pid file, which is what down() stops.
    if (asRoot()) daemon("runuser", ["-u", "postgres", "--", PGBOUNCER, ...bouncerArgs], bouncerLog);
    else daemon(PGBOUNCER, bouncerArgs, bouncerLog);
    const pidFile = join(bouncerDir, "pgbouncer.pid");
    await waitFor("pgbouncer", async () => existsSync(pidFile) && readFileSync(pidFile, "utf8").trim() !== "", 15_000, join(bouncerDir, "pgbouncer.log"));
    state.pids.pgbouncer = Number(readFileSync(pidFile, "utf8").trim());
    writeState(state);
    await waitFor("pgbouncer answers", async () => {
      const sql = postgres(pgbouncerUrl(state), { max: 1, onnotice: () => {}, connect_timeout: 2, prepare: false });
      try {
        await sql`select 1`;
        return true;
      } finally {
        await sql.end({ timeout: 1 });
      }
    }, 15_000, join(bouncerDir, "pgbouncer.log"));

    say(`s3 (s3rver, bucket ${S3_BUCKET}) on ${ports.s3}`);
    const s3Dir = join(dir, "s3");
    mkdirSync(s3Dir, { recursive: true });
    state.pids.s3 = daemon(process.execPath, ["--import", "tsx", join("scripts", "cluster", "s3.ts"), s3Dir, String(ports.s3), S3_BUCKET], join(dir, "s3.log"));
    writeState(state);
    await waitFor("s3", () => fetch(`http://127.0.0.1:${ports.s3}/`).then((r) => r.status > 0), 30_000, join(dir, "s3.log"));

    say(`api servers on ${ports.servers.join(", ")} (metrics on ${ports.metrics.join(", ")})`);
    await Promise.all(ports.servers.map((_, i) => startServer(state, i)));

    say(`haproxy on ${ports.haproxy} (stats: http://127.0.0.1:${ports.haproxyStats}/stats)`);
    writeFileSync(join(dir, "haproxy.cfg"), haproxyConfig(state));
    state.pids.haproxy = daemon(HAPROXY, ["-db", "-f", join(dir, "haproxy.cfg")], join(dir, "haproxy.log"));
    writeState(state);
    await waitFor("haproxy", () => healthy(`${frontendUrl(state)}/healthz`), 15_000, join(dir, "haproxy.log"));
    return state;
  } catch (err) {
    await down(dir, () => {}).catch(() => {});
    throw err;
  }
}

/** Stops everything the cluster under `dir` started and removes the directory. */
export async function down(dir = DEFAULT_DIR, say: (l: string) => void = (l) => process.stdout.write(l + "\n")): Promise<void> {
  dir = resolve(dir);
  const state = readState(dir);
  if (state) {
    await stopPid(state.pids.haproxy, "SIGTERM");
    await Promise.all(state.pids.servers.map((pid) => stopPid(pid, "SIGTERM", 30_000)));
    await stopPid(state.pids.s3, "SIGTERM");
    await stopPid(state.pids.pgbouncer, "SIGTERM");
  }
  // The instances are stopped (pg_ctl) before the directory goes.
  await destroyInstances(join(dir, "pg"));
  rmSync(dir, { recursive: true, force: true });
  say(`removed ${dir}`);
}

export interface ClusterStatus {
  dir: string;
  running: boolean;
  lines: string[];
}

/** What runs of the cluster under `dir`. */
export async function status(dir = DEFAULT_DIR): Promise<ClusterStatus> {
  dir = resolve(dir);
  const state = readState(dir);
  if (!state) return { dir, running: false, lines: [`no cluster under ${dir}`] };
  const { ports, pids } = state;
  const mark = (ok: boolean) => (ok ? "up  " : "DOWN");
  const lines = [
    `${mark(await primaryInstance(state).running())} postgresql primary  127.0.0.1:${ports.primary}`,
    `${mark(await replicaInstance(state).running())} postgresql replica  127.0.0.1:${ports.replica}`,
    `${mark(alive(pids.pgbouncer))} pgbouncer (${state.poolMode})  127.0.0.1:${ports.pgbouncer}`,
    `${mark(alive(pids.s3))} s3 (s3rver)  http://127.0.0.1:${ports.s3}`,
  ];
  for (let i = 0; i < ports.servers.length; i++) {
    lines.push(`${mark(alive(pids.servers[i]) && (await healthy(`${serverUrl(state, i)}/healthz`)))} api server ${i + 1}  ${serverUrl(state, i)}  metrics ${metricsUrl(state, i)}`);
  }
  lines.push(`${mark(alive(pids.haproxy) && (await healthy(`${frontendUrl(state)}/healthz`)))} haproxy  ${frontendUrl(state)}  stats http://127.0.0.1:${ports.haproxyStats}/stats`);
  return { dir, running: !lines.some((l) => l.startsWith("DOWN")), lines };
}

/** The owner token and organization the development-mode servers printed (the newest start's). */
export function ownerLogin(state: ClusterState): { token: string; organization: string } {
  for (let i = 0; i < state.ports.servers.length; i++) {
    const log = join(state.dir, `server-${i + 1}.log`);
    if (!existsSync(log)) continue;
    const text = readFileSync(log, "utf8");
    const tokens = [...text.matchAll(/export TOKEN=(\S+)/g)];
    const organization = /organization "local" \(([0-9a-f]+)\)/.exec(text)?.[1];
    if (tokens.length > 0 && organization) return { token: tokens[tokens.length - 1]![1]!, organization };
  }
  throw new Error("no server has printed its owner token yet");
}
