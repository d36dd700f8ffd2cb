// A real PgBouncer (Debian's /usr/sbin/pgbouncer) in front of the PostgreSQL DATABASE_URL names, started
// from a generated configuration on a free loopback port, for tests of the server behind a pooler. It runs
// as the `postgres` user when the tests run as root (PgBouncer refuses to run as root).
import { spawn, type ChildProcess } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const PGBOUNCER = "/usr/sbin/pgbouncer";

/** Why PgBouncer tests cannot run here, or undefined when they can. */
export function pgbouncerMissing(): string | undefined {
  if (!process.env.DATABASE_URL) return "DATABASE_URL is not set";
  if (!existsSync(PGBOUNCER)) return `${PGBOUNCER} is not installed (apt-get install pgbouncer)`;
  return undefined;
}

export interface Pgbouncer {
  port: number;
  /** The process (for its CPU time). */
  pid: number;
  /** `url` with its host and port replaced by the pooler's. */
  via(url: string): string;
  /** Everything PgBouncer logged. */
  logs(): string;
  stop(): Promise<void>;
}

export interface PgbouncerOptions {
  poolMode: "session" | "transaction";
  /** Server connections per database and user (small, so that statements move between them). */
  poolSize?: number;
  /** Run on each new server connection (PgBouncer's connect_query), e.g. SET statement_timeout. */
  connectQuery?: string;
  /** The PostgreSQL it pools (its host, port, user and password). Default DATABASE_URL. */
  target?: string;
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
  });
}

export async function startPgbouncer(opts: PgbouncerOptions): Promise<Pgbouncer> {
  const target = new URL(opts.target ?? process.env.DATABASE_URL!);
  const user = decodeURIComponent(target.username) || "postgres";
  const dir = mkdtempSync(join(tmpdir(), "pgbouncer-"));
  chmodSync(dir, 0o755);
  const port = await freePort();
  const connectQuery = opts.connectQuery ? ` connect_query='${opts.connectQuery.replace(/'/g, "''")}'` : "";
  writeFileSync(join(dir, "users.txt"), `"${user}" "${decodeURIComponent(target.password)}"\n`, { mode: 0o644 });
  writeFileSync(
    join(dir, "pgbouncer.ini"),
    [
      "[databases]",
      `* = host=${target.hostname || "127.0.0.1"} port=${target.port || "5432"}${connectQuery}`,
      "[pgbouncer]",
      "listen_addr = 127.0.0.1",
      `listen_port = ${port}`,
      "unix_socket_dir =",
      "auth_type = trust",
      `auth_file = ${join(dir, "users.txt")}`,
      `pool_mode = ${opts.poolMode}`,
      `default_pool_size = ${opts.poolSize ?? 2}`,
      "max_client_conn = 500",
      "",
    ].join("\n"),
    { mode: 0o644 },
  );
  const asRoot = process.getuid?.() === 0;
  const child: ChildProcess = spawn(PGBOUNCER, [...(asRoot ? ["-u", "postgres"] : []), join(dir, "pgbouncer.ini")], { stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  child.stdout!.on("data", (b: Buffer) => (output += b.toString()));
  child.stderr!.on("data", (b: Buffer) => (output += b.toString()));
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`pgbouncer did not start:\n${output}`)), 10_000);
    const check = () => {
      if (output.includes("process up")) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on("data", check);
    child.stderr!.on("data", check);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`pgbouncer exited:\n${output}`));
    });
  });
  return {
    port,
    pid: child.pid!,
    via(url) {
      const u = new URL(url);
      u.hostname = "127.0.0.1";
      u.port = String(port);
      return u.toString();
    },
    logs: () => output,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGINT");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
