// Advisories, their events and their OSV severities in the database, read-only here (import.ts writes them).
// A page is one statement, whatever its size: the advisories by keyset (with the total on a first page), each
// row carrying its events and the severities of the OSV records its aliases name (correlated subqueries).
import { and, eq, getTableColumns, getTableName, inArray, sql, type SQL } from "drizzle-orm";
import { advisories, advisoryEvents, osvRecords, type AdvisoryEventRow, type AdvisoryRow, type OsvSeverity } from "../db/schema/index.js";
import { countExpression, keysetPage, pageColumns, type ListPage, type ListPlan } from "../kernel/list/index.js";
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

/** `array[$1, $2, ...]::text[]` (a JavaScript array in a Drizzle template would become a parenthesised list). */
const textArray = (values: readonly string[]) => sql`array[${sql.join(values.map((v) => sql`${v}`), sql`, `)}]::text[]`;

/** `advisories.uid IN (advisory uids of events matching `where`)`: a semi-join over an events index. */
function hasEvent(where: SQL): SQL {
  return sql`${advisories.uid} in (select ${advisoryEvents.advisoryUid} from ${advisoryEvents} where ${where})`;
}

/** The SQL predicate of a filter (undefined: every advisory). */
export function advisoryWhere(f: AdvisoryFilter): SQL | undefined {
  if (f.none) return sql`false`;
  const parts: (SQL | undefined)[] = [];
  const anyOf = (column: AnyPgColumn, values: readonly string[]) => (values.length === 0 ? undefined : inArray(column, [...values]));
  if (f.uids?.length) parts.push(inArray(advisories.uid, [...f.uids]));
  if (f.ancestorsOf !== undefined) {
    const up = ancestorsOf(f.ancestorsOf);
    parts.push(up.length === 0 ? sql`false` : inArray(advisories.uid, up));
  }
  parts.push(anyOf(advisories.advisoryId, f.advisoryIds));
  parts.push(anyOf(advisories.package, f.artifactNames));
  parts.push(anyOf(advisories.artifactType, f.artifactTypes));
  parts.push(anyOf(advisories.artifactArchitecture, f.artifactArchitectures));
  parts.push(anyOf(advisories.componentName, f.componentNames));
  parts.push(anyOf(advisories.componentType, f.componentTypes));
  parts.push(anyOf(advisories.componentLocation, f.componentLocations));
  // The uids of the advisories naming an alias, from the GIN index, computed once (an InitPlan): a planner
  // estimate of `aliases && ...` inline would walk the uid order of every advisory to fill a page of few.
  if (f.aliases.length) {
    parts.push(sql`${advisories.uid} = any(array(select ${sql.identifier("x")}.uid from ${advisories} ${sql.identifier("x")} where ${sql.identifier("x")}.aliases && ${textArray(f.aliases)}))`);
  }
  if (f.latestEventType !== undefined) parts.push(eq(advisories.latestEventType, f.latestEventType));
  if (f.eventTypes.length) parts.push(hasEvent(inArray(advisoryEvents.type, [...f.eventTypes])));
  if (f.eventReviewStates.length) parts.push(hasEvent(inArray(advisoryEvents.reviewState, [...f.eventReviewStates])));
  if (f.eventAuthors.length) parts.push(hasEvent(inArray(advisoryEvents.author, [...f.eventAuthors])));
  if (f.eventReviewers.length) parts.push(hasEvent(inArray(advisoryEvents.reviewer, [...f.eventReviewers])));
  if (f.excludeEventAuthors.length) {
    parts.push(sql`not ${hasEvent(inArray(advisoryEvents.author, [...f.excludeEventAuthors]))}`);
  }
  if (f.query) parts.push(sql`${advisories.search} ilike ${`%${escapeLike(f.query)}%`}`);
  return and(...parts);
}

/**
 * A column of the outer advisories row, qualified: Drizzle writes a one-table select's columns bare, which
 * inside a subquery would name the subquery's own column of that name.
 */
const outer = (column: AnyPgColumn) => sql`${sql.identifier(getTableName(advisories))}.${sql.identifier(column.name)}`;

/** An event as the page's statement aggregates it: `[uid, epoch ms, type, author, reviewer, review state, data]`. */
type EventTuple = [string, number, number, string, string, number, Record<string, unknown>];

/**
 * The events of the advisory on the current row, in order, as one JSON array of tuples (a correlated
 * subquery over advisory_events' (advisory_uid, ordinal) index, evaluated only for the rows a page returns).
 */
const eventsOfRow = sql<EventTuple[] | string>`(select coalesce(json_agg(json_build_array(e.uid, floor(extract(epoch from e.time) * 1000)::bigint, e.type, e.author, e.reviewer, e.review_state, e.data) order by e.ordinal), '[]'::json)
  from ${advisoryEvents} e where e.advisory_uid = ${outer(advisories.uid)})`;

/** The OSV severities of the advisory on the current row: those of each alias with an OSV record, in alias order. */
const severitiesOfRow = sql<OsvSeverity[] | string>`(select coalesce(jsonb_agg(s.v order by a.n, s.m), '[]'::jsonb)
  from unnest(${outer(advisories.aliases)}) with ordinality a(id, n)
  join ${osvRecords} o on o.id = a.id
  cross join lateral jsonb_array_elements(o.severities) with ordinality s(v, m))`;

/** A JSON column as the driver returns it: parsed (postgres.js, PGlite) or, from another driver, text. */
const parsed = <T>(v: T | string): T => (typeof v === "string" ? (JSON.parse(v) as T) : v);

/** What a page's row selects beside the keyset: the advisory, its events and its severities. */
const withChildren = { ...getTableColumns(advisories), events: eventsOfRow, severities: severitiesOfRow };

function completed(r: AdvisoryRow & { events: EventTuple[] | string; severities: OsvSeverity[] | string }): AdvisoryWithEvents {
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
  return {
    async find(uid: string): Promise<AdvisoryWithEvents | undefined> {
      const [r] = await db.select(withChildren).from(advisories).where(eq(advisories.uid, uid));
      return r ? completed(r) : undefined;
    },

    async list(plan: ListPlan, filter: AdvisoryFilter): Promise<ListPage<AdvisoryWithEvents>> {
      const where = advisoryWhere(filter);
      const total = countExpression(advisories, where);
      const query = db
        .select({ row: withChildren, ...pageColumns(plan, order, total) })
        .from(advisories)
        .$dynamic();
      const page = await keysetPage(db, query, { plan, orderColumns: order, where, total });
      return { ...page, rows: page.rows.map(completed) };
    },
  };
}
