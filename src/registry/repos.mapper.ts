// Repo rows <-> chainguard.platform.registry.v2.Repo and RepoReadme messages. sync_config and custom_overlay
// are stored as their proto3 JSON (null when unset, so presence survives the round trip).
import { create, fromJson, toJson, type DescMessage, type JsonValue, type MessageShape } from "@bufbuild/protobuf";
import { FieldMaskSchema, timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  CustomOverlaySchema,
  RepoReadmeSchema,
  RepoSchema,
  SyncConfigSchema,
  type Repo,
  type RepoReadme,
} from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { applyUpdate } from "../kernel/field-mask.js";
import type { ReadmeRow, RepoFields, RepoRow } from "../db/schema/index.js";

const REPLACE_ALL = create(FieldMaskSchema, { paths: ["*"] });

function fromStored<D extends DescMessage>(schema: D, json: Record<string, unknown> | null): MessageShape<D> | undefined {
  if (json === null) return undefined;
  try {
    return fromJson(schema, json as JsonValue, { ignoreUnknownFields: true });
  } catch {
    // Unreadable stored JSON reads as unset rather than failing every read of the repo.
    return undefined;
  }
}

export function toRepo(row: RepoRow): Repo {
  return create(RepoSchema, {
    uid: row.uid,
    name: row.name,
    description: row.description,
    catalogTier: row.catalogTier,
    bundles: row.bundles,
    aliases: row.aliases,
    activeTags: row.activeTags,
    syncConfig: fromStored(SyncConfigSchema, row.syncConfig ?? null),
    customOverlay: fromStored(CustomOverlaySchema, row.customOverlay ?? null),
    createTime: timestampFromDate(row.createTime),
    updateTime: timestampFromDate(row.updateTime),
  });
}

/**
 * The repo as a client may write it: output-only fields dropped at every depth (uid, times, and the
 * server-managed sync_config fields), by replacing every writable field of an empty repo.
 */
export function writableRepo(repo: Repo): Repo {
  return applyUpdate(RepoSchema, create(RepoSchema), repo, REPLACE_ALL).message;
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
    syncConfig: repo.syncConfig ? (toJson(SyncConfigSchema, repo.syncConfig) as Record<string, unknown>) : null,
    customOverlay: repo.customOverlay ? (toJson(CustomOverlaySchema, repo.customOverlay) as Record<string, unknown>) : null,
  };
}

export function toRepoReadme(row: ReadmeRow): RepoReadme {
  return create(RepoReadmeSchema, { uid: row.uid, content: row.readme });
}
