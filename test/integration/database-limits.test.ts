// The database's limits, on real PostgreSQL (skipped without DATABASE_URL: PGlite has no pool and runs one
// statement at a time): a statement past statement_timeout answers DEADLINE_EXCEEDED, and a query meeting a
// pool whose connections are all busy fails UNAVAILABLE (DATABASE_BUSY, RetryInfo) after a bounded wait
// instead of waiting for the slow work ahead of it, whatever its length; the pool serves again afterwards.
import { Code, type ConnectError } from "@connectrpc/connect";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { errorReasonOf, toPublicError } from "../../src/kernel/errors/index.js";
import { setLogLevel } from "../../src/kernel/log.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";

const postgres = Boolean(process.env.DATABASE_URL);

/** What a client would see for a failure: the public error. */
async function publicErrorOf(work: Promise<unknown>): Promise<ConnectError> {
  try {
    await work;
  } catch (err) {
    return toPublicError(err, "test.platform.test");
  }
  throw new Error("expected the work to fail");
}

describe.skipIf(!postgres)("database limits (PostgreSQL)", () => {
  let database: TestDatabase;

  beforeAll(async () => {
    setLogLevel("silent");
    // Two connections; a statement may run 1 s; a query waits at most 300 ms for a connection.
    database = await openTestDatabase({ max: 2, statementTimeoutMs: 1_000, acquireTimeoutMs: 300 });
  });
  afterAll(async () => {
    await database?.dispose();
  });

  it("a statement past statement_timeout is DEADLINE_EXCEEDED (STATEMENT_TIMEOUT), not INTERNAL", async () => {
    const err = await publicErrorOf(database.db.execute(sql`select pg_sleep(30)`));
    expect(Code[err.code]).toBe(Code[Code.DeadlineExceeded]);
    expect(errorReasonOf(err)).toBe("STATEMENT_TIMEOUT");
  });

  it("a query meeting an exhausted pool is UNAVAILABLE (DATABASE_BUSY) with RetryInfo, then the pool serves again", async () => {
    // Both connections busy: a slow query and a transaction holding its connection.
    const slow = database.db.execute(sql`select pg_sleep(0.9)`).then(() => undefined); // (run: Drizzle's queries are lazy)
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const transaction = database.db.transaction(async (tx) => {
      await tx.execute(sql`select 1`);
      await held;
    });
    await new Promise((r) => setTimeout(r, 100)); // both have started
    const err = await publicErrorOf(database.db.execute(sql`select 1`));
    expect(Code[err.code]).toBe(Code[Code.Unavailable]);
    expect(errorReasonOf(err)).toBe("DATABASE_BUSY");
    expect(err.findDetails(RetryInfoSchema)[0]?.retryDelay).toBeDefined();
    const tx = await publicErrorOf(database.db.transaction(async (t) => t.execute(sql`select 1`)));
    expect(errorReasonOf(tx)).toBe("DATABASE_BUSY");
    release();
    await Promise.all([slow, transaction]);
    const rows = (await database.db.execute(sql`select 1 as n`)) as unknown as Array<{ n: number }>; // postgres.js: the rows
    expect([...rows]).toEqual([{ n: 1 }]);
  });

  it("queries beyond the pool's size wait their turn when turns come within the bound", async () => {
    const results = await Promise.all(Array.from({ length: 8 }, (_, i) => database.db.execute(sql`select ${i}::int as n, pg_sleep(0.02)`)));
    expect(results.map((r) => (r as unknown as Array<{ n: number }>)[0]!.n)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
  });
});
