// Tag rows <-> chainguard.platform.registry.v2.Tag messages, and the checks on a tag as clients send it
// (violation paths relative to the tag: `name`, `digest`, `bundles`).
import type { Timestamp } from "@bufbuild/protobuf/wkt";
import type { Tag } from "../../gen/chainguard/platform/registry/v2/tags_pb.js";
import { timestampOf } from "../kernel/timestamp.js";
import type { FieldViolation } from "../kernel/errors/index.js";
import { isValidDigest, TAG_NAME_PATTERN } from "./tag-kind.js";
import type { TagWrite } from "../db/schema/index.js";
import type { TagListRow } from "./tags.store.js";

const MAX_TAG_BUNDLES = 64;
const MAX_BUNDLE_LENGTH = 256;

const DIGEST_DESCRIPTION = "must be sha256: followed by 64 lowercase hexadecimal characters";

/** The row as the message, every field set (a plain message object: no schema walk per row of a page). */
export function toTag(row: TagListRow): Tag {
  return {
    $typeName: "chainguard.platform.registry.v2.Tag",
    uid: row.uid,
    name: row.name,
    digest: row.digest,
    updateTime: timestampOf(row.updateTime),
    deprecated: row.deprecated,
    bundles: row.bundles,
    createTime: timestampOf(row.createTime),
  };
}

export function digestViolations(digest: string, field = "digest"): FieldViolation[] {
  if (digest === "") return [{ field, description: `is required; it ${DIGEST_DESCRIPTION}` }];
  if (!isValidDigest(digest)) return [{ field, description: DIGEST_DESCRIPTION }];
  return [];
}

/** Every field of a tag about to be created (output-only fields are ignored). */
export function tagViolations(tag: Tag): FieldViolation[] {
  const out: FieldViolation[] = [];
  if (tag.name === "") out.push({ field: "name", description: "is required" });
  else if (!TAG_NAME_PATTERN.test(tag.name)) {
    out.push({ field: "name", description: "must be an OCI tag: a letter, digit or _, then up to 127 letters, digits, _, . or -" });
  }
  out.push(...digestViolations(tag.digest));
  if (tag.bundles.length > MAX_TAG_BUNDLES) out.push({ field: "bundles", description: `at most ${MAX_TAG_BUNDLES} entries` });
  else {
    const i = tag.bundles.findIndex((b) => b === "" || b.length > MAX_BUNDLE_LENGTH);
    if (i >= 0) out.push({ field: `bundles[${i}]`, description: `must be 1 to ${MAX_BUNDLE_LENGTH} characters long` });
  }
  return out;
}

/** The write for a tag under the repo `repoUid` (validated first with tagViolations). */
export function tagWrite(repoUid: string, tag: Tag): TagWrite {
  return { repoUid, name: tag.name, digest: tag.digest, deprecated: tag.deprecated, bundles: tag.bundles };
}

/** Earliest and latest instants accepted as filters (years 1 to 9999, as in proto3 JSON). */
const MIN_SECONDS = -62135596800n;
const MAX_SECONDS = 253402300799n;

/**
 * A Timestamp as PostgreSQL timestamptz text with microseconds ("2024-05-01T10:00:00.123456Z"), so a filter
 * on an update_time read back from a tag keeps its full precision. Undefined when out of range.
 */
export function instantText(ts: Timestamp): string | undefined {
  if (ts.seconds < MIN_SECONDS || ts.seconds > MAX_SECONDS || ts.nanos < 0 || ts.nanos > 999_999_999) return undefined;
  const whole = new Date(Number(ts.seconds) * 1000).toISOString().slice(0, 19); // YYYY-MM-DDTHH:MM:SS (years 0001-9999)
  const micros = String(Math.floor(ts.nanos / 1000)).padStart(6, "0");
  return `${whole}.${micros}Z`;
}
