// One OSV record (ossf/osv-schema; docs/data-formats.md, "OSV records"), validated: every field this server reads or
// the schema constrains is checked, and a problem names its path from the record's root
// (`references[2].type: unknown type "FOO"`). Fields the schema may add later are ignored, as the schema's
// own evolution rules expect readers to do.
import { isRecord } from "../kernel/records.js";

const OSV_SEVERITY_TYPES = ["CVSS_V2", "CVSS_V3", "CVSS_V4", "Ubuntu"] as const;
const OSV_REFERENCE_TYPES = ["ADVISORY", "ARTICLE", "DETECTION", "DISCUSSION", "REPORT", "FIX", "INTRODUCED", "GIT", "PACKAGE", "EVIDENCE", "WEB"] as const;
const RANGE_TYPES = ["ECOSYSTEM", "SEMVER", "GIT"] as const;
const RANGE_EVENTS = ["introduced", "fixed", "last_affected", "limit"] as const;

/** Longest id, alias and other short string accepted (real ids are under 100 characters). */
const MAX_ID_LENGTH = 256;

export interface OsvRecord {
  id: string;
  summary: string;
  details: string;
  aliases: string[];
  references: { type: string; url: string }[];
  severities: { type: string; score: string }[];
  modifiedTime: Date;
  publishedTime: Date | null;
  withdrawnTime: Date | null;
}

/** A record that breaks the schema; `field` is the path of the offending value ("" for the record itself). */
class OsvValidationError extends Error {
  constructor(
    readonly field: string,
    readonly problem: string,
  ) {
    super(field ? `${field}: ${problem}` : problem);
  }
}

// RFC 3339 date-time (the schema's "timestamp"): date, `T`, time, optional fraction, `Z` or an offset.
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$/;
// eslint-disable-next-line no-control-regex
const BLANK_OR_CONTROL = /[\s\u0000-\u001f\u007f]/;

type Json = Record<string, unknown>;

function describe(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : `${typeof v} ${JSON.stringify(v)}`.slice(0, 80);
}

function fail(field: string, problem: string): never {
  throw new OsvValidationError(field, problem);
}

function optionalString(o: Json, key: string, at: string): string {
  const v = o[key];
  if (v === undefined || v === null) return "";
  if (typeof v !== "string") fail(at + key, `must be a string, not ${describe(v)}`);
  return v;
}

function identifier(v: unknown, field: string): string {
  if (typeof v !== "string") fail(field, v === undefined ? "is required" : `must be a string, not ${describe(v)}`);
  if (v === "") fail(field, "must not be empty");
  if (v.length > MAX_ID_LENGTH) fail(field, `must be at most ${MAX_ID_LENGTH} characters long`);
  if (BLANK_OR_CONTROL.test(v)) fail(field, `must not contain spaces or control characters: ${JSON.stringify(v)}`);
  return v;
}

function parseRfc3339(v: unknown, field: string): Date {
  if (typeof v !== "string") fail(field, v === undefined ? "is required" : `must be an RFC 3339 timestamp string, not ${describe(v)}`);
  const m = RFC3339.exec(v);
  // A leap second (:60) is RFC 3339 but not a JS Date: read as the second before it.
  const date = m ? new Date(m[6] === "60" ? v.replace(/:60(?=[.Zz+-])/, ":59") : v) : undefined;
  // Date accepts 2024-02-30 (rolling over): the fields must read back as given (offsets aside).
  const valid = m && date && !Number.isNaN(date.getTime()) && Number(m[2]) >= 1 && Number(m[2]) <= 12 && Number(m[3]) >= 1 && Number(m[3]) <= new Date(Date.UTC(Number(m[1]), Number(m[2]), 0)).getUTCDate() && Number(m[4]) <= 23 && Number(m[5]) <= 59 && Number(m[6]) <= 60;
  if (!valid) fail(field, `must be an RFC 3339 timestamp (like 2024-09-10T07:05:03Z), not ${JSON.stringify(v)}`);
  return date!;
}

function optionalTime(o: Json, key: string): Date | null {
  return o[key] === undefined || o[key] === null ? null : parseRfc3339(o[key], key);
}

function array(o: Json, key: string, at: string): unknown[] {
  const v = o[key];
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v)) fail(at + key, `must be an array, not ${describe(v)}`);
  return v;
}

function strings(o: Json, key: string, at = ""): string[] {
  return array(o, key, at).map((v, i) => identifier(v, `${at}${key}[${i}]`));
}

function oneOf<T extends string>(v: unknown, allowed: readonly T[], field: string): T {
  if (typeof v !== "string") fail(field, v === undefined ? "is required" : `must be a string, not ${describe(v)}`);
  if (!(allowed as readonly string[]).includes(v)) fail(field, `unknown type ${JSON.stringify(v)} (expected one of ${allowed.join(", ")})`);
  return v as T;
}

function severities(o: Json, at: string): { type: string; score: string }[] {
  return array(o, "severity", at).map((s, i) => {
    const field = `${at}severity[${i}]`;
    if (!isRecord(s)) fail(field, `must be an object, not ${describe(s)}`);
    const type = oneOf(s.type, OSV_SEVERITY_TYPES, `${field}.type`);
    if (typeof s.score !== "string" || s.score.trim() === "") fail(`${field}.score`, s.score === undefined ? "is required" : "must be a non-empty string");
    if (type.startsWith("CVSS_") && !s.score.startsWith("CVSS:") && type !== "CVSS_V2") fail(`${field}.score`, `must be a CVSS vector string (CVSS:3.1/AV:N/...), not ${JSON.stringify(s.score).slice(0, 80)}`);
    return { type, score: s.score };
  });
}

function url(v: unknown, field: string): string {
  if (typeof v !== "string") fail(field, v === undefined ? "is required" : `must be a string, not ${describe(v)}`);
  let parsed: URL;
  try {
    parsed = new URL(v);
  } catch {
    fail(field, `must be an absolute URL, not ${JSON.stringify(v).slice(0, 120)}`);
  }
  if (!/^(https?|git|ssh|ftp):$/.test(parsed.protocol)) fail(field, `unsupported URL scheme ${parsed.protocol}`);
  return v;
}

function affected(o: Json): void {
  array(o, "affected", "").forEach((a, i) => {
    const at = `affected[${i}]`;
    if (!isRecord(a)) fail(at, `must be an object, not ${describe(a)}`);
    if (a.package !== undefined && !isRecord(a.package)) fail(`${at}.package`, `must be an object, not ${describe(a.package)}`);
    if (isRecord(a.package)) for (const k of ["ecosystem", "name", "purl"]) optionalString(a.package, k, `${at}.package.`);
    array(a, "ranges", `${at}.`).forEach((r, j) => {
      const rat = `${at}.ranges[${j}]`;
      if (!isRecord(r)) fail(rat, `must be an object, not ${describe(r)}`);
      oneOf(r.type, RANGE_TYPES, `${rat}.type`);
      const events = array(r, "events", `${rat}.`);
      if (events.length === 0) fail(`${rat}.events`, "must list at least one event");
      events.forEach((e, k) => {
        const eat = `${rat}.events[${k}]`;
        if (!isRecord(e)) fail(eat, `must be an object, not ${describe(e)}`);
        const keys = Object.keys(e).filter((x) => (RANGE_EVENTS as readonly string[]).includes(x));
        if (keys.length !== 1) fail(eat, `must have exactly one of ${RANGE_EVENTS.join(", ")}`);
        if (typeof e[keys[0]!] !== "string") fail(`${eat}.${keys[0]}`, "must be a string");
      });
    });
    array(a, "versions", `${at}.`).forEach((v, j) => {
      if (typeof v !== "string") fail(`${at}.versions[${j}]`, `must be a string, not ${describe(v)}`);
    });
    severities(a, `${at}.`);
    if (a.database_specific !== undefined && !isRecord(a.database_specific)) fail(`${at}.database_specific`, "must be an object");
    if (a.ecosystem_specific !== undefined && !isRecord(a.ecosystem_specific)) fail(`${at}.ecosystem_specific`, "must be an object");
  });
}

/** Validates a parsed OSV JSON document and returns what this server keeps of it. */
export function validateOsvRecord(value: unknown): OsvRecord {
  if (!isRecord(value)) fail("", `an OSV record is a JSON object, not ${describe(value)}`);
  const id = identifier(value.id, "id");
  const modifiedTime = parseRfc3339(value.modified, "modified");
  const publishedTime = optionalTime(value, "published");
  const withdrawnTime = optionalTime(value, "withdrawn");
  if (value.schema_version !== undefined) optionalString(value, "schema_version", "");
  const summary = optionalString(value, "summary", "");
  const details = optionalString(value, "details", "");
  const aliases = strings(value, "aliases");
  strings(value, "related");
  strings(value, "upstream");
  const severity = severities(value, "");
  const references = array(value, "references", "").map((r, i) => {
    const field = `references[${i}]`;
    if (!isRecord(r)) fail(field, `must be an object, not ${describe(r)}`);
    return { type: oneOf(r.type, OSV_REFERENCE_TYPES, `${field}.type`), url: url(r.url, `${field}.url`) };
  });
  affected(value);
  if (value.database_specific !== undefined && !isRecord(value.database_specific)) fail("database_specific", "must be an object");
  if (value.credits !== undefined && !Array.isArray(value.credits)) fail("credits", "must be an array");
  return { id, summary, details, aliases: [...new Set(aliases)], references, severities: severity, modifiedTime, publishedTime, withdrawnTime };
}
