// A bound on the wait for a database connection. postgres.js never refuses a query: when every connection is
// busy it pipelines the query behind another's on a busy connection, or queues it, and the query then waits
// as long as those before it take (a slow statement, a long transaction), however long that is. The gate in
// front of the pool admits as many queries and transactions at a time as the pool has connections; the
// others wait for a turn at most `timeoutMs`, then fail with UNAVAILABLE (reason DATABASE_BUSY, with
// RetryInfo), so calls meeting an exhausted pool are answered instead of piling up without end.
import type { Sql } from "postgres";
import { ConnectError } from "@connectrpc/connect";
import { unavailable } from "../kernel/errors/index.js";

interface PoolGateOptions {
  /** How many queries or transactions run at once: the pool's size. */
  permits: number;
  /** How long a query waits for a turn before it fails. */
  timeoutMs: number;
}

/** What a client refused by a busy pool is told to wait before retrying. */
const RETRY_AFTER_MS = 1_000;

interface PoolGate {
  /** Runs `fn` once a turn is free (at most timeoutMs from now), releasing the turn when it settles. */
  run<T>(fn: () => Promise<T>): Promise<T>;
  /** Its use now, and the refusals so far (for metrics). */
  stats(): PoolGateStats;
}

export interface PoolGateStats {
  size: number;
  /** Turns taken: queries and transactions holding a connection. */
  inUse: number;
  /** Queries and transactions waiting for a turn. */
  waiting: number;
  /** Those refused after waiting timeoutMs (DATABASE_BUSY). */
  acquireTimeouts: number;
}

export function createPoolGate(opts: PoolGateOptions): PoolGate {
  let free = opts.permits;
  let acquireTimeouts = 0;
  const waiting: Array<() => void> = [];
  const acquire = (): Promise<void> => {
    if (free > 0) {
      free--;
      return Promise.resolve();
    }
    return new Promise<void>((resolve, reject) => {
      const grant = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        waiting.splice(waiting.indexOf(grant), 1);
        acquireTimeouts++;
        reject(unavailable(`The database is busy: no connection became free within ${opts.timeoutMs} ms; retry later`, RETRY_AFTER_MS, "DATABASE_BUSY"));
      }, opts.timeoutMs);
      waiting.push(grant);
    });
  };
  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else free++;
  };
  return {
    stats: () => ({ size: opts.permits, inUse: opts.permits - free, waiting: waiting.length, acquireTimeouts }),
    async run(fn) {
      await acquire();
      try {
        return await fn();
      } finally {
        release();
      }
    },
  };
}

/**
 * The client with its pooled work behind the gate: `unsafe` (every query Drizzle runs outside a transaction)
 * and `begin` (a transaction holds its turn until it ends; the queries inside run on its own connection).
 * Everything else (listen, end, options) is the client's own.
 */
export function gatePool(client: Sql, gate: PoolGate, onError: (err: unknown) => void = () => {}): Sql {
  // A failure of the database (not the gate's own refusal, counted by the gate) is reported before it is rethrown.
  const failed = (err: unknown): never => {
    if (!(err instanceof ConnectError)) onError(err);
    throw err;
  };
  const unsafe = (...args: Parameters<Sql["unsafe"]>) => {
    // Drizzle awaits the query, or its .values(): each runs the query once a turn is free.
    const rows = () => gate.run(async () => await client.unsafe(...args).catch(failed));
    return {
      values: () => gate.run(async () => await client.unsafe(...args).values().catch(failed)),
      then: <A, B>(onFulfilled?: (value: unknown) => A, onRejected?: (reason: unknown) => B) => rows().then(onFulfilled, onRejected),
    };
  };
  const begin = (...args: unknown[]) => gate.run(() => (client.begin as (...a: unknown[]) => Promise<unknown>)(...args).catch(failed));
  return new Proxy(client, {
    get(target, property, receiver) {
      if (property === "unsafe") return unsafe;
      if (property === "begin") return begin;
      return Reflect.get(target, property, receiver) as unknown;
    },
  });
}
