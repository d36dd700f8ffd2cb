// ArtifactsService over every protocol, on data written by the importer (a Maven repository with metadata and
// Python dist-info directories): ListArtifacts (ecosystems required, query, order, paging, total),
// ListArtifactVersions (the ecosystems' version orders, descending by default; NOT_FOUND for an unknown
// artifact), GetArtifactCount, INVALID_ARGUMENT for a missing or unknown ecosystem, and authorization (global
// data: CAP_LIBRARIES_ARTIFACTS_LIST held anywhere).
import { Code } from "@connectrpc/connect";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ArtifactsService, Ecosystem } from "../../gen/chainguard/platform/libraries/v2/artifacts_pb.js";
import { importLibraries } from "../../src/libraries/import.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { call, contractCase, runContractCases, invalidField } from "./harness.js";

let server: TestServer;
let world: World;
let root = "";

function write(path: string, content: string) {
  mkdirSync(join(path, ".."), { recursive: true });
  writeFileSync(path, content);
}

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "acme");
  root = mkdtempSync(join(tmpdir(), "artifacts-contract-"));
  const widget = join(root, "org", "example", "widget");
  const versions = ["1.2", "1.10", "1.10-rc1", "1.9"];
  write(
    join(widget, "maven-metadata.xml"),
    `<metadata><groupId>org.example</groupId><artifactId>widget</artifactId><versioning><versions>${versions.map((v) => `<version>${v}</version>`).join("")}</versions></versioning></metadata>`,
  );
  for (const v of versions) {
    write(join(widget, v, `widget-${v}.pom`), `<project><groupId>org.example</groupId><artifactId>widget</artifactId><version>${v}</version><description>Widget ${v}</description></project>`);
  }
  write(join(root, "com", "acme", "gadget", "2.0", "gadget-2.0.pom"), `<project><groupId>com.acme</groupId><artifactId>gadget</artifactId><version>2.0</version><name>Gadget</name></project>`);
  const dist = (name: string, version: string) =>
    write(join(root, "py", `${name}-${version}.dist-info`, "METADATA"), `Metadata-Version: 2.1\nName: ${name}\nVersion: ${version}\nSummary: ${name} ${version}\n`);
  dist("requests", "2.9.0");
  dist("requests", "2.10.0");
  dist("requests", "2.10.0rc1");
  dist("friendly_Bard", "1.0");
  dist("zope.interface", "5.0");
  const summary = await importLibraries(server.database.db, [root]);
  expect(summary.skipped).toEqual([]);
});

afterAll(async () => {
  await server?.close();
  if (root) rmSync(root, { recursive: true, force: true });
});

const viewer = () => world.auth("viewer");
const names = (m: { artifacts: { name: string }[] }) => m.artifacts.map((a) => a.name);
const versionsOf = (m: { artifactVersions: { version: string }[] }) => m.artifactVersions.map((v) => v.version);

runContractCases("ArtifactsService", () => server.baseUrl, [
  contractCase({
    name: "ListArtifacts lists one ecosystem in name order with its latest version and count",
    method: ArtifactsService.method.listArtifacts,
    request: { ecosystems: [Ecosystem.JAVA] },
    headers: viewer,
    response: (m) => {
      expect(m.artifacts.map((a) => [a.uid, a.name, a.ecosystem, a.latestVersion, a.versionCount])).toEqual([
        ["maven/com.acme:gadget", "com.acme:gadget", Ecosystem.JAVA, "2.0", 1],
        ["maven/org.example:widget", "org.example:widget", Ecosystem.JAVA, "1.10", 4],
      ]);
      expect(m.artifacts[1]?.description).toBe("Widget 1.10");
      expect(m.totalCount).toBe(2n);
    },
  }),
  contractCase({
    name: "ListArtifacts over both ecosystems, name descending",
    method: ArtifactsService.method.listArtifacts,
    request: { ecosystems: [Ecosystem.JAVA, Ecosystem.PYTHON], orderBy: "name desc" },
    headers: viewer,
    response: (m) => {
      expect(names(m)).toEqual(["zope.interface", "requests", "org.example:widget", "friendly_Bard", "com.acme:gadget"]);
      expect(m.totalCount).toBe(5n);
    },
  }),
  contractCase({
    name: "ListArtifacts query is a case-insensitive substring (PEP 503 uid included)",
    method: ArtifactsService.method.listArtifacts,
    request: { ecosystems: [Ecosystem.PYTHON], query: "BARD" },
    headers: viewer,
    response: (m) => {
      expect(m.artifacts.map((a) => a.uid)).toEqual(["pypi/friendly-bard"]);
      expect(m.totalCount).toBe(1n);
    },
  }),
  contractCase({
    name: "ListArtifacts query matches nothing in another ecosystem",
    method: ArtifactsService.method.listArtifacts,
    request: { ecosystems: [Ecosystem.JAVA], query: "requests" },
    headers: viewer,
    response: (m) => expect(m.artifacts).toEqual([]),
  }),
  contractCase({
    name: "ListArtifacts pages with skip and a page size",
    method: ArtifactsService.method.listArtifacts,
    request: { ecosystems: [Ecosystem.JAVA, Ecosystem.PYTHON], pageSize: 2, skip: 1 },
    headers: viewer,
    response: (m) => {
      expect(names(m)).toEqual(["friendly_Bard", "org.example:widget"]);
      expect(m.nextPageToken).not.toBe("");
      expect(m.skipped).toBe(1);
      expect(m.totalCount).toBe(5n);
    },
  }),
  contractCase({
    name: "ListArtifacts without ecosystems is INVALID_ARGUMENT",
    method: ArtifactsService.method.listArtifacts,
    request: {},
    headers: viewer,
    error: invalidField("ecosystems"),
  }),
  contractCase({
    name: "ListArtifacts with ECOSYSTEM_UNSPECIFIED is INVALID_ARGUMENT",
    method: ArtifactsService.method.listArtifacts,
    request: { ecosystems: [Ecosystem.UNSPECIFIED] },
    headers: viewer,
    error: { code: Code.InvalidArgument },
  }),
  contractCase({
    name: "ListArtifacts with an unknown ecosystem is INVALID_ARGUMENT",
    method: ArtifactsService.method.listArtifacts,
    request: { ecosystems: [7 as Ecosystem] },
    headers: viewer,
    error: { code: Code.InvalidArgument },
  }),
  contractCase({
    name: "ListArtifacts with an unknown order_by field is INVALID_ARGUMENT",
    method: ArtifactsService.method.listArtifacts,
    request: { ecosystems: [Ecosystem.JAVA], orderBy: "colour" },
    headers: viewer,
    error: { code: Code.InvalidArgument },
  }),
  contractCase({
    name: "ListArtifactVersions orders Maven versions descending by ComparableVersion",
    method: ArtifactsService.method.listArtifactVersions,
    request: { artifactId: "maven/org.example:widget" },
    headers: viewer,
    response: (m) => {
      expect(versionsOf(m)).toEqual(["1.10", "1.10-rc1", "1.9", "1.2"]);
      expect(m.artifactVersions[0]).toMatchObject({ uid: "maven/org.example:widget@1.10", description: "Widget 1.10" });
      expect(m.totalCount).toBe(4n);
    },
  }),
  contractCase({
    name: "ListArtifactVersions orders Python versions by PEP 440, ascending when asked",
    method: ArtifactsService.method.listArtifactVersions,
    request: { artifactId: "pypi/requests", orderBy: "version asc" },
    headers: viewer,
    response: (m) => expect(versionsOf(m)).toEqual(["2.9.0", "2.10.0rc1", "2.10.0"]),
  }),
  contractCase({
    name: "ListArtifactVersions pages",
    method: ArtifactsService.method.listArtifactVersions,
    request: { artifactId: "maven/org.example:widget", pageSize: 3 },
    headers: viewer,
    response: (m) => {
      expect(versionsOf(m)).toEqual(["1.10", "1.10-rc1", "1.9"]);
      expect(m.nextPageToken).not.toBe("");
    },
  }),
  contractCase({
    name: "ListArtifacts asking for remediated builds (which this server does not hold) lists none",
    method: ArtifactsService.method.listArtifacts,
    request: { ecosystems: [Ecosystem.PYTHON], remediated: true },
    headers: viewer,
    response: (m) => {
      expect(m.artifacts).toEqual([]);
      expect(m.totalCount).toBe(0n);
    },
  }),
  contractCase({
    name: "ListArtifactVersions without artifact_id is INVALID_ARGUMENT",
    method: ArtifactsService.method.listArtifactVersions,
    request: {},
    headers: viewer,
    error: invalidField("artifact_id"),
    // REST has no route without the path parameter.
    only: ["grpc", "grpc-web", "connect-json", "connect-binary-h2"],
  }),
  contractCase({
    name: "ListArtifactVersions of an unknown artifact is NOT_FOUND",
    method: ArtifactsService.method.listArtifactVersions,
    request: { artifactId: "pypi/no-such-thing" },
    headers: viewer,
    error: { code: Code.NotFound },
  }),
  contractCase({
    name: "GetArtifactCount counts per ecosystem",
    method: ArtifactsService.method.getArtifactCount,
    request: { ecosystems: [Ecosystem.PYTHON, Ecosystem.JAVA] },
    headers: viewer,
    response: (m) =>
      expect(m.counts.map((c) => [c.ecosystem, c.totalCount])).toEqual([
        [Ecosystem.PYTHON, 3n],
        [Ecosystem.JAVA, 2n],
      ]),
  }),
  contractCase({
    name: "GetArtifactCount without ecosystems is INVALID_ARGUMENT",
    method: ArtifactsService.method.getArtifactCount,
    request: {},
    headers: viewer,
    error: invalidField("ecosystems"),
  }),
  contractCase({
    name: "a viewer of another group reads the same global data",
    method: ArtifactsService.method.getArtifactCount,
    request: { ecosystems: [Ecosystem.JAVA] },
    headers: () => world.auth("confinedOther"),
    response: (m) => expect(m.counts[0]?.totalCount).toBe(2n),
  }),
  contractCase({
    name: "a caller without the capability anywhere is PERMISSION_DENIED",
    method: ArtifactsService.method.listArtifacts,
    request: { ecosystems: [Ecosystem.JAVA] },
    headers: () => world.auth("stranger"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "no token is UNAUTHENTICATED",
    method: ArtifactsService.method.listArtifactVersions,
    request: { artifactId: "pypi/requests" },
    error: { code: Code.Unauthenticated },
  }),
]);

// Continuation: the second page of versions follows the first.
it("ListArtifactVersions continues with the page token", async () => {
  const first = await call("connect-json", server.baseUrl, ArtifactsService.method.listArtifactVersions, { artifactId: "maven/org.example:widget", pageSize: 3 }, viewer());
  const token = first.message!.nextPageToken;
  const second = await call("rest", server.baseUrl, ArtifactsService.method.listArtifactVersions, { artifactId: "maven/org.example:widget", pageSize: 3, pageToken: token }, viewer());
  expect(second.error).toBeUndefined();
  expect(versionsOf(second.message!)).toEqual(["1.2"]);
  expect(second.message!.nextPageToken).toBe("");
});
