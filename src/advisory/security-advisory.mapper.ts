// Advisory and OSV rows to SecurityAdvisoryService messages (read-only: nothing is written from a message).
//
// - An event's `data` is read by vulnerabilities/event-data.ts (the stored form, shared with the
//   vulnerabilities.v2 advisories); each event type becomes its DocumentEvent member. Events with no member there (PATCHED, or a type a newer
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
import { readEventData, type Detection } from "../vulnerabilities/event-data.js";

/**
 * DocumentAdvisory.package_namespace: the namespace of the packages the advisory documents describe. The
 * documents are the distribution's own (`<package>.advisories.yaml`, apk packages), so every advisory carries
 * the distribution's namespace.
 */
const PACKAGE_NAMESPACE = "wolfi";

type EventData = MessageInitShape<typeof DocumentEventSchema>["data"];

function falsePositiveType(kebab: string): FalsePositiveDetermination_Type {
  const name = `TYPE_${kebab.toUpperCase().replace(/-/g, "_")}`;
  return (FalsePositiveDetermination_TypeSchema.values.find((v) => v.name === name)?.number ?? 0) as FalsePositiveDetermination_Type;
}

function detection(d: Detection): EventData {
  switch (d.kind) {
    case "scan/v1":
      return { case: "detection", value: { type: { case: "scanv1", value: { ...d.scan } } } };
    case "nvdapi":
      return { case: "detection", value: { type: { case: "nvdapi", value: { cpeSearched: d.cpeSearched, cpeFound: d.cpeFound } } } };
    case "manual":
      return { case: "detection", value: { type: { case: "manual", value: {} } } };
    default:
      return { case: "detection", value: {} };
  }
}

/** The event's DocumentEvent form, or undefined for a type DocumentEvent has no member for. */
function toDocumentEvent(row: AdvisoryEventRow): DocumentEvent | undefined {
  const e = readEventData(row.type, row.data);
  let data: EventData;
  switch (e?.type) {
    case EventTypeFilter.DETECTION:
      data = detection(e.detection);
      break;
    case EventTypeFilter.TRUE_POSITIVE_DETERMINATION:
      data = { case: "truePositiveDetermination", value: { note: e.note } };
      break;
    case EventTypeFilter.FIXED: {
      const { fixedVersion, scannerVersion, grypeDbBuilt, grypeDbChecksum } = e;
      data = { case: "fixed", value: { fixedVersion, scannerVersion, grypeDbBuilt, grypeDbChecksum } };
      break;
    }
    case EventTypeFilter.FALSE_POSITIVE_DETERMINATION:
      data = { case: "falsePositiveDetermination", value: { type: falsePositiveType(e.falsePositiveType), note: e.note } };
      break;
    case EventTypeFilter.ANALYSIS_NOT_PLANNED:
      data = { case: "analysisNotPlanned", value: { note: e.note } };
      break;
    case EventTypeFilter.FIX_NOT_PLANNED:
      data = { case: "fixNotPlanned", value: { note: e.note } };
      break;
    case EventTypeFilter.PENDING_UPSTREAM_FIX:
      data = { case: "pendingUpstreamFix", value: { note: e.note } };
      break;
    default:
      return undefined;
  }
  return create(DocumentEventSchema, { timestamp: timestampFromDate(row.time), data });
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
function toSeverities(severities: readonly OsvSeverity[]): Severity[] {
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
