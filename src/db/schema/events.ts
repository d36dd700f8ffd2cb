// Event subscriptions and the delivery of outbox events to them.
//
// A subscription belongs to a group (RESTRICT, like every resource of a group) and receives the customer
// events of that group and of every group beneath it. When an outbox row is committed, a statement-level
// trigger (migration 0009) adds one delivery row per matching subscription in the same transaction, and
// notifies the delivery workers (channel apiserver_events). A delivery is `pending` until a sink acknowledges
// it (`delivered`) or its retries run out (`failed`, kept for inspection: see the event_delivery_problems
// view). Workers claim due pending rows with FOR UPDATE SKIP LOCKED and lease them by moving
// next_attempt_time past the attempt's end, so no two workers send one delivery at the same time.
import { sql } from "drizzle-orm";
import { check, index, integer, pgTable, primaryKey, smallint, text, uniqueIndex, uuid } from "drizzle-orm/pg-core";
import { instant, uidText } from "./columns.js";
import { groups } from "./iam.js";
import { outboxEvents } from "./outbox.js";

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
