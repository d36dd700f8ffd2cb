// Server-wide state shared by every replica.
import { bigint, pgTable, text, timestamp } from "drizzle-orm/pg-core";

/** Named secrets generated on first start (for example the page-token signing key), base64url-encoded. */
export const serverSecrets = pgTable("server_secrets", {
  name: text("name").primaryKey(),
  value: text("value").notNull(),
  createTime: timestamp("create_time", { withTimezone: true, precision: 6 }).notNull().defaultNow(),
});

/**
 * Where each identity's latest write stands, for reads from replicas (db/read-routing.ts): the transaction id
 * of the identity's last unit of work, written in that unit's transaction, until `expire_time`. A read of
 * the identity goes to a replica only once the replica sees that transaction committed. UNLOGGED (the
 * migration says so; drizzle-kit has no word for it): read on the primary only, never replicated, and no WAL
 * for a row written with every write.
 */
export const readPositions = pgTable("read_positions", {
  identity: text("identity").primaryKey(),
  xid: bigint("xid", { mode: "bigint" }).notNull(),
  expireTime: timestamp("expire_time", { withTimezone: true, precision: 6 }).notNull(),
});
