// gRPC server reflection against a real h2c server: the buf CLI lists and calls methods with no local schema
// (both reflection protocols), and a Connect gRPC client checks the answers and the error responses.
import { execFile } from "node:child_process";
import http2 from "node:http2";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create, createFileRegistry, fromBinary, getOption, type FileRegistry } from "@bufbuild/protobuf";
import {
  FileDescriptorProtoSchema,
  FileDescriptorSetSchema,
  timestampFromDate,
  type FileDescriptorProto,
} from "@bufbuild/protobuf/wkt";
import { createClient, type Client, type ConnectRouter } from "@connectrpc/connect";
import { connectNodeAdapter, createGrpcTransport } from "@connectrpc/connect-node";
import { allFiles } from "../../src/kernel/descriptors.js";
import { createHealth } from "../../src/server/health.js";
import { registerReflection } from "../../src/server/reflection.js";
import { PingService } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";
import { ReposService, type ListReposRequest } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { http } from "../../gen/google/api/annotations_pb.js";
import {
  ExtensionRequestSchema,
  ServerReflection,
  ServerReflectionRequestSchema,
  type ServerReflectionRequest,
  type ServerReflectionResponse,
} from "../../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1alpha } from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";

const run = promisify(execFile);

let server: http2.Http2Server;
let baseUrl: string;
let client: Client<typeof ServerReflection>;
const listReposCalls: ListReposRequest[] = [];

function routes(router: ConnectRouter): void {
  router.service(PingService, { ping: () => ({ response: "pong" }) });
  router.service(ReposService, {
    listRepos(request) {
      listReposCalls.push(request);
      if (!request.uidp) return {};
      return {
        repos: [
          {
            uid: `${request.uidp.childrenOf}/repo`,
            name: "nginx",
            createTime: timestampFromDate(new Date("2024-05-06T07:08:09Z")),
            syncConfig: { source: "cgr.dev/chainguard/nginx" },
          },
        ],
        totalCount: 1n,
      };
    },
  });
  createHealth().register(router);
  registerReflection(router, {
    files: allFiles,
    services: () => [...new Set(router.handlers.map((h) => h.service.typeName))],
  });
}

const sessions = new Set<http2.ServerHttp2Session>();

beforeAll(async () => {
  server = http2.createServer(connectNodeAdapter({ routes }));
  server.on("session", (s) => {
    sessions.add(s);
    s.on("close", () => sessions.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  client = createClient(ServerReflection, createGrpcTransport({ baseUrl }));
});

afterAll(async () => {
  // The client transports keep their HTTP/2 sessions open; close() waits for them.
  for (const s of sessions) s.destroy();
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

/** Runs the buf CLI; fails the test with its stderr when it exits non-zero. */
async function bufCurl(...args: string[]): Promise<string> {
  try {
    const { stdout } = await run("npx", ["--no-install", "buf", "curl", "--http2-prior-knowledge", ...args], {
      timeout: 20_000,
    });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`buf curl ${args.join(" ")} failed: ${e.stderr ?? e.message}`);
  }
}

/** Sends the requests on one reflection stream and collects the answers. */
async function reflect(...requests: ServerReflectionRequest["messageRequest"][]): Promise<ServerReflectionResponse[]> {
  async function* send() {
    for (const messageRequest of requests) yield create(ServerReflectionRequestSchema, { messageRequest });
  }
  const out: ServerReflectionResponse[] = [];
  for await (const res of client.serverReflectionInfo(send())) out.push(res);
  return out;
}

function fileNames(res: ServerReflectionResponse | undefined): string[] {
  if (res?.messageResponse.case !== "fileDescriptorResponse") {
    throw new Error(`expected a file descriptor response, got ${JSON.stringify(res?.messageResponse)}`);
  }
  return res.messageResponse.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b).name);
}

function errorOf(res: ServerReflectionResponse | undefined): { errorCode: number; errorMessage: string } {
  if (res?.messageResponse.case !== "errorResponse") {
    throw new Error(`expected an error response, got ${JSON.stringify(res?.messageResponse)}`);
  }
  return res.messageResponse.value;
}

describe("buf curl with server reflection", () => {
  const expectedServices = [
    "chainguard.platform.ping.v2.PingService",
    "chainguard.platform.registry.v2.ReposService",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
  ];

  it("lists the services", async () => {
    const out = await bufCurl("--list-services", baseUrl);
    expect(out.trim().split("\n").sort()).toEqual(expectedServices);
  });

  it("lists the methods", async () => {
    const out = await bufCurl("--list-methods", baseUrl);
    const methods = out.trim().split("\n");
    expect(methods).toContain("chainguard.platform.ping.v2.PingService/Ping");
    expect(methods).toContain("chainguard.platform.registry.v2.ReposService/ListRepos");
    expect(methods).toContain("chainguard.platform.registry.v2.ReposService/UpdateRepoReadme");
    expect(methods).toContain("grpc.health.v1.Health/Watch");
    expect(methods).toContain("grpc.reflection.v1.ServerReflection/ServerReflectionInfo");
  });

  it.each([[], ["--reflect-protocol", "grpc-v1"], ["--reflect-protocol", "grpc-v1alpha"]])(
    "calls Ping with no local schema %j",
    async (...flags: string[]) => {
      const out = await bufCurl(...flags, `${baseUrl}/chainguard.platform.ping.v2.PingService/Ping`);
      expect(JSON.parse(out)).toEqual({ response: "pong" });
    },
  );

  it.each([["grpc"], ["connect"], ["grpcweb"]])("calls Ping over %s", async (protocol) => {
    const out = await bufCurl("--protocol", protocol, `${baseUrl}/chainguard.platform.ping.v2.PingService/Ping`);
    expect(JSON.parse(out)).toEqual({ response: "pong" });
  });

  it("calls a method of a big file with cross-file imports (empty response)", async () => {
    const out = await bufCurl("-d", "{}", `${baseUrl}/chainguard.platform.registry.v2.ReposService/ListRepos`);
    expect(JSON.parse(out)).toEqual({});
  });

  it("encodes and decodes imported types and explicit JSON names", async () => {
    const out = await bufCurl(
      "--protocol",
      "grpc",
      "-d",
      JSON.stringify({ uidp: { childrenOf: "abc" }, pageSize: 5, orderBy: "name" }),
      `${baseUrl}/chainguard.platform.registry.v2.ReposService/ListRepos`,
    );
    // uidp is chainguard.platform.common.UIDPFilter (another file); createTime a well-known type; sync_config
    // carries json_name "sync_config" in the proto, which reflection must keep.
    expect(JSON.parse(out)).toEqual({
      repos: [
        {
          uid: "abc/repo",
          name: "nginx",
          createTime: "2024-05-06T07:08:09Z",
          sync_config: { source: "cgr.dev/chainguard/nginx" },
        },
      ],
      totalCount: "1",
    });
    const last = listReposCalls.at(-1);
    expect(last?.uidp?.childrenOf).toBe("abc");
    expect(last?.pageSize).toBe(5);
    expect(last?.orderBy).toBe("name");
  });

  it("calls a service whose file is not among the configured files (health)", async () => {
    const out = await bufCurl("-d", "{}", `${baseUrl}/grpc.health.v1.Health/Check`);
    expect(JSON.parse(out)).toEqual({ status: "SERVING" });
  });
});

describe("reflection over a Connect gRPC client", () => {
  it("lists services, including the reflection services", async () => {
    const [res] = await reflect({ case: "listServices", value: "" });
    expect(res?.messageResponse.case).toBe("listServicesResponse");
    const names =
      res?.messageResponse.case === "listServicesResponse" ? res.messageResponse.value.service.map((s) => s.name) : [];
    expect(names).toContain("chainguard.platform.ping.v2.PingService");
    expect(names).toContain("grpc.reflection.v1.ServerReflection");
    expect(names).toContain("grpc.reflection.v1alpha.ServerReflection");
  });

  it("answers unknown names with error_response NOT_FOUND and keeps the stream open", async () => {
    const responses = await reflect(
      { case: "fileContainingSymbol", value: "no.such.Symbol" },
      { case: "fileByFilename", value: "no/such/file.proto" },
      {
        case: "fileContainingExtension",
        value: create(ExtensionRequestSchema, { containingType: "google.protobuf.MethodOptions", extensionNumber: 1 }),
      },
      { case: "allExtensionNumbersOfType", value: "no.such.Message" },
      { case: "fileByFilename", value: "chainguard/platform/ping/v2/ping.proto" },
    );
    expect(responses).toHaveLength(5);
    for (const res of responses.slice(0, 4)) {
      const err = errorOf(res);
      expect(err.errorCode).toBe(5);
      expect(err.errorMessage).not.toBe("");
    }
    expect(errorOf(responses[0]).errorMessage).toContain("no.such.Symbol");
    expect(fileNames(responses[4])[0]).toBe("chainguard/platform/ping/v2/ping.proto");
    expect(responses[0]?.originalRequest?.messageRequest).toEqual({ case: "fileContainingSymbol", value: "no.such.Symbol" });
  });

  it("answers a request with no message_request with INVALID_ARGUMENT", async () => {
    const [res] = await reflect({ case: undefined, value: undefined });
    expect(errorOf(res).errorCode).toBe(3);
  });

  it.each([
    ["chainguard.platform.ping.v2.PingService", "chainguard/platform/ping/v2/ping.proto"],
    ["chainguard.platform.ping.v2.PingService.Ping", "chainguard/platform/ping/v2/ping.proto"],
    [".chainguard.platform.ping.v2.PingRequest", "chainguard/platform/ping/v2/ping.proto"],
    ["chainguard.platform.registry.v2.Repo", "chainguard/platform/registry/v2/repos.proto"],
    ["chainguard.platform.registry.v2.Repo.sync_config", "chainguard/platform/registry/v2/repos.proto"],
    ["chainguard.platform.registry.v2.CustomOverlay.Accounts.User", "chainguard/platform/registry/v2/repos.proto"],
    ["chainguard.platform.registry.v2.CatalogTier", "chainguard/platform/registry/v2/repos.proto"],
    ["chainguard.platform.registry.v2.CATALOG_TIER_FIPS", "chainguard/platform/registry/v2/repos.proto"],
    ["chainguard.platform.registry.v2.ListReposRequest._name", "chainguard/platform/registry/v2/repos.proto"],
    ["chainguard.platform.common.UIDPFilter", "platform/common/v1/uidp.platform.proto"],
    ["google.api.http", "google/api/annotations.proto"],
    ["google.api.field_behavior", "google/api/field_behavior.proto"],
    ["google.protobuf.Timestamp", "google/protobuf/timestamp.proto"],
    ["google.rpc.ErrorInfo", "google/rpc/error_details.proto"],
    ["grpc.reflection.v1.ServerReflection", "grpc/reflection/v1/reflection.proto"],
    ["grpc.reflection.v1alpha.ServerReflection.ServerReflectionInfo", "grpc/reflection/v1alpha/reflection.proto"],
    ["grpc.health.v1.HealthCheckResponse.ServingStatus", "health/v1/health.proto"],
  ])("resolves the symbol %s", async (symbol, file) => {
    const [res] = await reflect({ case: "fileContainingSymbol", value: symbol });
    expect(fileNames(res)[0]).toBe(file);
  });

  it("sends a file with its transitive dependencies, and each dependency once per stream", async () => {
    const [first, second] = await reflect(
      { case: "fileContainingSymbol", value: "chainguard.platform.registry.v2.ReposService" },
      { case: "fileByFilename", value: "google/api/annotations.proto" },
    );
    const names = fileNames(first);
    expect(names[0]).toBe("chainguard/platform/registry/v2/repos.proto");
    expect(new Set(names)).toEqual(
      new Set([
        "chainguard/platform/registry/v2/repos.proto",
        "apiserver/options/v1/options.proto",
        "apiserver/capabilityopts/v1/capability.proto",
        "capabilities/capabilities.proto",
        "google/api/annotations.proto",
        "google/api/http.proto",
        "google/api/field_behavior.proto",
        "google/protobuf/descriptor.proto",
        "google/protobuf/empty.proto",
        "google/protobuf/field_mask.proto",
        "google/protobuf/timestamp.proto",
        "platform/common/v1/uidp.platform.proto",
      ]),
    );
    expect(names).toHaveLength(new Set(names).size);
    // Asked for again: the file itself is sent, its dependencies were already sent on this stream.
    expect(fileNames(second)).toEqual(["google/api/annotations.proto"]);
  });

  it("serves descriptors that keep json_name and options such as google.api.http", async () => {
    const [res] = await reflect({ case: "fileContainingSymbol", value: "chainguard.platform.registry.v2.ReposService" });
    if (res?.messageResponse.case !== "fileDescriptorResponse") throw new Error("no file descriptors");
    // As a client would: the first file is the one asked for, the others its dependencies, in any order.
    const protos = res.messageResponse.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b));
    const ordered: FileDescriptorProto[] = [];
    const visit = (name: string): void => {
      const proto = protos.find((p) => p.name === name);
      if (!proto) throw new Error(`dependency not sent: ${name}`);
      if (ordered.includes(proto)) return;
      proto.dependency.forEach(visit);
      ordered.push(proto);
    };
    visit(protos[0]!.name);
    expect(ordered).toHaveLength(protos.length);
    const reg: FileRegistry = createFileRegistry(create(FileDescriptorSetSchema, { file: ordered }));
    const repos = reg.getService("chainguard.platform.registry.v2.ReposService");
    const listRepos = repos?.methods.find((m) => m.name === "ListRepos");
    expect(listRepos && getOption(listRepos, http).pattern).toEqual({ case: "get", value: "/registry/v2/repos" });
    const repo = reg.getMessage("chainguard.platform.registry.v2.Repo");
    expect(repo?.field.syncConfig?.proto.jsonName).toBe("sync_config");
    expect(repo?.field.createTime?.proto.jsonName).toBe("createTime");
    expect(repo?.field.catalogTier?.enum?.typeName).toBe("chainguard.platform.registry.v2.CatalogTier");
  });

  it("finds extensions by extendee and number, and lists extension numbers of a type", async () => {
    const [byExtension, numbers, none] = await reflect(
      {
        case: "fileContainingExtension",
        value: create(ExtensionRequestSchema, { containingType: "google.protobuf.MethodOptions", extensionNumber: 72295728 }),
      },
      { case: "allExtensionNumbersOfType", value: "google.protobuf.MethodOptions" },
      { case: "allExtensionNumbersOfType", value: "chainguard.platform.ping.v2.PingRequest" },
    );
    expect(fileNames(byExtension)[0]).toBe("google/api/annotations.proto");
    expect(numbers?.messageResponse.case).toBe("allExtensionNumbersResponse");
    if (numbers?.messageResponse.case === "allExtensionNumbersResponse") {
      expect(numbers.messageResponse.value.baseTypeName).toBe("google.protobuf.MethodOptions");
      expect(numbers.messageResponse.value.extensionNumber).toContain(72295728);
    }
    expect(none?.messageResponse).toMatchObject({
      case: "allExtensionNumbersResponse",
      value: { baseTypeName: "chainguard.platform.ping.v2.PingRequest", extensionNumber: [] },
    });
  });

  it("answers v1alpha the same way", async () => {
    const alpha = createClient(ServerReflectionV1alpha, createGrpcTransport({ baseUrl }));
    async function* send() {
      yield { messageRequest: { case: "fileContainingSymbol" as const, value: "chainguard.platform.ping.v2.PingService" } };
      yield { messageRequest: { case: "fileContainingSymbol" as const, value: "nope.Nope" } };
    }
    const out = [];
    for await (const res of alpha.serverReflectionInfo(send())) out.push(res);
    expect(out[0]?.messageResponse.case).toBe("fileDescriptorResponse");
    expect(out[1]?.messageResponse).toMatchObject({ case: "errorResponse", value: { errorCode: 5 } });
  });
});
