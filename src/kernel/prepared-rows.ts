// Rows of a hot prepared statement mapped by a mapper built once per statement. Drizzle maps each row of a
// prepared select with mapResultRow, which decides again for every cell what kind of field it holds (its
// `is` entity checks) and walks the field's path: about 0.24 ms for a page of 50 tags, against 0.09 ms for
// the same work decided once. The mapper is generated source (compileRowMapper): 51 rows of a tags page in
// 17 µs where a loop over the fields took 37 µs (measured in process; most of what is left is the Dates).
//
// Drizzle still builds the statement, prepares it and decodes each value with the column's own
// mapFromDriverValue (timestamptz text in PostgreSQL's usual form is read by timestamptzDate, to the same
// Date), so rows are exactly what Drizzle would return. The mapper is installed through the
// prepared query's `customResultMapper`, the hook Drizzle's relational queries use (not a documented option:
// the tests of every store that uses it run on both drivers, postgres.js and PGlite).
//
// On postgres.js, a hot statement also runs as a named statement of each connection (hotStatement). Drizzle
// sends its prepared queries through the driver's `unsafe` unnamed, so PostgreSQL parses, analyses and plans
// the statement again on every call: for an index lookup of a few rows, that was most of the database's time
// (bench/LOG.md, Advisories). Named, the connection keeps the parsed statement and PostgreSQL its plan
// cache: the first five runs get a plan for their values, later ones the cached generic plan when it is
// estimated no worse. Where a generic plan can be far worse than one made for the values (a trigram search
// whose selectivity depends on the pattern), the statement is kept planned per call (`planEachCall`).
import { Column, DrizzleQueryError, entityKind, fillPlaceholders, is, SQL } from "drizzle-orm";
import { PgCustomColumn, PgTimestamp } from "drizzle-orm/pg-core";
import * as drizzleUtils from "drizzle-orm/utils";

interface FieldEntry {
  path: string[];
  field: unknown;
}

interface Decoder {
  mapFromDriverValue(value: unknown): unknown;
}

interface PreparedInternals {
  fields?: FieldEntry[];
  joinsNotNullableMap?: Record<string, boolean>;
  customResultMapper?: (rows: unknown[][]) => unknown;
  /** The database's Drizzle logger (a NoopLogger unless one was given). */
  logger?: { logQuery(query: string, params: unknown[]): void };
  execute(values?: Record<string, unknown>): Promise<unknown>;
}

/** What a postgres.js prepared query of Drizzle holds (PostgresJsPreparedQuery, drizzle-orm 0.45). */
interface PostgresJsInternals extends PreparedInternals {
  client: { unsafe(query: string, params: unknown[], options: { prepare: boolean }): { values(): Promise<unknown[][]> } };
  queryString: string;
  params: unknown[];
}

// Drizzle's own row mapping, for selections the compiled mapper does not take (joins); internal to Drizzle.
const { mapResultRow } = drizzleUtils as unknown as {
  mapResultRow(fields: FieldEntry[], row: unknown[], joins: Record<string, boolean> | undefined): Record<string, unknown>;
};

/**
 * The Date of PostgreSQL's timestamptz text ("2026-11-24 17:14:59.123456+00", offset "+05:30" and fewer
 * fraction digits too), by arithmetic: Drizzle's decoder hands the text to `new Date`, which takes V8's
 * slower legacy parser for this format (two per row of a tags page). The same instant to the millisecond
 * (the fraction truncated, as V8 does); anything else (years before 1000 or past 9999, BC, infinity, an
 * offset with seconds) goes to Drizzle's decoder. test/unit/prepared-rows.test.ts holds the two equal.
 */
export function timestamptzDate(text: string): Date | undefined {
  const n = text.length;
  if (n < 22 || text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45 || text.charCodeAt(10) !== 32 || text.charCodeAt(13) !== 58 || text.charCodeAt(16) !== 58) return undefined;
  const year = digits(text, 0, 4);
  const month = digits(text, 5, 2);
  const day = digits(text, 8, 2);
  const hour = digits(text, 11, 2);
  const minute = digits(text, 14, 2);
  const second = digits(text, 17, 2);
  if (year < 1000 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59) return undefined;
  let at = 19;
  let ms = 0;
  if (text.charCodeAt(at) === 46) {
    const from = ++at;
    while (at < n && at - from < 6 && isDigit(text.charCodeAt(at))) at++;
    if (at === from) return undefined;
    const taken = Math.min(at - from, 3);
    ms = digits(text, from, taken) * (taken === 1 ? 100 : taken === 2 ? 10 : 1);
  }
  const sign = text.charCodeAt(at);
  if ((sign !== 43 && sign !== 45) || (n !== at + 3 && n !== at + 6)) return undefined;
  const offsetHours = digits(text, at + 1, 2);
  let offsetMinutes = 0;
  if (n === at + 6) {
    if (text.charCodeAt(at + 3) !== 58) return undefined;
    offsetMinutes = digits(text, at + 4, 2);
  }
  if (offsetHours < 0 || offsetMinutes < 0) return undefined;
  const offset = (offsetHours * 60 + offsetMinutes) * 60_000 * (sign === 43 ? 1 : -1);
  return new Date(Date.UTC(year, month - 1, day, hour, minute, second, ms) - offset);
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

/** The decimal number of `length` digits at `from`, or -1 when one is not a digit. */
function digits(text: string, from: number, length: number): number {
  let v = 0;
  for (let i = from; i < from + length; i++) {
    const c = text.charCodeAt(i);
    if (c < 48 || c > 57) return -1;
    v = v * 10 + (c - 48);
  }
  return v;
}

function decoderOf(field: unknown): Decoder {
  if (is(field, Column)) return field as unknown as Decoder;
  if (is(field, SQL)) return (field as unknown as { decoder: Decoder }).decoder;
  return (field as { sql: { decoder: Decoder } }).sql.decoder;
}

/**
 * Whether a column hands the driver's value back as it is: Drizzle's base Column (text, boolean, smallint,
 * ...), or a custom type without a fromDriver (uid columns, db/schema/columns.ts uidText).
 */
export function isIdentity(decoder: Decoder): boolean {
  if (decoder.mapFromDriverValue === (Column.prototype as unknown as Decoder).mapFromDriverValue) return true;
  return is(decoder, PgCustomColumn) && (decoder as unknown as { mapFrom?: unknown }).mapFrom === undefined;
}

/**
 * Rows as arrays (the driver's array mode, in the order of `fields`) to objects shaped like the selection
 * (`{ row: { ... }, keys: { k0 }, total }`), every value decoded by its column. The mapper is generated as
 * source, one object literal per row: each row is then built in one step with a fixed shape, where a loop
 * storing `row[name]` key by key walked every object through a chain of shapes, and columns that return the
 * driver's value (text, booleans, numbers, arrays) are not called at all. Names enter the source only as
 * JSON.stringify'd literals; decoders come in as `d[i]`.
 */
export function compileRowMapper(fields: readonly FieldEntry[]): (rows: unknown[][]) => Record<string, unknown>[] {
  if (fields.some((f) => f.path.length > 2)) throw new Error("compileRowMapper: selections nest at most one level");
  const decoders = fields.map((f) => decoderOf(f.field));
  // Each value's expression: `v[i]` as it is, or decoded (null and undefined read as null, as Drizzle does).
  const value = (i: number): string => {
    const decoder = decoders[i]!;
    if (isIdentity(decoder)) return `(v[${i}] ?? null)`;
    if (is(fields[i]!.field, PgTimestamp) && (fields[i]!.field as { withTimezone: boolean }).withTimezone) {
      return `((x = v[${i}]) == null ? null : typeof x === "string" ? (td(x) ?? d[${i}].mapFromDriverValue(x)) : d[${i}].mapFromDriverValue(x))`;
    }
    return `((x = v[${i}]) == null ? null : d[${i}].mapFromDriverValue(x))`;
  };
  // The outer names in order of first appearance, each with its value or its nested members.
  const outer = new Map<string, { i: number } | [string, number][]>();
  fields.forEach((f, i) => {
    const [name, member] = f.path as [string, string | undefined];
    if (member === undefined) outer.set(name, { i });
    else {
      const group = outer.get(name);
      if (Array.isArray(group)) group.push([member, i]);
      else outer.set(name, [[member, i]]);
    }
  });
  const literal = [...outer]
    .map(([name, v]) => `${JSON.stringify(name)}: ${Array.isArray(v) ? `{ ${v.map(([m, i]) => `${JSON.stringify(m)}: ${value(i)}`).join(", ")} }` : value(v.i)}`)
    .join(", ");
  const source = `"use strict";
  return function mapRows(rows) {
    const out = new Array(rows.length);
    let x;
    for (let r = 0; r < rows.length; r++) {
      const v = rows[r];
      out[r] = { ${literal} };
    }
    return out;
  };`;
  const make = new Function("d", "td", source) as (d: readonly Decoder[], td: typeof timestamptzDate) => (rows: unknown[][]) => Record<string, unknown>[];
  return make(decoders, timestamptzDate);
}

/**
 * Installs the compiled mapper on a prepared select of one table or of inner joins (a left or right join's
 * nullable side needs Drizzle's own mapping, which turns an all-null side into null) and returns it; a query
 * that is not such a select is returned unchanged.
 */
function withCompiledRows<P>(prepared: P): P {
  const q = prepared as unknown as PreparedInternals;
  const nullableJoin = q.joinsNotNullableMap !== undefined && Object.values(q.joinsNotNullableMap).some((notNull) => !notNull);
  if (!q.fields || nullableJoin || q.customResultMapper) return prepared;
  q.customResultMapper = compileRowMapper(q.fields);
  return prepared;
}

function isPostgresJs(q: PreparedInternals): q is PostgresJsInternals {
  const kind = (q.constructor as { [entityKind]?: string })[entityKind];
  const c = q as Partial<PostgresJsInternals>;
  return kind === "PostgresJsPreparedQuery" && typeof c.client?.unsafe === "function" && typeof c.queryString === "string" && Array.isArray(c.params);
}

interface HotStatementOptions {
  /**
   * Plan the statement for each call's values (Drizzle's unnamed statement) instead of letting PostgreSQL
   * cache a generic plan: for statements whose best plan depends on the values, e.g. a pattern search.
   */
  planEachCall?: boolean;
}

/**
 * A prepared select made hot: rows mapped by the compiled mapper (withCompiledRows) and, on postgres.js, run
 * as a named statement of each connection (see the top of this file). The rows, a failed query's
 * DrizzleQueryError, and what the database's Drizzle logger hears, are those Drizzle's execute gives; on other drivers (PGlite) only the mapper changes. A client made with `prepare: false` (e.g. behind
 * a transaction-mode pooler) keeps its statements unnamed: postgres.js honours the client's setting first.
 */
export function hotStatement<P>(prepared: P, opts: HotStatementOptions = {}): P {
  withCompiledRows(prepared);
  const q = prepared as unknown as PreparedInternals;
  if (opts.planEachCall || !q.fields || !isPostgresJs(q)) return prepared;
  const { client, queryString, params, fields, joinsNotNullableMap } = q;
  const map = q.customResultMapper ?? ((rows: unknown[][]) => rows.map((row) => mapResultRow(fields, row, joinsNotNullableMap)));
  q.execute = async (values = {}) => {
    const bound = fillPlaceholders(params, values);
    q.logger?.logQuery(queryString, bound);
    let rows: unknown[][];
    try {
      rows = await client.unsafe(queryString, bound, { prepare: true }).values();
    } catch (err) {
      // As Drizzle's own execute reports a failed query: the driver's error as the cause.
      throw new DrizzleQueryError(queryString, bound, err as Error);
    }
    return map(rows);
  };
  return prepared;
}

/** What a postgres.js session of Drizzle holds (PostgresJsSession, drizzle-orm 0.45). */
interface PostgresJsSessionInternals {
  client: { unsafe(query: string, params: unknown[], options: { prepare: boolean }): Promise<unknown> };
  logger?: { logQuery(query: string, params: unknown[]): void };
}

/** What every Drizzle database and transaction holds: its session and the dialect that writes its SQL. */
interface DatabaseInternals {
  session?: unknown;
  dialect?: { sqlToQuery(query: SQL): { sql: string; params: unknown[] } };
}

function postgresJsSessionOf(db: unknown): PostgresJsSessionInternals | undefined {
  const session = (db as DatabaseInternals).session;
  if (!session || (session.constructor as { [entityKind]?: string })[entityKind] !== "PostgresJsSession") return undefined;
  return typeof (session as Partial<PostgresJsSessionInternals>).client?.unsafe === "function" ? (session as PostgresJsSessionInternals) : undefined;
}

/**
 * A raw statement (what `db.execute(query)` runs) made hot: on postgres.js, run as a named statement of the
 * connection, as hotStatement runs a select (see the top of this file), for a statement a hot path sends with
 * the same text on every call, every value a parameter (a write and its event in one statement). Resolves to
 * what `db.execute` resolves to (on postgres.js, the rows as objects), and a failed query rejects with the
 * same DrizzleQueryError; on other drivers (PGlite) it is `db.execute`.
 */
export async function executeHot(db: { execute(query: SQL): PromiseLike<unknown> }, query: SQL): Promise<unknown> {
  const session = postgresJsSessionOf(db);
  const dialect = (db as DatabaseInternals).dialect;
  if (!session || !dialect) return db.execute(query);
  const { sql: text, params } = dialect.sqlToQuery(query);
  session.logger?.logQuery(text, params);
  try {
    return await session.client.unsafe(text, params, { prepare: true });
  } catch (err) {
    throw new DrizzleQueryError(text, params, err as Error);
  }
}
