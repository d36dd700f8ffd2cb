// The one adapter from a ListPlan to SQL: keyset continuation, limit + 1 rows, no OFFSET for continuation.
//
// - Continuation is `WHERE (c1, ..., uid) > (v1, ..., u)` (or `<` for descending) when every term has the
//   same direction and every column is NOT NULL, so a btree index on (c1, ..., uid) serves both the filter
//   and the order (scanned backwards for descending). Mixed directions or nullable columns use the expanded,
//   NULL-aware form `c1 > v1 OR (c1 = v1 AND (c2 > v2 OR ...))`, with PostgreSQL's default NULL placement
//   (NULLs sort as the greatest value: last ascending, first descending).
// - The keyset position is read back from each row as `(column)::text`: PostgreSQL's own text form, which is
//   exact (a timestamptz keeps its microseconds and its offset, where a JavaScript Date would round to
//   milliseconds and skip or repeat rows at page boundaries). The cursor values are sent back as untyped
//   parameters and PostgreSQL parses them as the column's type. This relies on the default DateStyle (ISO),
//   which both drivers use.
// - `skip` is an OFFSET applied after the keyset position (explicitly requested by the client).
// - The total is counted once, on the first page, and carried in the token; a first page that is also the
//   last one needs no count at all (skip + rows). The count is a scalar subquery of the page's own
//   statement (one round trip, evaluated once by PostgreSQL as an InitPlan); only a page that comes back
//   empty and still needs a total counts in a statement of its own. A store can supply a cheaper total
//   expression (a read of maintained counters).
import { and, Column, getTableColumns, is, or, sql, type SQL } from "drizzle-orm";
import type { AnyPgColumn, PgDatabase, PgQueryResultHKT, PgSelect, PgTable } from "drizzle-orm/pg-core";
import type { ListPlan } from "./plan.js";
import type { OrderTerm } from "./order-by.js";

/** A Drizzle database of either driver (pglite, postgres-js), or a transaction of one. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyPgDatabase = PgDatabase<PgQueryResultHKT, any, any>;

/** A sortable column or expression. Expressions are treated as nullable (the expanded, NULL-aware form). */
export type OrderColumn = AnyPgColumn | SQL;
/** The allow-list keys (proto field names) mapped to columns; must include `uid`, which must be unique. */
export type OrderColumns = Readonly<Record<string, OrderColumn>>;

export interface ListPage<Row> {
  rows: Row[];
  /** Empty on the last page. */
  nextPageToken: string;
  totalCount: bigint;
  skipped: number;
}

/** A fetched row with its keyset values (one text value per order term). */
export interface KeyedRow<Row> {
  row: Row;
  /**
   * The keyset values as the statement selected them: k0, k1, ... (sortKeySelection), PostgreSQL text.
   * Absent when every value is read from the row itself (completePage's `keysOf`).
   */
  keys?: Record<string, string | null>;
  /** The total, when the page's statement selected it (see totalSelection); the same on every row. */
  total?: string | null;
}

function columnsOf(order: readonly OrderTerm[], columns: OrderColumns): OrderColumn[] {
  if (!("uid" in columns)) throw new Error("orderColumns must include uid");
  return order.map((t) => {
    const c = columns[t.key];
    if (c === undefined) throw new Error(`orderColumns has no column for order key ${t.key}`);
    return c;
  });
}

function isNotNull(c: OrderColumn): boolean {
  return is(c, Column) && c.notNull;
}

/** The keyset continuation predicate for the plan's cursor, or undefined on a first page. */
export function keysetPredicate(plan: Pick<ListPlan, "order" | "cursor">, columns: OrderColumns): SQL | undefined {
  const { order, cursor } = plan;
  if (!cursor) return undefined;
  const cols = columnsOf(order, columns);
  if (cursor.length !== cols.length) throw new Error("cursor does not match the order");
  const first = order[0];
  const sameDirection = order.every((t) => t.desc === first?.desc);
  if (sameDirection && cols.every(isNotNull) && cursor.every((v) => v !== null)) {
    const lhs = sql.join(cols.map((c) => sql`${c}`), sql`, `);
    const rhs = sql.join(cursor.map((v) => sql`${v}`), sql`, `);
    return first?.desc ? sql`(${lhs}) < (${rhs})` : sql`(${lhs}) > (${rhs})`;
  }
  const branches: SQL[] = [];
  for (let i = 0; i < cols.length; i++) {
    const after = afterValue(cols[i]!, order[i]!.desc, cursor[i]!);
    if (after === undefined) continue;
    const equal = cols.slice(0, i).map((c, j) => equalValue(c, cursor[j]!));
    branches.push(equal.length === 0 ? after : and(...equal, after)!);
  }
  return branches.length === 0 ? sql`false` : or(...branches)!;
}

function equalValue(c: OrderColumn, v: string | null): SQL {
  return v === null ? sql`${c} IS NULL` : sql`${c} = ${v}`;
}

/** Rows strictly after value v in the term's direction (NULLs sort greatest), or undefined for none. */
function afterValue(c: OrderColumn, desc: boolean, v: string | null): SQL | undefined {
  if (v === null) return desc ? sql`${c} IS NOT NULL` : undefined;
  if (desc) return sql`${c} < ${v}`;
  return isNotNull(c) ? sql`${c} > ${v}` : sql`(${c} > ${v} OR ${c} IS NULL)`;
}

/** The ORDER BY terms of the plan. */
export function keysetOrderBy(plan: Pick<ListPlan, "order">, columns: OrderColumns): SQL[] {
  const cols = columnsOf(plan.order, columns);
  return cols.map((c, i) => (plan.order[i]!.desc ? sql`${c} desc` : sql`${c} asc`));
}

/**
 * Selection of the keyset values, exact, as text: `{ k0: (c0)::text AS "list_k0", ... }`. Aliased so the
 * output column (which PostgreSQL would otherwise name after the column) can never be confused with the
 * column in an unqualified ORDER BY.
 */
export function sortKeySelection(plan: Pick<ListPlan, "order">, columns: OrderColumns): Record<string, SQL.Aliased<string | null>> {
  const cols = columnsOf(plan.order, columns);
  return Object.fromEntries(cols.map((c, i) => [`k${i}`, sql<string | null>`(${c})::text`.as(`list_k${i}`)]));
}

/**
 * The selection of the total for a page's statement, `{ total: (<expression>)::text AS "list_total" }`, when
 * the plan needs one (no total carried in its token); otherwise nothing is selected.
 */
export function totalSelection(plan: Pick<ListPlan, "total">, total: SQL): { total?: SQL.Aliased<string | null> } {
  return plan.total === undefined ? { total: sql<string | null>`(${total})::text`.as("list_total") } : {};
}

/**
 * Turns the limit + 1 rows fetched for a plan into a page: trims the extra row, mints the next token from
 * the last row kept (its keyset values read by `keysOf`, by default its selected k0, k1, ...), and takes the
 * total from the token, from the page itself when it is the whole result, from the rows' selected total
 * (totalSelection), or from `count` (called at most once, and only when there is no carried or selected total).
 */
export async function completePage<Row>(
  plan: ListPlan,
  fetched: readonly KeyedRow<Row>[],
  count: () => Promise<bigint | number>,
  keysOf: (last: KeyedRow<Row>) => (string | null)[] = (last) => plan.order.map((_, i) => last.keys?.[`k${i}`] ?? null),
): Promise<ListPage<Row>> {
  const hasMore = fetched.length > plan.limit;
  const kept = hasMore ? fetched.slice(0, plan.limit) : fetched;
  let total = plan.total;
  if (total === undefined) {
    const selected = fetched[0]?.total;
    if (!plan.cursor && !hasMore && (kept.length > 0 || plan.skip === 0)) total = BigInt(plan.skip + kept.length);
    else if (selected !== undefined && selected !== null) total = BigInt(selected);
    else total = BigInt(await count());
  }
  const last = kept[kept.length - 1];
  const nextPageToken = hasMore && last ? plan.tokens.mint(keysOf(last), total) : "";
  return { rows: kept.map((k) => k.row), nextPageToken, totalCount: total, skipped: plan.skip };
}

interface ListPageOptions<T extends PgTable> {
  table: T;
  /** Filters and the caller's scope predicate, built by the store. */
  where?: SQL | undefined;
  /** The allow-list keys mapped to columns; must include uid. */
  orderColumns: OrderColumns;
  plan: ListPlan;
  /**
   * The total of the filtered rows as one scalar SQL expression, for example a read of maintained counters.
   * Default: `(select count(*) from <table> where <where>)`. Read in the page's own statement, and only
   * when the page needs a total.
   */
  total?: SQL;
}

/**
 * What a page's statement selects beside its row: the keyset values, and the total when the page needs one
 * (`select({ row: <columns>, ...pageColumns(plan, orderColumns, total) })`).
 */
export function pageColumns(
  plan: Pick<ListPlan, "order" | "total">,
  columns: OrderColumns,
  total: SQL,
): { keys: Record<string, SQL.Aliased<string | null>>; total?: SQL.Aliased<string | null> } {
  return { keys: sortKeySelection(plan, columns), ...totalSelection(plan, total) };
}

/** A row of a page's statement: the store's row, its keyset values and (when selected) the total. */
type PageRowOf<Q> = Awaited<Q> extends readonly { row: infer Row }[] ? Row : never;

interface KeysetPageOptions {
  plan: ListPlan;
  /** The allow-list keys mapped to columns; must include uid. */
  orderColumns: OrderColumns;
  /** Filters and the caller's scope predicate, built by the store. */
  where: SQL | undefined;
  /** The total of the rows `where` selects, as one scalar SQL expression (see pageColumns). */
  total: SQL;
}

/**
 * Runs a plan on a select whose FROM (and joins) the store has set and which selects
 * `{ row, ...pageColumns(...) }` (made `$dynamic()`): adds the filters and the keyset position, the order,
 * limit + 1 and the skip, and turns the rows into a page. One statement; a page that needs a total but comes
 * back empty (past the end) counts in a second one.
 */
export async function keysetPage<Q extends PgSelect>(db: AnyPgDatabase, query: Q, opts: KeysetPageOptions): Promise<ListPage<PageRowOf<Q>>> {
  const { plan, orderColumns } = opts;
  const rows = (await query
    .where(and(opts.where, keysetPredicate(plan, orderColumns)))
    .orderBy(...keysetOrderBy(plan, orderColumns))
    .limit(plan.limit + 1)
    .offset(plan.skip)) as KeyedRow<PageRowOf<Q>>[];
  return completePage(plan, rows, () => readTotal(db, opts.total));
}

/** Runs a plan against one table: keysetPage over `select <every column> from <table>`. */
export async function listPage<T extends PgTable>(db: AnyPgDatabase, options: ListPageOptions<T>): Promise<ListPage<T["$inferSelect"]>> {
  const { table, plan, orderColumns, where } = options;
  const total = options.total ?? countExpression(table, where);
  const query = db
    .select({ row: getTableColumns(table), ...pageColumns(plan, orderColumns, total) })
    .from(table as PgTable)
    .$dynamic();
  return (await keysetPage(db, query, { plan, orderColumns, where, total })) as ListPage<T["$inferSelect"]>;
}

/** `(select count(*) from <table> where <where>)`: uncorrelated, so PostgreSQL evaluates it once per statement. */
export function countExpression(table: PgTable, where: SQL | undefined): SQL {
  return where ? sql`(select count(*) from ${table} where ${where})` : sql`(select count(*) from ${table})`;
}

/** Reads a total expression in a statement of its own. */
export async function readTotal(db: AnyPgDatabase, total: SQL): Promise<bigint> {
  const [row] = await db.select({ n: sql<string>`(${total})::text` }).from(sql`(select 1) as list_one`);
  return BigInt(row?.n ?? 0);
}

/** The response fields of a page: `create(ListXResponseSchema, { xs: page.rows.map(toX), ...pageFields(page) })`. */
export function pageFields(page: Pick<ListPage<unknown>, "nextPageToken" | "totalCount" | "skipped">): {
  nextPageToken: string;
  totalCount: bigint;
  skipped: number;
} {
  return { nextPageToken: page.nextPageToken, totalCount: page.totalCount, skipped: page.skipped };
}
