// The outbox's two writers (src/kernel/unit-of-work.ts): recordEvents (a unit of work's events, several rows at
// once) and outboxInsert (one event embedded in the statement of the change it describes, as the registry's
// pushes do). Both must write the row Drizzle's own insert of the event writes, column by column: what a
// delivery reads must not depend on which wrote it. Runs on the embedded database, and on PostgreSQL when
// DATABASE_URL is set.
import { like, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outboxEvents } from "../../src/db/schema/index.js";
import type { OutboxEvent } from "../../src/kernel/outbox.js";
import { outboxInsert, recordEvents } from "../../src/kernel/unit-of-work.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";

let database: TestDatabase;

beforeAll(async () => {
  database = await openTestDatabase();
});
afterAll(async () => {
  await database?.dispose();
});

const events: OutboxEvent[] = [
  {
    type: "dev.chainguard.test.v1",
    subject: "drift/a",
    groupUid: "drift",
    audience: 2,
    method: "/test.Service/Method",
    actor: "someone",
    body: { name: "it's \"quoted\" ünïcödé \u2028", nested: { n: 1.5, list: [1, "two", null, true] }, empty: {} },
    bodyType: "test.Message",
    extensions: { group: "drift", identityprovider: "drift/p" },
  },
  { type: "dev.chainguard.test.v1", subject: "drift/b", groupUid: "", audience: 1, method: "/v2/push", actor: "", body: null, bodyType: "", extensions: {} },
];

/** The rows the writer left for the events above, without what the table's defaults fill (id, create time). */
async function written(write: () => Promise<unknown>) {
  const { db } = database;
  await db.delete(outboxEvents).where(like(outboxEvents.subject, "drift/%"));
  await write();
  const rows = await db.select().from(outboxEvents).where(like(outboxEvents.subject, "drift/%")).orderBy(outboxEvents.subject);
  return rows.map(({ id: _id, createTime: _createTime, ...rest }) => rest);
}

describe("the outbox's writers", () => {
  it("recordEvents and outboxInsert write the row Drizzle's insert of the event writes", async () => {
    const { db } = database;
    const byDrizzle = await written(() => db.insert(outboxEvents).values(events));
    expect(byDrizzle).toHaveLength(events.length);
    expect(byDrizzle).toEqual(events);
    expect(await written(() => recordEvents(db, events))).toEqual(byDrizzle);
    expect(await written(async () => { for (const e of events) await db.execute(outboxInsert(e)); })).toEqual(byDrizzle);
    // Through a FROM clause (a row per row of it), with a value the statement computes merged into the body.
    expect(
      await written(() => db.execute(sql`with one as (select 1) ${outboxInsert(events[0]!, { from: sql`one`, bodyMerge: sql`jsonb_build_object('merged', 'yes')` })}`)),
    ).toEqual([{ ...byDrizzle[0], body: { ...events[0]!.body, merged: "yes" } }]);
  });
});
