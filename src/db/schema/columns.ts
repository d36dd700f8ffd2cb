// Column helpers shared by every domain's tables.
import { customType, timestamp } from "drizzle-orm/pg-core";

/**
 * A uid column. Byte-order ("C") collation, so `uid LIKE 'prefix/%'` (uidp.descendants_of, scope filters)
 * can use the btree index, and ordering is the same on every database.
 */
export const uidText = customType<{ data: string; driverData: string }>({
  dataType: () => `text COLLATE "C"`,
});

/** A timestamp with microseconds and time zone, as PostgreSQL stores it. */
export const instant = (name: string) => timestamp(name, { withTimezone: true, precision: 6, mode: "date" });
