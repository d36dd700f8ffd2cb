// The delivery worker's metrics, read from its counts and the queue when Prometheus scrapes.
import { Counter, Gauge, type Registry } from "prom-client";
import { log } from "../../kernel/log.js";
import { setCounter } from "../../kernel/metrics.js";

/** What the metrics read of the worker (worker.ts DeliveryWorker). */
interface Observed {
  stats: Readonly<{ attempts: number; delivered: number; retried: number; failed: number; inFlight: number }>;
  depth(): Promise<{ pending: number; due: number }>;
}

export function registerDeliveryMetrics(registry: Registry, worker: Observed): void {
  new Gauge({
    name: "apiserver_events_delivery_backlog",
    help: "Pending event deliveries (state pending: all of them, due: those due now), read from the database at each scrape",
    labelNames: ["state"],
    registers: [registry],
    async collect() {
      try {
        const depth = await worker.depth();
        this.set({ state: "pending" }, depth.pending);
        this.set({ state: "due" }, depth.due);
      } catch (err) {
        // The database does not answer: the backlog is left out of this scrape, the rest is served.
        this.reset();
        log.debug("metrics: cannot read the delivery backlog", { err });
      }
    },
  });
  new Counter({
    name: "apiserver_events_delivery_attempts_total",
    help: "Delivery attempts made by this process",
    registers: [registry],
    collect() {
      setCounter(this, worker.stats.attempts);
    },
  });
  new Counter({
    name: "apiserver_events_deliveries_total",
    help: "Delivery attempts by outcome: delivered (2xx), retried (will be tried again), failed (given up)",
    labelNames: ["outcome"],
    registers: [registry],
    collect() {
      setCounter(this, worker.stats.delivered, { outcome: "delivered" });
      setCounter(this, worker.stats.retried, { outcome: "retried" });
      setCounter(this, worker.stats.failed, { outcome: "failed" });
    },
  });
  new Gauge({
    name: "apiserver_events_deliveries_in_flight",
    help: "Deliveries being sent by this process",
    registers: [registry],
    collect() {
      this.set(worker.stats.inFlight);
    },
  });
}
