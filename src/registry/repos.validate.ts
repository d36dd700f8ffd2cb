// Validation of repos as clients send them. Every check yields field violations whose paths are proto field
// names relative to the repo (a bad name is reported on `name`, a missing sync source on `sync_config.source`);
// `throwIfAny` turns them into one INVALID_ARGUMENT ("Invalid argument: <field>: <description>; ...") with a
// BadRequest. On update only the paths that changed are checked, so a stored value written under older rules
// never blocks an unrelated change.
import { toBinary, type DescMessage, type Message } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import { CatalogTierSchema, CustomOverlaySchema, SyncConfigSchema, type Repo } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { isOutputOnly, isRequired } from "../kernel/descriptors.js";
import type { FieldViolation } from "../kernel/errors/index.js";
import { TAG_NAME_PATTERN } from "./tag-kind.js";

/**
 * A repo name is a registry repository path (OCI distribution spec): components of lowercase letters and
 * digits, separated inside a component by ".", "_", "__" or dashes, joined by "/".
 */
export const REPO_NAME_PATTERN = /^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$/;
export const MAX_REPO_NAME_LENGTH = 255;
const MAX_DESCRIPTION_LENGTH = 4096;
/** Entries of bundles, aliases and active_tags. */
const MAX_LIST_ENTRIES = 256;
const MAX_ENTRY_LENGTH = 256;
/** Encoded size of sync_config and of custom_overlay. */
const MAX_SYNC_CONFIG_BYTES = 16 * 1024;
const MAX_CUSTOM_OVERLAY_BYTES = 256 * 1024;
/** The readme (Markdown), in UTF-8 bytes. */
const MAX_README_BYTES = 1024 * 1024;


// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;


/** Which fields to check: all of them (create) or the paths an update changed. */
type Only = readonly string[] | undefined;
const checks = (only: Only, field: string) => only === undefined || only.some((p) => p === field || p.startsWith(field + "."));

function repoNameViolations(name: string, field = "name"): FieldViolation[] {
  if (name === "") return [{ field, description: "is required" }];
  if (name.length > MAX_REPO_NAME_LENGTH) return [{ field, description: `must be at most ${MAX_REPO_NAME_LENGTH} characters long` }];
  if (!REPO_NAME_PATTERN.test(name)) {
    return [
      {
        field,
        description:
          'must be a registry repository name: lowercase letters and digits, separated by ".", "_", "__", "-" or "/" (for example "nginx" or "tools/nginx-fips")',
      },
    ];
  }
  return [];
}

function listViolations(field: string, values: readonly string[], entry: (v: string) => string | undefined): FieldViolation[] {
  if (values.length > MAX_LIST_ENTRIES) return [{ field, description: `at most ${MAX_LIST_ENTRIES} entries` }];
  for (const [i, v] of values.entries()) {
    const problem = entry(v);
    if (problem) return [{ field: `${field}[${i}]`, description: problem }];
  }
  if (new Set(values).size !== values.length) return [{ field, description: "must not repeat an entry" }];
  return [];
}

function plainEntry(v: string): string | undefined {
  if (v === "") return "must not be empty";
  if (v.length > MAX_ENTRY_LENGTH) return `must be at most ${MAX_ENTRY_LENGTH} characters long`;
  if (CONTROL.test(v)) return "must not contain control characters";
  return undefined;
}

function tagEntry(v: string): string | undefined {
  return TAG_NAME_PATTERN.test(v) ? undefined : "must be a tag name ([A-Za-z0-9_][A-Za-z0-9._-]{0,127})";
}

/**
 * REQUIRED fields (google.api.field_behavior) left unset anywhere inside a message, descending into set
 * message fields, repeated messages (`users[0]`) and maps of messages (`x["key"]`).
 */
function requiredViolations(desc: DescMessage, message: Message, path: string): FieldViolation[] {
  const out: FieldViolation[] = [];
  const r = reflect(desc, message, false);
  for (const field of desc.fields) {
    if (isOutputOnly(field)) continue;
    const at = `${path}.${field.name}`;
    if (!r.isSet(field)) {
      if (isRequired(field)) out.push({ field: at, description: "is required" });
      continue;
    }
    const raw = (message as unknown as Record<string, unknown>)[field.localName];
    if (field.fieldKind === "message" && !field.message.typeName.startsWith("google.protobuf.")) {
      out.push(...requiredViolations(field.message, raw as Message, at));
    } else if (field.fieldKind === "list" && field.listKind === "message") {
      (raw as Message[]).forEach((m, i) => out.push(...requiredViolations(field.message, m, `${at}[${i}]`)));
    } else if (field.fieldKind === "map" && field.mapKind === "message") {
      for (const [k, m] of Object.entries(raw as Record<string, Message>)) out.push(...requiredViolations(field.message, m, `${at}[${JSON.stringify(k)}]`));
    }
  }
  return out;
}

/** Checks a repo as it would be stored: every field (create), or only the paths an update changed. */
export function repoViolations(repo: Repo, only?: Only): FieldViolation[] {
  const out: FieldViolation[] = [];
  if (checks(only, "name")) out.push(...repoNameViolations(repo.name));
  if (checks(only, "description") && repo.description.length > MAX_DESCRIPTION_LENGTH) {
    out.push({ field: "description", description: `must be at most ${MAX_DESCRIPTION_LENGTH} characters long` });
  }
  if (checks(only, "catalog_tier") && !CatalogTierSchema.values.some((v) => v.number === repo.catalogTier)) {
    out.push({ field: "catalog_tier", description: `${repo.catalogTier} is not a CatalogTier value` });
  }
  if (checks(only, "bundles")) out.push(...listViolations("bundles", repo.bundles, plainEntry));
  if (checks(only, "aliases")) out.push(...listViolations("aliases", repo.aliases, plainEntry));
  if (checks(only, "active_tags")) out.push(...listViolations("active_tags", repo.activeTags, tagEntry));
  if (checks(only, "sync_config") && repo.syncConfig) {
    out.push(...requiredViolations(SyncConfigSchema, repo.syncConfig, "sync_config"));
    if (toBinary(SyncConfigSchema, repo.syncConfig).length > MAX_SYNC_CONFIG_BYTES) {
      out.push({ field: "sync_config", description: `must be at most ${MAX_SYNC_CONFIG_BYTES} bytes encoded` });
    }
  }
  if (checks(only, "custom_overlay") && repo.customOverlay) {
    out.push(...requiredViolations(CustomOverlaySchema, repo.customOverlay, "custom_overlay"));
    if (toBinary(CustomOverlaySchema, repo.customOverlay).length > MAX_CUSTOM_OVERLAY_BYTES) {
      out.push({ field: "custom_overlay", description: `must be at most ${MAX_CUSTOM_OVERLAY_BYTES} bytes encoded` });
    }
  }
  return out;
}

/** The readme content: Markdown text of at most MAX_README_BYTES UTF-8 bytes. */
export function readmeViolations(content: string): FieldViolation[] {
  const bytes = Buffer.byteLength(content, "utf8");
  if (bytes > MAX_README_BYTES) {
    return [{ field: "content", description: `must be at most ${MAX_README_BYTES} bytes (1 MiB) of UTF-8; got ${bytes}` }];
  }
  return [];
}
