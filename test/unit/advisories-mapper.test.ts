// The advisories mapper builds Advisory messages as plain objects (no create() per nested message): they are
// the messages create() makes from the same values, equal field by field and byte for byte, for every kind
// of event the documents hold, with and without severities.
import { create, equals, toBinary, toJson } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { describe, expect, it } from "vitest";
import { AdvisorySchema, EventTypeFilter, ReviewState, Severity_Type } from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import type { AdvisoryEventRow, AdvisoryRow } from "../../src/db/schema/index.js";
import { registry } from "../../src/kernel/descriptors.js";
import { toAdvisory } from "../../src/vulnerabilities/advisories.mapper.js";
import { toDocuments } from "../../src/advisory/security-advisory.mapper.js";
import { FalsePositiveDetermination_Type } from "../../gen/chainguard/platform/advisory/v2/advisory_pb.js";

const at = (s: string) => new Date(s);
const row: AdvisoryRow = {
  uid: "curl:CGA-aaaa",
  package: "curl",
  advisoryId: "CGA-aaaa",
  artifactType: "apk",
  artifactArchitecture: "",
  componentName: "libcurl",
  componentType: "apk",
  componentLocation: "/usr/lib/libcurl.so.4",
  aliases: ["CVE-2024-0001", "GHSA-x"],
  latestEventType: EventTypeFilter.FIXED,
  createTime: at("2024-09-10T07:05:03.123Z"),
  updateTime: at("1969-12-31T23:59:59.500Z"),
  search: "",
};
const event = (ordinal: number, type: number, data: Record<string, unknown>, author = ""): AdvisoryEventRow => ({
  uid: `${row.uid}/${ordinal}`,
  advisoryUid: row.uid,
  ordinal,
  time: at(`2024-09-1${ordinal}T00:00:0${ordinal}Z`),
  type,
  author,
  reviewer: ordinal % 2 ? "rev" : "",
  reviewState: ReviewState.APPROVED,
  data,
});
const events = [
  event(0, EventTypeFilter.DETECTION, { type: "scan/v1", data: { scanner: "grype", componentName: "libcurl", componentID: "x", componentVersion: "8", componentType: "apk", componentLocation: "/l", subpackageName: "curl-dev" } }, "me"),
  event(1, EventTypeFilter.DETECTION, { type: "nvdapi", data: { cpeSearched: "a", cpeFound: "b" } }),
  event(2, EventTypeFilter.DETECTION, { type: "manual" }),
  event(3, EventTypeFilter.FIXED, { "fixed-version": "8.9.1-r0", note: "n" }),
  event(4, EventTypeFilter.FALSE_POSITIVE_DETERMINATION, { type: "vulnerable-code-not-included-in-package", note: "fp" }),
  event(5, EventTypeFilter.TRUE_POSITIVE_DETERMINATION, { note: "tp" }),
  event(6, EventTypeFilter.ANALYSIS_NOT_PLANNED, { note: "a" }),
  event(7, EventTypeFilter.FIX_NOT_PLANNED, { note: "f" }),
  event(8, EventTypeFilter.PENDING_UPSTREAM_FIX, { note: "p" }),
  event(9, 99, {}),
];

/** Drops $typeName, so create() builds the message from the values rather than taking the object as one. */
function initOf<T extends { $typeName: string }>(m: T): Omit<T, "$typeName"> {
  const { $typeName: _, ...init } = m;
  return init;
}

/** What create() makes of the same values: the reference. */
function reference(m: ReturnType<typeof toAdvisory>, input: { events: AdvisoryEventRow[] }) {
  return create(AdvisorySchema, {
    ...initOf(m),
    createTime: timestampFromDate(row.createTime),
    updateTime: timestampFromDate(row.updateTime),
    events: m.events.map((e, i) => ({
      ...initOf(e),
      createTime: timestampFromDate(input.events[i]!.time),
      findings: new Uint8Array(0),
      type: e.type.case === undefined ? { case: undefined } : { case: e.type.case, value: initOf(e.type.value) },
    })),
    severities: m.severities.map((s) => ({ type: s.type, score: s.score })),
  } as never);
}

describe("toAdvisory", () => {
  it.each([
    ["every kind of event, and severities", { row, events, severities: [{ type: "CVSS_V3", score: "v3" }, { type: "Ubuntu", score: "high" }, { type: "CVSS_V4", score: "v4" }] }],
    ["no events and no severities", { row: { ...row, aliases: [] }, events: [], severities: [] }],
  ])("gives the message create() gives: %s", (_, input) => {
    const got = toAdvisory(input);
    const want = reference(got, input);
    expect(equals(AdvisorySchema, got, want)).toBe(true);
    expect(Buffer.from(toBinary(AdvisorySchema, got)).toString("hex")).toBe(Buffer.from(toBinary(AdvisorySchema, want)).toString("hex"));
    expect(toJson(AdvisorySchema, got, { registry, alwaysEmitImplicit: true })).toEqual(toJson(AdvisorySchema, want, { registry, alwaysEmitImplicit: true }));
    expect(got.severities.map((s) => s.type)).toEqual(input.severities.length ? [Severity_Type.CVSS_V3, Severity_Type.CVSS_V4] : []);
  });
});

describe("the advisory.v2 documents read the stored events as the advisories do", () => {
  it("the same values from the same keys, for every kind of event", () => {
    const [doc] = toDocuments([{ uid: row.uid, package: row.package, advisoryId: row.advisoryId, aliases: row.aliases, events }]);
    const docEvents = doc!.advisories[0]!.events;
    const advEvents = toAdvisory({ row, events, severities: [] }).events;
    // The unknown type (99) has no DocumentEvent member and is left out of the document.
    expect(docEvents).toHaveLength(events.length - 1);
    expect(advEvents.at(-1)!.type.case).toBeUndefined();
    const scan = docEvents[0]!.data.case === "detection" && docEvents[0]!.data.value.type.case === "scanv1" ? docEvents[0]!.data.value.type.value : undefined;
    expect(scan).toMatchObject({ scanner: "grype", componentId: "x", componentName: "libcurl", subpackageName: "curl-dev", componentLocation: "/l" });
    const adv = advEvents[0]!.type.case === "detection" && advEvents[0]!.type.value.type.case === "scanv1" ? advEvents[0]!.type.value.type.value : undefined;
    expect(adv).toMatchObject({ scanner: "grype", componentId: "x", component: "libcurl", subpackage: "curl-dev", componentLocation: "/l" });
    expect(docEvents.map((e) => e.data.case)).toEqual(advEvents.slice(0, -1).map((e) => e.type.case));
    const fixed = docEvents[3]!.data;
    expect(fixed.case === "fixed" ? fixed.value.fixedVersion : undefined).toBe("8.9.1-r0");
    const fp = [docEvents[4]!.data, advEvents[4]!.type];
    expect(fp.map((d) => (d.case === "falsePositiveDetermination" ? [d.value.type, d.value.note] : undefined))).toEqual([
      [FalsePositiveDetermination_Type.VULNERABLE_CODE_NOT_INCLUDED_IN_PACKAGE, "fp"],
      [FalsePositiveDetermination_Type.VULNERABLE_CODE_NOT_INCLUDED_IN_PACKAGE, "fp"],
    ]);
    const notes = (d: { case: string | undefined; value?: unknown }) => (d.value as { note?: string } | undefined)?.note;
    expect(docEvents.slice(5).map((e) => notes(e.data))).toEqual(["tp", "a", "f", "p"]);
    expect(advEvents.slice(5, -1).map((e) => notes(e.type))).toEqual(["tp", "a", "f", "p"]);
  });
});
