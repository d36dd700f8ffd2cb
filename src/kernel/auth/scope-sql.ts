// The SQL form of "visible to the caller": a row is visible when its uid is one of the caller's scope roots
// or lies beneath one. Stores add this to every unscoped List so rows, counts and pages never include what
// the caller may not see.
import { sql, type SQL } from "drizzle-orm";
import type { AnyPgColumn } from "drizzle-orm/pg-core";
import { escapeLike } from "../uidp.js";

export function scopePredicate(uid: AnyPgColumn | SQL, scopes: readonly string[]): SQL {
  if (scopes.length === 0) return sql`false`;
  const parts = scopes.map((s) => sql`(${uid} = ${s} or ${uid} like ${escapeLike(s) + "/%"})`);
  return sql`(${sql.join(parts, sql` or `)})`;
}
