// Uids and the UIDP filter (chainguard.platform.common.UIDPFilter).
//
// A uid is a path of segments joined by "/": a root group is 40 lowercase hex characters, a child group is
// `<parent uid>/<16 lowercase hex>`, and any other resource inside a group is `<group uid>/<suffix>`. Built-in
// roles have plain uids with no "/". The validator here is deliberately loose (non-empty segments of
// [a-z0-9._-]) so every resource kind shares it; it exists to keep garbage out of SQL and error messages.
//
// SQL shapes and the indexes they need:
// - descendants_of X: `uid LIKE 'X/%'` with LIKE metacharacters in X escaped. LIKE is correct under any
//   collation; a btree index serves the prefix only when the uid column uses the "C" collation
//   (recommended: `uid text COLLATE "C" PRIMARY KEY`, which also gives byte-wise, platform-independent
//   ordering) or has an extra `text_pattern_ops` index. PostgreSQL 15 does not treat "C.UTF-8" as "C".
// - children_of X: `parent = X` when the table has a parent column (index on (parent, ...)); otherwise
//   `uid LIKE 'X/%' AND uid NOT LIKE 'X/%/%'` (same index as descendants_of).
// - ancestors_of X: `uid IN (proper ancestors of X)`, computed from X itself (primary key lookups).
// - in_root: `uid NOT LIKE '%/%'` (a scan filter; root resources are few).
// - ids: `uid IN (...)` (primary key lookups).
// Several criteria set at once are combined with AND.
import { randomBytes } from "node:crypto";
import { and, sql, type SQL } from "drizzle-orm";
import type { AnyPgColumn } from "drizzle-orm/pg-core";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { invalidArgument, type FieldViolation } from "./errors/index.js";

/** The longest uid accepted anywhere. */
export const UID_MAX_LENGTH = 1024;
/** The most uids accepted in `uidp.ids`. */
export const UIDP_MAX_IDS = 1000;

const UID_PATTERN = /^[a-z0-9._-]+(?:\/[a-z0-9._-]+)*$/;

/** The one uid validator: non-empty segments of [a-z0-9._-] joined by "/", at most UID_MAX_LENGTH long. */
export function isValidUid(uid: string): boolean {
  return uid.length > 0 && uid.length <= UID_MAX_LENGTH && UID_PATTERN.test(uid);
}

/** The parent of a uid (everything before the last "/"), or undefined for a root uid. */
export function parentOf(uid: string): string | undefined {
  const i = uid.lastIndexOf("/");
  return i < 0 ? undefined : uid.slice(0, i);
}

/**
 * The proper ancestors of a uid, outermost first (the root first, the parent last). Empty for a root uid.
 * `ancestorsOf("a/b/c")` is `["a", "a/b"]`.
 */
export function ancestorsOf(uid: string): string[] {
  const out: string[] = [];
  for (let i = uid.indexOf("/"); i >= 0; i = uid.indexOf("/", i + 1)) out.push(uid.slice(0, i));
  return out;
}

/** True when `uid` is `scope` itself or lies anywhere beneath it (inclusive). */
export function isWithin(uid: string, scope: string): boolean {
  return uid === scope || uid.startsWith(scope + "/");
}

/**
 * The visible scopes that still decide which children of `parent` a caller sees: undefined when the parent
 * lies within one of `scopes`, for then every child does (a child's uid is `<parent uid>/<suffix>`,
 * newChildUid) and a list of the parent's children needs no scope predicate; otherwise the scopes beneath the
 * parent, the only ones that can hold any of its children (usually none: nothing is visible).
 *
 * Lists of a parent's children leave the scope predicate out when they can: a statement over parameters may
 * run a generic plan (cached for a named statement after five runs, or always under plan_cache_mode =
 * force_generic_plan), made without the values, where a scope's uid range, estimated narrow, can drive a scan
 * of everything beneath the scope for a page of a few rows (test/integration/list-plans.test.ts).
 */
export function scopesOverChildren(parent: string, scopes: readonly string[]): readonly string[] | undefined {
  if (scopes.some((s) => isWithin(parent, s))) return undefined;
  return scopes.filter((s) => s.startsWith(`${parent}/`));
}

/** True when the uid has no "/" (a root group or a built-in resource). */
export function isRootUid(uid: string): boolean {
  return !uid.includes("/");
}

/** Columns a UIDP predicate is built over. `parent`, when given, holds the uid's parent (NULL for roots). */
interface UidpColumns {
  uid: AnyPgColumn | SQL;
  parent?: AnyPgColumn | SQL;
}

/** Problems with a filter, as field violations on `uidp.<field>` (empty when the filter is valid). */
function uidpViolations(filter: UIDPFilter | undefined, fieldPrefix = "uidp"): FieldViolation[] {
  if (!filter) return [];
  const out: FieldViolation[] = [];
  const check = (name: string, value: string) => {
    if (value !== "" && !isValidUid(value)) {
      out.push({ field: `${fieldPrefix}.${name}`, description: `${JSON.stringify(truncate(value))} is not a valid uid` });
    }
  };
  check("ancestors_of", filter.ancestorsOf);
  check("descendants_of", filter.descendantsOf);
  check("children_of", filter.childrenOf);
  if (filter.ids.length > UIDP_MAX_IDS) {
    out.push({ field: `${fieldPrefix}.ids`, description: `at most ${UIDP_MAX_IDS} ids may be given` });
  } else {
    const bad = filter.ids.find((id) => !isValidUid(id));
    if (bad !== undefined) out.push({ field: `${fieldPrefix}.ids`, description: `${JSON.stringify(truncate(bad))} is not a valid uid` });
  }
  return out;
}

/** Throws INVALID_ARGUMENT (BadRequest on `uidp.<field>`) when the filter names an invalid uid. */
export function validateUidp(filter: UIDPFilter | undefined, fieldPrefix = "uidp"): void {
  const violations = uidpViolations(filter, fieldPrefix);
  if (violations.length > 0) throw invalidArgument(violations);
}

/** True when no criterion of the filter is set (an absent filter selects everything). */
export function isEmptyUidp(filter: UIDPFilter | undefined): boolean {
  return !filter || (!filter.ancestorsOf && !filter.descendantsOf && !filter.childrenOf && !filter.inRoot && filter.ids.length === 0);
}

/** Escapes LIKE metacharacters (and the escape character, backslash). */
export function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, "\\$&");
}

/**
 * The filter as a Drizzle predicate over the given columns, or undefined when the filter is absent or empty.
 * Validates first (INVALID_ARGUMENT naming `uidp.<field>`).
 */
export function uidpPredicate(filter: UIDPFilter | undefined, columns: UidpColumns, fieldPrefix = "uidp"): SQL | undefined {
  validateUidp(filter, fieldPrefix);
  if (!filter || isEmptyUidp(filter)) return undefined;
  const { uid, parent } = columns;
  const parts: SQL[] = [];
  if (filter.ancestorsOf) {
    const ancestors = ancestorsOf(filter.ancestorsOf);
    parts.push(ancestors.length === 0 ? sql`false` : uidIn(uid, ancestors));
  }
  if (filter.descendantsOf) {
    parts.push(sql`${uid} LIKE ${escapeLike(filter.descendantsOf) + "/%"} ESCAPE '\\'`);
  }
  if (filter.childrenOf) {
    if (parent) {
      parts.push(sql`${parent} = ${filter.childrenOf}`);
    } else {
      const prefix = escapeLike(filter.childrenOf) + "/";
      parts.push(sql`(${uid} LIKE ${prefix + "%"} ESCAPE '\\' AND ${uid} NOT LIKE ${prefix + "%/%"} ESCAPE '\\')`);
    }
  }
  if (filter.inRoot) parts.push(sql`${uid} NOT LIKE '%/%'`);
  if (filter.ids.length > 0) parts.push(uidIn(uid, [...new Set(filter.ids)]));
  return parts.length === 1 ? parts[0] : and(...parts);
}

/**
 * The same selection as uidpPredicate, in memory (for resources that do not live in a table, such as the
 * built-in roles, and as an oracle in tests). Assumes a valid filter.
 */
export function matchesUidp(filter: UIDPFilter | undefined, uid: string): boolean {
  if (!filter) return true;
  if (filter.ancestorsOf && !ancestorsOf(filter.ancestorsOf).includes(uid)) return false;
  if (filter.descendantsOf && !uid.startsWith(filter.descendantsOf + "/")) return false;
  if (filter.childrenOf && parentOf(uid) !== filter.childrenOf) return false;
  if (filter.inRoot && !isRootUid(uid)) return false;
  if (filter.ids.length > 0 && !filter.ids.includes(uid)) return false;
  return true;
}

/**
 * A canonical string for the filter, for page-token binding: equal for filters that select the same rows by
 * the same criteria (ids sorted and de-duplicated; an absent filter and an empty one are both "").
 */
export function uidpCanonical(filter: UIDPFilter | undefined): string {
  if (!filter || isEmptyUidp(filter)) return "";
  const parts: string[] = [];
  if (filter.ancestorsOf) parts.push(`ancestors_of=${filter.ancestorsOf}`);
  if (filter.descendantsOf) parts.push(`descendants_of=${filter.descendantsOf}`);
  if (filter.childrenOf) parts.push(`children_of=${filter.childrenOf}`);
  if (filter.inRoot) parts.push("in_root");
  if (filter.ids.length > 0) parts.push(`ids=${[...new Set(filter.ids)].sort().join(",")}`);
  return parts.join("&");
}

function uidIn(uid: AnyPgColumn | SQL, values: readonly string[]): SQL {
  return sql`${uid} IN (${sql.join(values.map((v) => sql`${v}`), sql`, `)})`;
}

function truncate(s: string): string {
  return s.length > 80 ? s.slice(0, 77) + "..." : s;
}

/** A new root uid: 40 random lowercase hex characters (organizations, root-level identities). */
export function newRootUid(): string {
  return randomBytes(20).toString("hex");
}

/** A new uid beneath `parent`: <parent>/<16 random lowercase hex characters>. */
export function newChildUid(parent: string): string {
  return `${parent}/${randomBytes(8).toString("hex")}`;
}

const GROUP_UID_PATTERN = /^[0-9a-f]{40}(?:\/[0-9a-f]{16})*$/;

/**
 * True when the uid has the shape of a group's: a root uid (40 hex) and child segments (16 hex each), as
 * newRootUid and newChildUid make them and the Group message describes.
 */
export function isGroupUid(uid: string): boolean {
  return uid.length <= UID_MAX_LENGTH && GROUP_UID_PATTERN.test(uid);
}
