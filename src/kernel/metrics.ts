// Helpers for metrics that read counts kept elsewhere (prom-client), shared by the server and the workers.
import type { Counter } from "prom-client";

/** A counter whose value another part of the server keeps: set from it at each scrape. */
export function setCounter(counter: Counter<string>, value: number, labels?: Record<string, string>): void {
  if (labels) {
    counter.remove(labels);
    counter.inc(labels, value);
  } else {
    counter.reset();
    counter.inc(value);
  }
}
