// The events domain: subscriptions, and the worker that delivers their events.
import { SubscriptionsService } from "../../gen/chainguard/platform/events/v2/subscriptions_pb.js";
import type { DomainModule } from "../kernel/module.js";
import type { EventsDeps } from "./deps.js";
import { startDeliveryWorker, type DeliveryWorker } from "./delivery/worker.js";
import { subscriptionsBindings } from "./subscriptions.service.js";

export const eventsModule: DomainModule<EventsDeps, DeliveryWorker> = {
  name: "events",
  services: [SubscriptionsService],
  create: (deps) => ({
    bindings: subscriptionsBindings(deps),
    startWorker: () => startDeliveryWorker({ db: deps.db, keys: deps.keys, issuer: deps.issuerUrl, sinks: deps.sinks, listen: deps.listen, options: deps.delivery }),
  }),
};
