// The SQL form of "visible to the caller": a row is visible when its uid is one of the caller's scope roots
// or lies beneath one. Stores add this to every unscoped List so rows, counts and pages never include what
// the caller may not see. One definition, over named values (scopePredicateOver), which scopePredicate
// fills with the scopes themselves. `uid` is a uid column (text COLLATE "C", db/schema/columns.ts uidText).
import { sql, type SQL } from "drizzle-orm";
import type { AnyPgColumn } from "drizzle-orm/pg-core";

/** The predicate for these scopes, their values in the statement. */
export function scopePredicate(uid: AnyPgColumn | SQL, scopes: readonly string[]): SQL {
  const values = scopeValues(scopes);
  return scopePredicateOver(uid, scopes.length, (name) => sql`${values[name]}`);
}

/**
 * The predicate over named values (prepared statements: kernel/list/prepared.ts): `param("scope_<i>")`,
 * `param("scope_lo_<i>")` and `param("scope_hi_<i>")` for each of `count` scopes; scopeValues gives their
 * values. "Beneath" is written as a range, `<scope>/` <= uid < `<scope>0` (uids are text COLLATE "C", where
 * '0' follows '/': exactly the uids that begin with `<scope>/`), not as `like`: PostgreSQL turns a `like`
 * prefix into an index range only when it sees the pattern, which a cached generic plan of a named statement
 * does not (kernel/prepared-rows.ts); a range over parameters is an index range in every plan.
 */
export function scopePredicateOver(uid: AnyPgColumn | SQL, count: number, param: (name: string) => unknown): SQL {
  if (count === 0) return sql`false`;
  const parts = Array.from({ length: count }, (_, i) => sql`(${uid} = ${param(`scope_${i}`)} or (${uid} >= ${param(`scope_lo_${i}`)} and ${uid} < ${param(`scope_hi_${i}`)}))`);
  return sql`(${sql.join(parts, sql` or `)})`;
}

/** The values of scopePredicateOver's named values for these scopes. */
export function scopeValues(scopes: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  scopes.forEach((s, i) => {
    out[`scope_${i}`] = s;
    out[`scope_lo_${i}`] = `${s}/`;
    out[`scope_hi_${i}`] = `${s}0`;
  });
  return out;
}
