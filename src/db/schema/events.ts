// Event subscriptions and the delivery of outbox events to them.
//
// A subscription belongs to a group (RESTRICT, like every resource of a group) and receives the customer
// events of that group and of every group beneath it that were written after it was created. A mutation's
// transaction only records its event (one outbox row); when some subscription matches the event's group, a
// trigger (drizzle/0027) also records one row in event_expansions, with the writing transaction's id and
// snapshot, and notifies the delivery workers at commit (channel apiserver_events). A worker later expands
// each such event into one delivery row per subscription, in a transaction of its own that also deletes the
// event_expansions row (claimed FOR UPDATE SKIP LOCKED: replicas expand different events, each exactly once;
// a transaction that fails leaves the row to be expanded again). The subscriptions an event goes to are the
// ones its writing transaction saw (committed before it, by create_xid and the recorded snapshot, or created
// in that same transaction) and that still exist when it is expanded; one created later receives nothing of
// it, as when the deliveries were added in the writer's own transaction.
//
// A delivery is `pending` until a sink acknowledges it (`delivered`) or its retries run out (`failed`, kept
// for inspection: see the event_delivery_problems view). Workers claim due pending rows with FOR UPDATE SKIP
// LOCKED and lease them by moving next_attempt_time past the attempt's end, so no two workers send one
// delivery at the same time.
import { sql } from "drizzle-orm";
import { check, customType, index, integer, pgTable, primaryKey, smallint, text, uniqueIndex, uuid } from "drizzle-orm/pg-core";
import { instant, uidText } from "./columns.js";
import { groups } from "./iam.js";
import { outboxEvents } from "./outbox.js";

/** A full (epoch-extended) transaction id; as text. */
const xid8 = customType<{ data: string; driverData: string }>({ dataType: () => "xid8" });
/** A transaction snapshot (which transactions it sees as committed); as text. */
const pgSnapshot = customType<{ data: string; driverData: string }>({ dataType: () => "pg_snapshot" });

export const subscriptions = pgTable(
  "subscriptions",
  {
    /** <group uid>/<16 hex> */
    uid: uidText("uid").primaryKey(),
    groupUid: uidText("group_uid")
      .notNull()
      .references(() => groups.uid, { onDelete: "restrict" }),
    /** The URL events are POSTed to. */
    sink: text("sink").notNull(),
    createTime: instant("create_time").notNull().defaultNow(),
    updateTime: instant("update_time").notNull().defaultNow(),
    /** The transaction that created it: an event's expansion reaches it only if the event's writer saw it. */
    createXid: xid8("create_xid").notNull().default(sql`pg_current_xact_id()`),
  },
  (t) => [
    // One subscription per sink in a group (a second would deliver every event twice); also the lookup of a
    // group's subscriptions when events fan out.
    uniqueIndex("subscriptions_group_sink_idx").on(t.groupUid, t.sink),
    index("subscriptions_create_time_idx").on(t.createTime, t.uid),
    index("subscriptions_update_time_idx").on(t.updateTime, t.uid),
  ],
);

export type SubscriptionRow = typeof subscriptions.$inferSelect;
export type SubscriptionFields = Pick<typeof subscriptions.$inferInsert, "sink">;

export const DELIVERY_STATES = ["pending", "delivered", "failed"] as const;
export type DeliveryState = (typeof DELIVERY_STATES)[number];

export const eventDeliveries = pgTable(
  "event_deliveries",
  {
    eventId: uuid("event_id")
      .notNull()
      .references(() => outboxEvents.id, { onDelete: "cascade" }),
    subscriptionUid: uidText("subscription_uid")
      .notNull()
      .references(() => subscriptions.uid, { onDelete: "cascade" }),
    state: text("state").$type<DeliveryState>().notNull().default("pending"),
    /** Attempts started (a claim counts one, so an attempt cut short by a crash counts too). */
    attempts: integer("attempts").notNull().default(0),
    /** When a pending delivery is next due; while an attempt is under way, when its lease ends. */
    nextAttemptTime: instant("next_attempt_time").notNull().defaultNow(),
    lastAttemptTime: instant("last_attempt_time"),
    /** The last attempt's outcome when it failed: "HTTP 503", "timeout after 10000 ms", "ECONNREFUSED", ... */
    lastError: text("last_error"),
    /** The last attempt's HTTP status, when the sink answered. */
    lastStatus: smallint("last_status"),
    /** When the sink acknowledged it (delivered), or when it was given up (failed). */
    doneTime: instant("done_time"),
    createTime: instant("create_time").notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.eventId, t.subscriptionUid] }),
    // The claim: due pending rows, per subscription, oldest first.
    index("event_deliveries_due_idx").on(t.subscriptionUid, t.nextAttemptTime).where(sql`state = 'pending'`),
    // Pruning: settled rows by age.
    index("event_deliveries_done_idx").on(t.doneTime).where(sql`state <> 'pending'`),
    index("event_deliveries_subscription_idx").on(t.subscriptionUid, t.state),
    check("event_deliveries_state_check", sql`state IN ('pending', 'delivered', 'failed')`),
  ],
);

export type DeliveryRow = typeof eventDeliveries.$inferSelect;

/**
 * Customer events waiting to be expanded into deliveries: one row per event that some subscription matched
 * when it was written, made by the outbox trigger (drizzle/0027) in the writer's transaction and deleted by
 * the expansion that adds the event's deliveries (events/delivery/queue.ts), in one transaction.
 */
export const eventExpansions = pgTable(
  "event_expansions",
  {
    eventId: uuid("event_id")
      .primaryKey()
      .references(() => outboxEvents.id, { onDelete: "cascade" }),
    /** The writing transaction: subscriptions it created receive the event. */
    writerXid: xid8("writer_xid").notNull().default(sql`pg_current_xact_id()`),
    /** What the writing transaction saw: subscriptions committed before it receive the event. */
    writerSnapshot: pgSnapshot("writer_snapshot").notNull().default(sql`pg_current_snapshot()`),
    createTime: instant("create_time").notNull().defaultNow(),
  },
  // Expansion takes the oldest first.
  (t) => [index("event_expansions_create_time_idx").on(t.createTime)],
);
