// Advisories, their events and their OSV severities in the database, read-only here (import.ts writes them).
// A page is one statement, whatever its size: the advisories by keyset (with the total on a first page), each
// row carrying its events and the severities of the OSV records its aliases name (correlated subqueries),
// prepared once per filter shape (which filters; for some, one value or several) with the values as parameters.
import { and, eq, getTableColumns, getTableName, sql, type SQL } from "drizzle-orm";
import { advisories, advisoryAliases, advisoryEvents, advisoryNamedByAny, osvRecordInForce, osvRecords, type AdvisoryEventRow, type AdvisoryRow, type OsvSeverity } from "../db/schema/index.js";
import { hotStatement } from "../kernel/prepared-rows.js";
import { arrayTypeOf } from "../kernel/store.js";
import { countExpression, createPreparedList, type ListPage, type ListPlan, type Param, type PreparedListQuery } from "../kernel/list/index.js";
import type { AnyPgColumn } from "drizzle-orm/pg-core";
import type { Executor } from "../kernel/store.js";
import { ancestorsOf, escapeLike } from "../kernel/uidp.js";

/** The filters of ListAdvisories, validated (advisories.service.ts). Empty lists filter nothing. */
export interface AdvisoryFilter {
  uids?: readonly string[];
  /** uidp.ancestors_of: the advisory owning an event uid (advisories have no ancestors). */
  ancestorsOf?: string;
  /** Set when the request selects nothing by construction (legacy ids, origin, descendants_of, children_of). */
  none?: boolean;
  advisoryIds: readonly string[];
  artifactNames: readonly string[];
  artifactTypes: readonly string[];
  artifactArchitectures: readonly string[];
  componentNames: readonly string[];
  componentTypes: readonly string[];
  componentLocations: readonly string[];
  aliases: readonly string[];
  eventReviewStates: readonly number[];
  eventAuthors: readonly string[];
  excludeEventAuthors: readonly string[];
  eventReviewers: readonly string[];
  eventTypes: readonly number[];
  latestEventType?: number;
  /** Case-insensitive substring of the package, the component name or an alias; "" for any. */
  query: string;
}

/** An advisory with what its message needs beside its row. */
export interface AdvisoryWithEvents {
  row: AdvisoryRow;
  events: AdvisoryEventRow[];
  severities: OsvSeverity[];
}

const order = {
  uid: advisories.uid,
  advisory_id: advisories.advisoryId,
  artifact_name: advisories.package,
  create_time: advisories.createTime,
  update_time: advisories.updateTime,
} as const;

/** `advisories.uid IN (advisory uids of events matching `where`)`: a semi-join over an events index. */
function hasEvent(where: SQL | undefined): SQL {
  return sql`${advisories.uid} in (select ${advisoryEvents.advisoryUid} from ${advisoryEvents} where ${where})`;
}

/**
 * A filter as the predicate of a prepared page (kernel/list/prepared.ts): the predicate over named values,
 * the values, and the shape the statement's text depends on: which filters are given and, for some, whether
 * with one value or several, never how many. The values travel as parameters (several as one array), so one
 * statement serves every request of a shape, whatever the number of values.
 */
function advisoryQuery(f: AdvisoryFilter): PreparedListQuery {
  if (f.none) return { shape: "none", where: () => sql`false`, total: () => sql`0`, values: {} };
  const values: Record<string, unknown> = {};
  const shape: string[] = [];
  const parts: ((p: Param) => SQL | undefined)[] = [];
  /** The values as one array parameter `<name>`: `= any($n::<type>[])` whatever their number. */
  const anyOf = (name: string, column: AnyPgColumn, list: readonly unknown[]) => {
    shape.push(name);
    values[name] = [...list];
    return (p: Param) => sql`${p(name)}::${arrayTypeOf(column)}`;
  };
  /**
   * `column` equal to one of `list`: one value as `column = $n`, several as `column = any($n::<type>[])`.
   * These columns lead an index of (column, uid) (and event filters one of (column, advisory_uid)), which
   * gives a page in uid order for one value only: a generic plan of `= any($n)` for one value cannot stop
   * after a page and, estimating ten values, walked the primary key past every advisory for a value no row
   * has (300,000 rows removed by the filter, 84 ms, against 0.05 ms for `= $1`; bench/LOG.md). So one value
   * keeps its own statement and any number of values beyond shares one.
   */
  const equalTo = (name: string, column: AnyPgColumn, list: readonly unknown[]): ((p: Param) => SQL) => {
    if (list.length === 1) {
      shape.push(name);
      values[name] = list[0];
      return (p) => sql`${column} = ${p(name)}`;
    }
    const array = anyOf(`${name}[]`, column, list);
    return (p) => sql`${column} = any(${array(p)})`;
  };
  const oneOf = (name: string, column: AnyPgColumn, list: readonly unknown[]) => {
    if (list.length === 0) return;
    const predicate = equalTo(name, column, list);
    parts.push(predicate);
  };
  const withEvent = (name: string, column: AnyPgColumn, list: readonly unknown[], negate = false) => {
    if (list.length === 0) return;
    const predicate = equalTo(name, column, list);
    parts.push((p) => (negate ? sql`not ${hasEvent(predicate(p))}` : hasEvent(predicate(p))));
  };
  /** uid among `list`: the primary key gives `uid = any($n)` in uid order, so any number of uids is one array. */
  const uidIn = (name: string, list: readonly string[]) => {
    const array = anyOf(name, advisories.uid, list);
    parts.push((p) => sql`${advisories.uid} = any(${array(p)})`);
  };
  if (f.uids?.length) uidIn("uid", f.uids);
  if (f.ancestorsOf !== undefined) {
    const up = ancestorsOf(f.ancestorsOf);
    if (up.length === 0) {
      shape.push("no-ancestor");
      parts.push(() => sql`false`);
    } else uidIn("up", up);
  }
  oneOf("id", advisories.advisoryId, f.advisoryIds);
  oneOf("pkg", advisories.package, f.artifactNames);
  oneOf("atype", advisories.artifactType, f.artifactTypes);
  oneOf("arch", advisories.artifactArchitecture, f.artifactArchitectures);
  oneOf("comp", advisories.componentName, f.componentNames);
  oneOf("ctype", advisories.componentType, f.componentTypes);
  oneOf("loc", advisories.componentLocation, f.componentLocations);
  // The uids of the advisories naming an alias, from advisory_aliases' primary key, computed once (an
  // InitPlan): a planner estimate inline would walk the uid order of every advisory to fill a page of few. The
  // aliases travel as one text[] whatever their number: `alias = any($n)`, which a plan made without the value
  // estimates at about one row per element of an array of 10 (over `aliases && $1` it was 0.5% of the table,
  // and re-planned each call); the outer query probes the primary key, in uid order, for the uids found.
  if (f.aliases.length) {
    const array = anyOf("alias", advisoryAliases.alias, f.aliases);
    parts.push((p) => advisoryNamedByAny(array(p)));
  }
  if (f.latestEventType !== undefined) {
    shape.push("latest");
    values.latest = f.latestEventType;
    parts.push((p) => eq(advisories.latestEventType, p("latest")));
  }
  withEvent("etype", advisoryEvents.type, f.eventTypes);
  withEvent("review", advisoryEvents.reviewState, f.eventReviewStates);
  withEvent("author", advisoryEvents.author, f.eventAuthors);
  withEvent("reviewer", advisoryEvents.reviewer, f.eventReviewers);
  withEvent("xauthor", advisoryEvents.author, f.excludeEventAuthors, true);
  if (f.query) {
    shape.push("q");
    values.q = `%${escapeLike(f.query)}%`;
    parts.push((p) => sql`${advisories.search} ilike ${p("q")}`);
  }
  const where = (p: Param) => and(...parts.map((part) => part(p)));
  // A pattern's selectivity decides its plan (a generic plan for `ilike $1` measured ten times slower).
  return { shape: shape.join(";"), where, total: (p) => countExpression(advisories, where(p)), values, planEachCall: Boolean(f.query) };
}

/**
 * A column qualified by its table's name (the outer advisories row's, or a joined table's where a subquery
 * has a column of the same name): Drizzle writes a one-table select's columns bare, which
 * inside a subquery would name the subquery's own column of that name.
 */
const qualified = (column: AnyPgColumn) => sql`${sql.identifier(getTableName(column.table))}.${sql.identifier(column.name)}`;

/** An event as the page's statement aggregates it: `[uid, epoch ms, type, author, reviewer, review state, data]`. */
type EventTuple = [string, number, number, string, string, number, Record<string, unknown>];

/**
 * The events of the advisory on the current row, in order, as one JSON array of tuples (a correlated
 * subquery over advisory_events' (advisory_uid, ordinal) index, evaluated only for the rows a page returns).
 */
const eventsOfRow = sql<EventTuple[] | string>`(select coalesce(json_agg(json_build_array(e.uid, floor(extract(epoch from e.time) * 1000)::bigint, e.type, e.author, e.reviewer, e.review_state, e.data) order by e.ordinal), '[]'::json)
  from ${advisoryEvents} e where e.advisory_uid = ${qualified(advisories.uid)})`;

/**
 * The OSV severities of the advisory on the current row: those of each alias with an OSV record in force (not
 * withdrawn), in alias order.
 */
const severitiesOfRow = sql<OsvSeverity[] | string>`(select coalesce(jsonb_agg(s.v order by a.n, s.m), '[]'::jsonb)
  from unnest(${qualified(advisories.aliases)}) with ordinality a(id, n)
  join ${osvRecords} on ${qualified(osvRecords.id)} = a.id and ${osvRecordInForce}
  cross join lateral jsonb_array_elements(${osvRecords.severities}) with ordinality s(v, m))`;

/** A JSON column as the driver returns it: parsed (postgres.js, PGlite) or, from another driver, text. */
const parsed = <T>(v: T | string): T => (typeof v === "string" ? (JSON.parse(v) as T) : v);

/** What a page's row selects beside the keyset: the advisory, its events and its severities. */
const withChildren = { ...getTableColumns(advisories), events: eventsOfRow, severities: severitiesOfRow };

/** A page's row: the advisory's columns, its events and its severities (withChildren). */
type AdvisoryPageRow = AdvisoryRow & { events: EventTuple[] | string; severities: OsvSeverity[] | string };

function completed(r: AdvisoryPageRow): AdvisoryWithEvents {
  const { events: eventTuples, severities, ...row } = r;
  const events = parsed(eventTuples).map(
    ([uid, ms, type, author, reviewer, reviewState, data], ordinal): AdvisoryEventRow => ({
      uid,
      advisoryUid: row.uid,
      ordinal,
      time: new Date(Number(ms)),
      type,
      author,
      reviewer,
      reviewState,
      data,
    }),
  );
  return { row, events, severities: parsed(severities) };
}

/**
 * Advisories with their events and severities: one statement per call, a page's rows carrying their events
 * and severities as JSON aggregated by correlated subqueries (one round trip, no second pass in JavaScript).
 */
export function createAdvisoryStore(db: Executor) {
  const pages = createPreparedList<typeof advisories, AdvisoryPageRow>(db, { name: "advisories", table: advisories, orderColumns: order, columns: withChildren });
  let findStatement: { execute(values: { uid: string }): Promise<AdvisoryPageRow[]> } | undefined;
  return {
    async find(uid: string): Promise<AdvisoryWithEvents | undefined> {
      findStatement ??= hotStatement(db.select(withChildren).from(advisories).where(eq(advisories.uid, sql.placeholder("uid"))).prepare("advisory_find"));
      const [r] = await findStatement.execute({ uid });
      return r ? completed(r) : undefined;
    },

    async list(plan: ListPlan, filter: AdvisoryFilter): Promise<ListPage<AdvisoryWithEvents>> {
      const page = await pages.page(plan, advisoryQuery(filter));
      return { ...page, rows: page.rows.map(completed) };
    },
  };
}
