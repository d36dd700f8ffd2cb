// Server secrets generated once and shared by every replica through the database.
import { randomBytes } from "node:crypto";
import { eq } from "drizzle-orm";
import type { Db } from "./client.js";
import { serverSecrets } from "./schema/index.js";

/** Returns the named secret, creating it (32 random bytes) if no replica has yet. Safe under races. */
export async function ensureSecret(db: Db, name: string): Promise<Uint8Array> {
  await db
    .insert(serverSecrets)
    .values({ name, value: randomBytes(32).toString("base64url") })
    .onConflictDoNothing({ target: serverSecrets.name });
  const [row] = await db.select({ value: serverSecrets.value }).from(serverSecrets).where(eq(serverSecrets.name, name));
  if (!row) throw new Error(`secret ${name} missing after insert`);
  return new Uint8Array(Buffer.from(row.value, "base64url"));
}
