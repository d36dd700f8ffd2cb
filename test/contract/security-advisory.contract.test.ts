// SecurityAdvisoryService over every protocol, on advisory documents written into the advisory tables (as the
// YAML importer writes them) and OSV records written by the OSV importer:
// - ListDocuments (no authentication): by package, by cves (aliases or advisory ids), both; every event type
//   mapped to its DocumentEvent member; INVALID_ARGUMENT for neither, more than 1,000 cves, an empty cve.
// - ListVulnerabilityMetadata (no authentication): by id and ids, everything paged, order_by, withdrawn
//   records left out, GIT references as TYPE_WEB, Ubuntu severities left out; INVALID_ARGUMENT beyond 1,000 ids.
// - ListResolvedVulnsReports (the four capabilities somewhere, repos the caller sees): one report per UTC day
//   with fixes, inclusive range, aliases and CVSS severities from OSV; INVALID_ARGUMENT for a missing or
//   inverted range, a range too long, no refs, too many refs, a bad repo or tag; NOT_FOUND for a repo the
//   caller does not see; PERMISSION_DENIED and UNAUTHENTICATED. Over REST, image_refs (a repeated message on a
//   GET) goes as one query parameter per ref holding its JSON object (the harness writes it so); the REST
//   spellings of the same request, and bad JSON refs, are checked after the table.
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { Code } from "@connectrpc/connect";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  FalsePositiveDetermination_Type,
  Reference_Type,
  SecurityAdvisoryService,
  Severity_Type,
  type ListDocumentsResponse,
  type ListResolvedVulnsReportsResponse,
} from "../../gen/chainguard/platform/advisory/v2/advisory_pb.js";
import { ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { importOsv } from "../../src/advisory/osv-import.js";
import { repos } from "../../src/db/schema/index.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { EventType, writeAdvisoryDocument } from "../support/advisory-fixtures.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { call, contractCase, runContractCases, invalidField } from "./harness.js";

let server: TestServer;
let world: World;
let root = "";

const CVSS3 = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H";
const CVSS4 = "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N";

const osv = (id: string, extra: Record<string, unknown> = {}) => JSON.stringify({ id, modified: "2024-09-01T00:00:00Z", summary: `summary ${id}`, details: `details ${id}`, ...extra });

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "acme");
  const db = server.database.db;
  await writeAdvisoryDocument(db, "nginx", [
    {
      id: "CGA-0001",
      aliases: ["CVE-2024-0001", "GHSA-aaaa-bbbb-cccc"],
      events: [
        {
          time: "2024-09-10T07:05:03Z",
          type: EventType.DETECTION,
          data: {
            type: "scan/v1",
            data: { subpackageName: "nginx-mod", componentID: "c1", componentName: "openssl", componentVersion: "3.0.0", componentType: "apk", componentLocation: "/lib", scanner: "grype" },
          },
        },
        { time: "2024-09-11T00:00:00Z", type: EventType.TRUE_POSITIVE_DETERMINATION, data: { note: "reachable" } },
        { time: "2024-09-12T19:03:40Z", type: EventType.FIXED, data: { "fixed-version": "1.2.3-r1" } },
      ],
    },
    {
      id: "CGA-0002",
      aliases: ["CVE-2024-0002"],
      events: [
        { time: "2024-09-01T00:00:00Z", type: EventType.DETECTION, data: { type: "nvdapi", data: { cpeSearched: "cpe:2.3:a:nginx:*", cpeFound: "cpe:2.3:a:nginx:nginx:1.0" } } },
        { time: "2024-09-02T00:00:00Z", type: EventType.FALSE_POSITIVE_DETERMINATION, data: { type: "vulnerable-code-not-in-execution-path", note: "not called" } },
      ],
    },
    {
      id: "CGA-0003",
      aliases: ["CVE-2024-0003"],
      events: [
        { time: "2024-09-05T00:00:00Z", type: EventType.PENDING_UPSTREAM_FIX, data: { note: "waiting" } },
        { time: "2024-09-12T01:00:00Z", type: EventType.FIXED, data: { "fixed-version": "1.2.2-r0" } },
      ],
    },
    {
      id: "CGA-0006",
      aliases: ["CVE-2024-0006"],
      events: [
        { time: "2024-08-01T00:00:00Z", type: EventType.DETECTION, data: { type: "manual" } },
        { time: "2024-08-02T00:00:00Z", type: EventType.ANALYSIS_NOT_PLANNED, data: { note: "later" } },
        { time: "2024-08-03T00:00:00Z", type: EventType.FIX_NOT_PLANNED, data: { note: "never" } },
        { time: "2024-08-04T00:00:00Z", type: EventType.PATCHED, data: {} },
      ],
    },
  ]);
  await writeAdvisoryDocument(db, "curl", [{ id: "CGA-0004", aliases: ["CVE-2024-0001"], events: [{ time: "2024-09-14T10:00:00Z", type: EventType.FIXED, data: { "fixed-version": "8.0-r1" } }] }]);
  await writeAdvisoryDocument(db, "redis", [{ id: "CGA-0005", aliases: ["CVE-2024-0005"], events: [{ time: "2024-09-13T23:59:59Z", type: EventType.FIXED, data: { "fixed-version": "7.0-r2" } }] }]);

  root = mkdtempSync(join(tmpdir(), "security-advisory-contract-"));
  mkdirSync(root, { recursive: true });
  const files: Record<string, string> = {
    "GHSA-aaaa-bbbb-cccc": osv("GHSA-aaaa-bbbb-cccc", {
      severity: [
        { type: "CVSS_V3", score: CVSS3 },
        { type: "Ubuntu", score: "high" },
      ],
      references: [
        { type: "ADVISORY", url: "https://github.com/advisories/GHSA-aaaa-bbbb-cccc" },
        { type: "GIT", url: "https://github.com/nginx/nginx" },
        { type: "FIX", url: "https://github.com/nginx/nginx/commit/1" },
      ],
    }),
    "CVE-2024-0001": osv("CVE-2024-0001", {
      severity: [
        { type: "CVSS_V3", score: CVSS3 },
        { type: "CVSS_V4", score: CVSS4 },
      ],
    }),
    "CVE-2024-0005": osv("CVE-2024-0005", { severity: [{ type: "CVSS_V2", score: "AV:N/AC:L/Au:N/C:P/I:P/A:P" }] }),
    "CVE-2024-0007": osv("CVE-2024-0007"),
    "CVE-2024-0008": osv("CVE-2024-0008"),
    "GO-2024-9999": osv("GO-2024-9999", { withdrawn: "2024-09-02T00:00:00Z", severity: [{ type: "CVSS_V3", score: CVSS3 }] }),
    "CVE-2024-0003": osv("CVE-2024-0003", { withdrawn: "2024-09-02T00:00:00Z", severity: [{ type: "CVSS_V3", score: CVSS3 }] }),
  };
  for (const [id, content] of Object.entries(files)) writeFileSync(join(root, `${id}.json`), content);
  const summary = await importOsv(db, [root]);
  expect(summary.skipped).toEqual([]);

  await db.insert(repos).values([
    { uid: newChildUid(world.org), groupUid: world.org, name: "nginx" },
    { uid: newChildUid(world.org), groupUid: world.org, name: "curl" },
    { uid: newChildUid(world.other), groupUid: world.other, name: "redis" },
  ]);
});

afterAll(async () => {
  await server?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

const viewer = () => world.auth("viewer");
const ts = (iso: string) => timestampFromDate(new Date(iso));
const september = { startTime: ts("2024-09-01T00:00:00Z"), endTime: ts("2024-09-30T23:59:59Z") };
const docs = (m: ListDocumentsResponse) => m.documents.map((d) => [d.id, d.advisories.map((a) => a.id)]);
const ids = (m: { vulnerabilityMetadata: { id: string }[] }) => m.vulnerabilityMetadata.map((v) => v.id);
const days = (m: ListResolvedVulnsReportsResponse) => m.resolvedVulnsReports.map((r) => [r.date?.seconds, r.resolvedVulns.map((v) => v.id)]);
const day = (iso: string) => BigInt(Date.parse(iso) / 1000);

runContractCases("SecurityAdvisoryService", () => server.baseUrl, [
  // ---- ListDocuments ----
  contractCase({
    name: "ListDocuments by package, without a token: every advisory with its events",
    method: SecurityAdvisoryService.method.listDocuments,
    request: { id: "nginx" },
    response: (m) => {
      expect(docs(m)).toEqual([["nginx", ["CGA-0001", "CGA-0002", "CGA-0003", "CGA-0006"]]]);
      const [a1, a2, , a6] = m.documents[0]!.advisories;
      expect(a1!.aliases).toEqual(["CVE-2024-0001", "GHSA-aaaa-bbbb-cccc"]);
      expect(a1!.packageNamespace).toBe("wolfi");
      expect(a1!.events.map((e) => [e.timestamp?.seconds, e.data.case])).toEqual([
        [day("2024-09-10T07:05:03Z"), "detection"],
        [day("2024-09-11T00:00:00Z"), "truePositiveDetermination"],
        [day("2024-09-12T19:03:40Z"), "fixed"],
      ]);
      const detection = a1!.events[0]!.data;
      expect(detection.case === "detection" && detection.value.type.case === "scanv1" ? detection.value.type.value : undefined).toMatchObject({
        scanner: "grype",
        subpackageName: "nginx-mod",
        componentId: "c1",
        componentName: "openssl",
        componentVersion: "3.0.0",
        componentType: "apk",
        componentLocation: "/lib",
      });
      expect(a1!.events[1]!.data.value).toMatchObject({ note: "reachable" });
      expect(a1!.events[2]!.data.value).toMatchObject({ fixedVersion: "1.2.3-r1" });
      const nvd = a2!.events[0]!.data;
      expect(nvd.case === "detection" && nvd.value.type.case === "nvdapi" ? nvd.value.type.value : undefined).toMatchObject({ cpeSearched: "cpe:2.3:a:nginx:*", cpeFound: "cpe:2.3:a:nginx:nginx:1.0" });
      expect(a2!.events[1]!.data.value).toMatchObject({ type: FalsePositiveDetermination_Type.VULNERABLE_CODE_NOT_IN_EXECUTION_PATH, note: "not called" });
      // PATCHED has no DocumentEvent member: left out.
      expect(a6!.events.map((e) => e.data.case)).toEqual(["detection", "analysisNotPlanned", "fixNotPlanned"]);
      const manual = a6!.events[0]!.data;
      expect(manual.case === "detection" ? manual.value.type.case : undefined).toBe("manual");
      expect(a6!.events[2]!.data.value).toMatchObject({ note: "never" });
    },
  }),
  contractCase({
    name: "ListDocuments by a CVE: every package with an advisory aliasing it",
    method: SecurityAdvisoryService.method.listDocuments,
    request: { cves: ["CVE-2024-0001"] },
    response: (m) =>
      expect(docs(m)).toEqual([
        ["curl", ["CGA-0004"]],
        ["nginx", ["CGA-0001"]],
      ]),
  }),
  contractCase({
    name: "ListDocuments by a GHSA alias, and by an advisory id",
    method: SecurityAdvisoryService.method.listDocuments,
    request: { cves: ["GHSA-aaaa-bbbb-cccc", "CGA-0005", "CVE-9999-0000"] },
    response: (m) =>
      expect(docs(m)).toEqual([
        ["nginx", ["CGA-0001"]],
        ["redis", ["CGA-0005"]],
      ]),
  }),
  contractCase({
    name: "ListDocuments by package and CVEs: that package's matching advisories",
    method: SecurityAdvisoryService.method.listDocuments,
    request: { id: "nginx", cves: ["CVE-2024-0001", "CVE-2024-0003"] },
    response: (m) => expect(docs(m)).toEqual([["nginx", ["CGA-0001", "CGA-0003"]]]),
  }),
  contractCase({
    name: "ListDocuments of an unknown package is empty",
    method: SecurityAdvisoryService.method.listDocuments,
    request: { id: "no-such-package" },
    response: (m) => expect(m.documents).toEqual([]),
  }),
  contractCase({
    name: "ListDocuments ignores a refused token (no authentication)",
    method: SecurityAdvisoryService.method.listDocuments,
    request: { id: "redis" },
    headers: { authorization: "Bearer not-a-token" },
    response: (m) => expect(docs(m)).toEqual([["redis", ["CGA-0005"]]]),
  }),
  contractCase({
    name: "ListDocuments with neither id nor cves is INVALID_ARGUMENT",
    method: SecurityAdvisoryService.method.listDocuments,
    request: {},
    error: invalidField("id"),
  }),
  contractCase({
    name: "ListDocuments with more than 1,000 cves is INVALID_ARGUMENT",
    method: SecurityAdvisoryService.method.listDocuments,
    request: { cves: Array.from({ length: 1001 }, (_, i) => `C${i}`) },
    error: invalidField("cves"),
  }),
  contractCase({
    name: "ListDocuments with an empty cve is INVALID_ARGUMENT naming it",
    method: SecurityAdvisoryService.method.listDocuments,
    request: { cves: ["CVE-2024-0001", ""] },
    error: invalidField("cves[1]"),
  }),

  // ---- ListVulnerabilityMetadata ----
  contractCase({
    name: "ListVulnerabilityMetadata by id: references (GIT as TYPE_WEB) and CVSS severities (Ubuntu left out)",
    method: SecurityAdvisoryService.method.listVulnerabilityMetadata,
    request: { id: "GHSA-aaaa-bbbb-cccc" },
    response: (m) => {
      expect(ids(m)).toEqual(["GHSA-aaaa-bbbb-cccc"]);
      const v = m.vulnerabilityMetadata[0]!;
      expect([v.summary, v.details]).toEqual(["summary GHSA-aaaa-bbbb-cccc", "details GHSA-aaaa-bbbb-cccc"]);
      expect(v.references.map((r) => [r.type, r.url])).toEqual([
        [Reference_Type.ADVISORY, "https://github.com/advisories/GHSA-aaaa-bbbb-cccc"],
        [Reference_Type.WEB, "https://github.com/nginx/nginx"],
        [Reference_Type.FIX, "https://github.com/nginx/nginx/commit/1"],
      ]);
      expect(v.severities.map((s) => [s.type, s.score])).toEqual([[Severity_Type.CVSS_V3, CVSS3]]);
      expect(m.totalCount).toBe(1n);
    },
  }),
  contractCase({
    name: "ListVulnerabilityMetadata by id and ids together, in id order; unknown and withdrawn ids are absent",
    method: SecurityAdvisoryService.method.listVulnerabilityMetadata,
    request: { id: "CVE-2024-0005", ids: ["CVE-2024-0001", "NOPE-1", "GO-2024-9999"] },
    response: (m) => {
      expect(ids(m)).toEqual(["CVE-2024-0001", "CVE-2024-0005"]);
      expect(m.vulnerabilityMetadata[1]!.severities.map((s) => s.type)).toEqual([Severity_Type.CVSS_V2]);
    },
  }),
  contractCase({
    name: "ListVulnerabilityMetadata with no id lists every record that is not withdrawn, paged",
    method: SecurityAdvisoryService.method.listVulnerabilityMetadata,
    request: { pageSize: 2 },
    response: (m) => {
      expect(ids(m)).toEqual(["CVE-2024-0001", "CVE-2024-0005"]);
      expect(m.nextPageToken).not.toBe("");
      expect(m.totalCount).toBe(5n);
    },
  }),
  contractCase({
    name: "ListVulnerabilityMetadata ordered by id descending, with skip",
    method: SecurityAdvisoryService.method.listVulnerabilityMetadata,
    request: { orderBy: "id desc", skip: 1 },
    response: (m) => {
      expect(ids(m)).toEqual(["CVE-2024-0008", "CVE-2024-0007", "CVE-2024-0005", "CVE-2024-0001"]);
      expect(m.skipped).toBe(1);
    },
  }),
  contractCase({
    name: "ListVulnerabilityMetadata with more than 1,000 ids is INVALID_ARGUMENT",
    method: SecurityAdvisoryService.method.listVulnerabilityMetadata,
    request: { ids: Array.from({ length: 1001 }, (_, i) => `V${i}`) },
    error: invalidField("ids"),
  }),
  contractCase({
    name: "ListVulnerabilityMetadata with an empty id in ids is INVALID_ARGUMENT naming it",
    method: SecurityAdvisoryService.method.listVulnerabilityMetadata,
    request: { ids: [""] },
    error: invalidField("ids[0]"),
  }),
  contractCase({
    name: "ListVulnerabilityMetadata with an unknown order_by field is INVALID_ARGUMENT",
    method: SecurityAdvisoryService.method.listVulnerabilityMetadata,
    request: { orderBy: "severity" },
    error: invalidField("order_by"),
  }),
  contractCase({
    name: "ListVulnerabilityMetadata with a negative page_size is INVALID_ARGUMENT",
    method: SecurityAdvisoryService.method.listVulnerabilityMetadata,
    request: { pageSize: -1 },
    error: invalidField("page_size"),
  }),

  // ---- ListResolvedVulnsReports ----
  contractCase({
    name: "ListResolvedVulnsReports: one report per day with fixes, with aliases and CVSS severities from OSV",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { imageRefs: [{ repo: "nginx" }], ...september },
    headers: viewer,
    response: (m) => {
      expect(days(m)).toEqual([[day("2024-09-12T00:00:00Z"), ["CGA-0001", "CGA-0003"]]]);
      const [fixed1, fixed3] = m.resolvedVulnsReports[0]!.resolvedVulns;
      expect(fixed1!.aliases).toEqual(["CVE-2024-0001", "GHSA-aaaa-bbbb-cccc"]);
      // CVSS_V3 from both records (once), CVSS_V4 from the CVE's; Ubuntu left out.
      expect(fixed1!.cvssSeverities.map((s) => [s.type, s.score])).toEqual([
        [Severity_Type.CVSS_V3, CVSS3],
        [Severity_Type.CVSS_V4, CVSS4],
      ]);
      // Its only OSV record is withdrawn: no severities.
      expect(fixed3!.cvssSeverities).toEqual([]);
    },
  }),
  contractCase({
    name: "ListResolvedVulnsReports over several refs (registry paths, tags) orders the days",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { imageRefs: [{ repo: "cgr.dev/acme/curl", tags: ["latest", "8.0"] }, { repo: "redis" }, { repo: "nginx", tags: ["1.27"] }], ...september },
    headers: viewer,
    response: (m) => {
      expect(days(m)).toEqual([
        [day("2024-09-12T00:00:00Z"), ["CGA-0001", "CGA-0003"]],
        [day("2024-09-13T00:00:00Z"), ["CGA-0005"]],
        [day("2024-09-14T00:00:00Z"), ["CGA-0004"]],
      ]);
      expect(m.resolvedVulnsReports[1]!.resolvedVulns[0]!.cvssSeverities.map((s) => s.type)).toEqual([Severity_Type.CVSS_V2]);
    },
  }),
  contractCase({
    name: "ListResolvedVulnsReports includes both ends of the range",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { imageRefs: [{ repo: "nginx" }, { repo: "redis" }], startTime: ts("2024-09-12T01:00:00Z"), endTime: ts("2024-09-13T23:59:59Z") },
    headers: viewer,
    response: (m) =>
      expect(days(m)).toEqual([
        [day("2024-09-12T00:00:00Z"), ["CGA-0001", "CGA-0003"]],
        [day("2024-09-13T00:00:00Z"), ["CGA-0005"]],
      ]),
  }),
  contractCase({
    name: "ListResolvedVulnsReports leaves out fixes outside the range, and days without fixes",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { imageRefs: [{ repo: "nginx" }], startTime: ts("2024-09-12T01:00:01Z"), endTime: ts("2024-09-20T00:00:00Z") },
    headers: viewer,
    response: (m) => expect(days(m)).toEqual([[day("2024-09-12T00:00:00Z"), ["CGA-0001"]]]),
  }),
  contractCase({
    name: "ListResolvedVulnsReports with no fix in the range is an empty list",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { imageRefs: [{ repo: "nginx" }], startTime: ts("2023-01-01T00:00:00Z"), endTime: ts("2023-12-31T00:00:00Z") },
    headers: viewer,
    response: (m) => expect(m.resolvedVulnsReports).toEqual([]),
  }),
  contractCase({
    name: "ListResolvedVulnsReports for a repo the caller does not see is NOT_FOUND",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { imageRefs: [{ repo: "redis" }, { repo: "nginx" }], ...september },
    headers: () => world.auth("otherViewer"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceName: "nginx" } }] },
  }),
  contractCase({
    name: "ListResolvedVulnsReports for a repo in the caller's group",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { imageRefs: [{ repo: "redis" }], ...september },
    headers: () => world.auth("otherViewer"),
    response: (m) => expect(days(m)).toEqual([[day("2024-09-13T00:00:00Z"), ["CGA-0005"]]]),
  }),
  contractCase({
    name: "ListResolvedVulnsReports for a repo that exists nowhere is NOT_FOUND",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { imageRefs: [{ repo: "postgres" }], ...september },
    headers: viewer,
    error: { code: Code.NotFound },
  }),
  contractCase({
    name: "ListResolvedVulnsReports with an inverted time range is INVALID_ARGUMENT",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { startTime: ts("2024-09-30T00:00:00Z"), endTime: ts("2024-09-01T00:00:00Z") },
    headers: viewer,
    error: invalidField("end_time"),
  }),
  contractCase({
    name: "ListResolvedVulnsReports over more than 366 days is INVALID_ARGUMENT",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { startTime: ts("2023-01-01T00:00:00Z"), endTime: ts("2024-09-01T00:00:00Z") },
    headers: viewer,
    error: invalidField("end_time"),
  }),
  contractCase({
    name: "ListResolvedVulnsReports with a time beyond year 9999 is INVALID_ARGUMENT",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { startTime: ts("2024-09-01T00:00:00Z"), endTime: { seconds: 300_000_000_000n } },
    headers: viewer,
    // JSON cannot write such a Timestamp: the binary protocols only.
    only: ["grpc", "grpc-web", "connect-binary-h2"],
    error: invalidField("end_time"),
  }),
  contractCase({
    name: "ListResolvedVulnsReports without start_time is INVALID_ARGUMENT",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { endTime: ts("2024-09-01T00:00:00Z") },
    headers: viewer,
    error: invalidField("start_time"),
  }),
  contractCase({
    name: "ListResolvedVulnsReports without image refs is INVALID_ARGUMENT",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: september,
    headers: viewer,
    error: invalidField("image_refs"),
  }),
  contractCase({
    name: "ListResolvedVulnsReports with more than 100 refs is INVALID_ARGUMENT",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { imageRefs: Array.from({ length: 101 }, () => ({ repo: "nginx" })), ...september },
    headers: viewer,
    error: invalidField("image_refs"),
  }),
  contractCase({
    name: "ListResolvedVulnsReports with an empty repo is INVALID_ARGUMENT naming it",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { imageRefs: [{ repo: "nginx" }, { repo: "" }], ...september },
    headers: viewer,
    error: invalidField("image_refs[1].repo"),
  }),
  contractCase({
    name: "ListResolvedVulnsReports with a tag inside repo is INVALID_ARGUMENT",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { imageRefs: [{ repo: "nginx:latest" }], ...september },
    headers: viewer,
    error: invalidField("image_refs[0].repo"),
  }),
  contractCase({
    name: "ListResolvedVulnsReports with a bad tag is INVALID_ARGUMENT naming it",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: { imageRefs: [{ repo: "nginx", tags: ["ok", "not a tag"] }], ...september },
    headers: viewer,
    error: invalidField("image_refs[0].tags[1]"),
  }),
  contractCase({
    name: "ListResolvedVulnsReports by a caller without the capabilities anywhere is PERMISSION_DENIED",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: september,
    headers: () => world.auth("stranger"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "ListResolvedVulnsReports without a token is UNAUTHENTICATED",
    method: SecurityAdvisoryService.method.listResolvedVulnsReports,
    request: september,
    error: { code: Code.Unauthenticated },
  }),
]);

describe("ListResolvedVulnsReports over REST, image refs written by hand", () => {
  const get = async (params: Array<[string, string]>) => {
    const res = await fetch(`${server.baseUrl}/advisory/v2/images/resolvedVulns?${new URLSearchParams(params).toString()}`, { headers: viewer() });
    return { status: res.status, body: (await res.json()) as { resolvedVulnsReports?: Array<{ date: string; resolvedVulns: Array<{ id: string }> }>; details?: Array<Record<string, unknown>> } };
  };
  const range: Array<[string, string]> = [
    ["startTime", "2024-09-01T00:00:00Z"],
    ["endTime", "2024-09-30T23:59:59Z"],
  ];
  const violations = (body: { details?: Array<Record<string, unknown>> }) =>
    (body.details?.find((d) => d["@type"] === "type.googleapis.com/google.rpc.BadRequest")?.fieldViolations as Array<{ field: string; description: string }> | undefined) ?? [];

  it.each(["imageRefs", "image_refs"])("takes one JSON object per ref (docs/api.md's curl) as %s, ignoring unknown keys", async (name) => {
    const { status, body } = await get([
      [name, '{"repo":"nginx","tags":["latest","1.25"]}'],
      [name, '{"repo":"redis","digest":"sha256:0000"}'],
      ...range,
    ]);
    expect(status, JSON.stringify(body)).toBe(200);
    expect(body.resolvedVulnsReports!.map((r) => [r.date, r.resolvedVulns.map((v) => v.id)])).toEqual([
      ["2024-09-12T00:00:00Z", ["CGA-0001", "CGA-0003"]],
      ["2024-09-13T00:00:00Z", ["CGA-0005"]],
    ]);
  });

  it.each<[string, Array<[string, string]>, string, RegExp]>([
    ["a ref that is not JSON", [["imageRefs", '{"repo":"nginx"}'], ["imageRefs", "{repo:nginx}"]], "image_refs[1]", /ImageRef\): the value must be its proto3 JSON object; got text that is not JSON/],
    ["a ref that is not an object", [["imageRefs", '["nginx"]']], "image_refs[0]", /got an array/],
    ["a ref of the wrong shape", [["imageRefs", '{"repo":"nginx","tags":"latest"}']], "image_refs[0].tags", /./],
    ["refs as dotted keys", [["imageRefs.repo", "nginx"]], "image_refs.repo", /image_refs is a repeated field; give each element as its JSON object \(imageRefs=\{\.\.\.\}\)/],
  ])("refuses %s: INVALID_ARGUMENT naming %s", async (_, params, field, description) => {
    const { status, body } = await get([...params, ...range]);
    expect(status).toBe(400);
    expect(violations(body)).toEqual([{ field, description: expect.stringMatching(description) }]);
  });
});

// Continuation: the pages of every record follow one another to the end.
it("ListVulnerabilityMetadata continues with the page token across protocols", async () => {
  const method = SecurityAdvisoryService.method.listVulnerabilityMetadata;
  const first = await call("connect-json", server.baseUrl, method, { pageSize: 2 });
  const second = await call("rest", server.baseUrl, method, { pageSize: 2, pageToken: first.message!.nextPageToken });
  const third = await call("grpc", server.baseUrl, method, { pageSize: 2, pageToken: second.message!.nextPageToken });
  expect(second.error).toBeUndefined();
  expect([ids(first.message!), ids(second.message!), ids(third.message!)]).toEqual([
    ["CVE-2024-0001", "CVE-2024-0005"],
    ["CVE-2024-0007", "CVE-2024-0008"],
    ["GHSA-aaaa-bbbb-cccc"],
  ]);
  expect(third.message!.nextPageToken).toBe("");
  expect(third.message!.totalCount).toBe(5n);
});

it("ListVulnerabilityMetadata refuses a page token with other filters", async () => {
  const method = SecurityAdvisoryService.method.listVulnerabilityMetadata;
  const first = await call("grpc", server.baseUrl, method, { pageSize: 1, ids: ["CVE-2024-0001", "CVE-2024-0005"] });
  const other = await call("grpc", server.baseUrl, method, { pageSize: 1, ids: ["CVE-2024-0001"], pageToken: first.message!.nextPageToken });
  expect(other.error?.code).toBe(Code.InvalidArgument);
});
