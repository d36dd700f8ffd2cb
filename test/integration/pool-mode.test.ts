// DATABASE_POOL_MODE on the database client (PostgreSQL): in session mode the kernel's hot statements and the
// prepared list pages are named statements of the connection; in transaction mode (behind a transaction-mode
// pooler) none is, and the rows are the same. One connection per pool, so pg_prepared_statements is the one
// the statements ran on.
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createScratchDatabase, type ScratchDatabase } from "../support/server-process.js";
import { openPostgres, type Database } from "../../src/db/client.js";
import { groups } from "../../src/db/schema/index.js";
import { hotStatement } from "../../src/kernel/prepared-rows.js";

describe.skipIf(!process.env.DATABASE_URL)("pool mode and named statements (PostgreSQL)", () => {
  let scratch: ScratchDatabase;
  beforeAll(async () => {
    scratch = await createScratchDatabase();
  });
  afterAll(async () => {
    await scratch?.dispose();
  });

  async function run(database: Database) {
    const uid = "0123456789abcdef0123456789abcdef01234567";
    await database.db.insert(groups).values({ uid, name: "pool-mode" }).onConflictDoNothing();
    const find = hotStatement(database.db.select().from(groups).where(eq(groups.uid, sql.placeholder("uid"))).prepare("pool_mode_find"));
    const rows = (await find.execute({ uid })) as { uid: string; name: string }[];
    const [named] = (await database.db.execute(sql`select count(*)::int as n from pg_prepared_statements`)) as unknown as { n: number }[];
    return { rows: rows.map((r) => ({ uid: r.uid, name: r.name })), named: named!.n };
  }

  it("session mode names the hot statements; transaction mode names none, with the same rows", async () => {
    const session = await openPostgres(scratch.url, { max: 1 });
    const transaction = await openPostgres(scratch.url, { max: 1, mode: "transaction" });
    try {
      const a = await run(session);
      const b = await run(transaction);
      expect(a.named).toBeGreaterThan(0);
      expect(b.named).toBe(0);
      expect(b.rows).toEqual(a.rows);
      expect(a.rows).toEqual([{ uid: "0123456789abcdef0123456789abcdef01234567", name: "pool-mode" }]);
    } finally {
      await session.close();
      await transaction.close();
    }
  });
});
