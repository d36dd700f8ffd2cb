import { create, toBinary } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { registry } from "../../src/kernel/descriptors.js";
import {
  errorDomainOf,
  failedPrecondition,
  hasErrorInfo,
  httpStatusOf,
  httpStatusOfError,
  httpVersionNotSupported,
  invalidArgument,
  methodNotAllowed,
  notFound,
  payloadTooLarge,
  reasonOf,
  routeNotFound,
  sqlStateOf,
  statusJson,
  toPublicError,
  toRestError,
  unsupportedMediaType,
} from "../../src/kernel/errors/index.js";
import { ErrorInfoSchema, RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { setLogLevel } from "../../src/kernel/log.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { PingService } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";

setLogLevel("silent");

describe("reasonOf", () => {
  it.each([
    [Code.InvalidArgument, "INVALID_ARGUMENT"],
    [Code.NotFound, "NOT_FOUND"],
    [Code.FailedPrecondition, "FAILED_PRECONDITION"],
    [Code.PermissionDenied, "PERMISSION_DENIED"],
    [Code.Unauthenticated, "UNAUTHENTICATED"],
    [Code.DeadlineExceeded, "DEADLINE_EXCEEDED"],
  ])("%s -> %s", (code, reason) => expect(reasonOf(code)).toBe(reason));
});

describe("httpStatusOf", () => {
  it.each([
    [Code.InvalidArgument, 400],
    [Code.FailedPrecondition, 400],
    [Code.Unauthenticated, 401],
    [Code.PermissionDenied, 403],
    [Code.NotFound, 404],
    [Code.AlreadyExists, 409],
    [Code.Aborted, 409],
    [Code.ResourceExhausted, 429],
    [Code.Internal, 500],
    [Code.Unimplemented, 501],
    [Code.Unavailable, 503],
    [Code.DeadlineExceeded, 504],
  ])("%s -> %s", (code, status) => expect(httpStatusOf(code)).toBe(status));
});

describe("errorDomainOf", () => {
  it("is <api domain>.<service domain>", () => {
    expect(errorDomainOf(GroupsService.method.getGroup, "example.com")).toBe("iam.example.com");
    expect(errorDomainOf(PingService.method.ping, "example.com")).toBe("ping.example.com");
    expect(errorDomainOf(undefined, "example.com")).toBe("example.com");
  });
});

describe("builders", () => {
  it("joins several field violations in one message", () => {
    const err = invalidArgument([
      { field: "name", description: "is required" },
      { field: "page_size", description: "must not be negative" },
    ]);
    expect(err.rawMessage).toBe("Invalid argument: name: is required; page_size: must not be negative");
  });

  it("a precondition failure uses the specification's message form", () => {
    const err = failedPrecondition({ type: "RESOURCE_NOT_EMPTY", description: "group has repos" });
    expect(err.rawMessage).toBe("Precondition failed: group has repos");
  });
});

describe("toPublicError", () => {
  it("completes the ErrorInfo domain and keeps the rest", () => {
    const out = toPublicError(notFound("Repo", "abc"), "registry.x");
    const json = statusJson(out, registry) as { code: number; details: Array<Record<string, unknown>> };
    expect(json.code).toBe(5);
    expect(json.details[0]).toMatchObject({ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "NOT_FOUND", domain: "registry.x" });
    expect(json.details[1]).toMatchObject({ "@type": "type.googleapis.com/google.rpc.ResourceInfo", resourceType: "Repo", resourceName: "abc" });
  });

  it("hides a plain error behind INTERNAL with a request id", () => {
    const out = toPublicError(new Error("select * from secrets"), "iam.x");
    expect(out.code).toBe(Code.Internal);
    expect(out.rawMessage).not.toMatch(/secrets/);
    expect(JSON.stringify(statusJson(out, registry))).not.toMatch(/secrets/);
  });

  it("hides an INTERNAL ConnectError raised by a library", () => {
    const out = toPublicError(new ConnectError("stack: at Foo (/srv/app.js:1)", Code.Internal), "iam.x");
    expect(out.rawMessage).toMatch(/^Internal error; quote request id/);
  });

  it("adds ErrorInfo to a ConnectError that lacks it", () => {
    const out = toPublicError(new ConnectError("deadline", Code.DeadlineExceeded), "iam.x");
    const json = statusJson(out, registry) as { details: Array<Record<string, unknown>> };
    expect(json.details[0]).toMatchObject({ reason: "DEADLINE_EXCEEDED", domain: "iam.x" });
  });

  it("keeps an error whose ErrorInfo came over the wire, and completes its domain", () => {
    const info = create(ErrorInfoSchema, { reason: "STOLEN_LAPTOP", domain: "" });
    const received = new ConnectError("no", Code.Internal);
    received.details.push({ type: ErrorInfoSchema.typeName, value: toBinary(ErrorInfoSchema, info) });
    expect(hasErrorInfo(received)).toBe(true);
    const out = toPublicError(received, "iam.x");
    expect(out.rawMessage).toBe("no");
    expect(out.findDetails(ErrorInfoSchema)).toMatchObject([{ reason: "STOLEN_LAPTOP", domain: "iam.x" }]);
  });

  it.each([
    ["40001", Code.Aborted],
    ["40P01", Code.Aborted],
    ["57P01", Code.Unavailable],
    ["23505", Code.Internal],
  ])("maps SQLSTATE %s through a wrapped cause to %s", (state, code) => {
    const driver = Object.assign(new Error("driver text"), { code: state });
    const wrapped = Object.assign(new Error("Failed query: ..."), { cause: driver });
    expect(sqlStateOf(wrapped)).toBe(state);
    expect(toPublicError(wrapped, "iam.x").code).toBe(code);
  });

  it.each(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "CONNECT_TIMEOUT", "CONNECTION_CLOSED", "CONNECTION_ENDED", "CONNECTION_DESTROYED", "08006", "08001", "57P03", "53300"])(
    "maps a lost or refused database connection (%s) to UNAVAILABLE with retry info",
    (code) => {
      const driver = Object.assign(new Error("connect ECONNREFUSED 10.0.0.5:5432"), { code });
      const wrapped = Object.assign(new Error("Failed query: select ..."), { cause: driver });
      const out = toPublicError(wrapped, "iam.x");
      expect(out.code).toBe(Code.Unavailable);
      expect(out.rawMessage).not.toMatch(/10\.0\.0\.5/);
      expect(out.findDetails(ErrorInfoSchema)).toMatchObject([{ reason: "DATABASE_UNAVAILABLE", domain: "iam.x" }]);
      expect(out.findDetails(RetryInfoSchema)).toHaveLength(1);
    },
  );
});

describe("the REST form", () => {
  it.each<[string, ConnectError, number, string]>([
    ["a route that does not exist", routeNotFound("GET", "/x"), 404, "ROUTE_NOT_FOUND"],
    ["a method the path is not served under", methodNotAllowed("PUT", "/x", ["GET", "POST"]), 405, "METHOD_NOT_ALLOWED"],
    ["a body over the cap", payloadTooLarge(10), 413, "PAYLOAD_TOO_LARGE"],
    ["a content type no protocol reads", unsupportedMediaType("text/plain", "/x"), 415, "UNSUPPORTED_MEDIA_TYPE"],
    ["a bidirectional stream over HTTP/1.1", httpVersionNotSupported("1.1", "/x"), 505, "HTTP_VERSION_NOT_SUPPORTED"],
    ["an error of a handler: its code's status", notFound("Repo", "a"), 404, "NOT_FOUND"],
  ])("%s: %i %s", (_, err, status, reason) => {
    const rest = toRestError(err, "registry.x", registry);
    expect(rest.status).toBe(status);
    expect(httpStatusOfError(toPublicError(err, "registry.x"))).toBe(status);
    const body = JSON.parse(rest.body) as { code: number; details: Array<Record<string, unknown>> };
    expect(body.code).toBe(err.code);
    expect(body.details[0]).toMatchObject({ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason, domain: "registry.x" });
  });

  it("sends the headers a refusal carries: Allow on a 405", () => {
    const rest = toRestError(methodNotAllowed("PUT", "/x", ["GET", "POST"]), "x", registry);
    expect(rest.headers.get("allow")).toBe("GET, POST");
  });

  it("hides an unexpected error behind a 500", () => {
    const rest = toRestError(new TypeError("cannot read secrets of undefined"), "x", registry);
    expect(rest.status).toBe(500);
    expect(rest.body).not.toMatch(/secrets/);
  });
});
