// The database: PostgreSQL through postgres.js when DATABASE_URL is set, otherwise an embedded PGlite
// database persisted under DATA_DIR, which one process at a time may open. Both get the same schema and the
// same migrations, applied on open.
import { existsSync, mkdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { readMigrationFiles } from "drizzle-orm/migrator";
import type { Logger } from "drizzle-orm/logger";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import type { Sql } from "postgres";
import { DataDirLockedError, lockDataDir, type DataDirLock } from "./data-dir-lock.js";
import { describeOpenFailure } from "./open-errors.js";
import { createPoolGate, gatePool } from "./pool-gate.js";
import * as schema from "./schema/index.js";
import { DEFAULT_LIMITS, type PoolMode } from "../config.js";
import { log } from "../kernel/log.js";
import { isConnectionError, sqlStateOf } from "../kernel/errors/sqlstate.js";
import type { PoolGateStats } from "./pool-gate.js";
import type { ReadRouter, ReadRoutingStats } from "./read-routing.js";

export type Schema = typeof schema;
/** The Drizzle database, whichever driver is underneath. */
export type Db = PgDatabase<PgQueryResultHKT, Schema>;

export interface Database {
  db: Db;
  kind: "postgres" | "pglite";
  /**
   * Subscribes to a notification channel (LISTEN). `onReady` runs each time the subscription is established,
   * the first time and after a lost connection is re-established: notifications sent while it was down are
   * lost, so a listener keeping derived state should discard it then. `onLost` runs when the subscription is
   * lost (the database unreachable); it is re-established by itself, with onReady, once the database is back.
   * Resolves with an unsubscribe function.
   */
  listen(
    channel: string,
    onNotify: (payload: string) => void,
    onReady: () => void,
    onLost?: () => void,
  ): Promise<() => Promise<void>>;
  close(): Promise<void>;
  /** Its pool's use (PostgreSQL) and the errors its queries met, since it opened (for metrics). */
  stats(): DatabaseStats;
}

export interface DatabaseStats {
  /** The PostgreSQL pool; none for the embedded database. */
  pool: PoolGateStats | undefined;
  /** Queries and transactions the database failed, by kind (queryErrorKind). */
  queryErrors: Readonly<Record<string, number>>;
  /** Where reads of read-only calls went, and each replica's state; only with replicas (db/read-routing.ts). */
  reads?: ReadRoutingStats;
}

/**
 * What a failed query or transaction met: the database unreachable, a statement cancelled by
 * statement_timeout, a serialization failure or deadlock, a constraint, or something else it reported.
 * Undefined for an error that is not the database's (one thrown by code inside a transaction).
 */
function queryErrorKind(err: unknown): string | undefined {
  if (isConnectionError(err)) return "connection";
  const state = sqlStateOf(err);
  if (state === undefined) return undefined;
  if (state === "57014") return "statement_timeout";
  if (state === "40001" || state === "40P01") return "serialization";
  if (state.startsWith("23")) return "constraint";
  return "other";
}

function createErrorCounts() {
  const counts: Record<string, number> = { connection: 0, statement_timeout: 0, serialization: 0, constraint: 0, other: 0 };
  return {
    counts: counts as Readonly<Record<string, number>>,
    count(err: unknown): void {
      const kind = queryErrorKind(err);
      if (kind !== undefined) counts[kind]!++;
    },
  };
}

/**
 * The migrations: the nearest drizzle/ (with its journal) above this module. From the sources that is the
 * checkout's; from a build, the copy beside the compiled code (dist/drizzle), whether this module is
 * dist/src/db/client.js or inlined in a bundle (dist/server.js).
 */
export const migrationsFolder = findMigrations(dirname(fileURLToPath(import.meta.url)));

function findMigrations(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, "drizzle");
    if (existsSync(join(candidate, "meta", "_journal.json"))) return candidate;
    if (dirname(dir) === dir) throw new Error(`no drizzle/ migrations folder above ${from}`);
  }
}

export interface PostgresOptions {
  /** Connections in the pool (default 10). */
  max?: number;
  /** statement_timeout of the pool's connections, in ms (default 10 s; 0: none). Migrations run without. */
  statementTimeoutMs?: number;
  /** How long a query or transaction waits for a free connection before failing UNAVAILABLE (default 5 s). */
  acquireTimeoutMs?: number;
  /** Hears every statement the pool's Drizzle sends (none by default; tests capture statements with it). */
  logger?: Logger;
  /**
   * `transaction`: `url` is a transaction-mode pooler (PgBouncer), where each transaction, or each statement
   * outside one, may run on another server connection. Then no statement is named (postgres.js `prepare:
   * false`, which also makes the kernel's hot statements and Drizzle's `.prepare()` run unnamed: same rows),
   * and no startup parameter is sent (PgBouncer refuses statement_timeout and jit): the pooler's server
   * connections must carry them (checked at open, warned when they differ). Default `session`.
   */
  mode?: PoolMode;
  /**
   * A direct connection to the same database (not through a transaction-mode pooler), for what needs a
   * session: LISTEN, and the migrations under a session advisory lock. Default: `url`.
   */
  listenUrl?: string | undefined;
  /** Streaming replicas serving the reads of read-only calls (db/read-routing.ts). Default none. */
  replicas?: { urls: readonly string[]; maxLagMs: number };
}

/** host:port of a PostgreSQL URL, for logs and metrics (never the URL: it may hold a password). */
export function hostOfUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || "5432"}`;
  } catch {
    return "unknown";
  }
}

/** Seconds a connection to a replica may take: past it, the read runs on the primary. */
const REPLICA_CONNECT_TIMEOUT_S = 1;

/**
 * Opens PostgreSQL at `url`, applying pending migrations under an advisory lock (replicas may race). The
 * migrations and LISTEN run over `opts.listenUrl` when it is set (see PostgresOptions).
 */
export async function openPostgres(url: string, opts: PostgresOptions = {}): Promise<Database> {
  const { default: postgres } = await import("postgres");
  const { drizzle } = await import("drizzle-orm/postgres-js");
  const { migrate } = await import("drizzle-orm/postgres-js/migrator");
  const direct = opts.listenUrl ?? url;
  const pooled = opts.mode === "transaction";

  // A session advisory lock is held by a server connection: through a transaction-mode pooler the unlock may
  // run on another one, and the lock would stay held. So the migrations run over the direct connection.
  const migrator = postgres(direct, { max: 1, onnotice: () => {}, connect_timeout: CONNECT_TIMEOUT_S });
  try {
    // The first round trip: a database that cannot be reached or refuses the login is said in one line.
    await migrator`select pg_advisory_lock(hashtext('apiserver:migrations'))`.catch((err: unknown) => {
      throw describeOpenFailure(err, direct) ?? err;
    });
    await announceMigrations((text) => migrator.unsafe(text));
    await migrate(drizzle(migrator), { migrationsFolder });
    await migrator`select pg_advisory_unlock(hashtext('apiserver:migrations'))`;
  } finally {
    await migrator.end();
  }

  // Fail fast when the database is unreachable: a connection attempt gives up after CONNECT_TIMEOUT_S (the
  // call answers UNAVAILABLE, kernel/errors/sqlstate.ts) instead of postgres.js's default 30 s, and idle
  // connections are closed after a while so a pool does not keep sockets a network change has killed.
  const options = { onnotice: () => {}, connect_timeout: CONNECT_TIMEOUT_S, idle_timeout: IDLE_TIMEOUT_S };
  const max = opts.max ?? DEFAULT_LIMITS.databasePool.max;
  // statement_timeout is a startup parameter of each connection: a statement running longer is cancelled by
  // the server (SQLSTATE 57014, answered DEADLINE_EXCEEDED). The pool is behind a gate (pool-gate.ts), so a
  // call meeting a pool whose connections are all busy waits a bounded time, not as long as those before it.
  // jit is off: the server's statements read a page or a row, and PostgreSQL compiles a statement whose
  // estimated cost passes jit_above_cost on every execution. A generic plan's estimates grow with the table
  // (ListAdvisories by CVE at 3,000,000 advisories: 103,000, for a page of one row that reads 20 buffers), so
  // past a size each call paid 9 ms of compilation for 0.3 ms of work (bench/LOG.md, "Plans safe under any
  // plan choice"). A `jit` query parameter of the URL still overrides it (postgres.js: URL parameters last).
  const statementTimeoutMs = opts.statementTimeoutMs ?? DEFAULT_LIMITS.databasePool.statementTimeoutMs;
  const connection = { statement_timeout: statementTimeoutMs, jit: "off" };
  const client = postgres(url, { ...options, max, ...(pooled ? { prepare: false } : { connection }) });
  // The pool's first connection: a pooler that refuses the startup parameters (DATABASE_POOL_MODE unset
  // behind PgBouncer) is said in one line naming the setting, at start rather than on the first call.
  const settings = await client<{ name: string; setting: string }[]>`select name, setting from pg_settings where name in ('statement_timeout', 'jit')`.catch(
    async (err: unknown) => {
      await client.end({ timeout: 0 }).catch(() => {});
      throw describeOpenFailure(err, url) ?? err;
    },
  );
  if (pooled) warnUnlessPoolerSets(settings, statementTimeoutMs);
  const gate = createPoolGate({ permits: max, timeoutMs: opts.acquireTimeoutMs ?? DEFAULT_LIMITS.databasePool.acquireTimeoutMs });
  const errors = createErrorCounts();
  const pool = gatePool(client, gate, errors.count);
  let router: ReadRouter | undefined;
  let db: Db;
  if (opts.replicas && opts.replicas.urls.length > 0) {
    // Reads of read-only calls to the replicas (through the databases readTarget gives); everything else,
    // as without them, on `pool`.
    const { createReadRouter, routeReads } = await import("./read-routing.js");
    const monitor = (target: string) => () =>
      postgres(target, { onnotice: () => {}, max: 1, connect_timeout: REPLICA_CONNECT_TIMEOUT_S, idle_timeout: 0, connection: { statement_timeout: 1_000 } });
    const routed = createReadRouter({
      primary: { name: hostOfUrl(url), pool, openMonitor: monitor(direct), close: async () => {} },
      replicas: opts.replicas.urls.map((replicaUrl) => {
        const replica = postgres(replicaUrl, { ...options, connect_timeout: REPLICA_CONNECT_TIMEOUT_S, max, connection });
        // A replica's failures are not the database's: its reads run again on the primary (read-routing.ts).
        const replicaGate = createPoolGate({ permits: max, timeoutMs: opts.acquireTimeoutMs ?? DEFAULT_LIMITS.databasePool.acquireTimeoutMs });
        return { name: hostOfUrl(replicaUrl), pool: gatePool(replica, replicaGate), openMonitor: monitor(replicaUrl), close: () => replica.end({ timeout: 5 }) };
      }),
      maxLagMs: opts.replicas.maxLagMs,
      database: (routedClient) => drizzle(routedClient, { schema, logger: opts.logger }),
    });
    router = routed;
    db = drizzle(pool, { schema, logger: opts.logger }) as unknown as Db;
    routeReads(db, routed);
    log.info("reads of read-only calls go to replicas", { replicas: opts.replicas.urls.map(hostOfUrl), maxLagMs: opts.replicas.maxLagMs });
  } else {
    db = drizzle(pool, { schema, logger: opts.logger }) as unknown as Db;
  }
  const subscriptions = createSubscriptions(() => postgres(direct, { ...options, max: 1, idle_timeout: 0, max_lifetime: 0, ...subscriptions.hooks }));
  return {
    db,
    kind: "postgres",
    listen: subscriptions.listen,
    stats: () => ({ pool: gate.stats(), queryErrors: errors.counts, ...(router ? { reads: router.stats() } : {}) }),
    async close() {
      await subscriptions.close();
      await router?.close();
      await client.end({ timeout: 5 });
    },
  };
}

/**
 * Behind a transaction-mode pooler the server cannot set statement_timeout and jit on its connections: the
 * pooler's server connections must have them (ALTER ROLE ... SET, or PgBouncer's connect_query). Said once at
 * open when what a connection of the pool has differs from what the server would have set.
 */
function warnUnlessPoolerSets(settings: readonly { name: string; setting: string }[], statementTimeoutMs: number): void {
  const value = (name: string) => settings.find((s) => s.name === name)?.setting;
  const differ: Record<string, { expected: string; found: string | undefined }> = {};
  if (value("statement_timeout") !== String(statementTimeoutMs)) differ.statement_timeout = { expected: String(statementTimeoutMs), found: value("statement_timeout") };
  if (value("jit") !== "off") differ.jit = { expected: "off", found: value("jit") };
  if (Object.keys(differ).length === 0) return;
  log.warn(
    "database: behind a transaction-mode pooler the server cannot set these on its connections; set them on the database role " +
      "(ALTER ROLE <user> SET statement_timeout = ..., SET jit = off) or in the pooler's connect_query (docs/operations.md)",
    { settings: differ },
  );
}

/**
 * Seconds a connection attempt may take before it fails (postgres.js connect_timeout). A database that is
 * down refuses at once; this bounds the wait for one that does not answer at all (a network black hole),
 * with room for a slow connection on a loaded machine.
 */
const CONNECT_TIMEOUT_S = 3;
/** Seconds an unused pooled connection stays open. */
const IDLE_TIMEOUT_S = 60;
/** Delays between attempts to re-establish lost subscriptions: doubling from the first to the last. */
const RESUBSCRIBE_FIRST_MS = 100;
const RESUBSCRIBE_MAX_MS = 2_000;

interface Listener {
  onNotify: (payload: string) => void;
  onReady: () => void;
  onLost: (() => void) | undefined;
}

/**
 * LISTEN on a connection of its own that survives the database going away. postgres.js's own listen()
 * re-listens once after its connection closes and gives up silently when that fails (the database still
 * down), so the subscriptions are kept here: when the connection closes, every listener hears onLost, and
 * LISTEN is retried with backoff until it succeeds, when every listener hears onReady again.
 */
function createSubscriptions(open: () => Sql) {
  const channels = new Map<string, Set<Listener>>();
  let sql: Sql | undefined;
  let retry: NodeJS.Timeout | undefined;
  let delay = RESUBSCRIBE_FIRST_MS;
  let attempting = false;
  let lost = false;
  let closed = false;

  const quote = (channel: string) => '"' + channel.replace(/"/g, '""') + '"';
  const subscribe = async (channel: string): Promise<void> => {
    await sql!.unsafe(`listen ${quote(channel)}`);
    for (const l of channels.get(channel) ?? []) l.onReady();
  };
  const resubscribe = (): void => {
    retry = undefined;
    if (closed) return;
    attempting = true;
    Promise.all([...channels.keys()].map(subscribe)).then(
      () => {
        attempting = false;
        lost = false;
        delay = RESUBSCRIBE_FIRST_MS;
        log.info("database: notifications listened to again", { channels: [...channels.keys()] });
      },
      (err: unknown) => {
        attempting = false;
        log.warn("database: cannot listen for notifications yet; retrying", { err, retryMs: delay });
        retry = setTimeout(resubscribe, delay);
        retry.unref();
        delay = Math.min(delay * 2, RESUBSCRIBE_MAX_MS);
      },
    );
  };
  const hooks = {
    onnotify(channel: string, payload: string) {
      for (const l of channels.get(channel) ?? []) l.onNotify(payload);
    },
    onclose() {
      if (closed) return;
      if (!lost) {
        lost = true;
        log.warn("database: notification connection lost");
        for (const set of channels.values()) for (const l of set) l.onLost?.();
      }
      if (retry || attempting) return; // a failed attempt closes its connection too, and is retried already
      retry = setTimeout(resubscribe, 0);
      retry.unref();
    },
  };

  return {
    hooks,
    async listen(channel: string, onNotify: Listener["onNotify"], onReady: Listener["onReady"], onLost?: Listener["onLost"]) {
      sql ??= open();
      const listener: Listener = { onNotify, onReady, onLost };
      let set = channels.get(channel);
      if (set) {
        set.add(listener);
        onReady();
      } else {
        channels.set(channel, (set = new Set([listener])));
        try {
          await subscribe(channel);
        } catch (err) {
          channels.delete(channel);
          throw err;
        }
      }
      return async () => {
        set.delete(listener);
        if (set.size > 0 || channels.get(channel) !== set) return;
        channels.delete(channel);
        await sql?.unsafe(`unlisten ${quote(channel)}`).catch(() => {});
      };
    },
    async close() {
      closed = true;
      clearTimeout(retry);
      await sql?.end({ timeout: 5 });
    },
  };
}

/**
 * Opens an embedded PGlite database in `dataDir` (or in memory when dataDir is "memory://"). A directory is
 * locked while open (data-dir-lock.ts): opening one that another process has open throws DataDirLockedError,
 * before anything is read or written.
 */
export async function openPglite(dataDir: string, opts: { shareWithCommands?: boolean; logger?: Logger } = {}): Promise<Database> {
  let lock: DataDirLock | undefined;
  const inMemory = dataDir.startsWith("memory://");
  if (!inMemory) {
    mkdirSync(dataDir, { recursive: true });
    lock = lockDataDir(dataDir);
    // Creating the database (initdb) is most of a first start: seconds to tens of seconds. Said first, so
    // the wait is not silent.
    if (existsSync(join(dataDir, "PG_VERSION"))) log.info("opening the embedded database", { dataDir });
    else log.info("creating the embedded database (the first start takes a while: 10 to 30 s)", { dataDir });
  }
  // What undoes the open so far: the lock, then the client and the lock.
  let close = async (): Promise<void> => lock?.release();
  try {
    const { PGlite } = await import("@electric-sql/pglite");
    const { pg_trgm } = await import("@electric-sql/pglite/contrib/pg_trgm");
    const { drizzle } = await import("drizzle-orm/pglite");
    const { migrate } = await import("drizzle-orm/pglite/migrator");
    // pg_trgm: the trigram index of ListAdvisories' query (migration advisories_search_trigram).
    const client = await PGlite.create(dataDir, { extensions: { pg_trgm } });
    close = async () => {
      try {
        await client.close();
      } finally {
        lock?.release();
      }
    };
    const errors = createErrorCounts();
    const db = drizzle(countingErrors(client, errors.count), { schema, logger: opts.logger });
    if (!inMemory) await announceMigrations(async (text) => (await client.query<Record<string, unknown>>(text)).rows);
    await migrate(db, { migrationsFolder });
    if (opts.shareWithCommands && !inMemory) {
      const { serveLocally } = await import("./local-socket.js");
      const shared = await serveLocally(client, dataDir);
      const closeClient = close;
      close = async () => {
        try {
          await shared.close();
        } finally {
          await closeClient();
        }
      };
    }
    return {
      db: db as unknown as Db,
      kind: "pglite",
      stats: () => ({ pool: undefined, queryErrors: errors.counts }),
      // In-process: the subscription cannot be lost.
      async listen(channel, onNotify, onReady) {
        const unlisten = await client.listen(channel, onNotify);
        onReady();
        return unlisten;
      },
      close: () => close(),
    };
  } catch (err) {
    await close().catch(() => {}); // the open's error is the one to report
    throw err;
  }
}

/**
 * Logs how many migrations are about to be applied, when there are any (a first start applies them all).
 * Drizzle's migrator applies those created after the last one it recorded: the same rule, read beforehand.
 */
async function announceMigrations(query: (text: string) => Promise<readonly Record<string, unknown>[]>): Promise<void> {
  const [state] = await query("select to_regclass('drizzle.__drizzle_migrations') is not null as recorded");
  let last = -Infinity;
  if (state?.recorded === true) {
    const [row] = await query("select max(created_at)::text as last from drizzle.__drizzle_migrations");
    if (row?.last != null) last = Number(row.last);
  }
  const pending = readMigrationFiles({ migrationsFolder }).filter((m) => m.folderMillis > last).length;
  if (pending > 0) log.info(`applying ${pending} database migration${pending === 1 ? "" : "s"}`);
}

/** The PGlite client with the failures of its queries and transactions reported (then rethrown). */
function countingErrors<C extends object>(client: C, onError: (err: unknown) => void): C {
  const counted = new Set<PropertyKey>(["query", "exec", "transaction"]);
  return new Proxy(client, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (!counted.has(property) || typeof value !== "function") return value;
      return (...args: unknown[]) =>
        (value as (...a: unknown[]) => Promise<unknown>).apply(target, args).catch((err: unknown) => {
          onError(err);
          throw err;
        });
    },
  });
}

/**
 * The embedded database of a running server, through the socket it shares it on (local-socket.ts): one
 * connection, one transaction at a time as on PGlite itself, no prepared statements kept in the session the
 * server shares. Migrations are the server's. Undefined when the holder serves no socket (another command).
 */
async function openShared(locked: DataDirLockedError): Promise<Database | undefined> {
  const { readSocketPointer } = await import("./local-socket.js");
  const path = readSocketPointer(locked.dataDir, locked.pid);
  if (!path) return undefined;
  const { default: postgres } = await import("postgres");
  const { drizzle } = await import("drizzle-orm/postgres-js");
  const client = postgres({ path, max: 1, prepare: false, onnotice: () => {}, connect_timeout: CONNECT_TIMEOUT_S });
  try {
    await client`select 1`;
  } catch {
    await client.end({ timeout: 0 }).catch(() => {});
    return undefined; // the server stopped meanwhile: the lock's message says what to do
  }
  const errors = createErrorCounts();
  return {
    db: drizzle(client, { schema }) as unknown as Db,
    kind: "pglite",
    stats: () => ({ pool: undefined, queryErrors: errors.counts }),
    listen: () => Promise.reject(new Error("a command on a running server's embedded database cannot listen for notifications")),
    close: () => client.end({ timeout: 5 }),
  };
}

export interface OpenOptions {
  databaseUrl: string | undefined;
  dataDir: string;
  postgres?: PostgresOptions;
  /**
   * The configuration's pool settings (commands pass the whole configuration): only how the database is
   * reached (pool mode, direct URL) is taken from it; `postgres` wins.
   */
  databasePool?: Pick<PostgresOptions, "mode" | "listenUrl">;
  /**
   * The embedded database, when another process has it open: "serve" (the server) shares it with the
   * commands while it runs; "join" (a command) uses the running server's when there is one. Unset: refused.
   */
  share?: "serve" | "join";
}

export async function openDatabase(cfg: OpenOptions): Promise<Database> {
  const started = performance.now();
  const ms = () => Math.round(performance.now() - started);
  if (cfg.databaseUrl) {
    const database = await openPostgres(cfg.databaseUrl, { mode: cfg.databasePool?.mode, listenUrl: cfg.databasePool?.listenUrl, ...cfg.postgres });
    log.info("database ready", { kind: "postgres", ms: ms() });
    return database;
  }
  let database: Database;
  try {
    database = await openPglite(cfg.dataDir, { shareWithCommands: cfg.share === "serve" });
  } catch (err) {
    const shared = err instanceof DataDirLockedError && cfg.share === "join" ? await openShared(err) : undefined;
    if (!shared) throw err;
    log.info("database ready", { kind: "pglite", dataDir: cfg.dataDir, through: "the running server", serverPid: (err as DataDirLockedError).pid });
    return shared;
  }
  log.info("database ready", { kind: "pglite", dataDir: cfg.dataDir, ms: ms() });
  return database;
}
