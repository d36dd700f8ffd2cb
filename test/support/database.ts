// A database for one test file: a fresh PostgreSQL database when DATABASE_URL is set (created here and
// dropped on dispose), otherwise an in-memory PGlite instance.
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { openPglite, openPostgres, type Database, type PostgresOptions } from "../../src/db/client.js";

export interface TestDatabase extends Database {
  /** Closes the connection and drops the scratch database. */
  dispose(): Promise<void>;
}

/** `postgres`: options of the pool on PostgreSQL (its size, timeouts; PGlite has none) and the Drizzle logger (both). */
export async function openTestDatabase(postgresOptions: PostgresOptions = {}): Promise<TestDatabase> {
  const url = process.env.DATABASE_URL;
  if (!url) {
    const db = await openPglite("memory://", { logger: postgresOptions.logger });
    return { ...db, dispose: () => db.close() };
  }
  const name = `t_${process.pid}_${randomBytes(4).toString("hex")}`;
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const target = new URL(url);
  target.pathname = `/${name}`;
  const db = await openPostgres(target.toString(), { max: 5, ...postgresOptions });
  return {
    ...db,
    async dispose() {
      await db.close();
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}
