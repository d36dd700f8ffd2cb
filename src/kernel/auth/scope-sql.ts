// The SQL form of "visible to the caller": a row is visible when its uid is one of the caller's scope roots
// or lies beneath one. Stores add this to every unscoped List so rows, counts and pages never include what
// the caller may not see. One definition, over named values (scopePredicateOver), which scopePredicate
// fills with the scopes themselves. `uid` is a uid column (text COLLATE "C", db/schema/columns.ts uidText).
//
// Two forms, by the number of scopes (the caller's outermost scopes: no one lies within another):
//   - up to SCOPE_RANGES_MAX, one index range per scope, written out: `uid = s or (s/ <= uid < s0)`. Every
//     plan, generic or not, reads each range from the uid index, or the rows in a page's order with the
//     ranges as a filter (a few comparisons per row).
//   - beyond it, ONE array parameter, so the statement's text does not grow with the scopes (a caller bound
//     in 10,000 groups made a 10,000-way OR, which PostgreSQL planned and ran in time growing with the scopes
//     for every row: a ListGroups timed out). The rows within the scopes are read first, one index range
//     per scope, in a subquery kept apart (`offset 0`), and the row's uid must be among them: PostgreSQL
//     hashes them, or looks each up, and never compares a row with every scope. A plain semi-join to the
//     array (`exists (select from unnest(...) where uid >= s ...)`) does just that, since its join condition
//     is a range and not an equality: 32 s for a count over 30,000 repos against 10,000 scopes. The array is
//     unnested from a sub-select so every plan estimates it alike (10 elements, as a generic plan does): with
//     its real length PostgreSQL's guess of rows per range (about 1,000) sized the hash for 11 million rows,
//     and the same page took 1.7 s instead of 0.35 s.
// A bounded range, not `like`: PostgreSQL turns a `like` prefix into an index range only when it sees the
// pattern, which a cached generic plan of a named statement does not (kernel/prepared-rows.ts). In "C"
// order '0' follows '/', so [s/, s0) holds exactly the uids beginning with `s/`.
import { Column, getTableName, is, sql, type SQL } from "drizzle-orm";
import type { AnyPgColumn } from "drizzle-orm/pg-core";

/** The most scopes written out as ranges; more travel as one array (see the top of this file). */
export const SCOPE_RANGES_MAX = 32;

/** The predicate for these scopes, their values in the statement. */
export function scopePredicate(uid: AnyPgColumn | SQL, scopes: readonly string[]): SQL {
  const values = scopeValues(scopes);
  return scopePredicateOver(uid, scopes.length, (name) => sql`${sql.param(values[name])}`);
}

/**
 * The predicate over named values (prepared statements: kernel/list/prepared.ts), its text decided by
 * `count` alone (a statement's shape may be keyed by it). Up to SCOPE_RANGES_MAX scopes, `param("scope_<i>")`,
 * `param("scope_lo_<i>")` and `param("scope_hi_<i>")` for each; beyond, `param("scopes")`, a text[] of them
 * all. scopeValues gives the values.
 */
export function scopePredicateOver(uid: AnyPgColumn | SQL, count: number, param: (name: string) => unknown): SQL {
  if (count === 0) return sql`false`;
  if (count <= SCOPE_RANGES_MAX) {
    const parts = Array.from({ length: count }, (_, i) => sql`(${uid} = ${param(`scope_${i}`)} or (${uid} >= ${param(`scope_lo_${i}`)} and ${uid} < ${param(`scope_hi_${i}`)}))`);
    return sql`(${sql.join(parts, sql` or `)})`;
  }
  const within = (v: SQL) => sql`${v} >= visible_scope.s and ${v} < (visible_scope.s || '0') and (${v} = visible_scope.s or ${v} >= (visible_scope.s || '/'))`;
  if (is(uid, Column)) {
    const column = sql`visible_row.${sql.identifier(uid.name)}`;
    return sql`${uid} in (select ${column} from unnest((select ${param("scopes")}::text[])) as visible_scope(s) join ${sql.identifier(getTableName(uid.table))} as visible_row on ${within(column)} offset 0)`;
  }
  // An expression, not a column of a table: no index to read the ranges from; each row against the scopes.
  return sql`exists (select from unnest(${param("scopes")}::text[]) as visible_scope(s) where ${within(sql`${uid}`)})`;
}

/** The values of scopePredicateOver's named values for these scopes. */
export function scopeValues(scopes: readonly string[]): Record<string, string | string[]> {
  if (scopes.length > SCOPE_RANGES_MAX) return { scopes: [...scopes] };
  const out: Record<string, string> = {};
  scopes.forEach((s, i) => {
    out[`scope_${i}`] = s;
    out[`scope_lo_${i}`] = `${s}/`;
    out[`scope_hi_${i}`] = `${s}0`;
  });
  return out;
}
