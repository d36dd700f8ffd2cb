// Pure parts of the advisory domain: OSV record validation (each field's rule and the path it names), image
// ref parsing (which repo names and package a ref designates), and the resolved-vulnerability reports built
// from fixed events (days, deduplication, severities).
import { describe, expect, it } from "vitest";
import { Severity_Type } from "../../gen/chainguard/platform/advisory/v2/advisory_pb.js";
import { parseImageRepo, tagProblem } from "../../src/advisory/image-ref.js";
import { validateOsvRecord } from "../../src/advisory/osv-record.js";
import { toResolvedVulnsReports } from "../../src/advisory/security-advisory.mapper.js";

const base = { id: "GHSA-1", modified: "2024-09-12T19:03:40Z" };
const problem = (record: unknown) => {
  try {
    validateOsvRecord(record);
    return "valid";
  } catch (err) {
    return (err as Error).message;
  }
};

describe("validateOsvRecord", () => {
  it.each([
    ["the minimal record", base, "valid"],
    ["an offset and a fraction", { ...base, modified: "2024-09-12T19:03:40.123456+02:00" }, "valid"],
    ["a leap second", { ...base, modified: "2016-12-31T23:59:60Z" }, "valid"],
    ["no id", { modified: base.modified }, "id: is required"],
    ["an empty id", { ...base, id: "" }, "id: must not be empty"],
    ["an id with a space", { ...base, id: "GHSA 1" }, /^id: must not contain spaces/],
    ["a numeric id", { ...base, id: 7 }, /^id: must be a string/],
    ["no modified", { id: "X" }, "modified: is required"],
    ["a date without time", { ...base, modified: "2024-09-12" }, /^modified: must be an RFC 3339 timestamp/],
    ["the 30th of February", { ...base, modified: "2024-02-30T00:00:00Z" }, /^modified: must be an RFC 3339/],
    ["a bad published", { ...base, published: "soon" }, /^published: must be an RFC 3339/],
    ["a bad withdrawn", { ...base, withdrawn: 3 }, /^withdrawn: must be an RFC 3339 timestamp string/],
    ["aliases not an array", { ...base, aliases: "CVE-1" }, /^aliases: must be an array/],
    ["a non-string alias", { ...base, aliases: ["CVE-1", null] }, /^aliases\[1\]: must be a string/],
    ["a non-string related", { ...base, related: [{}] }, /^related\[0\]: must be a string/],
    ["a summary not a string", { ...base, summary: 1 }, /^summary: must be a string/],
    ["an unknown severity type", { ...base, severity: [{ type: "CVSS_V5", score: "x" }] }, /^severity\[0\]\.type: unknown type "CVSS_V5"/],
    ["a severity without score", { ...base, severity: [{ type: "CVSS_V3" }] }, "severity[0].score: is required"],
    ["a CVSS v3 score that is no vector", { ...base, severity: [{ type: "CVSS_V3", score: "9.8" }] }, /^severity\[0\]\.score: must be a CVSS vector/],
    ["an Ubuntu severity", { ...base, severity: [{ type: "Ubuntu", score: "medium" }] }, "valid"],
    ["an unknown reference type", { ...base, references: [{ type: "WEB", url: "https://a" }, { type: "FOO", url: "https://b" }] }, /^references\[1\]\.type: unknown type "FOO"/],
    ["a reference without url", { ...base, references: [{ type: "WEB" }] }, "references[0].url: is required"],
    ["a relative url", { ...base, references: [{ type: "WEB", url: "/x" }] }, /^references\[0\]\.url: must be an absolute URL/],
    ["a javascript: url", { ...base, references: [{ type: "WEB", url: "javascript:alert(1)" }] }, /^references\[0\]\.url: unsupported URL scheme/],
    ["a range of unknown type", { ...base, affected: [{ ranges: [{ type: "X", events: [{ introduced: "0" }] }] }] }, /^affected\[0\]\.ranges\[0\]\.type: unknown type "X"/],
    ["a range event with two keys", { ...base, affected: [{ ranges: [{ type: "SEMVER", events: [{ introduced: "0", fixed: "1" }] }] }] }, /^affected\[0\]\.ranges\[0\]\.events\[0\]: must have exactly one of/],
    ["an affected severity", { ...base, affected: [{ severity: [{ type: "X", score: "y" }] }] }, /^affected\[0\]\.severity\[0\]\.type: unknown type/],
    ["unknown top-level fields", { ...base, future_field: { anything: 1 } }, "valid"],
    ["an array", [], /is a JSON object, not an array/],
  ])("%s", (_name, record, want) => {
    const got = problem(record);
    if (typeof want === "string") expect(got).toBe(want);
    else expect(got).toMatch(want);
  });

  it("keeps what the server reads", () => {
    const r = validateOsvRecord({
      ...base,
      aliases: ["CVE-1", "CVE-1", "CVE-2"],
      summary: "s",
      severity: [{ type: "CVSS_V3", score: "CVSS:3.1/AV:N" }],
      references: [{ type: "GIT", url: "https://github.com/x/y" }],
      withdrawn: "2024-10-01T00:00:00Z",
    });
    expect(r).toEqual({
      id: "GHSA-1",
      summary: "s",
      details: "",
      aliases: ["CVE-1", "CVE-2"],
      references: [{ type: "GIT", url: "https://github.com/x/y" }],
      severities: [{ type: "CVSS_V3", score: "CVSS:3.1/AV:N" }],
      modifiedTime: new Date("2024-09-12T19:03:40Z"),
      publishedTime: null,
      withdrawnTime: new Date("2024-10-01T00:00:00Z"),
    });
  });
});

describe("parseImageRepo", () => {
  it.each([
    ["nginx", { packageName: "nginx", repoNames: ["nginx"] }],
    ["chainguard/nginx", { packageName: "nginx", repoNames: ["chainguard/nginx", "nginx"] }],
    ["cgr.dev/chainguard/nginx", { packageName: "nginx", repoNames: ["chainguard/nginx", "nginx"] }],
    ["localhost:5000/nginx-fips", { packageName: "nginx-fips", repoNames: ["nginx-fips"] }],
    ["localhost/py3.12", { packageName: "py3.12", repoNames: ["py3.12"] }],
  ])("%s", (repo, want) => expect(parseImageRepo(repo)).toEqual(want));

  it.each([
    ["", "is required"],
    ["nginx:latest", /without a tag/],
    ["cgr.dev/chainguard/nginx:1.2", /without a tag/],
    ["nginx@sha256:abc", /not a digest/],
    ["NGINX", /must be a repository path/],
    ["cgr.dev/", /must be a repository path/],
    ["a//b", /must be a repository path/],
  ])("refuses %j", (repo, want) => {
    const got = parseImageRepo(repo);
    expect(typeof got).toBe("string");
    if (typeof want === "string") expect(got).toBe(want);
    else expect(got).toMatch(want);
  });

  it("checks tags as OCI tags", () => {
    expect(tagProblem("latest")).toBeUndefined();
    expect(tagProblem("1.2.3-r0_x")).toBeUndefined();
    expect(tagProblem(".hidden")).toMatch(/OCI tag/);
    expect(tagProblem("a".repeat(129))).toMatch(/OCI tag/);
  });
});

describe("toResolvedVulnsReports", () => {
  it("groups fixes by UTC day, merges an advisory fixed twice, and takes each CVSS severity once", () => {
    const reports = toResolvedVulnsReports(
      [
        { package: "a", advisoryId: "CGA-2", aliases: ["CVE-2"], time: new Date("2024-09-12T23:59:59.999Z") },
        { package: "a", advisoryId: "CGA-1", aliases: ["CVE-1"], time: new Date("2024-09-12T00:00:00Z") },
        { package: "b", advisoryId: "CGA-1", aliases: ["GHSA-1"], time: new Date("2024-09-12T05:00:00Z") },
        { package: "a", advisoryId: "CGA-3", aliases: [], time: new Date("2024-09-10T10:00:00Z") },
      ],
      new Map([
        ["CVE-1", [{ type: "CVSS_V3", score: "CVSS:3.1/A" }, { type: "Ubuntu", score: "low" }]],
        ["GHSA-1", [{ type: "CVSS_V3", score: "CVSS:3.1/A" }, { type: "CVSS_V4", score: "CVSS:4.0/B" }]],
      ]),
    );
    expect(reports.map((r) => [r.date?.seconds, r.resolvedVulns.map((v) => [v.id, v.aliases, v.cvssSeverities.map((s) => [s.type, s.score])])])).toEqual([
      [BigInt(Date.parse("2024-09-10T00:00:00Z") / 1000), [["CGA-3", [], []]]],
      [
        BigInt(Date.parse("2024-09-12T00:00:00Z") / 1000),
        [
          ["CGA-1", ["CVE-1", "GHSA-1"], [[Severity_Type.CVSS_V3, "CVSS:3.1/A"], [Severity_Type.CVSS_V4, "CVSS:4.0/B"]]],
          ["CGA-2", ["CVE-2"], []],
        ],
      ],
    ]);
  });
});
