// Advisories, their events and their OSV severities in the database, read-only here (import.ts writes them).
// A page is three statements, whatever its size: the advisories by keyset (with the total on a first page),
// then the events of those advisories, then the OSV records their aliases name.
import { and, asc, eq, inArray, sql, type SQL } from "drizzle-orm";
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

export function createAdvisoryStore(db: Executor) {
  /** The events and severities of the given advisories, in two statements. */
  async function complete(rows: readonly AdvisoryRow[]): Promise<AdvisoryWithEvents[]> {
    if (rows.length === 0) return [];
    const uids = rows.map((r) => r.uid);
    const aliases = [...new Set(rows.flatMap((r) => r.aliases))];
    const [events, osv] = await Promise.all([
      db
        .select()
        .from(advisoryEvents)
        .where(inArray(advisoryEvents.advisoryUid, uids))
        .orderBy(asc(advisoryEvents.advisoryUid), asc(advisoryEvents.ordinal)),
      aliases.length === 0
        ? Promise.resolve([])
        : db.select({ id: osvRecords.id, severities: osvRecords.severities }).from(osvRecords).where(inArray(osvRecords.id, aliases)),
    ]);
    const byAdvisory = new Map<string, AdvisoryEventRow[]>();
    for (const e of events) {
      let list = byAdvisory.get(e.advisoryUid);
      if (!list) byAdvisory.set(e.advisoryUid, (list = []));
      list.push(e);
    }
    const severities = new Map(osv.map((o) => [o.id, o.severities]));
    return rows.map((row) => ({ row, events: byAdvisory.get(row.uid) ?? [], severities: row.aliases.flatMap((a) => severities.get(a) ?? []) }));
  }

  return {
    async find(uid: string): Promise<AdvisoryWithEvents | undefined> {
      const [row] = await db.select().from(advisories).where(eq(advisories.uid, uid));
      return row ? (await complete([row]))[0] : undefined;
    },

    async list(plan: ListPlan, filter: AdvisoryFilter): Promise<ListPage<AdvisoryWithEvents>> {
      const where = advisoryWhere(filter);
      const total = countExpression(advisories, where);
      const query = db.select({ row: advisories, ...pageColumns(plan, order, total) }).from(advisories).$dynamic();
      const page = await keysetPage(db, query, { plan, orderColumns: order, where, total });
      return { ...page, rows: await complete(page.rows) };
    },
  };
}
