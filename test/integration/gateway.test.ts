// The REST gateway in front of a real Connect router: real generated services with handlers that record
// what they received (through a router interceptor, which also proves REST runs through the interceptors),
// served over node:http (and one h2c case), asserted with fetch as a REST client sees it.
import { createServer, type Server } from "node:http";
import { connect as http2Connect, createServer as createHttp2Server, type Http2Server } from "node:http2";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { ConnectRouter, Interceptor } from "@connectrpc/connect";
import { unaryImplementationsOf } from "../../src/kernel/invoke.js";
import { createRestGateway, type RestGateway } from "../../src/gateway/index.js";
import { apiMethods, registry } from "../../src/kernel/descriptors.js";
import { createErrorBoundary, invalidArgument, notFound } from "../../src/kernel/errors/index.js";
import { setLogLevel } from "../../src/kernel/log.js";
import { ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { ImagesService } from "../../gen/chainguard/platform/registry/v2/images_pb.js";
import { TagsService } from "../../gen/chainguard/platform/registry/v2/tags_pb.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentitiesService } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { ArtifactsService } from "../../gen/chainguard/platform/libraries/v2/artifacts_pb.js";
import { AdvisoriesService } from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { SecurityTokenService } from "../../gen/platform/oidc/v1/oidc.platform_pb.js";

/** What the router saw of the last call. */
interface Seen {
  method: string;
  request: JsonValue;
  headers: Record<string, string>;
}
let seen: Seen[] = [];

const recorder: Interceptor = (next) => async (req) => {
  if (!req.stream) {
    seen.push({
      method: req.method.name,
      request: toJson(req.method.input, req.message, { registry }),
      headers: Object.fromEntries(req.header.entries()),
    });
  }
  return next(req);
};

function routes(router: ConnectRouter): void {
  router.service(ReposService, {
    getRepo(req, ctx) {
      if (req.uid.endsWith("/missing")) throw notFound("repo", req.uid);
      if (req.uid.endsWith("/boom")) throw new Error("database password is hunter2");
      if (req.uid.endsWith("/bad")) throw invalidArgument({ field: "uid", description: "is not a repo uid" });
      ctx.responseHeader.set("x-echo", "repo");
      ctx.responseTrailer.set("x-trailing", "after");
      if (req.uid.endsWith("/late")) throw notFound("repo", req.uid);
      return { uid: req.uid, name: "r", createTime: timestampFromMs(Date.UTC(2024, 0, 2, 3, 4, 5)) };
    },
    listRepos(req) {
      return { repos: [{ uid: "o/a", name: "a" }], totalCount: 12345678901234567n, skipped: req.skip };
    },
    getRepoReadme: (req) => ({ uid: req.uid, content: "# readme" }),
    createRepo: (req) => ({ name: req.repo?.name, catalogTier: req.repo?.catalogTier, uid: `${req.parent}/new` }),
    updateRepo: (req) => req.repo ?? {},
    deleteRepo: () => ({}),
    updateRepoReadme: (req) => req.repoReadme ?? {},
  });
  router.service(ImagesService, { getArchitectures: () => ({ architectures: ["amd64", "arm64"] }) });
  router.service(TagsService, { getTag: (req) => ({ uid: req.uid }) });
  router.service(GroupsService, {
    getGroup: (req) => ({ uid: req.uid }),
    lookupGroup: () => ({ group: { uid: "found" } }),
    requestGroupAccess: () => ({}),
    updateGroup: (req) => req.group ?? {},
  });
  router.service(IdentitiesService, { updateIdentityMetadata: (req) => req.identityMetadata ?? {} });
  router.service(ArtifactsService, {
    listArtifacts: () => ({}),
    listArtifactVersions: () => ({}),
    getArtifactCount: () => ({}),
  });
  router.service(AdvisoriesService, { listAdvisories: () => ({}) });
  router.service(SecurityTokenService, { exchange: (req) => ({ token: `token-for-${req.aud.join("+")}` }) });
}

let gateway: RestGateway;
let server: Server;
let base: string;

beforeAll(async () => {
  setLogLevel("silent");
  gateway = createRestGateway({ implementations: unaryImplementationsOf(routes), interceptors: [createErrorBoundary("test.local"), recorder], methods: apiMethods, registry, serviceDomain: "test.local", requestTimeoutMs: 30_000 });
  server = createServer((req, res) => void gateway.handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

beforeEach(() => {
  seen = [];
});

interface Reply {
  status: number;
  headers: Headers;
  json: JsonObject;
}

async function rest(method: string, path: string, init: { body?: string | JsonValue; headers?: Record<string, string> } = {}): Promise<Reply> {
  const body = init.body === undefined ? undefined : typeof init.body === "string" ? init.body : JSON.stringify(init.body);
  const res = await fetch(base + path, { method, body, headers: { "content-type": "application/json", ...init.headers } });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: JSON.parse(text) as JsonObject };
}

/** The one call the router saw. */
function lastCall(): Seen {
  expect(seen).toHaveLength(1);
  return seen[0]!;
}

/** The google.rpc.Status body's detail of a type. */
function detail(json: JsonObject, type: string): JsonObject | undefined {
  const details = (json.details ?? []) as JsonObject[];
  return details.find((d) => d["@type"] === `type.googleapis.com/${type}`);
}

function expectFieldViolation(reply: Reply, field: string, description?: RegExp): void {
  expect(reply.status).toBe(400);
  expect(reply.json.code).toBe(3);
  const bad = detail(reply.json, "google.rpc.BadRequest");
  expect(bad).toBeDefined();
  const violations = bad!.fieldViolations as { field: string; description: string }[];
  const v = violations.find((x) => x.field === field);
  expect(v, JSON.stringify(violations)).toBeDefined();
  if (description) expect(v!.description).toMatch(description);
  expect(reply.json.message).toContain(`Invalid argument: ${field}: `);
  expect(detail(reply.json, "google.rpc.ErrorInfo")).toMatchObject({ reason: "INVALID_ARGUMENT" });
}

describe("routing", () => {
  it.each<[string, string, string, JsonObject]>([
    ["GET", "/registry/v2/repos", "ListRepos", {}],
    ["GET", "/registry/v2/repos/X", "GetRepo", { uid: "X" }],
    ["GET", "/registry/v2/repos/X/Y", "GetRepo", { uid: "X/Y" }],
    ["GET", "/registry/v2/repos/X/readme", "GetRepoReadme", { uid: "X" }],
    ["GET", "/registry/v2/repos/O/R/digests/sha256:abc/architectures", "GetArchitectures", { repoUid: "O/R", digest: "sha256:abc" }],
    ["GET", "/registry/v2/tags/O/R/T", "GetTag", { uid: "O/R/T" }],
    ["GET", "/iam/v2/groups:lookupGroup", "LookupGroup", {}],
    ["GET", "/iam/v2/groups/G", "GetGroup", { uid: "G" }],
    ["POST", "/iam/v2/groups/G/C:requestGroupAccess", "RequestGroupAccess", { groupUid: "G/C" }],
    ["GET", "/libraries/v2/artifacts/count", "GetArtifactCount", {}],
    ["GET", "/libraries/v2/artifacts/g%3Aa%2Fb%20c/versions", "ListArtifactVersions", { artifactId: "g:a/b c" }],
    ["GET", "/sts/exchange?aud=x", "Exchange", { aud: ["x"] }],
    ["POST", "/sts/exchange?aud=x", "Exchange", { aud: ["x"] }],
  ])("%s %s -> %s", async (verb, path, method, request) => {
    const reply = await rest(verb, path, verb === "POST" ? { body: {} } : {});
    expect(reply.status, JSON.stringify(reply.json)).toBe(200);
    expect(lastCall()).toMatchObject({ method, request });
  });

  it("answers an unknown path with 404 and a google.rpc.Status body", async () => {
    const reply = await rest("GET", "/registry/v2/nothing-here");
    expect(reply.status).toBe(404);
    expect(reply.headers.get("content-type")).toBe("application/json");
    expect(reply.json).toMatchObject({ code: 5, message: "No REST route for GET /registry/v2/nothing-here" });
    expect(detail(reply.json, "google.rpc.ErrorInfo")).toMatchObject({ reason: "ROUTE_NOT_FOUND", domain: "test.local" });
    expect(seen).toHaveLength(0);
  });

  it("answers a known path with a wrong method with 405 and Allow", async () => {
    const reply = await rest("DELETE", "/registry/v2/repos");
    expect(reply.status).toBe(405);
    expect(reply.headers.get("allow")).toBe("GET");
    expect(reply.json).toMatchObject({ code: 12 });
    expect(detail(reply.json, "google.rpc.ErrorInfo")).toMatchObject({ reason: "METHOD_NOT_ALLOWED", domain: "test.local" });
    const put = await rest("PUT", "/registry/v2/repos/O/R", { body: {} });
    expect(put.status).toBe(405);
    expect(put.headers.get("allow")).toBe("DELETE, GET, PATCH, POST");
  });

  it("answers a bound method the router does not serve with 501", async () => {
    const reply = await rest("GET", "/iam/v2/roles");
    expect(reply.status).toBe(501);
    expect(reply.json).toMatchObject({ code: 12 });
    expect(detail(reply.json, "google.rpc.ErrorInfo")).toMatchObject({ reason: "UNIMPLEMENTED", domain: "iam.test.local" });
  });

  it("rejects malformed percent-encoding in the path", async () => {
    expectFieldViolation(await rest("GET", "/registry/v2/repos/O/%zz"), "path", /percent-encoding/);
  });

  it("lists its routes, additional bindings included", () => {
    const exchange = gateway.routes.filter((r) => r.method.name === "Exchange").map((r) => `${r.verb} ${r.template}`);
    expect(exchange).toEqual(["POST /sts/exchange", "GET /sts/exchange"]);
    expect(gateway.routes.length).toBeGreaterThan(80);
  });
});

describe("query parameters", () => {
  it("set nested, repeated, enum, bool, int and optional fields", async () => {
    await rest("GET", "/registry/v2/repos?uidp.descendants_of=O&uidp.ids=a&uidp.ids=b&pageSize=10&skip=2&name=n&uidp.inRoot=true");
    expect(lastCall().request).toEqual({ uidp: { descendantsOf: "O", ids: ["a", "b"], inRoot: true }, pageSize: 10, skip: 2, name: "n" });

    seen = [];
    await rest("GET", "/libraries/v2/artifacts?ecosystems=ECOSYSTEM_JAVA&ecosystems=2&remediated=true&cuda_version=12");
    expect(lastCall().request).toEqual({ ecosystems: ["ECOSYSTEM_JAVA", "ECOSYSTEM_PYTHON"], remediated: true, cudaVersion: "12" });

    seen = [];
    await rest("GET", "/vulnerabilities/v2/advisories?artifactNames=a&artifactNames=b&artifact_types=t");
    expect(lastCall().request).toEqual({ artifactNames: ["a", "b"], artifactTypes: ["t"] });
  });

  it("ignores parameters that name no field, as unknown JSON fields are ignored", async () => {
    const reply = await rest("GET", "/registry/v2/repos?colour=red&uidp.shade=dark&pageSize=3&access_token=x");
    expect(reply.status, JSON.stringify(reply.json)).toBe(200);
    expect(lastCall().request).toEqual({ pageSize: 3 });
  });

  it.each<[string, string, RegExp]>([
    ["/registry/v2/repos?pageSize=ten", "page_size", /expected number \(int32\)/],
    ["/registry/v2/repos?uidp.inRoot=maybe", "uidp.in_root", /expected bool/],
    ["/registry/v2/repos?uidp.in_root.x=1", "uidp.in_root.x", /in_root is not a message/],
    ["/registry/v2/repos?uidp=O", "uidp", /is a message/],
    ["/libraries/v2/artifacts?ecosystems=ECOSYSTEM_RUST", "ecosystems", /invalid value "ECOSYSTEM_RUST"/],
    ["/registry/v2/repos/O/R?uid=other", "uid", /bound by the URL path/],
    ["/registry/v2/repos/O?repo.name=x", "repo.name", /carried by the request body/],
    ["/iam/v2/groups/G:requestGroupAccess?group_uid=x", "group_uid", /./],
  ])("rejects %s naming %s", async (path, field, description) => {
    const verb = path.includes("requestGroupAccess") || path.startsWith("/registry/v2/repos/O?") ? "POST" : "GET";
    expectFieldViolation(await rest(verb, path, verb === "POST" ? { body: {} } : {}), field, description);
    expect(seen).toHaveLength(0);
  });
});

describe("bodies", () => {
  it("reads the body field and takes the rest from the path", async () => {
    const reply = await rest("POST", "/registry/v2/repos/O", { body: { name: "n", catalog_tier: "CATALOG_TIER_FIPS", bundles: ["b"] } });
    expect(reply.status).toBe(200);
    expect(lastCall().request).toEqual({ parent: "O", repo: { name: "n", catalogTier: "CATALOG_TIER_FIPS", bundles: ["b"] } });
    expect(reply.json).toMatchObject({ uid: "O/new", name: "n", catalogTier: "CATALOG_TIER_FIPS" });
  });

  it("accepts an empty body", async () => {
    const reply = await rest("POST", "/registry/v2/repos/O", { body: "" });
    expect(reply.status).toBe(200);
    expect(lastCall().request).toEqual({ parent: "O" });
  });

  it("reads the whole request with body *", async () => {
    const reply = await rest("POST", "/iam/v2/groups/G:requestGroupAccess", { body: { group_uid: "ignored" } });
    expect(reply.status).toBe(200);
    expect(lastCall().request).toEqual({ groupUid: "G" });
  });

  it("ignores keys that name no field, at any depth", async () => {
    const body = { name: "n", nope: 1, customOverlay: { contents: { packages: ["p"], later: true } } };
    const reply = await rest("POST", "/registry/v2/repos/O", { body });
    expect(reply.status, JSON.stringify(reply.json)).toBe(200);
    expect(lastCall().request).toEqual({ parent: "O", repo: { name: "n", customOverlay: { contents: { packages: ["p"] } } } });
  });

  it("lets path variables override the body", async () => {
    await rest("PATCH", "/registry/v2/repos/O/R", { body: { uid: "X/Y", name: "n" } });
    expect(lastCall().request).toMatchObject({ repo: { uid: "O/R", name: "n" } });
  });

  it.each<[string, string, RegExp]>([
    ["{", "body", /malformed JSON/],
    ['{"name": 5}', "repo.name", /expected string, got 5/],
    ['{"catalogTier": "GOLD"}', "repo.catalog_tier", /invalid value "GOLD"/],
    ['{"customOverlay": {"accounts": {"users": [{"uid": "root"}]}}}', "repo.custom_overlay.accounts.users[0].uid", /int32/],
  ])("rejects %s naming %s", async (body, field, description) => {
    expectFieldViolation(await rest("POST", "/registry/v2/repos/O", { body }), field, description);
    expect(seen).toHaveLength(0);
  });

  it("answers a body over 4 MiB with 413", async () => {
    const big = JSON.stringify({ name: "x".repeat(4 * 1024 * 1024 + 10) });
    const reply = await rest("POST", "/registry/v2/repos/O", { body: big });
    expect(reply.status).toBe(413);
    expect(reply.json).toMatchObject({ code: 8 });
    expect(detail(reply.json, "google.rpc.ErrorInfo")).toMatchObject({ reason: "PAYLOAD_TOO_LARGE", domain: "registry.test.local" });
    expect(seen).toHaveLength(0);
  });

  it("answers a streamed body (no content-length) over 4 MiB with 413", async () => {
    const chunk = new Uint8Array(1024 * 1024).fill(0x20);
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < 6; i++) controller.enqueue(chunk);
        controller.close();
      },
    });
    const res = await fetch(base + "/registry/v2/repos/O", { method: "POST", body: stream, duplex: "half" } as RequestInit);
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ code: 8 });
  });
});

describe("update masks", () => {
  it("derives update_mask from the body keys when the client sends none", async () => {
    await rest("PATCH", "/registry/v2/repos/O/R", {
      body: { uid: "O/R", name: "n", description: "", customOverlay: { environment: { A: "1" }, contents: { packages: ["p"] } } },
    });
    expect(lastCall().request).toMatchObject({ updateMask: "name,description,customOverlay.environment,customOverlay.contents.packages" });
  });

  it("keeps the client's update_mask", async () => {
    await rest("PATCH", "/registry/v2/repos/O/R?updateMask=description", { body: { name: "n", description: "d" } });
    expect(lastCall().request).toMatchObject({ updateMask: "description" });
    seen = [];
    await rest("PATCH", "/registry/v2/repos/O/R?update_mask=catalog_tier,name", { body: { name: "n" } });
    expect(lastCall().request).toMatchObject({ updateMask: "catalogTier,name" });
  });

  it("treats maps as leaves and works for nested path variables", async () => {
    await rest("PATCH", "/iam/v2/groups/G/C", { body: { description: "d", resourceLimits: { repos: 3 } } });
    expect(lastCall().request).toEqual({ group: { uid: "G/C", description: "d", resourceLimits: { repos: 3 } }, updateMask: "description,resourceLimits" });
  });

  it("derives the mask relative to the resource for body *", async () => {
    await rest("PATCH", "/iam/v2/identities:updateIdentityMetadata", { body: { identityMetadata: { company: "c", job_title: "t" } } });
    expect(lastCall().request).toEqual({ identityMetadata: { company: "c", jobTitle: "t" }, updateMask: "company,jobTitle" });
    seen = [];
    await rest("PATCH", "/iam/v2/identities:updateIdentityMetadata", { body: { identityMetadata: { company: "c" }, updateMask: "product" } });
    expect(lastCall().request).toMatchObject({ updateMask: "product" });
  });

  it("sets no mask for an empty body", async () => {
    await rest("PATCH", "/registry/v2/repos/O/R", { body: "" });
    expect(lastCall().request).toEqual({ repo: { uid: "O/R" } });
  });
});

describe("responses", () => {
  it("are proto3 JSON with default values, int64 as strings and the method's headers", async () => {
    const reply = await rest("GET", "/registry/v2/repos/O/R");
    expect(reply.status).toBe(200);
    expect(reply.headers.get("content-type")).toBe("application/json");
    expect(reply.headers.get("x-echo")).toBe("repo");
    expect(reply.headers.get("x-trailing")).toBe("after"); // trailers become headers: REST has no trailers
    expect(reply.json).toEqual({
      uid: "O/R",
      name: "r",
      description: "",
      catalogTier: "CATALOG_TIER_UNSPECIFIED",
      bundles: [],
      aliases: [],
      activeTags: [],
      createTime: "2024-01-02T03:04:05Z",
      public: false,
    });
    const list = await rest("GET", "/registry/v2/repos?skip=3");
    expect(list.json).toMatchObject({ totalCount: "12345678901234567", skipped: 3, nextPageToken: "" });
  });

  it("are {} for google.protobuf.Empty", async () => {
    const reply = await rest("DELETE", "/registry/v2/repos/O/R");
    expect(reply.status).toBe(200);
    expect(reply.json).toEqual({});
  });

  it("carry the method's structured errors as google.rpc.Status with typed details", async () => {
    const missing = await rest("GET", "/registry/v2/repos/O/missing");
    expect(missing.status).toBe(404);
    expect(missing.json).toMatchObject({ code: 5, message: 'repo "O/missing" not found' });
    expect(detail(missing.json, "google.rpc.ErrorInfo")).toMatchObject({ reason: "NOT_FOUND", domain: "registry.test.local" });
    expect(detail(missing.json, "google.rpc.ResourceInfo")).toMatchObject({ resourceType: "repo", resourceName: "O/missing" });

    expectFieldViolation(await rest("GET", "/registry/v2/repos/O/bad"), "uid", /is not a repo uid/);

    // an error raised after the method set headers and trailers keeps them
    const late = await rest("GET", "/registry/v2/repos/O/late");
    expect(late.status).toBe(404);
    expect([late.headers.get("x-echo"), late.headers.get("x-trailing")]).toEqual(["repo", "after"]);
    expect(detail(late.json, "google.rpc.ResourceInfo")).toMatchObject({ resourceName: "O/late" });
  });

  it("hide unexpected errors behind INTERNAL with a request id", async () => {
    const reply = await rest("GET", "/registry/v2/repos/O/boom");
    expect(reply.status).toBe(500);
    expect(reply.json.code).toBe(13);
    expect(JSON.stringify(reply.json)).not.toContain("hunter2");
    const info = detail(reply.json, "google.rpc.ErrorInfo");
    expect(info).toMatchObject({ reason: "INTERNAL", domain: "registry.test.local" });
    const requestId = (info!.metadata as JsonObject).requestId as string;
    expect(reply.json.message).toContain(requestId);
    expect(detail(reply.json, "google.rpc.RequestInfo")).toMatchObject({ requestId });
  });
});

describe("interceptors", () => {
  it("see REST calls with the caller's headers, without HTTP protocol headers", async () => {
    await rest("GET", "/registry/v2/repos/O/R", { headers: { authorization: "Bearer abc", "x-custom": "1", "grpc-timeout": "1S", "connect-timeout-ms": "5" } });
    const call = lastCall();
    expect(call.method).toBe("GetRepo");
    expect(call.headers.authorization).toBe("Bearer abc");
    expect(call.headers["x-custom"]).toBe("1");
    expect(call.headers["content-type"]).toBe("application/json"); // the gateway calls in-process with Connect JSON
    expect(call.headers.host).toBeUndefined();
    expect(call.headers["grpc-timeout"]).toBeUndefined();
    expect(call.headers["connect-timeout-ms"]).toBeUndefined();
  });
});

describe("HTTP/2", () => {
  let h2: Http2Server;
  let port: number;
  beforeAll(async () => {
    h2 = createHttp2Server((req, res) => void gateway.handle(req, res));
    await new Promise<void>((resolve) => h2.listen(0, "127.0.0.1", resolve));
    port = (h2.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise<void>((resolve) => h2.close(() => resolve()));
  });

  async function h2Request(method: string, path: string, body?: string): Promise<{ status: number; json: JsonObject }> {
    const session = http2Connect(`http://127.0.0.1:${port}`);
    try {
      return await new Promise((resolve, reject) => {
        const req = session.request({ ":method": method, ":path": path, "content-type": "application/json", authorization: "Bearer h2" });
        let status = 0;
        let text = "";
        req.on("response", (headers) => (status = Number(headers[":status"])));
        req.setEncoding("utf8");
        req.on("data", (c: string) => (text += c));
        req.on("end", () => resolve({ status, json: JSON.parse(text) as JsonObject }));
        req.on("error", reject);
        req.end(body);
      });
    } finally {
      session.close();
    }
  }

  it("serves http2 compat requests the same way", async () => {
    const reply = await h2Request("PATCH", "/registry/v2/repos/O/R", JSON.stringify({ name: "n" }));
    expect(reply.status).toBe(200);
    expect(reply.json).toMatchObject({ uid: "O/R", name: "n" });
    expect(lastCall()).toMatchObject({ method: "UpdateRepo", headers: { authorization: "Bearer h2" }, request: { updateMask: "name" } });
    expect((await h2Request("GET", "/nope")).status).toBe(404);
    const tooBig = await h2Request("POST", "/registry/v2/repos/O", " ".repeat(4 * 1024 * 1024 + 1));
    expect(tooBig.status).toBe(413);
  });
});
