// The error model (AIP-193) over every protocol: each builder's error arrives with its code, message form
// and typed details; unexpected failures become INTERNAL with a request id and no internals; database
// errors are mapped by SQLSTATE; methods no domain implements yet answer UNIMPLEMENTED.
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, expect } from "vitest";
import { ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
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
import { bindPartial } from "../../src/server/bindings.js";

// A stand-in ReposService whose behaviour is chosen by the last segment of the uid it is asked for.
const faults = {
  getRepo(req: { uid: string }) {
    switch (req.uid.split("/").pop()) {
      case "missing":
        throw notFound("chainguard.platform.registry.v2.Repo", req.uid);
      case "invalid":
        throw invalidArgument({ field: "uid", description: "must be a repo uid" });
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
  server = await startTestServer({ overrides: [bindPartial(ReposService, faults)] });
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
