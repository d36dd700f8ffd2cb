// The error model (AIP-193) over every protocol: each builder's error arrives with its code, message form
// and typed details; unexpected failures become INTERNAL with a request id and no internals; database
// errors are mapped by SQLSTATE; methods no domain implements yet answer UNIMPLEMENTED. Messages arrive
// verbatim, whatever they contain: grpc-message is percent-encoded as the gRPC protocol says, which a
// grpc-js client decodes.
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { Client, credentials, Metadata, status as grpcStatus, type ServiceError } from "@grpc/grpc-js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GetRepoRequestSchema, RepoSchema, ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { SubscriptionsService } from "../../gen/chainguard/platform/events/v2/subscriptions_pb.js";
import {
  BadRequestSchema,
  PreconditionFailureSchema,
  RequestInfoSchema,
  ResourceInfoSchema,
} from "../../gen/google/rpc/error_details_pb.js";
import { failedPrecondition, invalidArgument, notFound } from "../../src/kernel/errors/index.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { contractCase, runContractCases } from "./harness.js";
import { bindPartial } from "../../src/kernel/module.js";
import { grpcFrame, rawGrpc } from "../support/raw-rpc.js";

// A message with what a header value cannot carry as it is: `:`, `/`, `%` and characters beyond ASCII.
const verbatim = "must look like sha256:<hex>/tag, 100% sure: é ✓";
const verbatimMessage = `Invalid argument: uid: ${verbatim}`;
// ... and as the gRPC protocol percent-encodes it: the UTF-8 bytes outside 0x20-0x7E, and `%`.
const verbatimGrpcMessage = "Invalid argument: uid: must look like sha256:<hex>/tag, 100%25 sure: %C3%A9 %E2%9C%93";

// A stand-in ReposService whose behaviour is chosen by the last segment of the uid it is asked for.
const faults = {
  getRepo(req: { uid: string }) {
    switch (req.uid.split("/").pop()) {
      case "missing":
        throw notFound("chainguard.platform.registry.v2.Repo", req.uid);
      case "invalid":
        throw invalidArgument({ field: "uid", description: "must be a repo uid" });
      case "verbatim":
        throw invalidArgument({ field: "uid", description: verbatim });
      case "crash":
        throw new Error('relation "repos" does not exist at character 15 (password=hunter2)');
      case "conflict":
        throw Object.assign(new Error("could not serialize access due to concurrent update"), { code: "40001" });
      default:
        return { uid: req.uid, name: "found" };
    }
  },
  deleteRepo(req: { uid: string }) {
    throw failedPrecondition({ type: "RESOURCE_NOT_EMPTY", subject: req.uid, description: "the repo still has tags" });
  },
};

let server: TestServer;
let world: World;
beforeAll(async () => {
  // SubscriptionsService with no methods: bound as the server binds every service no domain builds.
  server = await startTestServer({ overrides: [bindPartial(ReposService, faults), bindPartial(SubscriptionsService, {})] });
  world = await seedWorld(server);
});
const owner = () => world.auth("owner");
const inOrg = (suffix: string) => () => ({ uid: `${world.org}/${suffix}` });
afterAll(async () => {
  await server?.close();
});

runContractCases("Errors", () => server.baseUrl, [
  contractCase({
    name: "invalid argument: BadRequest field violation and the specification's message form",
    method: ReposService.method.getRepo,
    request: inOrg("invalid"),
    headers: owner,
    error: {
      code: Code.InvalidArgument,
      reason: "INVALID_ARGUMENT",
      domain: "registry.platform.test",
      message: "Invalid argument: uid: must be a repo uid",
      details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "uid", description: "must be a repo uid" }] } }],
    },
  }),
  contractCase({
    name: "a message with `:`, `/`, `%` and non-ASCII characters arrives verbatim",
    method: ReposService.method.getRepo,
    request: inOrg("verbatim"),
    headers: owner,
    error: {
      code: Code.InvalidArgument,
      message: verbatimMessage,
      details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "uid", description: verbatim }] } }],
    },
  }),
  contractCase({
    name: "not found: ResourceInfo naming the resource",
    method: ReposService.method.getRepo,
    request: inOrg("missing"),
    headers: owner,
    error: {
      code: Code.NotFound,
      reason: "NOT_FOUND",
      details: [{ schema: ResourceInfoSchema, value: { resourceType: "chainguard.platform.registry.v2.Repo", resourceName: expect.stringMatching(/\/missing$/) } }],
    },
  }),
  contractCase({
    name: "failed precondition: PreconditionFailure and the specification's message form",
    method: ReposService.method.deleteRepo,
    request: inOrg("busy"),
    headers: owner,
    error: {
      code: Code.FailedPrecondition,
      reason: "FAILED_PRECONDITION",
      message: "Precondition failed: the repo still has tags",
      details: [{ schema: PreconditionFailureSchema, value: { violations: [{ type: "RESOURCE_NOT_EMPTY", subject: expect.stringMatching(/\/busy$/) }] } }],
    },
  }),
  contractCase({
    name: "unexpected failure: INTERNAL with a request id and nothing of the cause",
    method: ReposService.method.getRepo,
    request: inOrg("crash"),
    headers: owner,
    error: {
      code: Code.Internal,
      reason: "INTERNAL",
      message: /^Internal error; quote request id [0-9a-f-]{36} when reporting it$/,
      details: [{ schema: RequestInfoSchema, value: { requestId: expect.stringMatching(/^[0-9a-f-]{36}$/) } }],
    },
  }),
  contractCase({
    name: "serialization failure from the database: ABORTED, retryable",
    method: ReposService.method.getRepo,
    request: inOrg("conflict"),
    headers: owner,
    error: { code: Code.Aborted, reason: "ABORTED", message: /retry/ },
  }),
  contractCase({
    name: "a method no domain implements yet: UNIMPLEMENTED with ErrorInfo",
    method: SubscriptionsService.method.listSubscriptions,
    request: {},
    headers: owner,
    error: { code: Code.Unimplemented, reason: "UNIMPLEMENTED", domain: "events.platform.test" },
  }),
  contractCase({
    name: "success passes through untouched",
    method: ReposService.method.getRepo,
    request: inOrg("def"),
    headers: owner,
    response: (repo) => {
      expect(repo.uid).toBe(`${world.org}/def`);
      expect(repo.name).toBe("found");
    },
  }),
]);

describe("grpc-message, as gRPC clients read it", () => {
  const path = `/${ReposService.typeName}/${ReposService.method.getRepo.name}`;
  const request = () => toBinary(GetRepoRequestSchema, create(GetRepoRequestSchema, inOrg("verbatim")()));

  it("a grpc-js client shows the message verbatim", async () => {
    const client = new Client(`127.0.0.1:${server.port}`, credentials.createInsecure());
    const metadata = new Metadata();
    metadata.set("authorization", owner().authorization!);
    try {
      const err = await new Promise<ServiceError>((resolve, reject) => {
        client.makeUnaryRequest(
          path,
          (bytes: Uint8Array) => Buffer.from(bytes),
          (buf: Buffer) => fromBinary(RepoSchema, buf),
          request(),
          metadata,
          (e) => (e ? resolve(e) : reject(new Error("expected an error"))),
        );
      });
      expect(err.code).toBe(grpcStatus.INVALID_ARGUMENT);
      expect(err.details).toBe(verbatimMessage);
    } finally {
      client.close();
    }
  });

  it("gRPC: the trailer is percent-encoded as the protocol says", async () => {
    const { fields: trailers } = await rawGrpc(server.baseUrl, path, grpcFrame(request()), { "content-type": "application/grpc", ...owner() });
    expect(trailers["grpc-status"]).toBe("3");
    expect(trailers["grpc-message"]).toBe(verbatimGrpcMessage);
  });

  it("gRPC-web: the trailer frame is percent-encoded as the protocol says", async () => {
    const res = await fetch(server.baseUrl + path, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", ...owner() },
      body: grpcFrame(request()),
    });
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(bytes[0]).toBe(0x80); // an error before any message: the trailer frame alone
    const trailer = bytes.subarray(5, 5 + bytes.readUInt32BE(1)).toString("latin1");
    expect(trailer).toContain("grpc-status: 3\r\n");
    expect(trailer).toContain(`grpc-message: ${verbatimGrpcMessage}\r\n`);
  });
});
