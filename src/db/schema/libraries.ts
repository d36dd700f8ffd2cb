// Library artifacts (Java and Python) and their versions: global data (not per organization), written only
// by the import-libraries command and read by ArtifactsService.
//
// An artifact's uid is `<ecosystem>/<normalized name>` ("pypi/requests", "maven/junit:junit"); a version's is
// `<artifact uid>@<version>`. `ordinal` is the version's rank among its artifact's versions in the
// ecosystem's own ordering (Maven ComparableVersion, PEP 440), recomputed by the importer whenever the set of
// versions changes, so ordering by version is an index order and pages continue by keyset.
import { bigint, index, integer, pgTable, smallint, text, uniqueIndex } from "drizzle-orm/pg-core";
import { instant, uidText } from "./columns.js";

export const libraryArtifacts = pgTable(
  "library_artifacts",
  {
    uid: uidText("uid").primaryKey(),
    /** chainguard.platform.libraries.v2.Ecosystem */
    ecosystem: smallint("ecosystem").notNull(),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    latestVersion: text("latest_version").notNull().default(""),
    versionCount: integer("version_count").notNull().default(0),
    createTime: instant("create_time").notNull().defaultNow(),
    updateTime: instant("update_time").notNull().defaultNow(),
  },
  (t) => [
    index("library_artifacts_ecosystem_name_idx").on(t.ecosystem, t.name, t.uid),
    index("library_artifacts_name_idx").on(t.name, t.uid),
    index("library_artifacts_update_time_idx").on(t.updateTime, t.uid),
  ],
);

export const libraryArtifactVersions = pgTable(
  "library_artifact_versions",
  {
    uid: uidText("uid").primaryKey(),
    artifactUid: uidText("artifact_uid")
      .notNull()
      .references(() => libraryArtifacts.uid, { onDelete: "cascade" }),
    name: text("name").notNull(),
    version: text("version").notNull(),
    description: text("description").notNull().default(""),
    sizeBytes: bigint("size_bytes", { mode: "number" }).notNull().default(0),
    /** Rank among the artifact's versions, ascending in the ecosystem's ordering. */
    ordinal: integer("ordinal").notNull().default(0),
    /** The file the version was read from (reported by the importer). */
    source: text("source").notNull().default(""),
    createTime: instant("create_time").notNull().defaultNow(),
    updateTime: instant("update_time").notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("library_artifact_versions_artifact_version_idx").on(t.artifactUid, t.version),
    index("library_artifact_versions_artifact_ordinal_idx").on(t.artifactUid, t.ordinal, t.uid),
  ],
);

export type LibraryArtifactRow = typeof libraryArtifacts.$inferSelect;
export type LibraryArtifactVersionRow = typeof libraryArtifactVersions.$inferSelect;
