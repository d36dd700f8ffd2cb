// Registry metadata: repos (with their readme), tags, and the manifests they point at.
//
// A repo belongs to a group (RESTRICT: a group holding repos cannot be deleted); tags and manifests belong
// to a repo and go with it. Tags carry a `kind` (regular, referrer, date, epoch) computed on write, so the
// default List filters are an index condition; tag_counts holds the number of tags per (repo, kind),
// maintained by a trigger (migration 0004), so a total count never rescans the collection.
import { sql } from "drizzle-orm";
import { bigint, boolean, index, integer, jsonb, pgTable, primaryKey, smallint, text, uniqueIndex } from "drizzle-orm/pg-core";
import { instant, uidText } from "./columns.js";
import { groups } from "./iam.js";

export const repos = pgTable(
  "repos",
  {
    /** <group uid>/<16 hex> */
    uid: uidText("uid").primaryKey(),
    groupUid: uidText("group_uid")
      .notNull()
      .references(() => groups.uid, { onDelete: "restrict" }),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    /** chainguard.platform.registry.v2.CatalogTier */
    catalogTier: integer("catalog_tier").notNull().default(0),
    bundles: text("bundles").array().notNull().default([]),
    aliases: text("aliases").array().notNull().default([]),
    activeTags: text("active_tags").array().notNull().default([]),
    /** SyncConfig / CustomOverlay as proto3 JSON, or null when unset. */
    syncConfig: jsonb("sync_config").$type<Record<string, unknown>>(),
    customOverlay: jsonb("custom_overlay").$type<Record<string, unknown>>(),
    /** The readme, Markdown. */
    readme: text("readme").notNull().default(""),
    /** Whether anyone may pull the repo's images over /v2/ without credentials (Repo.public). */
    public: boolean("public").notNull().default(false),
    createTime: instant("create_time").notNull().defaultNow(),
    updateTime: instant("update_time").notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("repos_group_name_idx").on(t.groupUid, t.name),
    index("repos_name_idx").on(t.name, t.uid),
    index("repos_create_time_idx").on(t.createTime, t.uid),
    index("repos_update_time_idx").on(t.updateTime, t.uid),
  ],
);

/** Tag kinds: what the List filters hide unless asked (include_referrers / include_dates / include_epochs). */
export const TagKind = { regular: 0, referrer: 1, date: 2, epoch: 3 } as const;

export const tags = pgTable(
  "tags",
  {
    /** <repo uid>/<16 hex> */
    uid: uidText("uid").primaryKey(),
    repoUid: uidText("repo_uid")
      .notNull()
      .references(() => repos.uid, { onDelete: "cascade" }),
    name: text("name").notNull(),
    /** sha256:<64 lowercase hex> */
    digest: text("digest").notNull(),
    deprecated: boolean("deprecated").notNull().default(false),
    bundles: text("bundles").array().notNull().default([]),
    /** TagKind, computed from the name on write. */
    kind: smallint("kind").notNull().default(0),
    createTime: instant("create_time").notNull().defaultNow(),
    updateTime: instant("update_time").notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("tags_repo_name_idx").on(t.repoUid, t.name),
    index("tags_repo_kind_uid_idx").on(t.repoUid, t.kind, t.uid),
    index("tags_repo_kind_name_idx").on(t.repoUid, t.kind, t.name, t.uid),
    index("tags_repo_kind_update_time_idx").on(t.repoUid, t.kind, t.updateTime, t.uid),
    index("tags_repo_digest_idx").on(t.repoUid, t.digest),
  ],
);

/** Number of tags per (repo, kind), maintained by a trigger on tags. */
export const tagCounts = pgTable(
  "tag_counts",
  {
    repoUid: uidText("repo_uid")
      .notNull()
      .references(() => repos.uid, { onDelete: "cascade" }),
    kind: smallint("kind").notNull(),
    count: bigint("count", { mode: "bigint" }).notNull().default(sql`0`),
  },
  (t) => [primaryKey({ columns: [t.repoUid, t.kind] })],
);

/**
 * Manifests stored in a repo, as the registry holds them: an image manifest (its platform, config and layer
 * sizes) or an image index (its child manifests and their platforms).
 */
export const manifests = pgTable(
  "manifests",
  {
    repoUid: uidText("repo_uid")
      .notNull()
      .references(() => repos.uid, { onDelete: "cascade" }),
    /** sha256:<64 lowercase hex> */
    digest: text("digest").notNull(),
    mediaType: text("media_type").notNull(),
    /** True for an image index / manifest list. */
    isIndex: boolean("is_index").notNull(),
    /** Image manifests: "os/architecture[/variant]" from the config blob, when known. */
    platform: text("platform"),
    /** Image manifests: size of the config blob plus all layers, in bytes. */
    size: bigint("size", { mode: "bigint" }),
    /** Image indexes: [{digest, platform, mediaType, size}] of the child manifests. */
    children: jsonb("children").$type<Array<{ digest: string; platform?: string; mediaType?: string; size?: number }>>(),
    /** The manifest's own size in bytes (as in its descriptor). */
    manifestSize: bigint("manifest_size", { mode: "bigint" }).notNull().default(sql`0`),
    /** Pushed over /v2/: the digest of the manifest its `subject` names (the referrers API lists it there). */
    subject: text("subject"),
    /** Pushed over /v2/: its artifactType (or its config's media type), for the referrers API. */
    artifactType: text("artifact_type"),
    /** Pushed over /v2/: its annotations, for the referrers API. */
    annotations: jsonb("annotations").$type<Record<string, string>>(),
    createTime: instant("create_time").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.repoUid, t.digest] }), index("manifests_repo_subject_idx").on(t.repoUid, t.subject)],
);

/**
 * The blobs a repo may serve over /v2/: blobs are stored once by digest (the BlobStore), but one is reachable
 * in a repo only once a push or a cross-repository mount linked it there. Go with the repo.
 */
export const repoBlobs = pgTable(
  "repo_blobs",
  {
    repoUid: uidText("repo_uid")
      .notNull()
      .references(() => repos.uid, { onDelete: "cascade" }),
    /** sha256:<64 hex> or sha512:<128 hex> */
    digest: text("digest").notNull(),
    size: bigint("size", { mode: "number" }).notNull(),
    createTime: instant("create_time").notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.repoUid, t.digest] }), index("repo_blobs_digest_idx").on(t.digest)],
);

// Row shapes the registry stores return and its mappers read (neither imports the other).
/** A repo without its readme (up to 1 MiB), which only the readme methods read. */
export type RepoRow = Omit<typeof repos.$inferSelect, "readme">;
export type ReadmeRow = Pick<typeof repos.$inferSelect, "uid" | "readme">;
/** The repo columns a client writes. */
export type RepoFields = Pick<RepoRow, "name" | "description" | "catalogTier" | "bundles" | "aliases" | "activeTags" | "syncConfig" | "customOverlay" | "public">;
export type TagRow = typeof tags.$inferSelect;
export type ManifestRow = typeof manifests.$inferSelect;

/** A tag as CreateTag and the OCI import write it: created, or moved when the repo has one of that name. */
export interface TagWrite {
  repoUid: string;
  name: string;
  /** Must already be validated (isValidDigest). */
  digest: string;
  deprecated?: boolean;
  bundles?: string[];
}
