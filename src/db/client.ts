// The database: PostgreSQL through postgres.js when DATABASE_URL is set, otherwise an embedded PGlite
// database persisted under DATA_DIR, which one process at a time may open. Both get the same schema and the
// same migrations, applied on open.
import { mkdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import { lockDataDir, type DataDirLock } from "./data-dir-lock.js";
import { createPoolGate, gatePool } from "./pool-gate.js";
import * as schema from "./schema/index.js";
import { log } from "../kernel/log.js";

export type Schema = typeof schema;
/** The Drizzle database, whichever driver is underneath. */
export type Db = PgDatabase<PgQueryResultHKT, Schema>;

export interface Database {
  db: Db;
  kind: "postgres" | "pglite";
  /**
   * Subscribes to a notification channel (LISTEN). `onReady` runs each time the subscription is established,
   * the first time and after a lost connection is re-established: notifications sent while it was down are
   * lost, so a listener keeping derived state should discard it then. Resolves with an unsubscribe function.
   */
  listen(channel: string, onNotify: (payload: string) => void, onReady: () => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
}

export const migrationsFolder = fileURLToPath(new URL("../../drizzle", import.meta.url));

export interface PostgresOptions {
  /** Connections in the pool (default 10). */
  max?: number;
  /** statement_timeout of the pool's connections, in ms (default 10 s; 0: none). Migrations run without. */
  statementTimeoutMs?: number;
  /** How long a query or transaction waits for a free connection before failing UNAVAILABLE (default 5 s). */
  acquireTimeoutMs?: number;
}

/** Opens PostgreSQL at `url`, applying pending migrations under an advisory lock (replicas may race). */
export async function openPostgres(url: string, opts: PostgresOptions = {}): Promise<Database> {
  const { default: postgres } = await import("postgres");
  const { drizzle } = await import("drizzle-orm/postgres-js");
  const { migrate } = await import("drizzle-orm/postgres-js/migrator");

  const migrator = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await migrator`select pg_advisory_lock(hashtext('apiserver:migrations'))`;
    await migrate(drizzle(migrator), { migrationsFolder });
    await migrator`select pg_advisory_unlock(hashtext('apiserver:migrations'))`;
  } finally {
    await migrator.end();
  }

  const max = opts.max ?? 10;
  // statement_timeout is a startup parameter of each connection: a statement running longer is cancelled by
  // the server (SQLSTATE 57014, answered DEADLINE_EXCEEDED). The pool is behind a gate (pool-gate.ts), so a
  // call meeting a pool whose connections are all busy waits a bounded time, not as long as those before it.
  const connection = { statement_timeout: opts.statementTimeoutMs ?? 10_000 };
  const client = postgres(url, { max, onnotice: () => {}, connection });
  const gate = createPoolGate({ permits: max, timeoutMs: opts.acquireTimeoutMs ?? 5_000 });
  const db = drizzle(gatePool(client, gate), { schema }) as unknown as Db;
  return {
    db,
    kind: "postgres",
    // postgres.js listens on a connection of its own and re-listens (calling onReady again) after a reconnect.
    async listen(channel, onNotify, onReady) {
      const { unlisten } = await client.listen(channel, onNotify, onReady);
      return unlisten;
    },
    close: () => client.end({ timeout: 5 }),
  };
}

/**
 * Opens an embedded PGlite database in `dataDir` (or in memory when dataDir is "memory://"). A directory is
 * locked while open (data-dir-lock.ts): opening one that another process has open throws DataDirLockedError,
 * before anything is read or written.
 */
export async function openPglite(dataDir: string): Promise<Database> {
  let lock: DataDirLock | undefined;
  if (!dataDir.startsWith("memory://")) {
    mkdirSync(dataDir, { recursive: true });
    lock = lockDataDir(dataDir);
  }
  // What undoes the open so far: the lock, then the client and the lock.
  let close = async (): Promise<void> => lock?.release();
  try {
    const { PGlite } = await import("@electric-sql/pglite");
    const { drizzle } = await import("drizzle-orm/pglite");
    const { migrate } = await import("drizzle-orm/pglite/migrator");
    const client = await PGlite.create(dataDir);
    close = async () => {
      try {
        await client.close();
      } finally {
        lock?.release();
      }
    };
    const db = drizzle(client, { schema });
    await migrate(db, { migrationsFolder });
    return {
      db: db as unknown as Db,
      kind: "pglite",
      // In-process: the subscription cannot be lost.
      async listen(channel, onNotify, onReady) {
        const unlisten = await client.listen(channel, onNotify);
        onReady();
        return unlisten;
      },
      close,
    };
  } catch (err) {
    await close().catch(() => {}); // the open's error is the one to report
    throw err;
  }
}

export async function openDatabase(cfg: { databaseUrl: string | undefined; dataDir: string; postgres?: PostgresOptions }): Promise<Database> {
  if (cfg.databaseUrl) {
    const database = await openPostgres(cfg.databaseUrl, cfg.postgres);
    log.info("database ready", { kind: "postgres" });
    return database;
  }
  const database = await openPglite(cfg.dataDir);
  log.info("database ready", { kind: "pglite", dataDir: cfg.dataDir });
  return database;
}
