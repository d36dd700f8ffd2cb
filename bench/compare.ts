// The server against its peers within one run: medians of interleaved rounds, and per call the ratios the
// goals are stated in (requests per second, and whole-system CPU per request: the answering process plus the
// PostgreSQL backends serving it).
import { textTable, type Result } from "./load.js";

/** The median of each column over the rounds of one target (errors: their sum). */
export function medianOf(results: readonly Result[]): Result {
  const median = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    const mid = sorted.length >> 1;
    return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  };
  const first = results[0]!;
  return {
    ...first,
    requests: median(results.map((r) => r.requests)),
    errors: results.reduce((a, r) => a + r.errors, 0),
    rps: median(results.map((r) => r.rps)),
    p50: median(results.map((r) => r.p50)),
    p99: median(results.map((r) => r.p99)),
    cpu: Object.fromEntries(Object.keys(first.cpu).map((l) => [l, median(results.map((r) => r.cpu[l]!))])),
  };
}

/** Whole-system CPU per request: the server's (or peer's) process plus the PostgreSQL backends serving it. */
export function wholeCpu(r: Result): number {
  return (r.cpu.server ?? 0) + (r.cpu.PostgreSQL ?? 0);
}

/** The goals against a peer: whole-system CPU per request at most this ratio, req/s at least that one. */
export const PEER_GOALS = { wholeCpu: 0.85, rps: 1.1 } as const;

/**
 * One line per (server, peer) pair: req/s, p50, server / PostgreSQL / whole CPU per request of each, the
 * ratios, and whether each goal is met.
 */
export function versusPeerTable(pairs: readonly (readonly [call: string, server: Result, peer: Result])[]): string {
  const ms = (v: number | undefined) => (v === undefined ? "" : v.toFixed(3));
  const rows = pairs.map(([call, s, p]) => {
    const cpuRatio = wholeCpu(s) / wholeCpu(p);
    const rpsRatio = s.rps / p.rps;
    return [
      call,
      `${s.rps.toFixed(0)} / ${p.rps.toFixed(0)}`,
      rpsRatio.toFixed(2),
      `${s.p50.toFixed(2)} / ${p.p50.toFixed(2)}`,
      `${ms(s.cpu.server)} / ${ms(p.cpu.server)}`,
      `${ms(s.cpu.PostgreSQL)} / ${ms(p.cpu.PostgreSQL)}`,
      `${ms(wholeCpu(s))} / ${ms(wholeCpu(p))}`,
      cpuRatio.toFixed(2),
      `${cpuRatio <= PEER_GOALS.wholeCpu ? "yes" : "no"} / ${rpsRatio >= PEER_GOALS.rps ? "yes" : "no"}`,
    ];
  });
  const head = [
    "call (this server / peer)",
    "req/s",
    "x req/s",
    "p50 ms",
    "server CPU ms",
    "PostgreSQL CPU ms",
    "whole CPU ms",
    "x whole CPU",
    `met: CPU<=${PEER_GOALS.wholeCpu} / req/s>=${PEER_GOALS.rps}`,
  ];
  return textTable(head, rows);
}
