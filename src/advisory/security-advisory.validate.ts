// Checks of SecurityAdvisoryService requests (the decisions are in security-advisory.service.ts): each turns
// a request into what the store is asked, or throws INVALID_ARGUMENT naming the field by its proto path.
import { timestampDate, type Timestamp } from "@bufbuild/protobuf/wkt";
import type { ImageRef, ListDocumentsRequest, ListResolvedVulnsReportsRequest, ListVulnerabilityMetadataRequest } from "../../gen/chainguard/platform/advisory/v2/advisory_pb.js";
import { invalidArgument, throwIfAny, type FieldViolation } from "../kernel/errors/index.js";
import { parseImageRepo, tagProblem } from "./image-ref.js";
import type { DocumentFilter } from "./security-advisory.store.js";

const MAX_CVES = 1000;
const MAX_METADATA_IDS = 1000;
export const MAX_DOCUMENT_ADVISORIES = 5000;
const MAX_IMAGE_REFS = 100;
const MAX_TAGS = 100;
const MAX_REPORT_DAYS = 366;
const MAX_ID_LENGTH = 256;
const DAY_MS = 24 * 60 * 60 * 1000;
const MIN_TIME_MS = Date.parse("0001-01-01T00:00:00Z");
const MAX_TIME_MS = Date.parse("9999-12-31T23:59:59.999Z");

function idViolations(values: readonly string[], field: (i: number) => string): FieldViolation[] {
  const out: FieldViolation[] = [];
  for (const [i, v] of values.entries()) {
    if (v === "") out.push({ field: field(i), description: "must not be empty" });
    else if (v.length > MAX_ID_LENGTH) out.push({ field: field(i), description: `must be at most ${MAX_ID_LENGTH} characters long` });
    if (out.length >= 10) break;
  }
  return out;
}

function timeOf(t: Timestamp | undefined, field: string): Date {
  if (!t) throw invalidArgument({ field, description: "is required" });
  const d = timestampDate(t);
  // Years 1 to 9999, as google.protobuf.Timestamp defines it (and within what PostgreSQL can compare).
  if (Number.isNaN(d.getTime()) || d.getTime() < MIN_TIME_MS || d.getTime() > MAX_TIME_MS) {
    throw invalidArgument({ field, description: "must be a timestamp between 0001-01-01 and 9999-12-31" });
  }
  return d;
}

interface Ref {
  packageName: string;
  repoNames: string[];
  repo: string;
  index: number;
}

function parseRefs(refs: readonly ImageRef[]): Ref[] {
  if (refs.length === 0) throw invalidArgument({ field: "image_refs", description: "at least one image ref is required" });
  if (refs.length > MAX_IMAGE_REFS) throw invalidArgument({ field: "image_refs", description: `at most ${MAX_IMAGE_REFS} image refs` });
  const violations: FieldViolation[] = [];
  const out: Ref[] = [];
  for (const [i, ref] of refs.entries()) {
    const parsed = parseImageRepo(ref.repo);
    if (typeof parsed === "string") violations.push({ field: `image_refs[${i}].repo`, description: parsed });
    else out.push({ ...parsed, repo: ref.repo, index: i });
    if (ref.tags.length > MAX_TAGS) violations.push({ field: `image_refs[${i}].tags`, description: `at most ${MAX_TAGS} tags` });
    else {
      for (const [j, tag] of ref.tags.entries()) {
        const problem = tagProblem(tag);
        if (problem) violations.push({ field: `image_refs[${i}].tags[${j}]`, description: problem });
      }
    }
  }
  throwIfAny(violations);
  return out;
}

/** The store filter of a ListDocuments request. */
export function documentFilterOf(req: ListDocumentsRequest): DocumentFilter {
  if (req.id === "" && req.cves.length === 0) {
    throw invalidArgument({ field: "id", description: "name a package (id) or vulnerabilities (cves): at least one is required" });
  }
  if (req.id.length > MAX_ID_LENGTH) throw invalidArgument({ field: "id", description: `must be at most ${MAX_ID_LENGTH} characters long` });
  if (req.cves.length > MAX_CVES) throw invalidArgument({ field: "cves", description: `at most ${MAX_CVES} entries` });
  throwIfAny(idViolations(req.cves, (i) => `cves[${i}]`));
  return { packageName: req.id || undefined, cves: [...new Set(req.cves)] };
}

/** INVALID_ARGUMENT for a ListDocuments request matching more advisories than an answer holds. */
export function tooBroad(req: ListDocumentsRequest) {
  return invalidArgument({
    field: req.cves.length > 0 ? "cves" : "id",
    description: `the request matches more than ${MAX_DOCUMENT_ADVISORIES} advisories: name fewer cves, or a package`,
  });
}

/** The OSV ids a ListVulnerabilityMetadata request names (id and ids together), or undefined for all. */
export function metadataIdsOf(req: ListVulnerabilityMetadataRequest): string[] | undefined {
  if (req.ids.length > MAX_METADATA_IDS) throw invalidArgument({ field: "ids", description: `at most ${MAX_METADATA_IDS} entries` });
  if (req.id.length > MAX_ID_LENGTH) throw invalidArgument({ field: "id", description: `must be at most ${MAX_ID_LENGTH} characters long` });
  throwIfAny(idViolations(req.ids, (i) => `ids[${i}]`));
  if (req.id === "" && req.ids.length === 0) return undefined;
  const ids = [...new Set([...(req.id ? [req.id] : []), ...req.ids])];
  if (ids.length > MAX_METADATA_IDS) throw invalidArgument({ field: "ids", description: `id and ids together name at most ${MAX_METADATA_IDS} records` });
  return ids;
}

interface ReportRequest {
  start: Date;
  end: Date;
  refs: Ref[];
}

/** The range and refs of a ListResolvedVulnsReports request (the range first: REST cannot carry refs). */
export function reportRequestOf(req: ListResolvedVulnsReportsRequest): ReportRequest {
  const start = timeOf(req.startTime, "start_time");
  const end = timeOf(req.endTime, "end_time");
  if (end < start) throw invalidArgument({ field: "end_time", description: "must not be before start_time" });
  if (end.getTime() - start.getTime() > MAX_REPORT_DAYS * DAY_MS) throw invalidArgument({ field: "end_time", description: `the range spans at most ${MAX_REPORT_DAYS} days` });
  return { start, end, refs: parseRefs(req.imageRefs) };
}
