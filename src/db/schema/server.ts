// Server-wide state shared by every replica.
import { pgTable, text, timestamp } from "drizzle-orm/pg-core";

/** Named secrets generated on first start (for example the page-token signing key), base64url-encoded. */
export const serverSecrets = pgTable("server_secrets", {
  name: text("name").primaryKey(),
  value: text("value").notNull(),
  createTime: timestamp("create_time", { withTimezone: true, precision: 6 }).notNull().defaultNow(),
});
