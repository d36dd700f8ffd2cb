// Prepared list pages: the statement of a hot list built once per shape, with placeholders for every value,
// and executed with the values of each request. Building a Drizzle select (its selection, predicates, order
// and the SQL text) cost about as much CPU per page as postgres.js spends reading the rows; a prepared
// statement pays it once. The statement is the one keysetPage would build (same selection, predicates,
// order, limit + 1 and skip), so pages, tokens and totals are the same.
//
// A shape is everything the statement's text depends on: the store's own part (how many scopes, which
// optional filters are present) and the plan's (order terms, whether there is a cursor and which of its
// values are null, whether the total is read). Values never are: they travel as parameters.
//
//   const pages = createPreparedList(db, { name: "tags", table: tags, orderColumns });
//   pages.page(plan, { shape, where: (p) => and(eq(tags.repoUid, p("repo")), ...), total: (p) => ..., values: { repo } });
import { and, Column, getTableColumns, is, sql, type SQL } from "drizzle-orm";
import type { PgColumn, PgSelect, PgTable } from "drizzle-orm/pg-core";
import { completePage, keysetOrderBy, keysetPredicate, readTotal, sortKeySelection, totalSelection, type AnyPgDatabase, type KeyedRow, type ListPage, type OrderColumn, type OrderColumns } from "./keyset.js";
import { orderText } from "./order-by.js";
import type { ListPlan } from "./plan.js";
import { hotStatement, isIdentity } from "../prepared-rows.js";

/** A named value of the statement: a placeholder when preparing, the value itself when a statement is built for once. */
export type Param = (name: string) => SQL | SQL.Aliased | ReturnType<typeof sql.placeholder>;

/**
 * Named values bound in place, for a statement built for one call from a query over named values. Each value
 * is one parameter, an array too (`= any($1::text[])`): Drizzle would write a bare array as a list `($1, $2)`.
 */
export function boundValues(values: Record<string, unknown>): Param {
  return (name) => sql`${sql.param(values[name])}`;
}

export interface PreparedListQuery {
  /** What the store's part of the statement text depends on (e.g. "scopes=1;kinds=1;name"). */
  shape: string;
  /** The filters and the caller's scope predicate, over named values. */
  where: (p: Param) => SQL | undefined;
  /** The total of the rows `where` selects, as one scalar expression over named values. */
  total: (p: Param) => SQL;
  /** The named values `where` and `total` use. */
  values: Record<string, unknown>;
  /**
   * Plan this shape's statement for each call's values instead of letting PostgreSQL cache a generic plan
   * (kernel/prepared-rows.ts, hotStatement): for filters whose best plan depends on the value, e.g. a pattern.
   */
  planEachCall?: boolean;
}

interface PreparedListOptions<T extends PgTable> {
  /** Names the statements (for reading a server's statements; unique per store). */
  name: string;
  table: T;
  /** The allow-list keys mapped to columns; must include uid. */
  orderColumns: OrderColumns;
  /** Shapes kept (default 256); past it the oldest statement is dropped. */
  maxShapes?: number;
  /**
   * What a row selects (default: every column of the table), e.g. the columns and correlated subqueries;
   * a page's rows are then of that shape (the caller's `Row`).
   */
  columns?: Record<string, unknown>;
  /**
   * Inner joins the selection reads from (e.g. a binding's identity, group and role), added to
   * `select ... from <table>`; the rows are still mapped by the compiled mapper (no join's side is nullable).
   */
  joins?: (from: PgSelect) => PgSelect;
}

interface Prepared {
  execute(values: Record<string, unknown>): Promise<unknown>;
}

/** A shape's statement, and how the keyset values of a row it returns are read. */
interface Statement {
  prepared: Prepared;
  keysOf: (last: KeyedRow<unknown>) => (string | null)[];
}

/** A text column's SQL type (text, varchar, a collated text such as the uid columns'); not arrays, not char (padded). */
const TEXT_TYPE = /^(?:text|varchar(?:\(\d+\))?|character varying(?:\(\d+\))?)(?: COLLATE "[^"]+")?$/;

/**
 * The member of the row selection that holds `column` itself, when the column's value as read is exactly its
 * `::text` (a text column read as it is): the keyset value is then taken from the row instead of being
 * selected again beside it (for a page ordered by uid or name, one value less per row).
 */
function exactTextMember(row: Record<string, unknown>, column: OrderColumn): string | undefined {
  if (!is(column, Column) || !TEXT_TYPE.test((column as PgColumn).getSQLType()) || !isIdentity(column as never)) return undefined;
  return Object.keys(row).find((k) => row[k] === column);
}

/** Pages of `table` through statements prepared once per shape, over `db` (the database or a transaction). */
export function createPreparedList<T extends PgTable, Row = T["$inferSelect"]>(db: AnyPgDatabase, opts: PreparedListOptions<T>) {
  const statements = new Map<string, Statement>();
  const rowColumns = (opts.columns ?? getTableColumns(opts.table)) as Record<string, unknown>;
  // Names only grow: a shape prepared after an eviction does not take an evicted statement's name.
  let count = 0;
  const max = opts.maxShapes ?? 256;
  const placeholder: Param = (name) => sql.placeholder(name);

  function prepare(key: string, plan: ListPlan, q: PreparedListQuery): Statement {
    // The plan's values replaced by placeholders: the cursor (null stays null: it shapes the predicate).
    const cursor = plan.cursor?.map((v, i) => (v === null ? null : (sql.placeholder(`list_k${i}`) as unknown as string)));
    const shaped = { ...plan, cursor };
    // Each term's keyset value: from the row's own member (a text column), or selected as k<i>.
    const members = plan.order.map((t) => exactTextMember(rowColumns, opts.orderColumns[t.key]!));
    const keys = Object.fromEntries(Object.entries(sortKeySelection(plan, opts.orderColumns)).filter((_, i) => members[i] === undefined));
    const keysOf = (last: KeyedRow<unknown>) =>
      members.map((m, i) => (m === undefined ? last.keys?.[`k${i}`] : (last.row as Record<string, string | null>)[m]) ?? null);
    const from = db
      .select({
        row: rowColumns as ReturnType<typeof getTableColumns<T>>,
        ...(Object.keys(keys).length > 0 ? { keys } : {}),
        ...totalSelection(plan, q.total(placeholder)),
      })
      .from(opts.table as PgTable)
      .$dynamic();
    const prepared = (opts.joins ? opts.joins(from) : from)
      .where(and(q.where(placeholder), keysetPredicate(shaped, opts.orderColumns)))
      .orderBy(...keysetOrderBy(plan, opts.orderColumns))
      .limit(sql.placeholder("list_limit"))
      .offset(sql.placeholder("list_skip"))
      .prepare(`${opts.name}_list_${count++}`);
    hotStatement(prepared, { planEachCall: q.planEachCall });
    if (statements.size >= max) statements.delete(statements.keys().next().value!);
    const statement = { prepared, keysOf };
    statements.set(key, statement);
    return statement;
  }

  return {
    /** The plan's page (see keysetPage: one statement; an empty page that needs a total counts in a second). */
    async page(plan: ListPlan, q: PreparedListQuery): Promise<ListPage<Row>> {
      const nulls = plan.cursor ? plan.cursor.map((v) => (v === null ? "n" : "v")).join("") : "-";
      const key = `${q.shape}|${q.planEachCall ? "planned|" : ""}${orderText(plan.order)}|${nulls}|${plan.total === undefined ? "total" : ""}`;
      const statement = statements.get(key) ?? prepare(key, plan, q);
      const values: Record<string, unknown> = { ...q.values, list_limit: plan.limit + 1, list_skip: plan.skip };
      if (plan.cursor) plan.cursor.forEach((v, i) => v !== null && (values[`list_k${i}`] = v));
      const rows = (await statement.prepared.execute(values)) as KeyedRow<Row>[];
      return completePage(plan, rows, () => readTotal(db, q.total(boundValues(q.values))), statement.keysOf);
    },
  };
}
