// The outbox: one row for every event a committed mutation emits, written in the mutation's own transaction
// (kernel/unit-of-work.ts), so a change and its event are committed together or not at all. Rows are never
// changed by the API; the events domain delivers them.
import { sql } from "drizzle-orm";
import { index, jsonb, pgTable, smallint, text, uuid } from "drizzle-orm/pg-core";
import { instant } from "./columns.js";

export const outboxEvents = pgTable(
  "outbox_events",
  {
    /** The event's unique id (the CloudEvent id, the same on every delivery attempt). */
    id: uuid("id").primaryKey().default(sql`gen_random_uuid()`),
    /** The CloudEvent type declared by the method (apiserver.options.v1.event). */
    type: text("type").notNull(),
    /** The uid of the resource the event is about. */
    subject: text("subject").notNull(),
    /** The group the event happened in; empty when it happened outside every group (a root identity's own metadata). */
    groupUid: text("group_uid").notNull(),
    /** apiserver.options.v1.Audience: who may receive it. */
    audience: smallint("audience").notNull(),
    /** The method that emitted it: "/<package>.<Service>/<Method>". */
    method: text("method").notNull(),
    /** The uid of the calling identity. */
    actor: text("actor").notNull(),
    /**
     * The method's response (its request, for a delete) as proto3 JSON, as the published SDK's redaction of its
     * type leaves it (kernel/outbox.ts); null when the event carries no body.
     */
    body: jsonb("body").$type<Record<string, unknown>>(),
    /** The body's full proto message name (the CloudEvent `bodytype` extension); empty in rows written before it. */
    bodyType: text("body_type").notNull().default(""),
    /** The other CloudEvent extension attributes (`group`, `identityprovider`) by name; empty in rows written before them. */
    extensions: jsonb("extensions").$type<Record<string, string>>().notNull().default({}),
    createTime: instant("create_time").notNull().defaultNow(),
  },
  (t) => [index("outbox_events_create_time_idx").on(t.createTime, t.id)],
);
