// Metrics in the Prometheus text format (prom-client), one registry per server instance (tests run several
// servers in one process): requests, their latency and those in flight, by protocol and method; the
// database pool and query errors; event delivery; the process's default metrics. What other parts count
// already (the pool gate, the delivery worker) is read when Prometheus scrapes, never on the request path.
//
// Label values are bounded: a service and method come from the served descriptors (or a fixed name for the
// server's own routes, "unknown" for a path that is none of them), a protocol is one of four, a code one of
// the seventeen gRPC codes.
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from "prom-client";
import type { Code } from "@connectrpc/connect";
import type { DatabaseStats } from "../db/client.js";
import { setCounter } from "../kernel/metrics.js";
import type { RunningWorker } from "../kernel/module.js";
import type { Protocol } from "../kernel/request.js";

/** The gRPC code names (the canonical ones, as google.rpc.Code spells them), by number. */
const CODE_NAMES = [
  "OK",
  "CANCELLED",
  "UNKNOWN",
  "INVALID_ARGUMENT",
  "DEADLINE_EXCEEDED",
  "NOT_FOUND",
  "ALREADY_EXISTS",
  "PERMISSION_DENIED",
  "RESOURCE_EXHAUSTED",
  "FAILED_PRECONDITION",
  "ABORTED",
  "OUT_OF_RANGE",
  "UNIMPLEMENTED",
  "INTERNAL",
  "UNAVAILABLE",
  "DATA_LOSS",
  "UNAUTHENTICATED",
] as const;

export function codeName(code: Code | number): string {
  return CODE_NAMES[code] ?? "UNKNOWN";
}

/** Latency buckets, in seconds: from a cached read to the request deadline's order of magnitude. */
const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export interface Metrics {
  readonly registry: Registry;
  /** A request arrived (in flight until `finished`). */
  started(protocol: Protocol): void;
  /** A request ended: its labels, outcome and duration. */
  finished(protocol: Protocol, service: string, method: string, code: Code | number, seconds: number): void;
  /** Reads the database's pool and error counts at each scrape. */
  observeDatabase(stats: () => DatabaseStats): void;
  /** Reads the delivery worker's counts and backlog at each scrape. */
  observeWorker(worker: RunningWorker): void;
  /** The exposition: content type and text. */
  render(): Promise<{ contentType: string; body: string }>;
}

interface Series {
  labels: { service: string; method: string; protocol: Protocol };
  duration: Histogram.Internal<string>;
  /** Requests answered, by gRPC code number. */
  counts: number[];
}

export function createMetrics(): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });

  // Counts are kept here as plain numbers and handed to prom-client when scraped: each of its calls hashes
  // a label object, several per request otherwise. The latency histogram is still observed per request.
  const series = new Map<string, Series>();
  const inFlightOf = new Map<Protocol, number>();

  const labelNames = ["service", "method", "protocol"] as const;
  new Counter({
    name: "apiserver_requests_total",
    help: "Requests answered, by API service, method, protocol (grpc, grpc-web, connect, rest) and gRPC code",
    labelNames: [...labelNames, "code"],
    registers: [registry],
    collect() {
      this.reset();
      for (const s of series.values()) s.counts.forEach((n, code) => n > 0 && this.inc({ ...s.labels, code: codeName(code) }, n));
    },
  });
  const duration = new Histogram({
    name: "apiserver_request_duration_seconds",
    help: "Time from a request's arrival to the end of its response, by API service, method and protocol",
    labelNames,
    buckets: DURATION_BUCKETS,
    registers: [registry],
  });
  new Gauge({
    name: "apiserver_requests_in_flight",
    help: "Requests being answered, by protocol",
    labelNames: ["protocol"],
    registers: [registry],
    collect() {
      for (const [protocol, n] of inFlightOf) this.set({ protocol }, n);
    },
  });

  const metrics: Metrics = {
    registry,
    started(protocol) {
      inFlightOf.set(protocol, (inFlightOf.get(protocol) ?? 0) + 1);
    },
    finished(protocol, service, method, code, seconds) {
      inFlightOf.set(protocol, (inFlightOf.get(protocol) ?? 1) - 1);
      const key = `${protocol} ${service} ${method}`;
      let s = series.get(key);
      // The histogram's child of each label set, kept: prom-client validates the labels when it makes one.
      if (!s) series.set(key, (s = { labels: { service, method, protocol }, duration: duration.labels(service, method, protocol), counts: [] }));
      s.duration.observe(seconds);
      s.counts[code] = (s.counts[code] ?? 0) + 1;
    },
    observeDatabase(stats) {
      registerDatabase(registry, stats);
    },
    observeWorker(worker) {
      worker.observe?.(registry);
    },
    async render() {
      return { contentType: registry.contentType, body: await registry.metrics() };
    },
  };
  return metrics;
}

function registerDatabase(registry: Registry, stats: () => DatabaseStats): void {
  // Each reads the counts when scraped (a few numbers kept by the pool gate and the error counter).
  const pool = () => stats().pool;
  const gauges: [name: string, help: string, field: "size" | "inUse" | "waiting"][] = [
    ["apiserver_db_pool_size", "Connections the PostgreSQL pool may open", "size"],
    ["apiserver_db_pool_in_use", "Queries and transactions holding a pool connection", "inUse"],
    ["apiserver_db_pool_waiting", "Queries and transactions waiting for a pool connection", "waiting"],
  ];
  for (const [name, help, field] of gauges) {
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        const p = pool();
        if (p) this.set(p[field]);
      },
    });
  }
  new Counter({
    name: "apiserver_db_pool_acquire_timeouts_total",
    help: "Queries refused because no pool connection became free in time (answered UNAVAILABLE, DATABASE_BUSY)",
    registers: [registry],
    collect() {
      const p = pool();
      if (p) setCounter(this, p.acquireTimeouts);
    },
  });
  registerReplicas(registry, stats);
  new Counter({
    name: "apiserver_db_query_errors_total",
    help: "Queries and transactions the database failed, by kind (connection, statement_timeout, serialization, constraint, other)",
    labelNames: ["kind"],
    registers: [registry],
    collect() {
      for (const [kind, n] of Object.entries(stats().queryErrors)) setCounter(this, n, { kind });
    },
  });
}

/**
 * Read replicas (db/read-routing.ts), when there are any: the reads of read-only calls by where they ran
 * (target "primary" with replica "", or "replica" with the replica's host:port), and each replica's state
 * and lag. A replica that is down has no lag series.
 */
function registerReplicas(registry: Registry, stats: () => DatabaseStats): void {
  if (!stats().reads) return;
  const reads = () => stats().reads!;
  new Counter({
    name: "apiserver_db_reads_total",
    help: "Queries of read-only calls outside transactions, by where they ran (primary or a replica)",
    labelNames: ["target", "replica"],
    registers: [registry],
    collect() {
      const r = reads();
      setCounter(this, r.primaryReads, { target: "primary", replica: "" });
      for (const replica of r.replicas) setCounter(this, replica.reads, { target: "replica", replica: replica.replica });
    },
  });
  new Gauge({
    name: "apiserver_db_replica_up",
    help: "1 while a replica is in rotation (answering, and no further behind than REPLICA_MAX_LAG), else 0",
    labelNames: ["replica"],
    registers: [registry],
    collect() {
      for (const r of reads().replicas) this.set({ replica: r.replica }, r.state === "up" ? 1 : 0);
    },
  });
  const lag: [name: string, help: string, field: "lagSeconds" | "lagBytes"][] = [
    ["apiserver_db_replica_lag_seconds", "How far a replica's replay is behind the primary, in seconds (an upper bound, at the last poll)", "lagSeconds"],
    ["apiserver_db_replica_lag_bytes", "Bytes of WAL the primary had at the last poll that a replica had not replayed", "lagBytes"],
  ];
  for (const [name, help, field] of lag) {
    new Gauge({
      name,
      help,
      labelNames: ["replica"],
      registers: [registry],
      collect() {
        this.reset();
        for (const r of reads().replicas) {
          const value = r[field];
          if (value !== undefined) this.set({ replica: r.replica }, value);
        }
      },
    });
  }
}
