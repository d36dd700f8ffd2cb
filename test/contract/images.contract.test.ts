// ImagesService over every protocol, on manifests rows written straight to the database (as the OCI import
// writes them, platforms as "linux/amd64"): the architectures a digest provides (index or image manifest),
// named as the published SDK names them ("amd64", "arm64", "arm/v7"), its size (an image manifest's own; an
// index's child chosen by architecture, in that form or as a platform, amd64 by default), and the errors:
// malformed digest or architecture, unknown digest or repo, an ambiguous or missing architecture, and callers
// without the capabilities.
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll } from "vitest";
import { expect } from "vitest";
import { ImagesService } from "../../gen/chainguard/platform/registry/v2/images_pb.js";
import { BadRequestSchema, PreconditionFailureSchema, ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { manifests, repos } from "../../src/db/schema/index.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { lazy } from "../support/matchers.js";
import { seedWorld, type World } from "../support/world.js";
import { contractCase, runContractCases } from "./harness.js";

const REPO = "chainguard.platform.registry.v2.Repo";
const MANIFEST = "chainguard.platform.registry.v2.Manifest";
const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX = "application/vnd.oci.image.index.v1+json";
const d = (c: string) => `sha256:${c.repeat(64)}`;

/** Image manifests. */
const AMD64 = d("1");
const ARM64 = d("2");
const ARMV7 = d("3");
const ARMV6 = d("4");
const NO_PLATFORM = d("5");
const ATTESTATION = d("6");
const NO_SIZE = d("7");
const WIN_AMD64 = d("8");
/** Indexes: every platform; a single platform (plus an attestation); one listing a child the repo lacks. */
const MULTI = d("a");
const SINGLE = d("b");
const PARTIAL = d("c");
const ABSENT_CHILD = d("e");
const EMPTY_INDEX = d("f");
/** Indexes: arm images only; linux and windows amd64. */
const ARM_ONLY = d("9");
const WINDOWS = d("d");
const UNKNOWN = d("0");

let server: TestServer;
let world: World;
let repo = "";

const child = (digest: string, platform: string, size = 1234) => ({ digest, platform, mediaType: OCI_MANIFEST, size });
const violation = (field: string, description?: RegExp) => ({
  schema: BadRequestSchema,
  value: { fieldViolations: [description ? { field, description: expect.stringMatching(description) } : { field }] },
});

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server);
  repo = newChildUid(world.org);
  const { db } = server.database;
  await db.insert(repos).values({ uid: repo, groupUid: world.org, name: "images" });
  const image = (digest: string, platform: string | null, size: bigint | null) => ({
    repoUid: repo,
    digest,
    mediaType: OCI_MANIFEST,
    isIndex: false,
    platform,
    size,
    manifestSize: 1234n,
  });
  const index = (digest: string, children: ReturnType<typeof child>[]) => ({
    repoUid: repo,
    digest,
    mediaType: OCI_INDEX,
    isIndex: true,
    children,
    manifestSize: 2048n,
  });
  await db.insert(manifests).values([
    image(AMD64, "linux/amd64", 30_000_000n),
    image(ARM64, "linux/arm64/v8", 29_000_000n),
    image(ARMV7, "linux/arm/v7", 25_000_000n),
    image(ARMV6, "linux/arm/v6", 24_000_000n),
    image(NO_PLATFORM, null, 500n),
    image(ATTESTATION, "unknown/unknown", 900n),
    image(NO_SIZE, "linux/amd64", null),
    image(WIN_AMD64, "windows/amd64", 70_000_000n),
    index(MULTI, [
      child(AMD64, "linux/amd64"),
      child(ARM64, "linux/arm64/v8"),
      child(ARMV7, "linux/arm/v7"),
      child(ARMV6, "linux/arm/v6"),
      child(ATTESTATION, "unknown/unknown"),
    ]),
    index(SINGLE, [child(AMD64, "linux/amd64"), child(ATTESTATION, "unknown/unknown")]),
    index(PARTIAL, [child(AMD64, "linux/amd64"), child(ABSENT_CHILD, "linux/s390x")]),
    index(EMPTY_INDEX, [child(ATTESTATION, "unknown/unknown")]),
    index(ARM_ONLY, [child(ARM64, "linux/arm64/v8"), child(ARMV7, "linux/arm/v7")]),
    index(WINDOWS, [child(AMD64, "linux/amd64"), child(WIN_AMD64, "windows/amd64")]),
  ]);
});

afterAll(async () => {
  await server?.close();
});

const base = () => server.baseUrl;
const viewer = () => world.auth("viewer");

// ---------------------------------------------------------------------------------------------------------
runContractCases("GetArchitectures", base, [
  contractCase({
    name: "an index: its children's platforms, in index order, without the attestation entry",
    method: ImagesService.method.getArchitectures,
    request: () => ({ repoUid: repo, digest: MULTI }),
    headers: viewer,
    response: (r) => expect(r.architectures).toEqual(["amd64", "arm64", "arm/v7", "arm/v6"]),
  }),
  contractCase({
    name: "a single-platform index",
    method: ImagesService.method.getArchitectures,
    request: () => ({ repoUid: repo, digest: SINGLE }),
    headers: viewer,
    response: (r) => expect(r.architectures).toEqual(["amd64"]),
  }),
  contractCase({
    name: "an index listing a child the repo does not hold still names its platform",
    method: ImagesService.method.getArchitectures,
    request: () => ({ repoUid: repo, digest: PARTIAL }),
    headers: viewer,
    response: (r) => expect(r.architectures).toEqual(["amd64", "s390x"]),
  }),
  contractCase({
    name: "a platform of another os than linux keeps its os",
    method: ImagesService.method.getArchitectures,
    request: () => ({ repoUid: repo, digest: WINDOWS }),
    headers: viewer,
    response: (r) => expect(r.architectures).toEqual(["amd64", "windows/amd64"]),
  }),
  contractCase({
    name: "an image manifest: its own platform",
    method: ImagesService.method.getArchitectures,
    request: () => ({ repoUid: repo, digest: ARM64 }),
    headers: viewer,
    response: (r) => expect(r.architectures).toEqual(["arm64"]),
  }),
  contractCase({
    name: "an image manifest whose platform is not known: none",
    method: ImagesService.method.getArchitectures,
    request: () => ({ repoUid: repo, digest: NO_PLATFORM }),
    headers: viewer,
    response: (r) => expect(r.architectures).toEqual([]),
  }),
  contractCase({
    name: "a digest the repo does not hold: NOT_FOUND with ResourceInfo naming <repo>@<digest>",
    method: ImagesService.method.getArchitectures,
    request: () => ({ repoUid: repo, digest: UNKNOWN }),
    headers: viewer,
    error: {
      code: Code.NotFound,
      reason: "NOT_FOUND",
      domain: "registry.platform.test",
      details: [{ schema: ResourceInfoSchema, value: { resourceType: MANIFEST, resourceName: lazy(() => `${repo}@${UNKNOWN}`) } }],
    },
  }),
  contractCase({
    name: "a missing repo: NOT_FOUND with ResourceInfo naming the repo",
    method: ImagesService.method.getArchitectures,
    request: () => ({ repoUid: `${world.org}/ffffffffffffffff`, digest: MULTI }),
    headers: viewer,
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: REPO, resourceName: lazy(() => `${world.org}/ffffffffffffffff`) } }] },
  }),
  ...[`sha256:${"A".repeat(64)}`, "sha256:abc", `md5:${"a".repeat(32)}`].map((digest) =>
    contractCase({
      name: `a malformed digest (${digest.slice(0, 12)}…): INVALID_ARGUMENT on digest`,
      method: ImagesService.method.getArchitectures,
      request: () => ({ repoUid: repo, digest }),
      headers: viewer,
      error: {
        code: Code.InvalidArgument,
        message: "Invalid argument: digest: must be sha256: followed by 64 lowercase hexadecimal characters",
        details: [violation("digest")],
      },
    }),
  ),
  ...(["teamViewer", "otherViewer", "stranger"] as const).map((caller) =>
    contractCase({
      name: `${caller} (no REPO_LIST + MANIFEST_METADATA_LIST on the repo's group): PERMISSION_DENIED`,
      method: ImagesService.method.getArchitectures,
      request: () => ({ repoUid: repo, digest: MULTI }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
    }),
  ),
  contractCase({
    name: "no credentials: UNAUTHENTICATED",
    method: ImagesService.method.getArchitectures,
    request: () => ({ repoUid: repo, digest: MULTI }),
    error: { code: Code.Unauthenticated },
  }),
]);

// ---------------------------------------------------------------------------------------------------------
runContractCases("GetSize", base, [
  contractCase({
    name: "an image manifest: its config + layers size and its platform",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: AMD64 }),
    headers: viewer,
    response: (r) => expect(r).toMatchObject({ size: 30_000_000n, architecture: "amd64" }),
  }),
  contractCase({
    name: "an image manifest of another architecture, none asked: its own size (the default names an index's child)",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: ARM64 }),
    headers: viewer,
    response: (r) => expect(r).toMatchObject({ size: 29_000_000n, architecture: "arm64" }),
  }),
  contractCase({
    name: "an image manifest with a matching architecture",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: ARM64, architecture: "arm64" }),
    headers: viewer,
    response: (r) => expect(r).toMatchObject({ size: 29_000_000n, architecture: "arm64" }),
  }),
  contractCase({
    name: "an image manifest with another architecture: NOT_FOUND, naming what it provides",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: AMD64, architecture: "arm64" }),
    headers: viewer,
    error: { code: Code.NotFound, message: /provides no arm64 image; it provides amd64$/, details: [{ schema: ResourceInfoSchema, value: { resourceType: MANIFEST } }] },
  }),
  contractCase({
    name: "an image manifest of unknown platform: its size, no architecture",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: NO_PLATFORM }),
    headers: viewer,
    response: (r) => expect(r).toMatchObject({ size: 500n, architecture: "" }),
  }),
  ...(
    [
      // As GetArchitectures names them.
      ["amd64", 30_000_000n, "amd64"],
      ["arm64", 29_000_000n, "arm64"],
      ["arm/v7", 25_000_000n, "arm/v7"],
      ["arm/v6", 24_000_000n, "arm/v6"],
      // As the image's platform says it (os/architecture[/variant]).
      ["linux/amd64", 30_000_000n, "amd64"],
      ["linux/arm64", 29_000_000n, "arm64"],
      ["linux/arm64/v8", 29_000_000n, "arm64"],
      ["arm64/v8", 29_000_000n, "arm64"],
      ["linux/arm/v7", 25_000_000n, "arm/v7"],
      ["linux/arm/v6", 24_000_000n, "arm/v6"],
    ] as const
  ).map(([architecture, size, platform]) =>
    contractCase({
      name: `an index with architecture ${architecture}: the size of the ${platform} image, named ${platform}`,
      method: ImagesService.method.getSize,
      request: () => ({ repoUid: repo, digest: MULTI, architecture }),
      headers: viewer,
      response: (r) => expect(r).toMatchObject({ size, architecture: platform }),
    }),
  ),
  contractCase({
    name: "an index of several platforms without an architecture: amd64, the default",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: MULTI }),
    headers: viewer,
    response: (r) => expect(r).toMatchObject({ size: 30_000_000n, architecture: "amd64" }),
  }),
  contractCase({
    name: "an index without amd64, no architecture asked: NOT_FOUND naming what it provides",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: ARM_ONLY }),
    headers: viewer,
    error: { code: Code.NotFound, message: /provides no amd64 image; it provides arm64, arm\/v7$/ },
  }),
  contractCase({
    name: "amd64 (the default) of an index with linux and windows images: the linux one, which that name names",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: WINDOWS }),
    headers: viewer,
    response: (r) => expect(r).toMatchObject({ size: 30_000_000n, architecture: "amd64" }),
  }),
  contractCase({
    name: "the windows image, by the name GetArchitectures gives it",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: WINDOWS, architecture: "windows/amd64" }),
    headers: viewer,
    response: (r) => expect(r).toMatchObject({ size: 70_000_000n, architecture: "windows/amd64" }),
  }),
  contractCase({
    name: "an architecture matching several platforms (arm: v6 and v7): INVALID_ARGUMENT on architecture",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: MULTI, architecture: "arm" }),
    headers: viewer,
    error: { code: Code.InvalidArgument, details: [violation("architecture", /matches several platforms \(arm\/v7, arm\/v6\); name one of them/)] },
  }),
  contractCase({
    name: "an architecture the index does not provide: NOT_FOUND",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: MULTI, architecture: "linux/s390x" }),
    headers: viewer,
    error: { code: Code.NotFound, message: /provides no linux\/s390x image/, details: [{ schema: ResourceInfoSchema, value: { resourceType: MANIFEST, resourceName: lazy(() => `${repo}@${MULTI}`) } }] },
  }),
  contractCase({
    name: "a single-platform index needs no architecture (the attestation entry does not count)",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: SINGLE }),
    headers: viewer,
    response: (r) => expect(r).toMatchObject({ size: 30_000_000n, architecture: "amd64" }),
  }),
  contractCase({
    name: "an index child the repo does not hold: NOT_FOUND naming the child",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: PARTIAL, architecture: "s390x" }),
    headers: viewer,
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: MANIFEST, resourceName: lazy(() => `${repo}@${ABSENT_CHILD}`) } }] },
  }),
  contractCase({
    name: "an index of attestations only: FAILED_PRECONDITION",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: EMPTY_INDEX }),
    headers: viewer,
    error: { code: Code.FailedPrecondition, details: [{ schema: PreconditionFailureSchema, value: { violations: [{ type: "NO_PLATFORM_IMAGES" }] } }] },
  }),
  contractCase({
    name: "an image manifest whose size was not recorded: FAILED_PRECONDITION",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: NO_SIZE }),
    headers: viewer,
    error: { code: Code.FailedPrecondition, details: [{ schema: PreconditionFailureSchema, value: { violations: [{ type: "SIZE_UNKNOWN" }] } }] },
  }),
  contractCase({
    name: "a digest the repo does not hold: NOT_FOUND with ResourceInfo",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: UNKNOWN, architecture: "amd64" }),
    headers: viewer,
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: MANIFEST, resourceName: lazy(() => `${repo}@${UNKNOWN}`) } }] },
  }),
  contractCase({
    name: "a malformed digest and architecture: INVALID_ARGUMENT on both",
    method: ImagesService.method.getSize,
    request: () => ({ repoUid: repo, digest: "latest", architecture: "Linux AMD64" }),
    headers: viewer,
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "digest" }, { field: "architecture" }] } }] },
  }),
  ...(["otherViewer", "stranger"] as const).map((caller) =>
    contractCase({
      name: `${caller}: PERMISSION_DENIED, also for a digest that does not exist`,
      method: ImagesService.method.getSize,
      request: () => ({ repoUid: repo, digest: UNKNOWN }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied },
    }),
  ),
]);
