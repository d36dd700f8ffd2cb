// Advisory rows (with their events and OSV severities) to messages; read-only, nothing is written from one.
// An event's `data` is kept as the file had it (document.ts): its typed oneof is read from the keys the format
// names, and other keys are left out of the message.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  AdvisoryEventSchema,
  AdvisorySchema,
  EventTypeFilter,
  Severity_Type,
  type Advisory,
  type AdvisoryEvent,
} from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import type { AdvisoryEventRow, OsvSeverity } from "../db/schema/index.js";
import type { AdvisoryWithEvents } from "./advisories.store.js";
import { falsePositiveTypes } from "./document.js";

type Data = Record<string, unknown>;
type EventType = MessageInitShape<typeof AdvisoryEventSchema>["type"];

const str = (d: Data | undefined, key: string): string => (typeof d?.[key] === "string" ? (d[key] as string) : "");
const mapping = (v: unknown): Data | undefined => (typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Data) : undefined);

function eventType(type: number, d: Data): EventType {
  const note = str(d, "note");
  switch (type) {
    case EventTypeFilter.DETECTION: {
      const inner = mapping(d.data);
      if (d.type === "scan/v1") {
        return {
          case: "detection",
          value: {
            type: {
              case: "scanv1",
              value: {
                scanner: str(inner, "scanner"),
                subpackage: str(inner, "subpackageName"),
                componentId: str(inner, "componentID"),
                component: str(inner, "componentName"),
                componentVersion: str(inner, "componentVersion"),
                componentType: str(inner, "componentType"),
                componentLocation: str(inner, "componentLocation"),
              },
            },
          },
        };
      }
      if (d.type === "nvdapi") return { case: "detection", value: { type: { case: "nvdapi", value: { cpeSearched: str(inner, "cpeSearched"), cpeFound: str(inner, "cpeFound") } } } };
      return { case: "detection", value: { type: { case: "manual", value: {} } } };
    }
    case EventTypeFilter.FIXED:
      return { case: "fixed", value: { fixedVersion: str(d, "fixed-version"), note } };
    case EventTypeFilter.FALSE_POSITIVE_DETERMINATION:
      return { case: "falsePositiveDetermination", value: { type: falsePositiveTypes[str(d, "type")] ?? 0, note } };
    case EventTypeFilter.TRUE_POSITIVE_DETERMINATION:
      return { case: "truePositiveDetermination", value: { note } };
    case EventTypeFilter.ANALYSIS_NOT_PLANNED:
      return { case: "analysisNotPlanned", value: { note } };
    case EventTypeFilter.FIX_NOT_PLANNED:
      return { case: "fixNotPlanned", value: { note } };
    case EventTypeFilter.PENDING_UPSTREAM_FIX:
      return { case: "pendingUpstreamFix", value: { note } };
    default:
      return { case: undefined };
  }
}

export function toAdvisoryEvent(e: AdvisoryEventRow): AdvisoryEvent {
  return create(AdvisoryEventSchema, {
    uid: e.uid,
    createTime: timestampFromDate(e.time),
    author: e.author,
    reviewer: e.reviewer,
    reviewState: e.reviewState,
    type: eventType(e.type, e.data),
  });
}

/** OSV severity types this contract has a value for; others (e.g. Ubuntu) are left out. */
const severityTypes: Readonly<Record<string, Severity_Type>> = { CVSS_V2: Severity_Type.CVSS_V2, CVSS_V3: Severity_Type.CVSS_V3, CVSS_V4: Severity_Type.CVSS_V4 };

function toSeverities(list: readonly OsvSeverity[]) {
  return list.flatMap((s) => {
    const type = severityTypes[s.type];
    return type === undefined ? [] : [{ type, score: s.score }];
  });
}

export function toAdvisory({ row, events, severities }: AdvisoryWithEvents): Advisory {
  return create(AdvisorySchema, {
    uid: row.uid,
    advisoryId: row.advisoryId,
    createTime: timestampFromDate(row.createTime),
    updateTime: timestampFromDate(row.updateTime),
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
  });
}
