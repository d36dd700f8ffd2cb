// Server secrets (and settings) generated once and shared by every replica through the database.
import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import type { Db } from "./client.js";
import { serverSecrets } from "./schema/index.js";

/** Returns the named secret, creating it (32 random bytes) if no replica has yet. Safe under races. */
export async function ensureSecret(db: Db, name: string): Promise<Uint8Array> {
  return new Uint8Array(Buffer.from(await ensureStored(db, name, randomBytes(32).toString("base64url")), "base64url"));
}

/**
 * Returns the value stored under `name`, storing `value` first when none is (the first start, or replica,
 * decides; the later ones read it). Safe under races.
 */
export async function ensureStored(db: Db, name: string, value: string): Promise<string> {
  await db.insert(serverSecrets).values({ name, value }).onConflictDoNothing({ target: serverSecrets.name });
  const [row] = await db.select({ value: serverSecrets.value }).from(serverSecrets).where(eq(serverSecrets.name, name));
  if (!row) throw new Error(`${name} missing after insert`);
  return row.value;
}
