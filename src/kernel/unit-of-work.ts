// The unit of work: every method that declares an event (apiserver.options.v1.event) runs in one database
// transaction, and once its handler has succeeded, the event is recorded in the outbox (outbox.ts,
// db/schema/outbox.ts) in that same transaction. A mutation that fails records nothing and changes nothing;
// one that commits always has its event.
//
// Handlers reach the transaction only through their stores: `storeFactory(db, createXStore)` gives, per
// call, the store over the call's transaction inside a unit of work and the one over the database
// otherwise. A handler opens no transaction of its own, and reads nothing outside its stores while in a unit
// of work (the embedded database runs one transaction at a time: a read beside it would wait on itself).
import { create, type DescMethod, type Message, type Registry } from "@bufbuild/protobuf";
import { createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { outboxEvents } from "../db/schema/outbox.js";
import { accessKey } from "./auth/principal.js";
import { eventPlanOf, outboxEventOf, type EventPlan } from "./outbox.js";
import type { Executor } from "./store.js";

const transactionKey = createContextKey<Executor | undefined>(undefined, { description: "the call's unit of work" });

/**
 * The store of a call: over the call's transaction in a unit of work (made once per transaction), else the
 * one made over `db` at start-up.
 */
export function storeFactory<S>(db: Executor, make: (db: Executor) => S): (ctx: HandlerContext) => S {
  const shared = make(db);
  const perTransaction = new WeakMap<Executor, S>();
  return (ctx) => {
    const tx = ctx.values.get(transactionKey);
    if (!tx) return shared;
    let store = perTransaction.get(tx);
    if (!store) perTransaction.set(tx, (store = make(tx)));
    return store;
  };
}

export interface UnitOfWorkOptions {
  db: Executor;
  /** Types for the JSON of event bodies (Any). */
  registry: Registry;
}

/** The interceptor that runs each event-declaring method as a unit of work (innermost: after authorization). */
export function createUnitOfWork(opts: UnitOfWorkOptions): Interceptor {
  const plans = new Map<DescMethod, EventPlan | null>();
  const planOf = (method: DescMethod): EventPlan | null => {
    let plan = plans.get(method);
    if (plan === undefined) plans.set(method, (plan = eventPlanOf(method) ?? null));
    return plan;
  };
  return (next) => async (req) => {
    const plan = planOf(req.method);
    if (!plan || req.stream) return next(req);
    return opts.db.transaction(async (tx) => {
      req.contextValues.set(transactionKey, tx);
      const res = await next(req);
      if (!res.stream) {
        const actor = req.contextValues.get(accessKey)?.principal.identityUid ?? "";
        await tx.insert(outboxEvents).values(outboxEventOf(plan, { request: req.message, response: res.message, actor }, opts.registry));
      }
      // The call's deadline passed (it has answered DEADLINE_EXCEEDED) or its client went away: roll back,
      // so no change is committed behind an answer that says the call failed.
      if (req.signal.aborted) throw req.signal.reason;
      return res;
    });
  };
}

/** A change made outside a unit of work, as the API method making the same change would describe it. */
export interface EventedChange<M extends DescMethod = DescMethod> {
  method: M;
  /** The method's request (what a delete's event body is). Default: an empty request. */
  request?: Message;
  /** The method's response (what a create's or update's event body is). Default: an empty response. */
  response?: Message;
}

const sidePlans = new Map<DescMethod, EventPlan>();

/**
 * Records, in `tx`, the events of changes made outside a unit of work (a login through an identity
 * provider, an invite accepted, a SCIM write): each the event its API method records, with the caller as
 * actor and `source` (the path that made the change) as the event's method.
 */
export async function recordEvents(tx: Executor, changes: readonly EventedChange[], who: { actor: string; source: string }, registry: Registry): Promise<void> {
  if (changes.length === 0) return;
  const events = changes.map(({ method, request, response }) => {
    let plan = sidePlans.get(method);
    if (!plan) {
      plan = eventPlanOf(method);
      if (!plan) throw new Error(`${method.parent.typeName}/${method.name} declares no event`);
      sidePlans.set(method, plan);
    }
    const call = { request: request ?? create(method.input), response: response ?? create(method.output), actor: who.actor };
    return { ...outboxEventOf(plan, call, registry), method: who.source };
  });
  await tx.insert(outboxEvents).values(events);
}
