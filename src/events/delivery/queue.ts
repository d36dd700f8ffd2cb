// The deliveries in the database (db/schema/events.ts): expanded from events, claimed, settled and pruned in
// batches, each one statement, so the cost per event stays small at thousands of events a second.
//
// An expansion takes the oldest events waiting in event_expansions, FOR UPDATE SKIP LOCKED (replicas
// expanding at once take different events), as many as make a bounded number of deliveries, deletes their rows
// and adds one pending delivery per subscription the event's writer saw (and that still exists), in one statement: an event is expanded exactly once, and an
// expansion that fails or is rolled back leaves its events waiting for the next one.
//
// A claim takes, for each subscription in random order, its oldest due pending deliveries, up to the
// subscription's free slots in this process (so a slow sink never fills a claim), FOR UPDATE SKIP LOCKED
// (replicas claiming at once take different rows), and leases them: attempts + 1 and next_attempt_time moved
// to the end of the lease. A worker that dies mid-attempt leaves the row to be claimed again when the lease
// ends; one that settles it records the outcome of that attempt only (a settle names the attempt number, so
// an outcome arriving after the lease was taken over changes nothing).
import { sql } from "drizzle-orm";
import { executedRows, type Executor } from "../../kernel/store.js";

/** A claimed delivery: the event, where it goes, and which attempt this is. */
export interface ClaimedDelivery {
  eventId: string;
  subscriptionUid: string;
  attempt: number;
  /** When the delivery was created (its event committed): retries last for a period from then. */
  createTime: Date;
  sink: string;
  /** The subscription's group (the token's subject is webhook:<group>). */
  subscriptionGroup: string;
  type: string;
  subject: string;
  eventGroup: string;
  method: string;
  actor: string;
  /** The event body as JSON text, as stored; null when the event carries none. */
  body: string | null;
  /** The body's full proto message name ("" for events recorded before it was kept). */
  bodyType: string;
  /** The CloudEvent extension attributes by name (empty for events recorded before they were kept). */
  extensions: Record<string, string>;
  eventTime: Date;
}

/** What an attempt came to. */
export type Settlement =
  | { outcome: "delivered"; eventId: string; subscriptionUid: string; status: number }
  | {
      outcome: "retry" | "failed";
      eventId: string;
      subscriptionUid: string;
      attempt: number;
      status: number | null;
      error: string;
      /** retry: when it is due again. */
      next: Date;
    };

/**
 * Rows bound as one JSON parameter, read back with jsonb_to_recordset: the same on both drivers (postgres.js
 * cannot bind every array type, and drizzle expands a bare array into a list).
 */
const rowsParam = (rows: readonly object[]) => sql`jsonb_to_recordset(${JSON.stringify(rows)}::jsonb)`;

const asDate = (v: unknown) => (v instanceof Date ? v : new Date(String(v)));
/** A jsonb object of strings, as either driver returns it (parsed, or as text). */
const extensionsOf = (v: unknown): Record<string, string> => (typeof v === "string" ? (JSON.parse(v) as Record<string, string>) : ((v ?? {}) as Record<string, string>));

interface ClaimRequest {
  /** Most deliveries one subscription may have in flight in this process. */
  perSubscription: number;
  /** Deliveries each busy subscription has in flight now. */
  busy: ReadonlyMap<string, number>;
  /** Most rows to claim in all. */
  limit: number;
  /** How long the claim holds them (past the attempt's timeout). */
  leaseMs: number;
}

/** The channel the delivery workers listen on: the outbox trigger notifies it, and so does an expansion. */
export const EVENTS_CHANNEL = "apiserver_events";

export function createDeliveryQueue(db: Executor) {
  return {
    /**
     * Expands the oldest waiting events into their deliveries, due at once: up to `limit.events` of them, and
     * no more once they reach `limit.deliveries` deliveries (the first is always taken, whatever its fan-out),
     * so one transaction stays short at any mix of fan-outs. Notifies the workers when it added any. Returns
     * how many events it expanded, how many deliveries it added, and whether more events may be waiting.
     */
    async expand(limit: { events: number; deliveries: number }): Promise<{ events: number; deliveries: number; more: boolean }> {
      const [row] = executedRows(
        await db.execute(sql`
          WITH candidates AS (
            SELECT event_id, create_time FROM event_expansions ORDER BY create_time LIMIT ${limit.events}::int FOR UPDATE SKIP LOCKED
          ),
          sized AS (
            SELECT c.event_id, f.n, sum(f.n) OVER (ORDER BY c.create_time, c.event_id) AS running
            FROM candidates c JOIN outbox_events e ON e.id = c.event_id
            CROSS JOIN LATERAL (SELECT count(*) AS n FROM subscriptions s WHERE s.group_uid = ANY (uid_lineage(e.group_uid))) f
          ),
          done AS (
            DELETE FROM event_expansions x WHERE x.event_id = ANY (ARRAY(SELECT event_id FROM sized WHERE running - n < ${limit.deliveries}::int))
            RETURNING x.event_id, x.writer_xid, x.writer_snapshot
          ),
          added AS (
            -- The subscriptions on the event's group or an ancestor of it that its writer saw: committed before
            -- its snapshot, or created in its own transaction. The delivery's time is the event's, as when the
            -- writer added it (retries last for a period from then).
            INSERT INTO event_deliveries (event_id, subscription_uid, next_attempt_time, create_time)
            SELECT e.id, s.uid, e.create_time, e.create_time
            FROM done d JOIN outbox_events e ON e.id = d.event_id
            JOIN subscriptions s ON s.group_uid = ANY (uid_lineage(e.group_uid))
            WHERE s.create_xid = d.writer_xid OR pg_visible_in_snapshot(s.create_xid, d.writer_snapshot)
            RETURNING 1
          ),
          counts AS (
            SELECT (SELECT count(*) FROM candidates)::int AS candidates, (SELECT count(*) FROM done)::int AS events, (SELECT count(*) FROM added)::int AS deliveries
          )
          SELECT candidates, events, deliveries, CASE WHEN deliveries > 0 THEN pg_notify(${EVENTS_CHANNEL}, '') END AS notified FROM counts`),
      );
      const candidates = Number(row?.candidates ?? 0);
      const events = Number(row?.events ?? 0);
      return { events, deliveries: Number(row?.deliveries ?? 0), more: candidates === limit.events || events < candidates };
    },

    async claim(req: ClaimRequest): Promise<ClaimedDelivery[]> {
      const busy = [...req.busy].map(([uid, n]) => ({ uid, n }));
      const result = await db.execute(sql`
        WITH busy AS (SELECT * FROM ${rowsParam(busy)} AS b(uid text, n int)),
        due AS (
          SELECT d.event_id, d.subscription_uid
          FROM (SELECT uid FROM subscriptions ORDER BY random()) s
          LEFT JOIN busy b ON b.uid = s.uid
          CROSS JOIN LATERAL (
            SELECT d.event_id, d.subscription_uid FROM event_deliveries d
            WHERE d.subscription_uid = s.uid AND d.state = 'pending' AND d.next_attempt_time <= now()
            ORDER BY d.next_attempt_time
            LIMIT greatest(${req.perSubscription}::int - coalesce(b.n, 0), 0)
            FOR UPDATE OF d SKIP LOCKED
          ) d
          LIMIT ${req.limit}::int
        )
        UPDATE event_deliveries d
        SET attempts = d.attempts + 1, last_attempt_time = now(),
            next_attempt_time = now() + make_interval(secs => ${req.leaseMs / 1000}::float8)
        FROM due JOIN outbox_events e ON e.id = due.event_id JOIN subscriptions s ON s.uid = due.subscription_uid
        -- The ids as an array: the claimed rows are found by primary key. (A plain join back let the planner,
        -- expecting up to LIMIT rows, hash-join a scan of the whole table: a claim's cost grew with the backlog.)
        WHERE d.event_id = ANY (ARRAY(SELECT event_id FROM due)) AND d.event_id = due.event_id AND d.subscription_uid = due.subscription_uid
        RETURNING d.event_id, d.subscription_uid, d.attempts, d.create_time, s.sink, s.group_uid AS subscription_group,
                  e.type, e.subject, e.group_uid AS event_group, e.method, e.actor, e.body::text AS body, e.body_type, e.extensions, e.create_time AS event_time`);
      return executedRows(result).map((r) => ({
        eventId: String(r.event_id),
        subscriptionUid: String(r.subscription_uid),
        attempt: Number(r.attempts),
        createTime: asDate(r.create_time),
        sink: String(r.sink),
        subscriptionGroup: String(r.subscription_group),
        type: String(r.type),
        subject: String(r.subject),
        eventGroup: String(r.event_group),
        method: String(r.method),
        actor: String(r.actor),
        body: r.body === null ? null : String(r.body),
        bodyType: String(r.body_type),
        extensions: extensionsOf(r.extensions),
        eventTime: asDate(r.event_time),
      }));
    },

    /** Records outcomes: delivered rows are done; failed ones are due again later, or given up. */
    async settle(batch: readonly Settlement[]): Promise<void> {
      const delivered = batch.filter((s) => s.outcome === "delivered");
      const others = batch.filter((s) => s.outcome !== "delivered");
      if (delivered.length > 0) {
        // Whichever attempt succeeded: the sink has the event.
        await db.execute(sql`
          UPDATE event_deliveries d SET state = 'delivered', done_time = now(), last_status = u.status
          FROM ${rowsParam(delivered.map((s) => ({ e: s.eventId, s: s.subscriptionUid, status: s.status })))} AS u(e uuid, s text, status int)
          WHERE d.event_id = u.e AND d.subscription_uid = u.s AND d.state = 'pending'`);
      }
      if (others.length > 0) {
        const failures = others as Extract<Settlement, { outcome: "retry" | "failed" }>[];
        await db.execute(sql`
          UPDATE event_deliveries d
          SET state = u.state, done_time = CASE WHEN u.state = 'failed' THEN now() END,
              next_attempt_time = u.next, last_error = u.error, last_status = u.status
          FROM ${rowsParam(
            failures.map((s) => ({ e: s.eventId, s: s.subscriptionUid, attempt: s.attempt, state: s.outcome === "failed" ? "failed" : "pending", next: s.next.toISOString(), error: s.error, status: s.status })),
          )} AS u(e uuid, s text, attempt int, state text, next timestamptz, error text, status int)
          WHERE d.event_id = u.e AND d.subscription_uid = u.s AND d.state = 'pending' AND d.attempts = u.attempt`);
      }
    },

    /** Gives claimed deliveries back unattempted: due at once, their attempt not counted. */
    async release(claimed: readonly ClaimedDelivery[]): Promise<void> {
      if (claimed.length === 0) return;
      await db.execute(sql`
        UPDATE event_deliveries d SET attempts = d.attempts - 1, next_attempt_time = now()
        FROM ${rowsParam(claimed.map((c) => ({ e: c.eventId, s: c.subscriptionUid, attempt: c.attempt })))} AS u(e uuid, s text, attempt int)
        WHERE d.event_id = u.e AND d.subscription_uid = u.s AND d.state = 'pending' AND d.attempts = u.attempt`);
    },

    /**
     * Deletes, a batch at a time, deliveries settled before the retention periods, then events older than
     * `deliveredMs` that no delivery still refers to and that are not waiting to be expanded. Returns the rows
     * deleted.
     */
    async prune(opts: { deliveredMs: number; failedMs: number; batch: number }): Promise<{ deliveries: number; events: number }> {
      const deliveries = executedRows(
        await db.execute(sql`
          DELETE FROM event_deliveries WHERE (event_id, subscription_uid) IN (
            SELECT event_id, subscription_uid FROM event_deliveries
            WHERE state <> 'pending' AND done_time < now() - make_interval(secs => (CASE WHEN state = 'delivered' THEN ${opts.deliveredMs} ELSE ${opts.failedMs} END)::float8 / 1000)
            LIMIT ${opts.batch}::int FOR UPDATE SKIP LOCKED)
          RETURNING 1`),
      ).length;
      const events = executedRows(
        await db.execute(sql`
          DELETE FROM outbox_events WHERE id IN (
            SELECT e.id FROM outbox_events e
            WHERE e.create_time < now() - make_interval(secs => ${opts.deliveredMs}::float8 / 1000)
              AND NOT EXISTS (SELECT 1 FROM event_deliveries d WHERE d.event_id = e.id)
              AND NOT EXISTS (SELECT 1 FROM event_expansions x WHERE x.event_id = e.id)
            ORDER BY e.create_time LIMIT ${opts.batch}::int FOR UPDATE SKIP LOCKED)
          RETURNING 1`),
      ).length;
      return { deliveries, events };
    },

    /** Pending deliveries, and how many of them are due now (the backlog). */
    async depth(): Promise<{ pending: number; due: number }> {
      const [row] = executedRows(
        await db.execute(sql`SELECT count(*) AS pending, count(*) FILTER (WHERE next_attempt_time <= now()) AS due FROM event_deliveries WHERE state = 'pending'`),
      );
      return { pending: Number(row?.pending ?? 0), due: Number(row?.due ?? 0) };
    },
  };
}
