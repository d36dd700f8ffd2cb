// Local PostgreSQL instances made from the machine's PostgreSQL binaries: a primary in a directory of its own
// on a port of its own, and streaming replicas of it made with pg_basebackup. The replica tests and the
// cluster command (`npm run cluster`) start them; nothing here touches the machine's own cluster.
//
// PostgreSQL refuses to run as root, so when this process is root the binaries run as the `postgres` user
// (runuser), and the instance's directory belongs to that user.
import { execFile } from "node:child_process";
import { chownSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** The directory of the newest installed PostgreSQL's binaries (Debian: /usr/lib/postgresql/<major>/bin). */
export function postgresBinDir(): string | undefined {
  const fromEnv = process.env.PG_BIN_DIR;
  if (fromEnv) return existsSync(join(fromEnv, "pg_ctl")) ? fromEnv : undefined;
  const root = "/usr/lib/postgresql";
  if (!existsSync(root)) return undefined;
  const majors = readdirSync(root).filter((v) => /^\d+$/.test(v)).sort((a, b) => Number(b) - Number(a));
  for (const major of majors) {
    const bin = join(root, major, "bin");
    if (existsSync(join(bin, "pg_ctl")) && existsSync(join(bin, "pg_basebackup"))) return bin;
  }
  return undefined;
}

/** Why local instances cannot be made here, or undefined when they can. */
export function localPostgresUnavailable(): string | undefined {
  if (!postgresBinDir()) return "no PostgreSQL server binaries (initdb, pg_ctl, pg_basebackup) are installed";
  if (process.getuid?.() === 0 && !existsSync("/usr/sbin/runuser") && !existsSync("/sbin/runuser")) return "running as root without runuser";
  return undefined;
}

const asRoot = () => process.getuid?.() === 0;

/** Runs a PostgreSQL binary (as the postgres user when this process is root). */
async function pg(binary: string, args: string[]): Promise<string> {
  const bin = postgresBinDir();
  if (!bin) throw new Error(localPostgresUnavailable());
  const file = join(bin, binary);
  const { stdout } = asRoot()
    ? await run("runuser", ["-u", "postgres", "--", file, ...args], { cwd: "/tmp" })
    : await run(file, args, { cwd: "/tmp" });
  return stdout;
}

function ownByPostgres(path: string): void {
  if (!asRoot()) return;
  const { uid, gid } = postgresUser();
  chownSync(path, uid, gid);
}

let postgresIds: { uid: number; gid: number } | undefined;
function postgresUser(): { uid: number; gid: number } {
  if (!postgresIds) {
    // /var/lib/postgresql belongs to the postgres user on Debian; fall back to the passwd entry.
    const home = "/var/lib/postgresql";
    if (existsSync(home)) {
      const s = statSync(home);
      postgresIds = { uid: s.uid, gid: s.gid };
    } else {
      throw new Error("no postgres user home (/var/lib/postgresql) to take the postgres user's ids from");
    }
  }
  return postgresIds;
}

export interface PgInstance {
  readonly role: "primary" | "replica";
  readonly port: number;
  readonly dataDir: string;
  /** A URL of database `database` (default postgres) on this instance, as the postgres superuser over TCP. */
  url(database?: string): string;
  start(): Promise<void>;
  /** Stops the instance (fast shutdown: sessions are ended, the WAL is flushed). */
  stop(): Promise<void>;
  /** Whether the postmaster runs. */
  running(): Promise<boolean>;
}

export interface InstanceOptions {
  /** A directory for the instance; made (and owned by postgres) if missing. Removed by destroy(). */
  dir: string;
  port: number;
  /** Extra postgresql.conf lines. */
  settings?: Record<string, string | number>;
}

/** An instance made before (by this process or another): its data directory and port. */
export function instance(role: PgInstance["role"], dataDir: string, port: number): PgInstance {
  const logFile = join(dataDir, "..", `${role}-${port}.log`);
  return {
    role,
    port,
    dataDir,
    url: (database = "postgres") => `postgres://postgres@127.0.0.1:${port}/${database}`,
    async start() {
      await pg("pg_ctl", ["-D", dataDir, "-l", logFile, "-w", "-t", "60", "start"]);
    },
    async stop() {
      await pg("pg_ctl", ["-D", dataDir, "-m", "fast", "-w", "-t", "60", "stop"]).catch((err: unknown) => {
        if (!/not running|No such file|does not exist/i.test(String((err as { stderr?: string }).stderr ?? err))) throw err;
      });
    },
    async running() {
      try {
        await pg("pg_ctl", ["-D", dataDir, "status"]);
        return true;
      } catch {
        return false;
      }
    },
  };
}

function prepareDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  ownByPostgres(dir);
}

function conf(settings: Record<string, string | number>): string {
  return Object.entries(settings).map(([k, v]) => `${k} = ${typeof v === "number" ? v : `'${v}'`}`).join("\n") + "\n";
}

/**
 * Makes and starts a primary: initdb with trust authentication on loopback (including replication), WAL
 * kept for replicas, listening on 127.0.0.1:`port` only.
 */
export async function startPrimary(opts: InstanceOptions): Promise<PgInstance> {
  prepareDir(opts.dir);
  const dataDir = join(opts.dir, "primary");
  await pg("initdb", ["-D", dataDir, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"]);
  const settings = {
    listen_addresses: "127.0.0.1",
    port: opts.port,
    unix_socket_directories: opts.dir,
    wal_level: "replica",
    max_wal_senders: 10,
    max_replication_slots: 10,
    hot_standby: "on",
    hot_standby_feedback: "on",
    wal_keep_size: "256MB",
    fsync: "off",
    synchronous_commit: "off",
    full_page_writes: "off",
    max_connections: 200,
    shared_buffers: "128MB",
    ...opts.settings,
  };
  writeAs(join(dataDir, "postgresql.auto.conf"), conf(settings));
  writeAs(join(dataDir, "pg_hba.conf"), ["local all all trust", "host all all 127.0.0.1/32 trust", "local replication all trust", "host replication all 127.0.0.1/32 trust", ""].join("\n"));
  const primary = instance("primary", dataDir, opts.port);
  await primary.start();
  return primary;
}

/**
 * Makes and starts a streaming replica of `primary` with pg_basebackup (-R writes its primary_conninfo and
 * standby.signal), on 127.0.0.1:`port`. Its settings are the primary's but for the port.
 */
export async function startReplica(primary: PgInstance, opts: InstanceOptions): Promise<PgInstance> {
  prepareDir(opts.dir);
  const dataDir = join(opts.dir, `replica-${opts.port}`);
  await pg("pg_basebackup", ["-h", "127.0.0.1", "-p", String(primary.port), "-U", "postgres", "-D", dataDir, "-R", "-X", "stream", "-c", "fast", "--no-sync"]);
  const settings = { port: opts.port, unix_socket_directories: opts.dir, ...opts.settings };
  // pg_basebackup copied the primary's postgresql.auto.conf and appended primary_conninfo: add the port last.
  const auto = join(dataDir, "postgresql.auto.conf");
  writeAs(auto, readFileSync(auto, "utf8") + conf(settings));
  const replica = instance("replica", dataDir, opts.port);
  await replica.start();
  return replica;
}

function writeAs(path: string, text: string): void {
  writeFileSync(path, text, { mode: 0o600 });
  ownByPostgres(path);
}

/** Stops every instance under `dir` that runs, and removes the directory. */
export async function destroyInstances(dir: string): Promise<void> {
  if (!existsSync(dir)) return;
  for (const entry of readdirSync(dir)) {
    const dataDir = join(dir, entry);
    if (existsSync(join(dataDir, "PG_VERSION"))) await instance("primary", dataDir, 0).stop().catch(() => {});
  }
  rmSync(dir, { recursive: true, force: true });
}
