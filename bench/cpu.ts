// CPU time of the processes a measurement exercises, read from /proc (Linux): utime + stime of every thread
// (the main thread, V8's garbage-collector helpers, libuv's pool), so a figure counts all the work a request
// caused in that process. Throughput and latency move with whatever else the machine runs; CPU per request
// does much less, so ratios of CPU per request compare fairly across runs on a shared machine.
//
//   const meters = [processCpu("server", api.serverPid), backendsCpu("PostgreSQL", admin, { not: "bench" })];
//   const result = await measure(name, send, { ...load, cpu: meters });   // result.cpu: ms per request, by label
import { readFileSync } from "node:fs";
import type postgres from "postgres";

/**
 * The CPU time a process has used so far (user + system, every thread), in seconds, from /proc/<pid>/stat
 * (in clock ticks of 1/100 s).
 */
export function cpuSecondsOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  // The fields after the command name (in parentheses, which may hold spaces): utime and stime are the
  // 14th and 15th fields of the line, the 12th and 13th after ")".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * User and system CPU seconds apart, from /proc/<pid>/stat: the process's own (every thread), or with `reaped`
 * the children it has waited for (for this process: the clients it ran, such as skopeo).
 */
export function userSys(pid: number | "self", reaped = false): { user: number; sys: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const at = reaped ? 13 : 11;
  return { user: Number(f[at]) / 100, sys: Number(f[at + 1]) / 100 };
}

/** The CPU of some processes over a window: `begin` starts it and resolves with the function ending it. */
export interface CpuMeter {
  /** The column this meter fills ("server", "PostgreSQL", ...). */
  label: string;
  /** Starts a window; the returned function ends it and resolves with the CPU seconds used within it. */
  begin(): Promise<() => Promise<number>>;
}

/** CPU seconds per pid, leaving out processes that are gone. */
function sample(pids: Iterable<number>): Map<number, number> {
  const out = new Map<number, number>();
  for (const pid of pids) {
    try {
      out.set(pid, cpuSecondsOf(pid));
    } catch {
      // exited
    }
  }
  return out;
}

/** Sum over the end sample of what each process used since the start sample (a new process: all of it). */
function used(start: Map<number, number>, end: Map<number, number>): number {
  let sum = 0;
  for (const [pid, s] of end) sum += s - (start.get(pid) ?? 0);
  return sum;
}

/** The CPU of fixed processes (a server, a peer, a helper script). */
export function processCpu(label: string, ...pids: number[]): CpuMeter {
  return {
    label,
    async begin() {
      const start = sample(pids);
      return async () => used(start, sample(pids));
    },
  };
}

/**
 * The CPU of this process (the load generator itself, with its closed loop: an upper bound of a client's
 * share), from process.cpuUsage, which counts every thread as /proc does but in microseconds.
 */
export function selfCpu(label: string): CpuMeter {
  return {
    label,
    async begin() {
      const start = process.cpuUsage();
      return async () => {
        const u = process.cpuUsage(start);
        return (u.user + u.system) / 1e6;
      };
    },
  };
}

/**
 * The application_name of the benchmarks' own connections (raw-SQL pools, the meters' queries), so the
 * PostgreSQL backends serving a server can be told from theirs.
 */
export const BENCH_APPLICATION = "bench";

/**
 * The pids of a database's client backends, chosen by application_name (`only` one name, or `not` one), the
 * asking connection's own left out.
 */
export async function backendPids(admin: postgres.Sql, who: { only: string } | { not: string | readonly string[] }): Promise<number[]> {
  const rows =
    "only" in who
      ? await admin<{ pid: number }[]>`
          select pid from pg_stat_activity
          where datname = current_database() and backend_type = 'client backend' and application_name = ${who.only}
            and pid <> pg_backend_pid()`
      : await admin<{ pid: number }[]>`
          select pid from pg_stat_activity
          where datname = current_database() and backend_type = 'client backend'
            and application_name <> all(${typeof who.not === "string" ? [who.not] : [...who.not]})
            and pid <> pg_backend_pid()`;
  return rows.map((r) => r.pid);
}

/**
 * The CPU of the PostgreSQL backends serving some clients of the database `admin` is connected to (the
 * server runs on this machine, so /proc has them). Backends are listed at both ends of the window, so one
 * a pool opens meanwhile is counted whole and one it closes is lost: pools here keep their connections.
 */
export function backendsCpu(label: string, admin: postgres.Sql, who: { only: string } | { not: string | readonly string[] }): CpuMeter {
  return {
    label,
    async begin() {
      const start = sample(await backendPids(admin, who));
      return async () => used(start, sample(await backendPids(admin, who)));
    },
  };
}

/** Runs `body` inside one window of every meter; resolves with its result and the CPU seconds by label. */
export async function metered<T>(meters: readonly CpuMeter[], body: () => Promise<T>): Promise<{ value: T; cpu: Record<string, number> }> {
  const ends = await Promise.all(meters.map((m) => m.begin()));
  const value = await body();
  const seconds = await Promise.all(ends.map((end) => end()));
  return { value, cpu: Object.fromEntries(meters.map((m, i) => [m.label, seconds[i]!])) };
}
