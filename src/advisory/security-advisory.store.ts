// Reads of the global advisory data for SecurityAdvisoryService: advisory documents (the adv tables, written
// by the YAML importer), OSV records (written by import-osv), and which repos of the registry a caller sees
// (for resolved-vulnerability reports). Read-only: nothing here writes.
import { and, asc, eq, gte, lte, or, sql } from "drizzle-orm";
import { EventTypeFilter } from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { advisories, advisoryEvents, advisoryNamedByAny, osvRecordInForce, osvRecords, repos, type AdvisoryEventRow, type OsvRecordRow, type OsvSeverity } from "../db/schema/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { hotStatement } from "../kernel/prepared-rows.js";
import { countExpression, keysetPage, pageColumns, type ListPage, type ListPlan } from "../kernel/list/index.js";
import { equalsAny, type Executor } from "../kernel/store.js";

export interface DocumentFilter {
  /** The package (Document.id); undefined for any. */
  packageName: string | undefined;
  /** Advisory ids or aliases, any of which an advisory must carry; empty for any (but one of the two is needed). */
  cves: readonly string[];
}

export interface DocumentAdvisoryRow {
  uid: string;
  package: string;
  advisoryId: string;
  aliases: string[];
  events: AdvisoryEventRow[];
}

export interface FixedAdvisoryRow {
  package: string;
  advisoryId: string;
  aliases: string[];
  /** The time of the `fixed` event. */
  time: Date;
}

const metadataOrder = { uid: osvRecords.id, id: osvRecords.id } as const;

/** Which filters a ListDocuments read has: the package, the cves, or both (the request needs one). */
type DocumentShape = "package" | "cves" | "package_cves";

/**
 * The ListDocuments read of a shape, as one named statement (kernel/prepared-rows.ts, hotStatement) whose
 * text does not depend on the values: the package, the cves as one text[] parameter whatever their number,
 * and the limit. The matching advisories (at most `limit`, in (package, advisory id) order), then their
 * events joined. A cve matches an advisory id or an alias: the aliases read from advisory_aliases by btree,
 * `alias = any($cves)`, which a plan made without the values estimates at about one row per element of an
 * array of 10 (PostgreSQL's guess for an array it does not know), so a generic plan stays an index lookup.
 */
function documentsStatement(db: Executor, shape: DocumentShape) {
  const cves = sql`${sql.placeholder("cves")}::text[]`;
  const byPackage = shape === "cves" ? undefined : eq(advisories.package, sql.placeholder("package"));
  const byCve = shape === "package" ? undefined : or(advisoryNamedByAny(cves), sql`${advisories.advisoryId} = any(${cves})`);
  const matched = db.$with("matched").as(
    db
      .select({ uid: advisories.uid, package: advisories.package, advisoryId: advisories.advisoryId, aliases: advisories.aliases })
      .from(advisories)
      .where(and(byPackage, byCve))
      .orderBy(asc(advisories.package), asc(advisories.advisoryId))
      .limit(sql.placeholder("limit")),
  );
  return hotStatement(
    db
      .with(matched)
      .select({ uid: matched.uid, package: matched.package, advisoryId: matched.advisoryId, aliases: matched.aliases, event: advisoryEvents })
      .from(matched)
      .leftJoin(advisoryEvents, eq(advisoryEvents.advisoryUid, matched.uid))
      .orderBy(asc(matched.package), asc(matched.advisoryId), asc(advisoryEvents.ordinal))
      .prepare(`advisory_documents_${shape}`),
  );
}

export function createSecurityAdvisoryStore(db: Executor) {
  const documentStatements = new Map<DocumentShape, ReturnType<typeof documentsStatement>>();
  return {
    /**
     * The advisories matching the filter, each with its events (oldest first), ordered by package then
     * advisory id; at most `limit` of them: `undefined` when more match (the caller says the request is too
     * broad rather than answer with a part).
     */
    async documents(filter: DocumentFilter, limit: number): Promise<DocumentAdvisoryRow[] | undefined> {
      const shape: DocumentShape | undefined =
        filter.packageName === undefined ? (filter.cves.length === 0 ? undefined : "cves") : filter.cves.length === 0 ? "package" : "package_cves";
      // The request's check (documentFilterOf) asks for one of them: every advisory is never an answer.
      if (shape === undefined) throw new Error("documents: name a package or cves");
      let statement = documentStatements.get(shape);
      if (!statement) documentStatements.set(shape, (statement = documentsStatement(db, shape)));
      const rows = await statement.execute({ package: filter.packageName ?? "", cves: [...filter.cves], limit: limit + 1 });
      const out: DocumentAdvisoryRow[] = [];
      for (const r of rows) {
        let last = out[out.length - 1];
        if (!last || last.uid !== r.uid) out.push((last = { uid: r.uid, package: r.package, advisoryId: r.advisoryId, aliases: r.aliases, events: [] }));
        if (r.event) last.events.push(r.event);
      }
      return out.length > limit ? undefined : out;
    },

    /** A page of OSV records (withdrawn ones left out), by id; `ids` undefined for all of them. */
    metadata(plan: ListPlan, ids: readonly string[] | undefined): Promise<ListPage<OsvRecordRow>> {
      const where = and(osvRecordInForce, ids !== undefined ? equalsAny(osvRecords.id, ids) : undefined);
      const total = countExpression(osvRecords, where);
      const query = db.select({ row: osvRecords, ...pageColumns(plan, metadataOrder, total) }).from(osvRecords).$dynamic();
      return keysetPage(db, query, { plan, orderColumns: metadataOrder, where, total });
    },

    /** The severities of the OSV records (not withdrawn) with these ids. */
    async severities(ids: readonly string[]): Promise<Map<string, OsvSeverity[]>> {
      if (ids.length === 0) return new Map();
      const rows = await db
        .select({ id: osvRecords.id, severities: osvRecords.severities })
        .from(osvRecords)
        .where(and(osvRecordInForce, equalsAny(osvRecords.id, ids)));
      return new Map(rows.map((r) => [r.id, r.severities]));
    },

    /** The names among `names` of the repos beneath the scopes (the caller's visible registry). */
    async visibleRepoNames(scopes: readonly string[], names: readonly string[]): Promise<Set<string>> {
      if (scopes.length === 0 || names.length === 0) return new Set();
      const rows = await db
        .selectDistinct({ name: repos.name })
        .from(repos)
        .where(and(equalsAny(repos.name, names), scopePredicate(repos.uid, scopes)));
      return new Set(rows.map((r) => r.name));
    },

    /** The `fixed` events of the packages' advisories in [start, end], oldest first. */
    fixedAdvisories(packages: readonly string[], start: Date, end: Date): Promise<FixedAdvisoryRow[]> {
      if (packages.length === 0) return Promise.resolve([]);
      return db
        .select({ package: advisories.package, advisoryId: advisories.advisoryId, aliases: advisories.aliases, time: advisoryEvents.time })
        .from(advisoryEvents)
        .innerJoin(advisories, eq(advisories.uid, advisoryEvents.advisoryUid))
        .where(and(equalsAny(advisories.package, packages), eq(advisoryEvents.type, EventTypeFilter.FIXED), gte(advisoryEvents.time, start), lte(advisoryEvents.time, end)))
        .orderBy(asc(advisoryEvents.time), asc(advisories.advisoryId));
    },
  };
}
