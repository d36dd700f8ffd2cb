// Reads from streaming replicas (DATABASE_REPLICA_URLS), with read-your-writes across servers.
//
// What goes where. Routing is opt-in and explicit: the unit-of-work interceptor, for an API method that
// declares no event and whose service writes nothing outside a unit of work, asks where the call's reads
// go (readTarget) before its handler runs, and the handler's stores (kernel/unit-of-work.ts, storeFactory)
// are then the ones made over that target: a replica's database, or the primary's. Everything else runs
// on the primary as without replicas: every transaction (a unit of work, and every read inside it; a
// transaction opened on a replica's database runs on the primary too), authentication and authorization
// (they run before), what does not read through storeFactory, the workers (event delivery, fan-out, garbage
// collection), the LISTEN connections, migrations, importers and the registry's data plane (/v2/). The SQL
// text is never inspected. As a safety net, a statement a replica refuses as a write (SQLSTATE 25006) runs
// again on the primary and is logged: it is a routing bug.
//
// Why not an AsyncLocalStorage scope around the call, read by the pool: on Node 20 the first scope turns on
// promise hooks for the whole process, and every await of every request then costs about 2.5 times as much
// (measured: 200 awaits, 15 µs without, 38 µs with); a target chosen once per call and handed to the
// stores costs nothing beyond the choice.
//
// Read-your-writes. After a caller's write has been answered, no read of that caller may see the database
// as it was before the write, whichever server the read reaches. A memory per process ("identity -> LSN")
// does not reach the other servers, and a notification may arrive after the read it should have steered.
// So the write itself leaves its mark on the primary, in its own transaction: `read_positions` holds, per
// identity, the transaction id (xid) of its latest unit of work, for a bounded time (positionTtlMs). The
// row is written before the commit, so it is visible on the primary from the instant the write is, to
// every server; a reader that finds it is steered whatever the order of events.
//
// The check against a replica is by visibility, not by byte position: each replica's snapshot
// (pg_current_snapshot(), as the standby's replay has it) is polled every POLL_MS, and a transaction has
// ended on the replica when it is below the snapshot's xmin, the oldest transaction still in progress there
// (endedIn says why not more). Ended there means the replica has replayed its commit record (or abort), as a
// commit LSN would say too, but the commit LSN is not known inside the transaction that must record it (it
// is written by the commit itself); the xid is. A snapshot only grows on a replica, so a transaction visible
// in the polled snapshot is visible to the read that follows. A read-only call of an identity then costs
// one index lookup on the primary (`read_positions` by identity: a few microseconds of the primary's time),
// one query for the calls that arrive together (positionLookups), skipped for anonymous callers (they have no writes), when no replica is in rotation, and when this
// process itself made the identity's latest write and no replica has it yet (the call goes straight to the
// primary). The decision is taken once per call, before its handler; all its reads go to the same place.
//
// Writes outside a unit of work that a caller may read back through the API (the registry's manifest
// pushes and deletions) record the mark with recordWriters too: in their transaction, or in a statement of
// its own after the write and before the answer, whose transaction commits after the write, so a replica
// that has the mark has the write too.
//
// Health. A replica is in rotation while its last poll (each bounded by POLL_TIMEOUT_MS) answered within
// FRESH_MS, it is still in recovery (a promoted replica no longer follows the primary), and its lag is at
// most REPLICA_MAX_LAG. The lag is measured against the primary's WAL position sampled at each poll: when
// the replica has replayed the primary's position sampled at time t, every change made before t is on it,
// and its lag is at most now - t (an upper bound, so the rule errs towards the primary). A replica query
// that fails on the connection takes the replica out until its next good poll and runs again on the
// primary: a replica that goes down costs a client no error, and at most a poll interval of failed replica
// attempts. positionTtlMs (30 s + twice the allowed lag) is longer than any replica in rotation can
// be behind, so a forgotten position can no longer steer a read wrongly.
//
// Durability of the marks: the table is UNLOGGED, so a crash of the primary empties it. Replicas of a
// crashed primary are rebuilt or re-synchronized in practice; meanwhile marks written before the crash are
// lost, which the operations guide says (docs/replicas.md).
import DataLoader from "dataloader";
import { sql, type SQL } from "drizzle-orm";
import type { Sql } from "postgres";
import { isConnectionError, sqlStateOf } from "../kernel/errors/sqlstate.js";
import { log } from "../kernel/log.js";

/** How often each replica's position and the primary's WAL position are sampled. */
export const POLL_MS = 150;
/** A poll that takes longer counts as failed (the replica is out until one answers in time). */
const POLL_TIMEOUT_MS = 1_000;
/** A replica whose last good poll is older than this is out of rotation. */
const FRESH_MS = 1_000;
/** How often expired positions are removed from the primary. */
const PRUNE_MS = 60_000;
/** Positions this process remembers of its own writes (the oldest are forgotten first). */
const OWN_WRITES_MAX = 10_000;
/** SQLSTATEs of a replica query that are run again on the primary: a write refused, a recovery conflict. */
const RETRIED_STATES = new Set(["25006", "40001"]);

/** How long a write's position steers its identity's reads (docs/replicas.md). */
export function positionTtlMs(maxLagMs: number): number {
  return 30_000 + 2 * maxLagMs;
}

/** What executes a statement: the database or a transaction (Drizzle's execute). */
interface Executes {
  execute(query: SQL): PromiseLike<unknown>;
}

interface WritePositions {
  /** Records, through `executor` (the write's transaction, or the database after the write), that `identities` wrote. */
  record(executor: Executes, identities: readonly string[]): Promise<void>;
}

interface Routing {
  positions: WritePositions;
  target(identity: string | undefined): Promise<object>;
}

const routingOf = new WeakMap<object, Routing>();

/** Whether reads of `db` are routed to replicas (read-only calls are worth a target only then). */
export function routesReads(db: object): boolean {
  return routingOf.has(db);
}

/**
 * Where the reads of a read-only call of `identity` (undefined: anonymous) go: the database of a replica
 * that has every write of the caller, or the primary's. `db` itself when it has no replicas.
 */
export async function readTarget<D extends object>(db: D, identity: string | undefined): Promise<D> {
  const routing = routingOf.get(db);
  return routing ? ((await routing.target(identity || undefined)) as D) : db;
}

/**
 * Records that `identities` wrote, through `executor` (inside the write's transaction, or after the write
 * and before its answer): their next reads go to the primary until a replica has this. Does nothing when
 * `db` has no replicas.
 */
export async function recordWriters(db: object, executor: Executes, identities: readonly (string | undefined)[]): Promise<void> {
  const positions = routingOf.get(db)?.positions;
  if (!positions) return;
  const named = [...new Set(identities.filter((i): i is string => !!i))];
  if (named.length > 0) await positions.record(executor, named);
}

export interface ReplicaStatus {
  /** host:port of the replica's URL (never the URL: it may hold a password). */
  replica: string;
  /** up: in rotation; lagging: answering but too far behind (or no longer a replica); down: not answering. */
  state: "up" | "lagging" | "down";
  /** Upper bound of how far its replay is behind the primary, in seconds; undefined when down. */
  lagSeconds: number | undefined;
  /** Bytes of WAL the primary has that it has not replayed; undefined when down. */
  lagBytes: number | undefined;
  /** Reads it served. */
  reads: number;
}

export interface ReadRoutingStats {
  /** Reads of read-only calls served by the primary (no replica could serve them, or one failed). */
  primaryReads: number;
  replicas: ReplicaStatus[];
}

/** A client of one database: the pool queries run on (behind its gate), and a monitor connection. */
export interface RoutedClient {
  name: string;
  pool: Sql;
  /** Opens a connection of its own for the polls (reopened after a poll timed out). */
  openMonitor(): Sql;
  close(): Promise<void>;
}

export interface ReadRouterOptions {
  primary: RoutedClient;
  replicas: readonly RoutedClient[];
  maxLagMs: number;
  /** Makes the database (Drizzle) over a client: one per replica, and one for the reads sent to the primary. */
  database: (client: Sql) => object;
}

interface Snapshot {
  xmin: bigint;
  xmax: bigint;
  running: Set<bigint>;
}

interface Replica {
  client: RoutedClient;
  monitor: Sql;
  /** When its last poll answered (ms); undefined after a failure. */
  polledAt: number | undefined;
  recovering: boolean;
  replay: bigint;
  snapshot: Snapshot | undefined;
  lagMs: number;
  lagBytes: number;
  reads: number;
  /** Whether its last state was reported in rotation (to log the changes). */
  wasUp: boolean | undefined;
}

export interface ReadRouter {
  /** The database a read-only call of `identity` reads from: a replica's that has the caller's writes, or the primary's. */
  target(identity: string | undefined): Promise<object>;
  /** Polls now (tests: a change of a replica's state is seen without waiting for the next poll). */
  poll(): Promise<void>;
  stats(): ReadRoutingStats;
  close(): Promise<void>;
}

/** pg_lsn text (16/B374D848) as a number of bytes. */
export function parseLsn(text: string): bigint {
  const [hi, lo] = text.split("/");
  return (BigInt(`0x${hi}`) << 32n) | BigInt(`0x${lo}`);
}

/**
 * The primary's insert position as a record's end. At the start of a WAL page, pg_current_wal_insert_lsn()
 * points past the page's header (24 bytes; 40 at a segment's start), where no record ends: a replica that
 * has replayed everything reports the header's start, and would never seem to catch up on an idle primary.
 * (PostgreSQL's default page and segment sizes: 8 kB and 16 MB.)
 */
export function recordEndOf(insertLsn: bigint): bigint {
  if (insertLsn % (16n << 20n) === 40n) return insertLsn - 40n;
  if (insertLsn % 8192n === 24n) return insertLsn - 24n;
  return insertLsn;
}

/** pg_snapshot text (xmin:xmax:xip,...). */
export function parseSnapshot(text: string): Snapshot {
  const [xmin, xmax, xip = ""] = text.split(":");
  return { xmin: BigInt(xmin!), xmax: BigInt(xmax!), running: new Set(xip === "" ? [] : xip.split(",").map((x) => BigInt(x))) };
}

/**
 * Whether transaction `xid` has ended (committed or rolled back) in a replica's `snapshot`: when it is below
 * the snapshot's xmin. On a primary, pg_visible_in_snapshot's rule would also count an xid between xmin and
 * xmax that is not listed as in progress; not on a standby. A standby cannot tell top-level transactions from
 * subtransactions, so its snapshots keep every transaction in progress in the subtransaction list, which
 * pg_current_snapshot() does not print: its in-progress list is always empty there. Its xmin is the oldest
 * transaction still in progress on it (or xmax when none is), so below xmin is the rule that holds; the
 * cluster load test met stale reads under the other one (a write whose xid lay between xmin and xmax, its
 * commit not yet replayed, while a later transaction's was).
 */
export function endedIn(snapshot: Snapshot, xid: bigint): boolean {
  return xid < snapshot.xmin;
}

/**
 * The read positions of identities, looked up in batches: concurrent calls share one query on the primary
 * instead of one each. A call joins the next query to start, never one already running: that query's
 * snapshot could have been taken before a write answered to the caller before this call arrived, and would
 * miss the write's mark. So at most one query runs at a time, and the calls that arrive meanwhile wait for
 * it to end and then go together in the next (DataLoader, no cache: a position is read afresh each call).
 */
export function positionLookups(query: (identities: string[]) => Promise<Map<string, bigint>>): DataLoader<string, bigint | undefined> {
  let running = false;
  let next: (() => void) | undefined;
  return new DataLoader<string, bigint | undefined>(
    async (identities) => {
      running = true;
      try {
        const found = await query([...new Set(identities)]);
        return identities.map((i) => found.get(i));
      } catch (err) {
        return identities.map(() => (err instanceof Error ? err : new Error(String(err))));
      } finally {
        running = false;
        const dispatch = next;
        next = undefined;
        dispatch?.();
      }
    },
    {
      cache: false,
      // The calls of this turn of the event loop go together; while a query runs, the batch waits for it.
      batchScheduleFn: (dispatch) => (running ? (next = dispatch) : process.nextTick(dispatch)),
    },
  );
}

function withTimeout<T>(promise: PromiseLike<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    Promise.resolve(promise),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

export function createReadRouter(opts: ReadRouterOptions): ReadRouter & { positions: WritePositions } {
  const { primary } = opts;
  const ttlSeconds = positionTtlMs(opts.maxLagMs) / 1000;
  const historyMs = opts.maxLagMs + 5_000;
  let primaryMonitor = primary.openMonitor();
  /** The primary's WAL insert position, sampled at each poll, newest last. */
  const history: { at: number; lsn: bigint }[] = [];
  const replicas: Replica[] = opts.replicas.map((client) => ({
    client,
    monitor: client.openMonitor(),
    polledAt: undefined,
    recovering: false,
    replay: 0n,
    snapshot: undefined,
    lagMs: Infinity,
    lagBytes: 0,
    reads: 0,
    wasUp: undefined,
  }));
  let primaryReads = 0;
  let turn = 0;
  /** Positions of the writes this process made: identity -> xid, until expiry. */
  const ownWrites = new Map<string, { xid: bigint; until: number }>();

  const inRotation = (r: Replica, now = Date.now()): boolean =>
    r.polledAt !== undefined && now - r.polledAt <= FRESH_MS && r.recovering && r.snapshot !== undefined && r.lagMs <= opts.maxLagMs;

  const report = (r: Replica, err?: unknown) => {
    const up = inRotation(r);
    if (up === r.wasUp) return;
    r.wasUp = up;
    if (up) log.info("database replica in rotation", { replica: r.client.name, lagMs: Math.round(r.lagMs) });
    else if (r.polledAt === undefined) log.warn("database replica out of rotation: not answering; its reads go to the primary", { replica: r.client.name, err });
    else log.warn("database replica out of rotation: lagging; its reads go to the primary", { replica: r.client.name, lagMs: Math.round(r.lagMs), recovering: r.recovering });
  };
  const markDown = (r: Replica, err: unknown) => {
    r.polledAt = undefined;
    report(r, err);
  };

  /** An upper bound of how far behind a replica that has replayed `replay` is, by the sampled history. */
  const lagOf = (replay: bigint, now: number): number => {
    const latest = history.at(-1);
    if (!latest || now - latest.at > FRESH_MS) return Infinity;
    if (replay >= latest.lsn) return 0;
    for (let i = history.length - 1; i >= 0; i--) if (history[i]!.lsn <= replay) return now - history[i]!.at;
    return Infinity;
  };

  const pollReplica = async (r: Replica): Promise<void> => {
    try {
      const [row] = await withTimeout(
        r.monitor<{ recovering: boolean; replay: string | null; snapshot: string }[]>`select pg_is_in_recovery() as recovering, pg_last_wal_replay_lsn()::text as replay, pg_current_snapshot()::text as snapshot`,
        POLL_TIMEOUT_MS,
        `replica ${r.client.name}`,
      );
      const now = Date.now();
      r.recovering = row!.recovering && row!.replay !== null;
      r.replay = row!.replay ? parseLsn(row!.replay) : 0n;
      r.snapshot = parseSnapshot(row!.snapshot);
      r.lagMs = lagOf(r.replay, now);
      const latest = history.at(-1);
      r.lagBytes = latest && latest.lsn > r.replay ? Number(latest.lsn - r.replay) : 0;
      r.polledAt = now;
      report(r);
    } catch (err) {
      if (!isConnectionError(err)) {
        // Timed out or broken: a fresh connection for the next poll (the old one may be stuck).
        const stuck = r.monitor;
        r.monitor = r.client.openMonitor();
        void stuck.end({ timeout: 0 }).catch(() => {});
      }
      markDown(r, err);
    }
  };

  let polling: Promise<void> | undefined;
  const pollOnce = async (): Promise<void> => {
    try {
      const [row] = await withTimeout(primaryMonitor<{ lsn: string }[]>`select pg_current_wal_insert_lsn()::text as lsn`, POLL_TIMEOUT_MS, "primary");
      const at = Date.now();
      history.push({ at, lsn: recordEndOf(parseLsn(row!.lsn)) });
      while (history.length > 1 && at - history[0]!.at > historyMs) history.shift();
    } catch (err) {
      if (!isConnectionError(err)) {
        const stuck = primaryMonitor;
        primaryMonitor = primary.openMonitor();
        void stuck.end({ timeout: 0 }).catch(() => {});
      }
      // Without a fresh sample every lag is unknown: the replicas drop out (lagOf) until the primary answers.
    }
    await Promise.all(replicas.map(pollReplica));
  };
  const poll = (): Promise<void> => (polling ??= pollOnce().finally(() => (polling = undefined)));
  const ticker = setInterval(() => void poll(), POLL_MS);
  ticker.unref();
  const pruner = setInterval(() => {
    void primaryMonitor`delete from read_positions where expire_time < now()`.catch((err: unknown) => log.warn("could not remove expired read positions", { err }));
    const now = Date.now();
    for (const [identity, own] of ownWrites) if (own.until <= now) ownWrites.delete(identity);
  }, PRUNE_MS);
  pruner.unref();

  const lookups = positionLookups(async (identities) => {
    const rows = (await primary.pool.unsafe("select identity, xid::text as xid from read_positions where identity = any($1::text[]) and expire_time > now()", [identities], {
      prepare: true,
    })) as unknown as { identity: string; xid: string }[];
    return new Map(rows.map((r) => [r.identity, BigInt(r.xid)]));
  });
  const lookup = (identity: string): Promise<bigint | undefined> => lookups.load(identity);

  const choose = async (identity: string | undefined): Promise<Replica | undefined> => {
    const now = Date.now();
    let candidates = replicas.filter((r) => inRotation(r, now));
    if (candidates.length === 0) return undefined;
    if (identity !== undefined) {
      const own = ownWrites.get(identity);
      if (own && own.until > now && !candidates.some((r) => endedIn(r.snapshot!, own.xid))) return undefined;
      const xid = await lookup(identity);
      if (xid !== undefined) candidates = candidates.filter((r) => endedIn(r.snapshot!, xid));
      if (candidates.length === 0) return undefined;
    }
    return candidates[turn++ % candidates.length];
  };

  /**
   * A client for Drizzle whose queries run on `replica` (the primary when it is null), counted; a replica's
   * query that fails on the connection (or that the replica refuses) runs again on the primary, and a
   * transaction always runs on the primary.
   */
  const readClient = (replica: Replica | null): Sql => {
    const run = async <T>(query: (pool: Sql) => PromiseLike<T>): Promise<T> => {
      if (replica && replica.polledAt !== undefined) {
        try {
          const out = await query(replica.client.pool);
          replica.reads++;
          return out;
        } catch (err) {
          const state = sqlStateOf(err);
          if (isConnectionError(err)) markDown(replica, err);
          else if (state === "25006") log.warn("a statement of a read-only call wrote: run again on the primary (a routing bug to report)", { replica: replica.client.name, err });
          else if (!RETRIED_STATES.has(state ?? "")) throw err;
        }
      }
      const out = await query(primary.pool);
      primaryReads++;
      return out;
    };
    // Drizzle awaits the query, or its .values(): each runs when awaited.
    const unsafe = (...args: Parameters<Sql["unsafe"]>) => ({
      values: () => run((pool) => pool.unsafe(...args).values()),
      then: <A, B>(onFulfilled?: (value: unknown) => A, onRejected?: (reason: unknown) => B) => run((pool) => pool.unsafe(...args)).then(onFulfilled, onRejected),
    });
    const begin = (...args: unknown[]) => (primary.pool.begin as (...a: unknown[]) => Promise<unknown>)(...args);
    return new Proxy(primary.pool, {
      get(target, property, receiver) {
        if (property === "unsafe") return unsafe;
        if (property === "begin") return begin;
        return Reflect.get(target, property, receiver) as unknown;
      },
    });
  };
  const primaryReadDb = opts.database(readClient(null));
  const replicaDbs = new Map(replicas.map((r) => [r, opts.database(readClient(r))]));

  const positions: WritePositions = {
    async record(executor, identities) {
      for (const identity of identities) {
        const rows = (await executor.execute(sql`
          insert into read_positions (identity, xid, expire_time)
          values (${identity}, pg_current_xact_id()::text::bigint, now() + make_interval(secs => ${ttlSeconds}))
          on conflict (identity) do update set xid = excluded.xid, expire_time = excluded.expire_time
          returning xid::text as xid`)) as unknown as { xid: string }[];
        const xid = rows[0]?.xid;
        if (xid === undefined) continue;
        if (ownWrites.size >= OWN_WRITES_MAX) ownWrites.delete(ownWrites.keys().next().value!);
        ownWrites.delete(identity);
        ownWrites.set(identity, { xid: BigInt(xid), until: Date.now() + ttlSeconds * 1000 });
      }
    },
  };

  void poll();
  return {
    target: async (identity) => {
      const replica = await choose(identity);
      return replica ? replicaDbs.get(replica)! : primaryReadDb;
    },
    positions,
    poll,
    stats: () => ({
      primaryReads,
      replicas: replicas.map((r) => {
        const down = r.polledAt === undefined || Date.now() - r.polledAt > FRESH_MS;
        return {
          replica: r.client.name,
          state: inRotation(r) ? "up" : down ? "down" : "lagging",
          lagSeconds: down ? undefined : Number.isFinite(r.lagMs) ? r.lagMs / 1000 : undefined,
          lagBytes: down ? undefined : r.lagBytes,
          reads: r.reads,
        };
      }),
    }),
    async close() {
      clearInterval(ticker);
      clearInterval(pruner);
      await polling?.catch(() => {});
      await Promise.all([primaryMonitor.end({ timeout: 5 }), ...replicas.map((r) => r.monitor.end({ timeout: 5 })), ...replicas.map((r) => r.client.close())]);
    },
  };
}

/** Routes the read-only calls of `db` (the primary's database) with `router`. */
export function routeReads(db: object, router: ReadRouter & { positions: WritePositions }): void {
  routingOf.set(db, { positions: router.positions, target: (identity) => router.target(identity) });
}
