// Fan-out outside the writer's transaction (on the embedded database and on PostgreSQL): a write in a group
// with subscriptions commits its event alone, and the delivery queue's expansion later adds exactly one
// delivery per subscription the writer saw; expansions running at once expand each event once; one rolled back
// is done again; pruning keeps an event still waiting to be expanded. No delivery worker runs here: the test
// expands by hand (events-delivery.test.ts covers the worker doing it).
import { and, eq, sql } from "drizzle-orm";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { eventDeliveries, eventExpansions, outboxEvents, subscriptions } from "../../src/db/schema/index.js";
import { createDeliveryQueue } from "../../src/events/delivery/queue.js";
import type { Executor } from "../../src/kernel/store.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

let server: TestServer;
let world: World;
const onPostgres = Boolean(process.env.DATABASE_URL);

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "fan-out");
});

afterAll(async () => {
  await server?.close();
});

afterEach(async () => {
  const { db } = server.database;
  await db.delete(subscriptions);
  await db.delete(outboxEvents);
});

async function subscribe(group: string, n: number): Promise<string[]> {
  const uids = Array.from({ length: n }, () => newChildUid(group)).map((uid) => ({ uid, groupUid: group, sink: `http://127.0.0.1:9/${uid}` }));
  await server.database.db.insert(subscriptions).values(uids);
  return uids.map((u) => u.uid);
}

async function rest(method: string, path: string, body?: unknown): Promise<Record<string, unknown>> {
  const res = await fetch(`${server.baseUrl}${path}`, {
    method,
    headers: { ...world.auth("owner"), "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = (await res.json()) as Record<string, unknown>;
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`);
  return json;
}

/** Expands until nothing waits; the totals. */
async function expandAll(db: Executor = server.database.db, events = 100, deliveries = 2_000): Promise<{ events: number; deliveries: number }> {
  const queue = createDeliveryQueue(db);
  const total = { events: 0, deliveries: 0 };
  for (;;) {
    const r = await queue.expand({ events, deliveries });
    if (r.events === 0) return total;
    total.events += r.events;
    total.deliveries += r.deliveries;
  }
}

const count = async (table: typeof eventDeliveries | typeof eventExpansions | typeof outboxEvents) =>
  (await server.database.db.select({ n: sql<number>`count(*)::int` }).from(table))[0]!.n;

/** Each event's receivers, sorted. */
async function receivers(): Promise<Map<string, string[]>> {
  const rows = await server.database.db.select().from(eventDeliveries);
  const by = new Map<string, string[]>();
  for (const r of rows) by.set(r.eventId, [...(by.get(r.eventId) ?? []), r.subscriptionUid].sort());
  return by;
}

/** `n` customer events in `group`, inserted in one statement (as a bulk write would). */
async function insertEvents(group: string, n: number, audience = 2): Promise<void> {
  await server.database.db.execute(sql`
    INSERT INTO outbox_events (type, subject, group_uid, audience, method, actor, body)
    SELECT 'dev.chainguard.api.platform.registry.repo.created.v1', ${group} || '/' || lpad(to_hex(i), 16, '0'), ${group}, ${audience}::smallint,
           '/chainguard.platform.registry.v2.ReposService/CreateRepo', 'test', jsonb_build_object('name', 'repo-' || i)
    FROM generate_series(1, ${n}::int) i`);
}

describe("a write in a group with subscriptions", () => {
  it("commits its event and no delivery; the expansion adds exactly one per matching subscription", async () => {
    const matching = [...(await subscribe(world.org, 20)), ...(await subscribe(world.team, 5))].sort();
    await subscribe(world.other, 3); // a sibling group: not matched
    const repo = String((await rest("POST", `/registry/v2/repos/${world.team}`, { name: "fanned-out" })).uid);
    await rest("PATCH", `/registry/v2/repos/${repo}`, { uid: repo, name: "fanned-out", description: "changed" });

    // Both writes committed: two events, each waiting to be expanded, and not one delivery.
    expect(await count(outboxEvents)).toBe(2);
    expect(await count(eventExpansions)).toBe(2);
    expect(await count(eventDeliveries)).toBe(0);

    expect(await expandAll()).toEqual({ events: 2, deliveries: 50 });
    const events = await server.database.db.select({ id: outboxEvents.id }).from(outboxEvents);
    const by = await receivers();
    for (const { id } of events) expect(by.get(id)).toEqual(matching);
    expect(await count(eventExpansions)).toBe(0);
    // Due at once, stamped with the event's time (retries last for a period from it).
    const rows = await server.database.db
      .select({ d: eventDeliveries.createTime, due: eventDeliveries.nextAttemptTime, e: outboxEvents.createTime, state: eventDeliveries.state })
      .from(eventDeliveries)
      .innerJoin(outboxEvents, eq(outboxEvents.id, eventDeliveries.eventId));
    for (const r of rows) expect([r.state, r.d.getTime(), r.due.getTime()]).toEqual(["pending", r.e.getTime(), r.e.getTime()]);
    // Nothing is expanded twice.
    expect(await expandAll()).toEqual({ events: 0, deliveries: 0 });
  });

  it("records nothing to expand for an event no subscription matches, or one not for customers", async () => {
    await subscribe(world.other, 2);
    await rest("POST", `/registry/v2/repos/${world.team}`, { name: "unwatched" });
    await subscribe(world.team, 2);
    await insertEvents(world.team, 3, 1);
    expect(await count(outboxEvents)).toBe(4);
    expect(await count(eventExpansions)).toBe(0);
    expect(await expandAll()).toEqual({ events: 0, deliveries: 0 });
  });
});

describe("which subscriptions an event goes to: the ones its writer saw, still there when it is expanded", () => {
  it("not one created after the write, nor one deleted before the expansion; a subscription's own creation reaches it", async () => {
    const [kept, deleted] = await subscribe(world.org, 2);
    const repo = String((await rest("POST", `/registry/v2/repos/${world.org}`, { name: "seen-by" })).uid);
    const [later] = await subscribe(world.org, 1);
    await server.database.db.delete(subscriptions).where(eq(subscriptions.uid, deleted!));
    // Created through the API: its own creation is an event it receives (written in the same transaction).
    const viaApi = String((await rest("POST", `/events/v2/subscriptions/${world.org}`, { sink: "http://127.0.0.1:9/via-api" })).uid);
    await expandAll();
    const [repoEvent] = await server.database.db.select({ id: outboxEvents.id }).from(outboxEvents).where(eq(outboxEvents.subject, repo));
    const [subEvent] = await server.database.db.select({ id: outboxEvents.id }).from(outboxEvents).where(eq(outboxEvents.subject, viaApi));
    const by = await receivers();
    expect(by.get(repoEvent!.id)).toEqual([kept]);
    expect(by.get(subEvent!.id)).toEqual([kept, later, viaApi].sort());
  });

  it.skipIf(!onPostgres)("not one whose creating transaction commits after the write, though it began before (PostgreSQL)", async () => {
    const [before] = await subscribe(world.org, 1);
    const concurrent = newChildUid(world.org);
    let repo = "";
    await server.database.db.transaction(async (tx) => {
      await tx.insert(subscriptions).values({ uid: concurrent, groupUid: world.org, sink: "http://127.0.0.1:9/concurrent" });
      // The write commits while this subscription is not yet committed.
      repo = String((await rest("POST", `/registry/v2/repos/${world.org}`, { name: "raced" })).uid);
    });
    await rest("PATCH", `/registry/v2/repos/${repo}`, { uid: repo, name: "raced", description: "after" });
    await expandAll();
    const events = await server.database.db.select({ id: outboxEvents.id, type: outboxEvents.type }).from(outboxEvents).where(eq(outboxEvents.subject, repo));
    const by = await receivers();
    const of = (suffix: string) => by.get(events.find((e) => e.type.endsWith(suffix))!.id);
    expect(of("created.v1")).toEqual([before]);
    expect(of("updated.v1")).toEqual([before, concurrent].sort());
  });
});

describe("expanding", () => {
  it("expansions running at once expand each event exactly once", async () => {
    const subs = (await subscribe(world.org, 10)).sort();
    const N = 200;
    await insertEvents(world.team, N);
    expect(await count(eventExpansions)).toBe(N);
    // Four expanders, small batches: on PostgreSQL each on a connection of its own, contending for the rows.
    const results = await Promise.all(Array.from({ length: 4 }, () => expandAll(server.database.db, 7, 50)));
    expect(results.reduce((n, r) => n + r.events, 0)).toBe(N);
    expect(results.reduce((n, r) => n + r.deliveries, 0)).toBe(N * 10);
    const by = await receivers();
    expect(by.size).toBe(N);
    for (const got of by.values()) expect(got).toEqual(subs);
    expect(await count(eventDeliveries)).toBe(N * 10);
    expect(await count(eventExpansions)).toBe(0);
  });

  it("an expansion stops taking events once they make its number of deliveries, and takes one event at least", async () => {
    await subscribe(world.team, 10);
    await insertEvents(world.team, 5);
    const queue = createDeliveryQueue(server.database.db);
    // 10 deliveries each: the third reaches 25.
    expect(await queue.expand({ events: 100, deliveries: 25 })).toEqual({ events: 3, deliveries: 30, more: true });
    // One event alone is more than 5 deliveries: it is taken all the same.
    expect(await queue.expand({ events: 100, deliveries: 5 })).toEqual({ events: 1, deliveries: 10, more: true });
    expect(await queue.expand({ events: 1, deliveries: 100 })).toEqual({ events: 1, deliveries: 10, more: true });
    expect(await queue.expand({ events: 100, deliveries: 100 })).toEqual({ events: 0, deliveries: 0, more: false });
    expect(await count(eventDeliveries)).toBe(50);
  });

  it("an expansion rolled back is done again", async () => {
    await subscribe(world.team, 4);
    await insertEvents(world.team, 3);
    const rollback = new Error("test: rolled back");
    await expect(
      server.database.db.transaction(async (tx) => {
        expect(await createDeliveryQueue(tx).expand({ events: 100, deliveries: 100 })).toEqual({ events: 3, deliveries: 12, more: false });
        throw rollback;
      }),
    ).rejects.toBe(rollback);
    expect(await count(eventDeliveries)).toBe(0);
    expect(await count(eventExpansions)).toBe(3);
    expect(await expandAll()).toEqual({ events: 3, deliveries: 12 });
    expect(await count(eventDeliveries)).toBe(12);
  });

  it("pruning keeps an event waiting to be expanded, however old", async () => {
    await subscribe(world.team, 1);
    await insertEvents(world.team, 2);
    await insertEvents(world.other, 1); // no subscription: nothing to wait for
    await new Promise((r) => setTimeout(r, 5));
    const pruned = await createDeliveryQueue(server.database.db).prune({ deliveredMs: 1, failedMs: 1, batch: 100 });
    expect(pruned).toEqual({ deliveries: 0, events: 1 });
    expect(await count(outboxEvents)).toBe(2);
    expect(await expandAll()).toEqual({ events: 2, deliveries: 2 });
    expect(await server.database.db.select().from(eventDeliveries).where(and(eq(eventDeliveries.state, "pending")))).toHaveLength(2);
  });
});
