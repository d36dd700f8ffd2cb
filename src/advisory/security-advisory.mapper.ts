// Advisory and OSV rows to SecurityAdvisoryService messages (read-only: nothing is written from a message).
//
// - An event's `data` is kept as the advisory file has it (keys as in the YAML: `fixed-version`, a detection's
//   `type` with its own `data` of camelCase scan keys, a false positive's kebab-case `type` and `note`); each
//   event type becomes its DocumentEvent member. Events with no member there (PATCHED, or a type a newer
//   importer stores) are left out of the document rather than sent without their data.
// - OSV reference types map one to one onto Reference.Type; GIT (which has no value) becomes TYPE_WEB: it is a
//   link to a repository, still useful to a reader. OSV severities of type Ubuntu (a word such as "medium",
//   not a vector) have no Severity.Type and are left out.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  DocumentAdvisorySchema,
  DocumentEventSchema,
  DocumentSchema,
  FalsePositiveDetermination_TypeSchema,
  Reference_Type,
  ResolvedVulnSchema,
  ResolvedVulnsReportSchema,
  Severity_Type,
  SeveritySchema,
  VulnerabilityMetadataSchema,
  type Document,
  type DocumentAdvisory,
  type DocumentEvent,
  type FalsePositiveDetermination_Type,
  type ResolvedVuln,
  type ResolvedVulnsReport,
  type Severity,
  type VulnerabilityMetadata,
} from "../../gen/chainguard/platform/advisory/v2/advisory_pb.js";
import { EventTypeFilter } from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import type { AdvisoryEventRow, OsvRecordRow, OsvReference, OsvSeverity } from "../db/schema/index.js";
import type { DocumentAdvisoryRow, FixedAdvisoryRow } from "./security-advisory.store.js";
import { isRecord } from "../kernel/records.js";

/**
 * DocumentAdvisory.package_namespace: the namespace of the packages the advisory documents describe. The
 * documents are the distribution's own (`<package>.advisories.yaml`, apk packages), so every advisory carries
 * the distribution's namespace.
 */
const PACKAGE_NAMESPACE = "wolfi";

type Data = Record<string, unknown>;
type EventData = MessageInitShape<typeof DocumentEventSchema>["data"];

function text(data: Data | undefined, ...keys: string[]): string {
  for (const k of keys) {
    const v = data?.[k];
    if (typeof v === "string") return v;
    if (typeof v === "number") return String(v);
  }
  return "";
}

function object(v: unknown): Data | undefined {
  return isRecord(v) ? v : undefined;
}

function falsePositiveType(kebab: string): FalsePositiveDetermination_Type {
  const name = `TYPE_${kebab.toUpperCase().replace(/-/g, "_")}`;
  return (FalsePositiveDetermination_TypeSchema.values.find((v) => v.name === name)?.number ?? 0) as FalsePositiveDetermination_Type;
}

function detection(data: Data): EventData {
  const inner = object(data.data);
  switch (text(data, "type")) {
    case "scan/v1":
      return {
        case: "detection",
        value: {
          type: {
            case: "scanv1",
            value: {
              scanner: text(inner, "scanner"),
              subpackageName: text(inner, "subpackageName", "subpackage-name"),
              componentId: text(inner, "componentID", "componentId", "component-id"),
              componentName: text(inner, "componentName", "component-name"),
              componentVersion: text(inner, "componentVersion", "component-version"),
              componentType: text(inner, "componentType", "component-type"),
              componentLocation: text(inner, "componentLocation", "component-location"),
              artifactVersion: text(inner, "artifactVersion", "artifact-version"),
              scannerVersion: text(inner, "scannerVersion", "scanner-version"),
              grypeDbBuilt: text(inner, "grypeDbBuilt", "grype-db-built"),
              grypeDbChecksum: text(inner, "grypeDbChecksum", "grype-db-checksum"),
            },
          },
        },
      };
    case "nvdapi":
      return { case: "detection", value: { type: { case: "nvdapi", value: { cpeSearched: text(inner, "cpeSearched", "cpe-searched"), cpeFound: text(inner, "cpeFound", "cpe-found") } } } };
    case "manual":
      return { case: "detection", value: { type: { case: "manual", value: {} } } };
    default:
      return { case: "detection", value: {} };
  }
}

/** The event's DocumentEvent form, or undefined for a type DocumentEvent has no member for. */
function toDocumentEvent(e: AdvisoryEventRow): DocumentEvent | undefined {
  const d = e.data;
  let data: EventData;
  switch (e.type) {
    case EventTypeFilter.DETECTION:
      data = detection(d);
      break;
    case EventTypeFilter.TRUE_POSITIVE_DETERMINATION:
      data = { case: "truePositiveDetermination", value: { note: text(d, "note") } };
      break;
    case EventTypeFilter.FIXED:
      data = {
        case: "fixed",
        value: {
          fixedVersion: text(d, "fixed-version", "fixedVersion"),
          scannerVersion: text(d, "scanner-version", "scannerVersion"),
          grypeDbBuilt: text(d, "grype-db-built", "grypeDbBuilt"),
          grypeDbChecksum: text(d, "grype-db-checksum", "grypeDbChecksum"),
        },
      };
      break;
    case EventTypeFilter.FALSE_POSITIVE_DETERMINATION:
      data = { case: "falsePositiveDetermination", value: { type: falsePositiveType(text(d, "type")), note: text(d, "note") } };
      break;
    case EventTypeFilter.ANALYSIS_NOT_PLANNED:
      data = { case: "analysisNotPlanned", value: { note: text(d, "note") } };
      break;
    case EventTypeFilter.FIX_NOT_PLANNED:
      data = { case: "fixNotPlanned", value: { note: text(d, "note") } };
      break;
    case EventTypeFilter.PENDING_UPSTREAM_FIX:
      data = { case: "pendingUpstreamFix", value: { note: text(d, "note") } };
      break;
    default:
      return undefined;
  }
  return create(DocumentEventSchema, { timestamp: timestampFromDate(e.time), data });
}

function toDocumentAdvisory(a: DocumentAdvisoryRow): DocumentAdvisory {
  return create(DocumentAdvisorySchema, {
    id: a.advisoryId,
    aliases: a.aliases,
    packageNamespace: PACKAGE_NAMESPACE,
    events: a.events.flatMap((e) => toDocumentEvent(e) ?? []),
  });
}

/** Advisories (ordered by package) grouped into one Document per package. */
export function toDocuments(rows: readonly DocumentAdvisoryRow[]): Document[] {
  const out: Document[] = [];
  for (const r of rows) {
    let doc = out[out.length - 1];
    if (!doc || doc.id !== r.package) out.push((doc = create(DocumentSchema, { id: r.package })));
    doc.advisories.push(toDocumentAdvisory(r));
  }
  return out;
}

const referenceTypes: Readonly<Record<string, Reference_Type>> = {
  ADVISORY: Reference_Type.ADVISORY,
  ARTICLE: Reference_Type.ARTICLE,
  DETECTION: Reference_Type.DETECTION,
  DISCUSSION: Reference_Type.DISCUSSION,
  REPORT: Reference_Type.REPORT,
  FIX: Reference_Type.FIX,
  INTRODUCED: Reference_Type.INTRODUCED,
  PACKAGE: Reference_Type.PACKAGE,
  EVIDENCE: Reference_Type.EVIDENCE,
  WEB: Reference_Type.WEB,
  GIT: Reference_Type.WEB,
};

const severityTypes: Readonly<Record<string, Severity_Type>> = {
  CVSS_V2: Severity_Type.CVSS_V2,
  CVSS_V3: Severity_Type.CVSS_V3,
  CVSS_V4: Severity_Type.CVSS_V4,
};

function toReferences(refs: readonly OsvReference[]) {
  return refs.map((r) => ({ type: referenceTypes[r.type] ?? Reference_Type.UNSPECIFIED, url: r.url }));
}

/** The CVSS severities (Ubuntu's and unknown types left out). */
export function toSeverities(severities: readonly OsvSeverity[]): Severity[] {
  return severities.flatMap((s) => {
    const type = severityTypes[s.type];
    return type === undefined ? [] : [create(SeveritySchema, { type, score: s.score })];
  });
}

export function toVulnerabilityMetadata(r: OsvRecordRow): VulnerabilityMetadata {
  return create(VulnerabilityMetadataSchema, {
    id: r.id,
    summary: r.summary,
    details: r.details,
    references: toReferences(r.references),
    severities: toSeverities(r.severities),
  });
}

function toResolvedVuln(id: string, aliases: readonly string[], severities: readonly Severity[]): ResolvedVuln {
  return create(ResolvedVulnSchema, { id, aliases: [...aliases], cvssSeverities: [...severities] });
}

const DAY_MS = 24 * 60 * 60 * 1000;

function byText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * One report per UTC day that has fixes (dated midnight UTC, oldest first), listing each advisory fixed that
 * day once (the same advisory fixed twice that day, or in two packages, is one entry with both alias lists),
 * by id, with the CVSS severities of the OSV records named by its id or an alias.
 */
export function toResolvedVulnsReports(fixes: readonly FixedAdvisoryRow[], severities: ReadonlyMap<string, readonly OsvSeverity[]>): ResolvedVulnsReport[] {
  const days = new Map<number, Map<string, Set<string>>>();
  for (const f of fixes) {
    const day = Math.floor(f.time.getTime() / DAY_MS) * DAY_MS;
    let byId = days.get(day);
    if (!byId) days.set(day, (byId = new Map()));
    const aliases = byId.get(f.advisoryId) ?? new Set<string>();
    for (const a of f.aliases) aliases.add(a);
    byId.set(f.advisoryId, aliases);
  }
  const vuln = (id: string, aliases: Set<string>): ResolvedVuln => {
    const seen = new Set<string>();
    const cvss: Severity[] = [];
    for (const osvId of [id, ...aliases]) {
      for (const s of toSeverities(severities.get(osvId) ?? [])) {
        const key = `${s.type} ${s.score}`;
        if (seen.has(key)) continue;
        seen.add(key);
        cvss.push(s);
      }
    }
    return toResolvedVuln(id, [...aliases], cvss);
  };
  return [...days.entries()]
    .sort(([a], [b]) => a - b)
    .map(([day, byId]) =>
      create(ResolvedVulnsReportSchema, {
        date: timestampFromDate(new Date(day)),
        resolvedVulns: [...byId.entries()].sort(([a], [b]) => byText(a, b)).map(([id, aliases]) => vuln(id, aliases)),
      }),
    );
}
