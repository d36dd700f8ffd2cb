// Advisory rows (with their events and OSV severities) to messages; read-only, nothing is written from one.
// An event's `data` is read by event-data.ts (shared with the advisory.v2 documents); what it reads beyond
// this contract's fields is left out of the message.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import {
  AdvisoryEvent_AnalysisNotPlannedSchema,
  AdvisoryEvent_DetectionSchema,
  AdvisoryEvent_FalsePositiveDeterminationSchema,
  AdvisoryEvent_FixedSchema,
  AdvisoryEvent_FixNotPlannedSchema,
  AdvisoryEvent_PatchedSchema,
  AdvisoryEvent_PendingUpstreamFixSchema,
  AdvisoryEvent_TruePositiveDeterminationSchema,
  AdvisoryEventSchema,
  AdvisorySchema,
  EventTypeFilter,
  Severity_Type,
  SeveritySchema,
  type Advisory,
  type AdvisoryEvent,
  type Severity,
} from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { timestampOf } from "../kernel/timestamp.js";
import type { AdvisoryEventRow, OsvSeverity } from "../db/schema/index.js";
import type { AdvisoryWithEvents } from "./advisories.store.js";
import { falsePositiveTypes } from "./document.js";
import { readEventData } from "./event-data.js";

type EventType = NonNullable<MessageInitShape<typeof AdvisoryEventSchema>["type"]>;

function eventType(row: AdvisoryEventRow): EventType {
  const e = readEventData(row.type, row.data);
  switch (e?.type) {
    case EventTypeFilter.DETECTION: {
      const d = e.detection;
      if (d.kind === "scan/v1") {
        const s = d.scan;
        return {
          case: "detection",
          value: {
            type: {
              case: "scanv1",
              value: {
                scanner: s.scanner,
                subpackage: s.subpackageName,
                componentId: s.componentId,
                component: s.componentName,
                componentVersion: s.componentVersion,
                componentType: s.componentType,
                componentLocation: s.componentLocation,
              },
            },
          },
        };
      }
      if (d.kind === "nvdapi") return { case: "detection", value: { type: { case: "nvdapi", value: { cpeSearched: d.cpeSearched, cpeFound: d.cpeFound } } } };
      return { case: "detection", value: { type: { case: "manual", value: {} } } };
    }
    case EventTypeFilter.FIXED:
      return { case: "fixed", value: { fixedVersion: e.fixedVersion, note: e.note } };
    case EventTypeFilter.FALSE_POSITIVE_DETERMINATION:
      return { case: "falsePositiveDetermination", value: { type: falsePositiveTypes[e.falsePositiveType] ?? 0, note: e.note } };
    case EventTypeFilter.TRUE_POSITIVE_DETERMINATION:
      return { case: "truePositiveDetermination", value: { note: e.note } };
    case EventTypeFilter.ANALYSIS_NOT_PLANNED:
      return { case: "analysisNotPlanned", value: { note: e.note } };
    case EventTypeFilter.FIX_NOT_PLANNED:
      return { case: "fixNotPlanned", value: { note: e.note } };
    case EventTypeFilter.PENDING_UPSTREAM_FIX:
      return { case: "pendingUpstreamFix", value: { note: e.note } };
    default:
      return { case: undefined };
  }
}

/** The message type of each case of AdvisoryEvent.type (its value is created from the init shape above). */
const caseSchemas = {
  detection: AdvisoryEvent_DetectionSchema,
  fixed: AdvisoryEvent_FixedSchema,
  falsePositiveDetermination: AdvisoryEvent_FalsePositiveDeterminationSchema,
  truePositiveDetermination: AdvisoryEvent_TruePositiveDeterminationSchema,
  analysisNotPlanned: AdvisoryEvent_AnalysisNotPlannedSchema,
  fixNotPlanned: AdvisoryEvent_FixNotPlannedSchema,
  pendingUpstreamFix: AdvisoryEvent_PendingUpstreamFixSchema,
  patched: AdvisoryEvent_PatchedSchema,
} as const;

/** No findings: shared, never written to. */
const NO_FINDINGS = new Uint8Array(0);

// Advisory, AdvisoryEvent and Severity are built as plain message objects with every field set (protobuf-es 2
// messages are plain objects), and timestamps by timestampOf: create() walks the schema of each nested message,
// which for a page of 50 advisories with their events cost more than the rest of the mapping. Only the value of
// an event's oneof goes through create(). test/unit/advisory.test.ts holds the result equal to create()'s.
function toAdvisoryEvent(e: AdvisoryEventRow): AdvisoryEvent {
  const t = eventType(e);
  const type = (t.case === undefined ? { case: undefined } : { case: t.case, value: create(caseSchemas[t.case] as never, t.value as never) }) as AdvisoryEvent["type"];
  return {
    $typeName: AdvisoryEventSchema.typeName,
    uid: e.uid,
    createTime: timestampOf(e.time),
    findings: NO_FINDINGS,
    author: e.author,
    reviewer: e.reviewer,
    reviewState: e.reviewState,
    type,
  };
}

/** OSV severity types this contract has a value for; others (e.g. Ubuntu) are left out. */
const severityTypes: Readonly<Record<string, Severity_Type>> = { CVSS_V2: Severity_Type.CVSS_V2, CVSS_V3: Severity_Type.CVSS_V3, CVSS_V4: Severity_Type.CVSS_V4 };

function toSeverities(list: readonly OsvSeverity[]): Severity[] {
  return list.flatMap((s) => {
    const type = severityTypes[s.type];
    return type === undefined ? [] : [{ $typeName: SeveritySchema.typeName, type, score: s.score }];
  });
}

export function toAdvisory({ row, events, severities }: AdvisoryWithEvents): Advisory {
  return {
    $typeName: AdvisorySchema.typeName,
    uid: row.uid,
    advisoryId: row.advisoryId,
    createTime: timestampOf(row.createTime),
    updateTime: timestampOf(row.updateTime),
    author: events[0]?.author ?? "",
    artifactName: row.package,
    artifactType: row.artifactType,
    artifactArchitecture: row.artifactArchitecture,
    componentName: row.componentName,
    componentLocation: row.componentLocation,
    componentType: row.componentType,
    aliases: row.aliases,
    events: events.map(toAdvisoryEvent),
    severities: toSeverities(severities),
  };
}
