// AdvisoriesService over every protocol, on data written by the importer (three package documents) plus an OSV
// record and one event given an author, a reviewer and a pending review: GetAdvisory (typed events, OSV
// severities, NOT_FOUND), ListAdvisories with each filter, query, uidp, order, paging and total_count,
// INVALID_ARGUMENT for bad filters, repeated REST query parameters, and authorization (global data:
// CAP_ADVISORIES_LIST held on any group; the uid is not read as a group).
import { Code } from "@connectrpc/connect";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, expect, it } from "vitest";
import {
  AdvisoriesService,
  AdvisoryEvent_FalsePositiveDetermination_Type as FalsePositiveType,
  EventTypeFilter,
  ReviewState,
  Severity_Type,
} from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { osvRecords } from "../../src/db/schema/index.js";
import { UID_MAX_LENGTH } from "../../src/kernel/uidp.js";
import { importAdvisories } from "../../src/vulnerabilities/import.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { call, contractCase, runContractCases, invalidField } from "./harness.js";

let server: TestServer;
let world: World;
let root = "";

const curl = `schema-version: 2.0.2
package:
  name: curl
advisories:
  - id: CGA-aaaa-bbbb-cccc
    aliases: [CVE-2024-0001, GHSA-xxxx-yyyy-zzzz]
    events:
      - timestamp: 2024-09-10T07:05:03Z
        type: detection
        data:
          type: scan/v1
          data: {subpackageName: curl-dev, componentID: 1234abcd, componentName: libcurl, componentVersion: 8.9.0, componentType: apk, componentLocation: /usr/lib/libcurl.so.4, scanner: grype}
      - timestamp: 2024-09-12T19:03:40Z
        type: fixed
        data: {fixed-version: 8.9.1-r0}
  - id: CGA-dddd-eeee-ffff
    aliases: [CVE-2024-0002]
    events:
      - timestamp: 2024-10-01T00:00:00Z
        type: detection
        data:
          type: nvdapi
          data: {cpeSearched: "cpe:2.3:a:haxx:curl:*", cpeFound: "cpe:2.3:a:haxx:curl:8.9.0"}
      - timestamp: 2024-10-02T00:00:00Z
        type: false-positive-determination
        data: {type: vulnerable-code-not-in-execution-path, note: not reachable}
`;
const zlib = `schema-version: "2"
package:
  name: zlib
advisories:
  - id: CGA-1111-2222-3333
    aliases: [CVE-2023-45853]
    events:
      - {timestamp: 2024-01-01T00:00:00Z, type: detection, data: {type: manual}}
      - {timestamp: 2024-01-02T00:00:00Z, type: pending-upstream-fix, data: {note: waiting}}
  - id: CGA-4444-5555-6666
`;
const openssl = `schema-version: 2.0.1
package:
  name: openssl
advisories:
  - id: CGA-7777-8888-9999
    aliases: [CVE-2024-0727]
    events:
      - {timestamp: 2024-02-01T00:00:00Z, type: fix-not-planned, data: {note: end of life}}
`;

const A = "curl:CGA-aaaa-bbbb-cccc";
const D = "curl:CGA-dddd-eeee-ffff";
const O = "openssl:CGA-7777-8888-9999";
const Z1 = "zlib:CGA-1111-2222-3333";
const Z4 = "zlib:CGA-4444-5555-6666";

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "acme");
  root = mkdtempSync(join(tmpdir(), "advisories-contract-"));
  mkdirSync(root, { recursive: true });
  writeFileSync(join(root, "curl.advisories.yaml"), curl);
  writeFileSync(join(root, "zlib.advisories.yaml"), zlib);
  writeFileSync(join(root, "openssl.advisories.yaml"), openssl);
  const summary = await importAdvisories(server.database.db, [root]);
  expect(summary.skipped).toEqual([]);
  const { db } = server.database;
  // The format names no author or reviewer: give one event some, under review, for the event filters.
  await db.execute(sql`update advisory_events set author = 'alice', reviewer = 'bob', review_state = ${ReviewState.PENDING} where uid = ${`${D}/1`}`);
  await db.insert(osvRecords).values([
    {
      id: "CVE-2024-0001",
      source: "test",
      contentHash: "0",
      severities: [
        { type: "CVSS_V3", score: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H" },
        { type: "Ubuntu", score: "high" },
      ],
    },
    // Withdrawn: its severity is not D's (D's severities are asserted empty).
    { id: "CVE-2024-0002", source: "test", contentHash: "1", withdrawnTime: new Date("2024-10-01T00:00:00Z"), severities: [{ type: "CVSS_V3", score: "CVSS:3.1/AV:N/AC:H/PR:N/UI:N/S:U/C:L/I:N/A:N" }] },
  ]);
});

afterAll(async () => {
  await server?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

const viewer = () => world.auth("viewer");
const uids = (m: { advisories: { uid: string }[] }) => m.advisories.map((a) => a.uid);
const list = AdvisoriesService.method.listAdvisories;
const listing = (name: string, request: Parameters<typeof call<typeof list.input, typeof list.output>>[3], want: string[]) =>
  contractCase({
    name,
    method: list,
    request,
    headers: viewer,
    response: (m) => {
      expect(uids(m)).toEqual(want);
      expect(m.totalCount).toBe(BigInt(want.length));
    },
  });

runContractCases("AdvisoriesService", () => server.baseUrl, [
  contractCase({
    name: "GetAdvisory returns the advisory with its typed events and its OSV severities (CVSS only)",
    method: AdvisoriesService.method.getAdvisory,
    request: { uid: A },
    headers: viewer,
    response: (m) => {
      expect(m).toMatchObject({ uid: A, advisoryId: "CGA-aaaa-bbbb-cccc", artifactName: "curl", artifactType: "apk", componentName: "libcurl", componentType: "apk", componentLocation: "/usr/lib/libcurl.so.4" });
      expect(m.aliases).toEqual(["CVE-2024-0001", "GHSA-xxxx-yyyy-zzzz"]);
      expect(m.createTime?.seconds).toBe(BigInt(Date.parse("2024-09-10T07:05:03Z") / 1000));
      expect(m.updateTime?.seconds).toBe(BigInt(Date.parse("2024-09-12T19:03:40Z") / 1000));
      expect(m.severities.map((s) => [s.type, s.score])).toEqual([[Severity_Type.CVSS_V3, "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"]]);
      expect(m.events.map((e) => [e.uid, e.reviewState, e.type.case])).toEqual([
        [`${A}/0`, ReviewState.APPROVED, "detection"],
        [`${A}/1`, ReviewState.APPROVED, "fixed"],
      ]);
      const detection = m.events[0]?.type;
      expect(detection?.case === "detection" && detection.value.type.case === "scanv1" ? detection.value.type.value : undefined).toMatchObject({
        scanner: "grype",
        subpackage: "curl-dev",
        componentId: "1234abcd",
        component: "libcurl",
        componentVersion: "8.9.0",
        componentType: "apk",
        componentLocation: "/usr/lib/libcurl.so.4",
      });
      const fixed = m.events[1]?.type;
      expect(fixed?.case === "fixed" ? fixed.value.fixedVersion : undefined).toBe("8.9.1-r0");
      expect(m.events[1]?.createTime?.seconds).toBe(BigInt(Date.parse("2024-09-12T19:03:40Z") / 1000));
    },
  }),
  contractCase({
    name: "GetAdvisory maps NVD detections and false-positive determinations, with the event's author and review",
    method: AdvisoriesService.method.getAdvisory,
    request: { uid: D },
    headers: viewer,
    response: (m) => {
      expect(m.severities).toEqual([]);
      const [nvd, fp] = m.events.map((e) => e.type);
      expect(nvd?.case === "detection" && nvd.value.type.case === "nvdapi" ? nvd.value.type.value : undefined).toMatchObject({ cpeSearched: "cpe:2.3:a:haxx:curl:*", cpeFound: "cpe:2.3:a:haxx:curl:8.9.0" });
      expect(fp?.case === "falsePositiveDetermination" ? [fp.value.type, fp.value.note] : undefined).toEqual([FalsePositiveType.VULNERABLE_CODE_NOT_IN_EXECUTION_PATH, "not reachable"]);
      expect(m.events[1]).toMatchObject({ author: "alice", reviewer: "bob", reviewState: ReviewState.PENDING });
    },
  }),
  contractCase({
    name: "GetAdvisory of a manual detection",
    method: AdvisoriesService.method.getAdvisory,
    request: { uid: Z1 },
    headers: viewer,
    response: (m) => {
      const [detection] = m.events.map((e) => e.type);
      expect(detection?.case === "detection" ? detection.value.type.case : undefined).toBe("manual");
    },
  }),
  contractCase({
    name: "GetAdvisory without a uid is INVALID_ARGUMENT on uid",
    method: AdvisoriesService.method.getAdvisory,
    request: { uid: "" },
    headers: viewer,
    error: invalidField("uid"),
    // REST: the uid is the path; an empty one names no route.
    only: ["grpc", "grpc-web", "connect-json", "connect-binary-h2"],
  }),
  contractCase({
    name: "GetAdvisory with a uid longer than a uid may be is INVALID_ARGUMENT on uid",
    method: AdvisoriesService.method.getAdvisory,
    request: { uid: "x".repeat(UID_MAX_LENGTH + 1) },
    headers: viewer,
    error: invalidField("uid"),
  }),
  contractCase({
    name: "GetAdvisory of an advisory without events",
    method: AdvisoriesService.method.getAdvisory,
    request: { uid: Z4 },
    headers: viewer,
    response: (m) => {
      expect(m.events).toEqual([]);
      expect(m.artifactName).toBe("zlib");
    },
  }),
  contractCase({
    name: "GetAdvisory of an unknown uid is NOT_FOUND",
    method: AdvisoriesService.method.getAdvisory,
    request: { uid: "curl:CGA-none" },
    headers: viewer,
    error: { code: Code.NotFound, reason: "NOT_FOUND" },
  }),
  contractCase({
    name: "a viewer confined to another group reads the same global data",
    method: AdvisoriesService.method.getAdvisory,
    request: { uid: O },
    headers: () => world.auth("confinedOther"),
    response: (m) => expect(m.uid).toBe(O),
  }),
  contractCase({
    name: "GetAdvisory by a caller without the capability anywhere is PERMISSION_DENIED, whether or not it exists",
    method: AdvisoriesService.method.getAdvisory,
    request: { uid: A },
    headers: () => world.auth("stranger"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "GetAdvisory of an unknown uid by a caller without the capability is PERMISSION_DENIED too",
    method: AdvisoriesService.method.getAdvisory,
    request: { uid: "curl:CGA-none" },
    headers: () => world.auth("stranger"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "GetAdvisory without a token is UNAUTHENTICATED",
    method: AdvisoriesService.method.getAdvisory,
    request: { uid: A },
    error: { code: Code.Unauthenticated },
  }),
  contractCase({
    name: "ListAdvisories without a token is UNAUTHENTICATED",
    method: list,
    request: {},
    error: { code: Code.Unauthenticated },
  }),
  contractCase({
    name: "ListAdvisories by a caller without the capability anywhere is PERMISSION_DENIED",
    method: list,
    request: {},
    headers: () => world.auth("stranger"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "ListAdvisories lists every advisory in uid order with their events",
    method: list,
    request: {},
    headers: viewer,
    response: (m) => {
      expect(uids(m)).toEqual([A, D, O, Z1, Z4]);
      expect(m.totalCount).toBe(5n);
      expect(m.nextPageToken).toBe("");
      expect(m.advisories.map((a) => a.events.length)).toEqual([2, 2, 1, 2, 0]);
      expect(m.advisories[0]?.severities.map((s) => s.type)).toEqual([Severity_Type.CVSS_V3]);
    },
  }),
  listing("advisory_ids", { advisoryIds: ["CGA-7777-8888-9999", "CGA-1111-2222-3333"] }, [O, Z1]),
  listing("legacy_advisory_ids (none are imported) match nothing", { legacyAdvisoryIds: ["CGA-old"] }, []),
  listing("artifact_names", { artifactNames: ["zlib", "openssl"] }, [O, Z1, Z4]),
  listing("artifact_types", { artifactTypes: ["apk"] }, [A, D, O, Z1, Z4]),
  listing("artifact_types naming another type", { artifactTypes: ["oci"] }, []),
  listing("artifact_architectures (the documents name none)", { artifactArchitectures: ["x86_64"] }, []),
  listing("component_names", { componentNames: ["libcurl"] }, [A]),
  listing("component_types", { componentTypes: ["apk", "go-module"] }, [A]),
  listing("component_locations", { componentLocations: ["/usr/lib/libcurl.so.4"] }, [A]),
  listing("aliases (any of them)", { aliases: ["CVE-2024-0727", "GHSA-xxxx-yyyy-zzzz"] }, [A, O]),
  listing("origin (the documents record none) matches nothing", { origin: "nvd" }, []),
  listing("event_review_states", { eventReviewStates: [ReviewState.PENDING] }, [D]),
  listing("event_review_states approved", { eventReviewStates: [ReviewState.APPROVED] }, [A, D, O, Z1]),
  listing("event_authors", { eventAuthors: ["alice"] }, [D]),
  listing("exclude_event_authors", { excludeEventAuthors: ["alice"] }, [A, O, Z1, Z4]),
  listing("event_reviewers", { eventReviewers: ["bob"] }, [D]),
  listing("event_types (an advisory having an event of one of them)", { eventTypes: [EventTypeFilter.DETECTION] }, [A, D, Z1]),
  listing("event_types fixed or fix-not-planned", { eventTypes: [EventTypeFilter.FIXED, EventTypeFilter.FIX_NOT_PLANNED] }, [A, O]),
  listing("latest_event_type", { latestEventType: EventTypeFilter.PENDING_UPSTREAM_FIX }, [Z1]),
  listing("latest_event_type fixed (a detection before it does not count)", { latestEventType: EventTypeFilter.FIXED }, [A]),
  listing("query matches the artifact name, case-insensitively", { query: "CURL" }, [A, D]),
  listing("query matches the component name", { query: "LibCur" }, [A]),
  listing("query matches an alias", { query: "45853" }, [Z1]),
  listing("query shorter than a trigram", { query: "zl" }, [Z1, Z4]),
  listing("query with LIKE metacharacters is literal", { query: "c%l" }, []),
  listing("filters combine", { artifactNames: ["curl"], eventTypes: [EventTypeFilter.FIXED] }, [A]),
  listing("uidp.ids", { uidp: { ids: [Z4, A] } }, [A, Z4]),
  listing("uidp.ancestors_of an event is its advisory", { uidp: { ancestorsOf: `${A}/1` } }, [A]),
  listing("uidp.in_root is every advisory", { uidp: { inRoot: true } }, [A, D, O, Z1, Z4]),
  listing("uidp.children_of: advisories are children of nothing", { uidp: { childrenOf: "curl" } }, []),
  contractCase({
    name: "ListAdvisories orders by artifact_name descending, pages, and counts",
    method: list,
    request: { orderBy: "artifact_name desc", pageSize: 2 },
    headers: viewer,
    response: (m) => {
      expect(uids(m)).toEqual([Z4, Z1]);
      expect(m.nextPageToken).not.toBe("");
      expect(m.totalCount).toBe(5n);
    },
  }),
  contractCase({
    name: "ListAdvisories orders by create_time (the first event's time)",
    method: list,
    request: { orderBy: "create_time", eventTypes: [EventTypeFilter.DETECTION, EventTypeFilter.FIX_NOT_PLANNED] },
    headers: viewer,
    response: (m) => expect(uids(m)).toEqual([Z1, O, A, D]),
  }),
  contractCase({
    name: "ListAdvisories skips",
    method: list,
    request: { skip: 3 },
    headers: viewer,
    response: (m) => {
      expect(uids(m)).toEqual([Z1, Z4]);
      expect(m.skipped).toBe(3);
      expect(m.totalCount).toBe(5n);
    },
  }),
  contractCase({ name: "an unknown event type is INVALID_ARGUMENT", method: list, request: { eventTypes: [EventTypeFilter.FIXED, 99 as EventTypeFilter] }, headers: viewer, error: invalidField("event_types[1]") }),
  contractCase({ name: "EVENT_TYPE_FILTER_UNSPECIFIED is INVALID_ARGUMENT", method: list, request: { eventTypes: [EventTypeFilter.UNSPECIFIED] }, headers: viewer, error: invalidField("event_types[0]") }),
  contractCase({ name: "an unknown latest_event_type is INVALID_ARGUMENT", method: list, request: { latestEventType: 42 as EventTypeFilter }, headers: viewer, error: invalidField("latest_event_type") }),
  contractCase({ name: "an unknown review state is INVALID_ARGUMENT", method: list, request: { eventReviewStates: [ReviewState.APPROVED, 9 as ReviewState] }, headers: viewer, error: invalidField("event_review_states[1]") }),
  contractCase({
    name: "more than 1,000 values in one filter is INVALID_ARGUMENT",
    method: list,
    request: { advisoryIds: Array.from({ length: 1001 }, (_, i) => `A${i}`) },
    headers: viewer,
    error: invalidField("advisory_ids"),
    // 1,001 query parameters exceed what an HTTP server takes in a request line; the limit is the same there.
    only: ["grpc", "grpc-web", "connect-json", "connect-binary-h2"],
  }),
  contractCase({ name: "a query longer than 256 characters is INVALID_ARGUMENT", method: list, request: { query: "x".repeat(257) }, headers: viewer, error: invalidField("query") }),
  contractCase({ name: "an unknown order_by field is INVALID_ARGUMENT", method: list, request: { orderBy: "severity" }, headers: viewer, error: invalidField("order_by") }),
  contractCase({ name: "a negative page_size is INVALID_ARGUMENT", method: list, request: { pageSize: -1 }, headers: viewer, error: invalidField("page_size") }),
]);

it("ListAdvisories continues with the page token, across protocols", async () => {
  const first = await call("connect-json", server.baseUrl, list, { orderBy: "artifact_name desc", pageSize: 2 }, viewer());
  const second = await call("rest", server.baseUrl, list, { orderBy: "artifact_name desc", pageSize: 2, pageToken: first.message!.nextPageToken }, viewer());
  expect(second.error).toBeUndefined();
  expect(uids(second.message!)).toEqual([O, D]);
  const third = await call("grpc", server.baseUrl, list, { orderBy: "artifact_name desc", pageSize: 2, pageToken: second.message!.nextPageToken }, viewer());
  expect(uids(third.message!)).toEqual([A]);
  expect(third.message!.nextPageToken).toBe("");
  expect(third.message!.totalCount).toBe(5n);
});

it("REST takes repeated filters as repeated query parameters, by JSON or proto name, enums by name", async () => {
  const get = async (query: string) => {
    const res = await fetch(`${server.baseUrl}/vulnerabilities/v2/advisories?${query}`, { headers: viewer() });
    expect(res.status).toBe(200);
    return ((await res.json()) as { advisories: { uid: string }[] }).advisories.map((a) => a.uid);
  };
  expect(await get("artifactNames=openssl&artifactNames=zlib")).toEqual([O, Z1, Z4]);
  expect(await get("artifact_names=openssl&artifact_names=zlib&eventTypes=EVENT_TYPE_FILTER_DETECTION")).toEqual([Z1]);
  expect(await get("eventTypes=EVENT_TYPE_FILTER_FIXED&eventTypes=EVENT_TYPE_FILTER_FIX_NOT_PLANNED")).toEqual([A, O]);
  const one = await fetch(`${server.baseUrl}/vulnerabilities/v2/advisories/${encodeURIComponent(A)}`, { headers: viewer() });
  expect(((await one.json()) as { uid: string }).uid).toBe(A);
});
