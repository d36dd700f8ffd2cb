// Repo rows <-> chainguard.platform.registry.v2.Repo and RepoReadme messages. sync_config and custom_overlay
// are stored as their proto3 JSON (null when unset, so presence survives the round trip).
import { create } from "@bufbuild/protobuf";
import {
  CustomOverlaySchema,
  RepoReadmeSchema,
  RepoSchema,
  SyncConfigSchema,
  type Repo,
  type RepoReadme,
} from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { writableOf } from "../kernel/field-mask.js";
import { fromStored, toStored } from "../kernel/stored-json.js";
import { timestampOf } from "../kernel/timestamp.js";
import type { ReadmeRow, RepoFields, RepoRow } from "../db/schema/index.js";

/** The row as the message, every field set (a plain message object: no schema walk per row). */
export function toRepo(row: RepoRow): Repo {
  return {
    $typeName: "chainguard.platform.registry.v2.Repo",
    uid: row.uid,
    name: row.name,
    description: row.description,
    catalogTier: row.catalogTier,
    bundles: row.bundles,
    aliases: row.aliases,
    activeTags: row.activeTags,
    syncConfig: fromStored(SyncConfigSchema, row.syncConfig ?? null),
    customOverlay: fromStored(CustomOverlaySchema, row.customOverlay ?? null),
    createTime: timestampOf(row.createTime),
    updateTime: timestampOf(row.updateTime),
    public: row.public,
  };
}

/**
 * The repo as a client may write it: output-only fields dropped at every depth (uid, times, and the
 * server-managed sync_config fields), by replacing every writable field of an empty repo.
 */
export function writableRepo(repo: Repo): Repo {
  return writableOf(RepoSchema, repo);
}

/** The client-writable columns of a repo message. */
export function repoFields(repo: Repo): RepoFields {
  return {
    name: repo.name,
    description: repo.description,
    catalogTier: repo.catalogTier,
    bundles: repo.bundles,
    aliases: repo.aliases,
    activeTags: repo.activeTags,
    syncConfig: toStored(SyncConfigSchema, repo.syncConfig),
    customOverlay: toStored(CustomOverlaySchema, repo.customOverlay),
    public: repo.public,
  };
}

export function toRepoReadme(row: ReadmeRow): RepoReadme {
  return create(RepoReadmeSchema, { uid: row.uid, content: row.readme });
}
