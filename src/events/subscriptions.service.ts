// SubscriptionsService: the HTTP endpoints (sinks) that receive the CloudEvents of a group and of every group
// beneath it. Create, Get and Delete are authorized by the auth interceptor before they run, from the group
// in the request's uid (or parent); ListSubscriptions is unscoped and filters to the caller's visible scopes.
// Delivery to the sinks is not here: the delivery workers expand each customer event into one delivery per
// subscription its writer saw (events/delivery/queue.ts; a subscription receives the events written after it
// was created, and its own creation's) and send them.
//
// Decisions:
// - The sink is checked by the server's sink policy (events/sinks.ts) before anything is written: an https
//   URL (plain http to loopback hosts in development), no credentials or fragment, at most 2,048 characters;
//   in production its host must resolve to public addresses only. It is stored as the URL parser serialises it
//   (sinks.ts normalizeSink), so spellings of one URL are one sink.
// - One subscription per sink in a group: a second is ALREADY_EXISTS naming the first.
// - The only writable field is the sink: OUTPUT_ONLY fields (uid, times) sent by a client are ignored.
// - ListSubscriptions defaults to create_time order; create_time, update_time and uid may be ordered by.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  ListSubscriptionsResponseSchema,
  SubscriptionSchema,
  SubscriptionsService,
} from "../../gen/chainguard/platform/events/v2/subscriptions_pb.js";
import { listScopesOf } from "../kernel/auth/index.js";
import { throwIfAny } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { bindService, type ServiceBinding } from "../kernel/module.js";
import type { EventsDeps } from "./deps.js";
import { normalizeSink, sinkViolations } from "./sinks.js";
import { toSubscription } from "./subscriptions.mapper.js";
import { createSubscriptionStore } from "./subscriptions.store.js";

export const subscriptionList = defineListSpec({
  name: "events.v2.ListSubscriptions",
  message: SubscriptionSchema,
  orderBy: ["create_time", "update_time"],
  defaultOrder: "create_time",
});

export function subscriptionsBindings(deps: EventsDeps): ServiceBinding[] {
  const subscriptions = storeFactory(deps.db, createSubscriptionStore);

  const impl: ServiceImpl<typeof SubscriptionsService> = {
    async createSubscription(req, ctx) {
      const sink = req.subscription?.sink ?? "";
      throwIfAny(await sinkViolations(sink, deps.sinks, "subscription.sink"));
      return toSubscription(await subscriptions(ctx).create(req.parent, { sink: normalizeSink(sink) }));
    },

    async getSubscription(req, ctx) {
      return toSubscription(await subscriptions(ctx).get(req.uid));
    },

    async listSubscriptions(req, ctx) {
      const scopes = await listScopesOf(ctx);
      const page = await subscriptions(ctx).list(deps.lists.plan(req, subscriptionList, scopes), { scopes, uidp: req.uidp });
      return create(ListSubscriptionsResponseSchema, { subscriptions: page.rows.map(toSubscription), ...pageFields(page) });
    },

    async deleteSubscription(req, ctx) {
      await subscriptions(ctx).remove(req.uid);
      return {};
    },
  };

  return [bindService(SubscriptionsService, impl)];
}
