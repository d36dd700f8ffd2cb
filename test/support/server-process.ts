// Real server processes (`tsx src/main.ts`) on real PostgreSQL, for tests of what only a process shows:
// stopping on a signal, crashing, several replicas on one database, the database going away.
import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { openPostgres, type Db } from "../../src/db/client.js";
import { createKeyStore, mintToken, type KeyStore } from "../../src/kernel/auth/index.js";
import type { TestServer } from "./server.js";
import { seedWorld, type World } from "./world.js";

/** A scratch PostgreSQL database on the server DATABASE_URL names; dropped by dispose(). */
export interface ScratchDatabase {
  url: string;
  /** Its URL with another host and port (through a proxy). */
  via(host: string, port: number): string;
  sql: postgres.Sql;
  dispose(): Promise<void>;
}

export async function createScratchDatabase(): Promise<ScratchDatabase> {
  const base = process.env.DATABASE_URL;
  if (!base) throw new Error("DATABASE_URL is not set");
  const name = `t_${process.pid}_${randomBytes(4).toString("hex")}`;
  const admin = postgres(base, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const target = new URL(base);
  target.pathname = `/${name}`;
  const url = target.toString();
  const sql = postgres(url, { max: 2, onnotice: () => {} });
  return {
    url,
    via(host, port) {
      const u = new URL(url);
      u.hostname = host;
      u.port = String(port);
      return u.toString();
    },
    sql,
    async dispose() {
      await sql.end({ timeout: 1 });
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}

export interface ServerProcess {
  baseUrl: string;
  port: number;
  child: ChildProcess;
  /** The owner token development mode printed. */
  token: string;
  /** The local organization's uid development mode printed. */
  organization: string;
  /** Everything the process wrote on stderr (JSON log lines). */
  logs(): string;
  /** Resolves with the exit code (or the signal) once the process has ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Ends the process (SIGKILL) if it still runs, and waits for it. */
  kill(): Promise<void>;
}

/** The issuer every test process shares, so replicas accept each other's tokens. */
export const TEST_ISSUER = "http://apiserver.test";

/**
 * Starts `tsx src/main.ts` in development mode on an ephemeral port of 127.0.0.1, and resolves once it
 * listens and has printed its owner token.
 */
export async function startServerProcess(databaseUrl: string, env: Record<string, string> = {}): Promise<ServerProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts"], {
    env: {
      ...process.env,
      PORT: "0",
      HOST: "127.0.0.1",
      DATABASE_URL: databaseUrl,
      SERVER_MODE: "development",
      ISSUER_URL: TEST_ISSUER,
      LOG_LEVEL: "info",
      // Several processes run at once: each its own metrics port.
      METRICS_ADDR: "127.0.0.1:0",
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal })),
  );
  const ready = new Promise<{ port: number; token: string; organization: string }>((resolve, reject) => {
    let port: number | undefined;
    const check = () => {
      const token = /export TOKEN=(\S+)/.exec(stdout)?.[1];
      const organization = /organization "local" \(([0-9a-f]+)\)/.exec(stdout)?.[1];
      if (port !== undefined && token && organization) resolve({ port, token, organization });
    };
    child.stdout!.on("data", (b: Buffer) => {
      stdout += b.toString();
      check();
    });
    child.stderr!.on("data", (b: Buffer) => {
      stderr += b.toString();
      // The API listener's line (pino writes "msg" after the fields: each line is read as JSON).
      for (const line of stderr.split("\n")) {
        if (port !== undefined || !line.includes('"msg":"listening"')) continue;
        try {
          port = Number((JSON.parse(line) as { port?: number }).port);
        } catch {
          // An incomplete line: read again with the next chunk.
        }
      }
      check();
    });
    void exited.then(({ code, signal }) => reject(new Error(`server exited (${code ?? signal}) before it was ready:\n${stderr}`)));
  });
  const { port, token, organization } = await ready;
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    port,
    child,
    token,
    organization,
    logs: () => stderr,
    exited,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
      await exited;
    },
  };
}

/** The test's own connection to a scratch database: its Drizzle handle, and tokens as the servers mint them. */
export interface DirectAccess {
  db: Db;
  keys: KeyStore;
  /** An access token of TEST_ISSUER for the identity, signed with the current key. */
  token(identityUid: string): Promise<string>;
  /** seedWorld's organization and callers, written straight to the database. */
  world(name?: string): Promise<World>;
  close(): Promise<void>;
}

export async function openDirect(url: string): Promise<DirectAccess> {
  const database = await openPostgres(url, { max: 2 });
  const keys = await createKeyStore(database.db);
  const token = async (subject: string) =>
    (await mintToken(keys, { issuer: TEST_ISSUER, subject, audience: TEST_ISSUER, ttlSeconds: 600 })).token;
  return {
    db: database.db,
    keys,
    token,
    world: (name) => seedWorld({ database, token } as unknown as TestServer, name),
    close: () => database.close(),
  };
}
