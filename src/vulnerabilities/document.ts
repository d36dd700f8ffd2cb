// One package advisory document (`<package>.advisories.yaml`, schema 2.x; docs/data-formats.md, "Package advisory documents"), parsed
// and validated into the rows the importer writes. Pure: no database, no files. Reusable by any reader of the
// format (the advisory.v2 domain reads the rows this produces, not the YAML).
//
// Decisions:
// - The YAML is read with the failsafe schema: every scalar is a string, so `fixed-version: 1.10` stays
//   "1.10" (not the number 1.1), `schema-version: 2` is "2", and timestamps are validated as written.
// - A known field with a bad value (a timestamp that is not RFC 3339, an advisory id holding `:`, an unknown
//   false-positive type) makes the whole document invalid: AdvisoryDocumentError names the field by its path
//   (`advisories[3].events[1].timestamp`). Nothing of an invalid document is written.
// - What the importer does not know (an event type, a key) is not an error: the event or value is kept where
//   it maps, and each is listed in `unknown` for the import summary. An event of an unknown type is not
//   stored; the ordinals of the others stay their positions in the file, so their uids do not move when the
//   importer later learns the type.
// - `data` is stored as read (keys as in the file, unknown keys included): the mapper reads the keys it
//   knows, and nothing the file said is lost.
import { parse } from "yaml";
import { AdvisoryEvent_FalsePositiveDetermination_Type as FalsePositiveType, EventTypeFilter } from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { isRecord } from "../kernel/records.js";

/** The event types of the format, as the EventTypeFilter values stored in advisory_events.type. */
const eventTypes: Readonly<Record<string, EventTypeFilter>> = {
  detection: EventTypeFilter.DETECTION,
  "true-positive-determination": EventTypeFilter.TRUE_POSITIVE_DETERMINATION,
  fixed: EventTypeFilter.FIXED,
  "false-positive-determination": EventTypeFilter.FALSE_POSITIVE_DETERMINATION,
  "analysis-not-planned": EventTypeFilter.ANALYSIS_NOT_PLANNED,
  "fix-not-planned": EventTypeFilter.FIX_NOT_PLANNED,
  "pending-upstream-fix": EventTypeFilter.PENDING_UPSTREAM_FIX,
};

/** The kebab-case false-positive types of the files, one to one with FalsePositiveDetermination.Type. */
export const falsePositiveTypes: Readonly<Record<string, FalsePositiveType>> = {
  "vulnerability-record-analysis-contested": FalsePositiveType.VULNERABILITY_RECORD_ANALYSIS_CONTESTED,
  "component-vulnerability-mismatch": FalsePositiveType.COMPONENT_VULNERABILITY_MISMATCH,
  "vulnerable-code-version-not-used": FalsePositiveType.VULNERABLE_CODE_VERSION_NOT_USED,
  "vulnerable-code-not-included-in-package": FalsePositiveType.VULNERABLE_CODE_NOT_INCLUDED_IN_PACKAGE,
  "vulnerable-code-not-in-execution-path": FalsePositiveType.VULNERABLE_CODE_NOT_IN_EXECUTION_PATH,
  "vulnerable-code-cannot-be-controlled-by-adversary": FalsePositiveType.VULNERABLE_CODE_CANNOT_BE_CONTROLLED_BY_ADVERSARY,
  "inline-mitigations-exist": FalsePositiveType.INLINE_MITIGATIONS_EXIST,
};

const SCAN_V1_KEYS = ["subpackageName", "componentID", "componentName", "componentVersion", "componentType", "componentLocation", "scanner"] as const;
const NVDAPI_KEYS = ["cpeSearched", "cpeFound"] as const;

interface ParsedEvent {
  /** Position in the file's event list (from 0). */
  ordinal: number;
  time: Date;
  type: EventTypeFilter;
  data: Record<string, unknown>;
}

export interface ParsedAdvisory {
  uid: string;
  id: string;
  aliases: string[];
  /** The events whose type is known, oldest first. */
  events: ParsedEvent[];
  componentName: string;
  componentType: string;
  componentLocation: string;
  /** The type of the last known event; 0 when there is none. */
  latestEventType: EventTypeFilter;
  /** Text searched by ListAdvisories' query. */
  search: string;
}

export interface Unknown {
  kind: "event type" | "key";
  /** Path of the field in the document, e.g. `advisories[2].events[0].data.extra`. */
  path: string;
  value?: string;
}

export interface ParsedDocument {
  package: string;
  schemaVersion: string;
  advisories: ParsedAdvisory[];
  unknown: Unknown[];
}

/** A document that cannot be imported: the field (its path in the document, "" for the whole) and why. */
export class AdvisoryDocumentError extends Error {
  constructor(
    readonly path: string,
    readonly description: string,
  ) {
    super(path ? `${path}: ${description}` : description);
    this.name = "AdvisoryDocumentError";
  }
}

const RFC3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:[Zz]|[+-]\d{2}:\d{2})$/;
/** A package name or advisory id: one uid segment each side of the `:` (no `:`, `/` or whitespace). */
const NAME = /^[^\s:/]+$/;

type Mapping = Record<string, unknown>;

function fail(path: string, description: string): never {
  throw new AdvisoryDocumentError(path, description);
}

function show(v: unknown): string {
  const s = typeof v === "string" ? v : JSON.stringify(v);
  return JSON.stringify(s.length > 60 ? `${s.slice(0, 60)}...` : s);
}

/** Reports keys of `m` outside `known` as unknown. */
function unknownKeys(m: Mapping, known: readonly string[], path: string, out: Unknown[]): void {
  for (const k of Object.keys(m)) if (!known.includes(k)) out.push({ kind: "key", path: path ? `${path}.${k}` : k });
}

function optionalString(m: Mapping, key: string, path: string): string {
  const v = m[key];
  if (v === undefined || v === null) return "";
  if (typeof v !== "string") fail(`${path}.${key}`, "must be a string");
  return v;
}

function requiredMapping(m: Mapping, key: string, path: string): Mapping {
  const v = m[key];
  if (!isRecord(v)) fail(`${path}.${key}`, v === undefined || v === "" ? "is required" : "must be a mapping");
  return v;
}

function parseTime(v: unknown, path: string): Date {
  if (typeof v !== "string" || v === "") fail(path, "is required (an RFC 3339 time)");
  const t = Date.parse(v);
  if (!RFC3339.test(v) || Number.isNaN(t)) fail(path, `not an RFC 3339 time: ${show(v)}`);
  return new Date(t);
}

/** Validates the event's data for its type; reports unknown keys. */
function checkData(type: string, data: Mapping, path: string, unknown: Unknown[]): void {
  switch (type) {
    case "detection": {
      const kind = optionalString(data, "type", path);
      unknownKeys(data, ["type", "data"], path, unknown);
      if (kind === "manual") return;
      if (kind !== "scan/v1" && kind !== "nvdapi") fail(`${path}.type`, `must be scan/v1, nvdapi or manual, not ${show(data.type ?? "")}`);
      const inner = requiredMapping(data, "data", path);
      const keys = kind === "scan/v1" ? SCAN_V1_KEYS : NVDAPI_KEYS;
      for (const k of keys) optionalString(inner, k, `${path}.data`);
      unknownKeys(inner, keys, `${path}.data`, unknown);
      return;
    }
    case "fixed": {
      if (optionalString(data, "fixed-version", path) === "") fail(`${path}.fixed-version`, "is required");
      unknownKeys(data, ["fixed-version"], path, unknown);
      return;
    }
    case "false-positive-determination": {
      const kind = optionalString(data, "type", path);
      if (!(kind in falsePositiveTypes)) fail(`${path}.type`, `must be one of ${Object.keys(falsePositiveTypes).join(", ")}, not ${show(kind)}`);
      optionalString(data, "note", path);
      unknownKeys(data, ["type", "note"], path, unknown);
      return;
    }
    default:
      optionalString(data, "note", path);
      unknownKeys(data, ["note"], path, unknown);
  }
}

/**
 * Parses and validates one document. Throws AdvisoryDocumentError naming the field (or "" when the text is
 * not YAML at all).
 */
export function parseAdvisoryDocument(text: string): ParsedDocument {
  let root: unknown;
  try {
    root = parse(text, { schema: "failsafe", uniqueKeys: true, maxAliasCount: 100 });
  } catch (err) {
    fail("", `not valid YAML: ${(err as Error).message.split("\n")[0]}`);
  }
  if (!isRecord(root)) fail("", "not a YAML mapping (an advisory document)");
  const unknown: Unknown[] = [];
  unknownKeys(root, ["schema-version", "package", "advisories"], "", unknown);

  const version = root["schema-version"];
  if (typeof version !== "string" || version === "") fail("schema-version", "is required");
  if (!/^2(?:\.\d+){0,2}$/.test(version)) {
    fail("schema-version", `${show(version)} is not supported: this importer reads schema version 2 (2, 2.0.1, 2.0.2, ...)`);
  }

  const pkg = root.package;
  if (!isRecord(pkg)) fail("package.name", "is required");
  const name = pkg.name;
  if (typeof name !== "string" || name === "") fail("package.name", "is required");
  if (!NAME.test(name)) fail("package.name", `${show(name)} must not hold ":", "/" or whitespace`);
  unknownKeys(pkg, ["name"], "package", unknown);

  const list = root.advisories ?? [];
  if (!Array.isArray(list)) fail("advisories", "must be a list");
  const seen = new Map<string, number>();
  const advisories = list.map((a, i) => parseAdvisory(name, a, `advisories[${i}]`, seen, i, unknown));
  return { package: name, schemaVersion: version, advisories, unknown };
}

function parseAdvisory(pkg: string, a: unknown, path: string, seen: Map<string, number>, index: number, unknown: Unknown[]): ParsedAdvisory {
  if (!isRecord(a)) fail(path, "must be a mapping");
  unknownKeys(a, ["id", "aliases", "events"], path, unknown);
  const id = a.id;
  if (typeof id !== "string" || id === "") fail(`${path}.id`, "is required");
  if (!NAME.test(id)) fail(`${path}.id`, `${show(id)} must not hold ":", "/" or whitespace`);
  const earlier = seen.get(id);
  if (earlier !== undefined) fail(`${path}.id`, `${show(id)} is already the id of advisories[${earlier}]`);
  seen.set(id, index);

  const rawAliases = a.aliases ?? [];
  if (!Array.isArray(rawAliases)) fail(`${path}.aliases`, "must be a list");
  const aliases = rawAliases.map((x, j) => {
    if (typeof x !== "string" || x === "") fail(`${path}.aliases[${j}]`, "must be a non-empty string");
    return x;
  });

  const rawEvents = a.events ?? [];
  if (!Array.isArray(rawEvents)) fail(`${path}.events`, "must be a list");
  const events: ParsedEvent[] = [];
  let component = { name: "", type: "", location: "" };
  rawEvents.forEach((e, j) => {
    const at = `${path}.events[${j}]`;
    if (!isRecord(e)) fail(at, "must be a mapping");
    unknownKeys(e, ["timestamp", "type", "data"], at, unknown);
    const time = parseTime(e.timestamp, `${at}.timestamp`);
    const type = e.type;
    if (typeof type !== "string" || type === "") fail(`${at}.type`, "is required");
    const data = e.data === undefined || e.data === "" ? {} : e.data;
    if (!isRecord(data)) fail(`${at}.data`, "must be a mapping");
    const known = eventTypes[type];
    if (known === undefined) {
      unknown.push({ kind: "event type", path: `${at}.type`, value: type });
      return;
    }
    checkData(type, data, `${at}.data`, unknown);
    if (type === "detection" && data.type === "scan/v1") {
      const inner = data.data as Mapping;
      component = { name: String(inner.componentName ?? ""), type: String(inner.componentType ?? ""), location: String(inner.componentLocation ?? "") };
    }
    events.push({ ordinal: j, time, type: known, data });
  });
  return {
    uid: `${pkg}:${id}`,
    id,
    aliases,
    events,
    componentName: component.name,
    componentType: component.type,
    componentLocation: component.location,
    latestEventType: events[events.length - 1]?.type ?? EventTypeFilter.UNSPECIFIED,
    search: [pkg, component.name, ...aliases].join("\n"),
  };
}
