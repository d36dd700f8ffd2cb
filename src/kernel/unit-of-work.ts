// The unit of work: every method that declares an event (apiserver.options.v1.event) runs in one database
// transaction, and once its handler has succeeded, the event is recorded in the outbox (outbox.ts,
// db/schema/outbox.ts) in that same transaction. A mutation that fails records nothing and changes nothing;
// one that commits always has its event.
//
// Handlers reach the transaction only through their stores: `storeFactory(db, createXStore)` gives, per
// call, the store over the call's transaction inside a unit of work and the one over the database
// otherwise. A handler opens no transaction of its own, and reads nothing outside its stores while in a unit
// of work (the embedded database runs one transaction at a time: a read beside it would wait on itself).
//
// Writes that arrive outside the API's methods (a login through an identity provider, an invite accepted, a
// SCIM write) run through the same helper as the interceptor, runUnitOfWork, and so keep the same rules.
// Events no API method describes (the registry's pushes and pulls) are built by their domain and written by
// recordEvents, the outbox's one writer, or, where the change and its event are one statement, embedded in
// that statement by outboxInsert (the same columns and values).
import { sql, type SQL } from "drizzle-orm";
import { create, type DescMethod, type Message, type Registry } from "@bufbuild/protobuf";
import { createContextKey, type HandlerContext, type Interceptor } from "@connectrpc/connect";
import { readTarget, recordWriters, routesReads } from "../db/read-routing.js";
import { outboxEvents } from "../db/schema/outbox.js";
import { accessKey } from "./auth/principal.js";
import { eventPlanOf, outboxEventOf, type EventPlan, type OutboxEvent } from "./outbox.js";
import type { Executor } from "./store.js";

const transactionKey = createContextKey<Executor | undefined>(undefined, { description: "the call's unit of work" });
const readKey = createContextKey<Executor | undefined>(undefined, { description: "where the call's reads go (read replicas)" });

/**
 * The store of a call: over the call's transaction in a unit of work (made once per transaction); with
 * read replicas, in a read-only call, the one over the database its reads go to (a replica's or the
 * primary's: db/read-routing.ts, made once per database); else the one made over `db` at start-up.
 */
export function storeFactory<S>(db: Executor, make: (db: Executor) => S): (ctx: HandlerContext) => S {
  const shared = make(db);
  const perExecutor = new WeakMap<Executor, S>();
  return (ctx) => {
    const tx = ctx.values.get(transactionKey) ?? ctx.values.get(readKey);
    if (!tx) return shared;
    let store = perExecutor.get(tx);
    if (!store) perExecutor.set(tx, (store = make(tx)));
    return store;
  };
}

export interface UnitOfWorkOptions {
  db: Executor;
  /** Types for the JSON of event bodies (Any). */
  registry: Registry;
  /**
   * Services whose methods without an event still write outside a unit of work (the token exchange stores
   * refresh tokens; accepting an invite runs its own unit of work after reads that must see the primary):
   * their calls never read from a replica.
   */
  writingServices?: readonly string[];
}

/**
 * The interceptor that runs each event-declaring method as a unit of work (innermost: after authorization).
 * With read replicas (db/read-routing.ts), every other unary call of a service that writes only in units
 * of work is read-only: it chooses where its reads go (a replica that has every write of the caller, or the
 * primary), and its handler's stores read there. Authentication and authorization ran before, on the primary.
 */
export function createUnitOfWork(opts: UnitOfWorkOptions): Interceptor {
  const plans = new Map<DescMethod, EventPlan | null>();
  const planOf = (method: DescMethod): EventPlan | null => {
    let plan = plans.get(method);
    if (plan === undefined) plans.set(method, (plan = eventPlanOf(method) ?? null));
    return plan;
  };
  const replicated = routesReads(opts.db);
  const writing = new Set(opts.writingServices ?? []);
  // The remembered grants are forgotten by the authorization interceptor, for every IAM write (grantServices).
  return (next) => async (req) => {
    if (!planOf(req.method) || req.stream) {
      if (!replicated || req.stream || writing.has(req.service.typeName)) return next(req);
      req.contextValues.set(readKey, await readTarget(opts.db, req.contextValues.get(accessKey)?.principal.identityUid));
      return next(req);
    }
    return runUnitOfWork({ db: opts.db, registry: opts.registry, signal: req.signal }, async (unit) => {
      req.contextValues.set(transactionKey, unit.tx);
      const res = await next(req);
      if (!res.stream) {
        const actor = req.contextValues.get(accessKey)?.principal.identityUid ?? "";
        unit.record([{ method: req.method, request: req.message, response: res.message }], { actor });
      }
      return res;
    });
  };
}

/** A change, as the API method making the same change would describe it (and record its event). */
export interface EventedChange<M extends DescMethod = DescMethod> {
  method: M;
  /** The method's request (what a delete's event body is). Default: an empty request. */
  request?: Message;
  /** The method's response (what a create's or update's event body is). Default: an empty response. */
  response?: Message;
}

/** Who made a change: the event's actor, and its method (default: the API method's path). */
export interface ChangeSource {
  actor: string;
  /** The path that made the change when it is not the API method (a login, an invite accepted, a SCIM write). */
  source?: string;
}

/** The work inside a unit of work: its transaction, and what it tells the unit. */
export interface UnitOfWork {
  /** The transaction: every read and write of the work goes through it (stores made over it). */
  readonly tx: Executor;
  /** The events of `changes`, recorded in the transaction once the work has returned. */
  record(changes: readonly EventedChange[], who: ChangeSource): void;
  /** The work changed nothing grants hang on: the remembered grants are kept (by default they are forgotten). */
  keepGrants(): void;
}

export interface RunUnitOfWorkOptions {
  db: Executor;
  /** Types for the JSON of event bodies (Any). */
  registry: Registry;
  /** The call's signal: aborted (deadline passed, client gone) before the commit, the work is rolled back. */
  signal?: AbortSignal | undefined;
  /** Makes this server forget the grants it remembered: run once the transaction has ended. */
  grantsChanged?: (() => void) | undefined;
}

const plansOfChanges = new Map<DescMethod, EventPlan>();

function eventOfChange({ method, request, response }: EventedChange, who: ChangeSource, registry: Registry) {
  let plan = plansOfChanges.get(method);
  if (!plan) {
    plan = eventPlanOf(method);
    if (!plan) throw new Error(`${method.parent.typeName}/${method.name} declares no event`);
    plansOfChanges.set(method, plan);
  }
  const call = { request: request ?? create(method.input), response: response ?? create(method.output), actor: who.actor };
  const event = outboxEventOf(plan, call, registry);
  return who.source === undefined ? event : { ...event, method: who.source };
}

/**
 * Runs `work` as a unit of work, for an RPC (the interceptor above) as for a write outside the API's methods
 * (a login through an identity provider, an invite accepted, a SCIM write): in one transaction; the events
 * it records written in that transaction after it returns; rolled back when `signal` was aborted meanwhile,
 * so no change is committed behind an answer that says the call failed; and once the transaction has ended,
 * the remembered grants forgotten (`grantsChanged`), unless the work said it changed none of them. A work
 * that fails also has them forgotten: whether its commit happened may be unknown.
 */
export async function runUnitOfWork<T>(opts: RunUnitOfWorkOptions, work: (unit: UnitOfWork) => Promise<T>): Promise<T> {
  let forgetGrants = true;
  try {
    return await opts.db.transaction(async (tx) => {
      const events: OutboxEvent[] = [];
      const result = await work({
        tx,
        record: (changes, who) => {
          for (const change of changes) events.push(eventOfChange(change, who, opts.registry));
        },
        keepGrants: () => {
          forgetGrants = false;
        },
      });
      await recordEvents(tx, events);
      // With replicas: the writers' next reads go to the primary until a replica has this transaction.
      await recordWriters(opts.db, tx, events.map((e) => e.actor));
      if (opts.signal?.aborted) throw opts.signal.reason;
      return result;
    });
  } catch (err) {
    forgetGrants = true;
    throw err;
  } finally {
    if (forgetGrants) opts.grantsChanged?.();
  }
}

/** The outbox's columns an event fills: every column of the table but those its defaults fill (id, create time). */
type OutboxColumn = keyof Omit<typeof outboxEvents.$inferInsert, "id" | "createTime">;

/**
 * The columns both writers of the outbox list (recordEvents and outboxInsert), in one order: the one mapping
 * of an event to its row. A column added to the table must be named here (the type below fails until it is),
 * and the event must then carry its value.
 */
const OUTBOX_COLUMNS = ["type", "subject", "groupUid", "audience", "method", "actor", "body", "bodyType", "extensions"] as const satisfies readonly (OutboxColumn & keyof OutboxEvent)[];
const everyOutboxColumn: Exclude<OutboxColumn, (typeof OUTBOX_COLUMNS)[number]> extends never ? true : never = true;
void everyOutboxColumn;
const outboxColumnList = sql.join(
  OUTBOX_COLUMNS.map((k) => sql.identifier(outboxEvents[k].name)),
  sql`, `,
);

/**
 * An event's values, in OUTBOX_COLUMNS's order, each as its column's driver value (Drizzle's own mapping: a
 * jsonb column's value is its JSON text) cast to the column's type. `bodyMerge`: see outboxInsert.
 */
function outboxValues(event: OutboxEvent, bodyMerge?: SQL): SQL {
  return sql.join(
    OUTBOX_COLUMNS.map((k) => {
      const column = outboxEvents[k];
      const type = sql.raw(column.getSQLType());
      const v = event[k];
      const value = v === null ? sql`null::${type}` : sql`${column.mapToDriverValue(v as never)}::${type}`;
      return k === "body" && bodyMerge ? sql`${value} || ${bodyMerge}` : value;
    }),
    sql`, `,
  );
}

/**
 * Writes events to the outbox: the one way a row gets there, for the events of API methods (above) and for
 * those a domain builds itself because no RPC made the change (the registry's push and pull over /v2/: type,
 * subject, group, body as the published SDK defines them). Pass the transaction of the change the events
 * describe, so that they commit or roll back with it; an event about no change (a pull) may pass the database.
 */
export async function recordEvents(db: Executor, events: readonly OutboxEvent[]): Promise<void> {
  if (events.length === 0) return;
  const rows = sql.join(
    events.map((e) => sql`(${outboxValues(e)})`),
    sql`, `,
  );
  await db.execute(sql`insert into ${outboxEvents} (${outboxColumnList}) values ${rows}`);
}

/**
 * recordEvents's insert of one event as SQL (the same columns and values), for a write whose change and event
 * run as one statement (a data-modifying WITH query: one round trip, one commit, the two committed together or
 * not at all). `bodyMerge`: a jsonb object that statement computes, merged into the body (a value only the
 * statement learns, such as the digest a tag pointed at before it moved). `from`: a FROM clause for the values
 * (a WITH query's name, so that it is evaluated with the insert; a row per row of it).
 */
export function outboxInsert(event: OutboxEvent, opts: { bodyMerge?: SQL; from?: SQL } = {}): SQL {
  return sql`insert into ${outboxEvents} (${outboxColumnList}) select ${outboxValues(event, opts.bodyMerge)}${opts.from ? sql` from ${opts.from}` : sql``}`;
}
