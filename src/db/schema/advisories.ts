// Security advisory data: global (not per organization), written only by the import commands and read by
// the vulnerabilities.v2 AdvisoriesService and the advisory.v2 SecurityAdvisoryService.
//
// - advisory_documents: one row per package advisory document (`<package>.advisories.yaml`); `content_hash`
//   (sha256 of the file) lets a re-import skip an unchanged file and rewrite only a changed one.
// - advisories: one row per (package, advisory id). uid `<package>:<advisory id>` (neither part holds a `:`
//   or a `/`), so events are its children by the uid convention. The component columns come from the latest
//   scan/v1 detection; `latest_event_type` is the EventTypeFilter value of the last event (the advisory's
//   current state), kept as a column so that filter is an index lookup.
// - advisory_events: the events of an advisory, oldest first (`ordinal` from 0), uid `<advisory uid>/<ordinal>`.
//   `type` is the EventTypeFilter value; `data` the event's data as read from the file (keys as in the file).
// - advisory_aliases: one row per (alias, advisory), the advisories' `aliases` arrays unnested, kept by
//   triggers on advisories (migration advisory_aliases_triggers), so every writer (the importer, a bulk load
//   in SQL) keeps it. ListAdvisories' alias filter and ListDocuments' cve filter (both advisoryNamedByAny) read
//   it by btree: `alias = any($1)`, which a plan made without the value still estimates at a few rows, where
//   `aliases && $1` over a GIN index of the array has no estimate (0.5% of the table, with or without the
//   value). No statement searched the array any more, so its GIN index went (migration
//   advisories_aliases_gin_dropped): one index less for every write of an advisory.
// - osv_records: OSV records (ossf/osv-schema) by id, for vulnerability metadata and the severities of the
//   advisories whose aliases name them; `content_hash` as above.
import { getTableName, isNull, sql, type SQL } from "drizzle-orm";
import { index, integer, type AnyPgColumn, jsonb, pgTable, primaryKey, smallint, text, uniqueIndex } from "drizzle-orm/pg-core";
import { instant, uidText } from "./columns.js";

export const advisoryDocuments = pgTable("advisory_documents", {
  /** The package name: Document.id. */
  package: text("package").primaryKey(),
  schemaVersion: text("schema_version").notNull(),
  /** The file the document was read from. */
  source: text("source").notNull(),
  /** sha256 (hex) of the file's bytes. */
  contentHash: text("content_hash").notNull(),
  createTime: instant("create_time").notNull().defaultNow(),
  updateTime: instant("update_time").notNull().defaultNow(),
});

export const advisories = pgTable(
  "advisories",
  {
    uid: uidText("uid").primaryKey(),
    package: text("package")
      .notNull()
      .references(() => advisoryDocuments.package, { onDelete: "cascade" }),
    advisoryId: text("advisory_id").notNull(),
    /** Advisory.artifact_type: `apk` for the distribution's package documents. */
    artifactType: text("artifact_type").notNull().default("apk"),
    artifactArchitecture: text("artifact_architecture").notNull().default(""),
    componentName: text("component_name").notNull().default(""),
    componentType: text("component_type").notNull().default(""),
    componentLocation: text("component_location").notNull().default(""),
    aliases: text("aliases").array().notNull().default([]),
    /** chainguard.platform.vulnerabilities.v2.EventTypeFilter of the last event; 0 when it has none. */
    latestEventType: smallint("latest_event_type").notNull().default(0),
    /** When the first event happened (the import time when it has none). */
    createTime: instant("create_time").notNull().defaultNow(),
    /** When the last event happened (the import time when it has none). */
    updateTime: instant("update_time").notNull().defaultNow(),
    /**
     * What ListAdvisories' `query` searches (a case-insensitive substring): the package, the component name
     * and the aliases, joined by newlines (which a query cannot usefully contain), written by the importer and
     * indexed by a pg_trgm GIN index (migration advisories_search_trigram).
     */
    search: text("search").notNull().default(""),
  },
  (t) => [
    uniqueIndex("advisories_package_advisory_id_idx").on(t.package, t.advisoryId),
    index("advisories_advisory_id_idx").on(t.advisoryId),
    // ListAdvisories' equality filters, each in the default order (uid): one index range scan per page.
    index("advisories_package_uid_idx").on(t.package, t.uid),
    index("advisories_artifact_type_uid_idx").on(t.artifactType, t.uid),
    index("advisories_artifact_architecture_uid_idx").on(t.artifactArchitecture, t.uid),
    index("advisories_component_name_uid_idx").on(t.componentName, t.uid),
    index("advisories_component_type_uid_idx").on(t.componentType, t.uid),
    index("advisories_component_location_uid_idx").on(t.componentLocation, t.uid),
    index("advisories_latest_event_type_uid_idx").on(t.latestEventType, t.uid),
  ],
);

export const advisoryEvents = pgTable(
  "advisory_events",
  {
    uid: uidText("uid").primaryKey(),
    advisoryUid: uidText("advisory_uid")
      .notNull()
      .references(() => advisories.uid, { onDelete: "cascade" }),
    ordinal: integer("ordinal").notNull(),
    /** The event's own timestamp. */
    time: instant("time").notNull(),
    /** chainguard.platform.vulnerabilities.v2.EventTypeFilter */
    type: smallint("type").notNull(),
    author: text("author").notNull().default(""),
    reviewer: text("reviewer").notNull().default(""),
    /** chainguard.platform.vulnerabilities.v2.ReviewState */
    reviewState: smallint("review_state").notNull(),
    data: jsonb("data").$type<Record<string, unknown>>().notNull().default({}),
  },
  (t) => [
    uniqueIndex("advisory_events_advisory_ordinal_idx").on(t.advisoryUid, t.ordinal),
    index("advisory_events_type_time_idx").on(t.type, t.time),
    // ListAdvisories' event filters (an advisory having an event with one of the values): semi-joins.
    index("advisory_events_type_advisory_idx").on(t.type, t.advisoryUid),
    index("advisory_events_author_advisory_idx").on(t.author, t.advisoryUid),
    index("advisory_events_reviewer_advisory_idx").on(t.reviewer, t.advisoryUid),
    index("advisory_events_review_state_advisory_idx").on(t.reviewState, t.advisoryUid),
  ],
);

export const advisoryAliases = pgTable(
  "advisory_aliases",
  {
    alias: text("alias").notNull(),
    advisoryUid: uidText("advisory_uid")
      .notNull()
      .references(() => advisories.uid, { onDelete: "cascade" }),
  },
  (t) => [primaryKey({ columns: [t.alias, t.advisoryUid] }), index("advisory_aliases_advisory_uid_idx").on(t.advisoryUid)],
);

export interface OsvReference {
  type: string;
  url: string;
}

export interface OsvSeverity {
  type: string;
  score: string;
}

export const osvRecords = pgTable("osv_records", {
  id: text("id").primaryKey(),
  summary: text("summary").notNull().default(""),
  details: text("details").notNull().default(""),
  aliases: text("aliases").array().notNull().default([]),
  references: jsonb("references").$type<OsvReference[]>().notNull().default([]),
  severities: jsonb("severities").$type<OsvSeverity[]>().notNull().default([]),
  modifiedTime: instant("modified_time"),
  publishedTime: instant("published_time"),
  withdrawnTime: instant("withdrawn_time"),
  source: text("source").notNull(),
  contentHash: text("content_hash").notNull(),
  createTime: instant("create_time").notNull().defaultNow(),
  updateTime: instant("update_time").notNull().defaultNow(),
});

/**
 * The OSV records in force: every reader treats a withdrawn record as gone (docs/importing.md, Importing OSV records),
 * so its severities, aliases and references are used nowhere.
 */
export const osvRecordInForce = isNull(osvRecords.withdrawnTime);

/**
 * `advisories.uid` is one of the advisories naming any of `aliases`, one text[] value (a parameter whatever the
 * number of aliases): their uids read from advisory_aliases' primary key by `alias = any($1)` and computed once
 * (an InitPlan), so the outer query probes advisories by uid. A plan made without the value estimates the
 * lookup at about one row per element of an array of 10 (PostgreSQL's guess for an array it cannot see), one
 * made for the value at about one row per alias. The columns are qualified by their tables' names: the
 * predicate may sit inside a subquery or a one-table select, where Drizzle writes columns bare.
 */
export function advisoryNamedByAny(aliases: SQL): SQL {
  const qualified = (c: AnyPgColumn) => sql`${sql.identifier(getTableName(c.table))}.${sql.identifier(c.name)}`;
  return sql`${qualified(advisories.uid)} = any(array(select ${qualified(advisoryAliases.advisoryUid)} from ${advisoryAliases} where ${qualified(advisoryAliases.alias)} = any(${aliases})))`;
}

export type AdvisoryDocumentRow = typeof advisoryDocuments.$inferSelect;
export type AdvisoryRow = typeof advisories.$inferSelect;
export type AdvisoryAliasRow = typeof advisoryAliases.$inferSelect;
export type AdvisoryEventRow = typeof advisoryEvents.$inferSelect;
export type OsvRecordRow = typeof osvRecords.$inferSelect;
