// An advisory event's `data` as advisory_events stores it: as the document had it (document.ts), with the keys
// spelled as the format spells them (kebab-case on the event, `fixed-version`; camelCase inside a scan/v1
// detection's own `data`, `componentID`). Read here once, for the vulnerabilities.v2 Advisory and the
// advisory.v2 Document messages alike; a key the format does not name is read in the spelling of its level.
import { EventTypeFilter } from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { isRecord } from "../kernel/records.js";

type Data = Record<string, unknown>;

interface ScanV1 {
  scanner: string;
  subpackageName: string;
  componentId: string;
  componentName: string;
  componentVersion: string;
  componentType: string;
  componentLocation: string;
  artifactVersion: string;
  scannerVersion: string;
  grypeDbBuilt: string;
  grypeDbChecksum: string;
}

export type Detection =
  | { kind: "scan/v1"; scan: ScanV1 }
  | { kind: "nvdapi"; cpeSearched: string; cpeFound: string }
  | { kind: "manual" }
  /** A detection type the format does not name (the importer refuses one; a row written otherwise may hold it). */
  | { kind: "other" };

/** What an event says, by its type (advisory_events.type); undefined for a type read here has no form for. */
type EventData =
  | { type: EventTypeFilter.DETECTION; detection: Detection }
  | { type: EventTypeFilter.FIXED; fixedVersion: string; note: string; scannerVersion: string; grypeDbBuilt: string; grypeDbChecksum: string }
  /** `falsePositiveType` as the file has it, kebab-case (document.ts falsePositiveTypes). */
  | { type: EventTypeFilter.FALSE_POSITIVE_DETERMINATION; falsePositiveType: string; note: string }
  | {
      type:
        | EventTypeFilter.TRUE_POSITIVE_DETERMINATION
        | EventTypeFilter.ANALYSIS_NOT_PLANNED
        | EventTypeFilter.FIX_NOT_PLANNED
        | EventTypeFilter.PENDING_UPSTREAM_FIX;
      note: string;
    };

/** A stored value as text: the files' scalars are stored as strings; a number (written by hand) reads as one. */
function text(data: Data | undefined, key: string): string {
  const v = data?.[key];
  return typeof v === "string" ? v : typeof v === "number" ? String(v) : "";
}

function detection(data: Data): Detection {
  const inner = isRecord(data.data) ? data.data : undefined;
  switch (text(data, "type")) {
    case "scan/v1":
      return {
        kind: "scan/v1",
        scan: {
          scanner: text(inner, "scanner"),
          subpackageName: text(inner, "subpackageName"),
          componentId: text(inner, "componentID"),
          componentName: text(inner, "componentName"),
          componentVersion: text(inner, "componentVersion"),
          componentType: text(inner, "componentType"),
          componentLocation: text(inner, "componentLocation"),
          artifactVersion: text(inner, "artifactVersion"),
          scannerVersion: text(inner, "scannerVersion"),
          grypeDbBuilt: text(inner, "grypeDbBuilt"),
          grypeDbChecksum: text(inner, "grypeDbChecksum"),
        },
      };
    case "nvdapi":
      return { kind: "nvdapi", cpeSearched: text(inner, "cpeSearched"), cpeFound: text(inner, "cpeFound") };
    case "manual":
      return { kind: "manual" };
    default:
      return { kind: "other" };
  }
}

/** Reads a stored event's data for its type. */
export function readEventData(type: number, data: Data): EventData | undefined {
  const note = text(data, "note");
  switch (type) {
    case EventTypeFilter.DETECTION:
      return { type, detection: detection(data) };
    case EventTypeFilter.FIXED:
      return {
        type,
        fixedVersion: text(data, "fixed-version"),
        note,
        scannerVersion: text(data, "scanner-version"),
        grypeDbBuilt: text(data, "grype-db-built"),
        grypeDbChecksum: text(data, "grype-db-checksum"),
      };
    case EventTypeFilter.FALSE_POSITIVE_DETERMINATION:
      return { type, falsePositiveType: text(data, "type"), note };
    case EventTypeFilter.TRUE_POSITIVE_DETERMINATION:
    case EventTypeFilter.ANALYSIS_NOT_PLANNED:
    case EventTypeFilter.FIX_NOT_PLANNED:
    case EventTypeFilter.PENDING_UPSTREAM_FIX:
      return { type, note };
    default:
      return undefined;
  }
}
