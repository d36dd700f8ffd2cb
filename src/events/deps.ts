// What the events domain is built from: its service, and its delivery worker.
import type { Database } from "../db/client.js";
import type { KernelDeps } from "../kernel/module.js";
import type { DeliveryOptions } from "./delivery/worker.js";
import type { SinkPolicy } from "./sinks.js";

export interface EventsDeps extends KernelDeps {
  /** Which event sinks subscriptions may name, and deliveries reach (events/sinks.ts). */
  sinks: SinkPolicy;
  /** Database notifications (Database.listen): the worker hears of new events at once. */
  listen: Database["listen"];
  /** The delivery worker's settings (config.ts EVENTS_*). */
  delivery?: Partial<DeliveryOptions> | undefined;
}
