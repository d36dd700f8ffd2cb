// The database layer on whichever database the run uses (PGlite, or PostgreSQL with DATABASE_URL):
// migrations apply, and server secrets are created once and shared, even when replicas race.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ensureSecret } from "../../src/db/secrets.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";

let database: TestDatabase;
beforeAll(async () => {
  database = await openTestDatabase();
});
afterAll(async () => {
  await database?.dispose();
});

describe("database", () => {
  it("has the migrated schema", async () => {
    const rows = await database.db.execute<{ table_name: string }>(
      sql`select table_name from information_schema.tables where table_schema = 'public' order by table_name`,
    );
    const names = (Array.isArray(rows) ? rows : (rows as { rows: Array<{ table_name: string }> }).rows).map((r) => r.table_name);
    expect(names).toContain("server_secrets");
  });

  it("creates a secret once: every caller, concurrent or later, gets the same bytes", async () => {
    const concurrent = await Promise.all(Array.from({ length: 10 }, () => ensureSecret(database.db, "test-secret")));
    const later = await ensureSecret(database.db, "test-secret");
    expect(later.length).toBe(32);
    for (const s of concurrent) expect(Buffer.from(s).equals(Buffer.from(later))).toBe(true);
    const other = await ensureSecret(database.db, "another-secret");
    expect(Buffer.from(other).equals(Buffer.from(later))).toBe(false);
  });
});
