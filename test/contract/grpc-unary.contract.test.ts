// The gRPC unary path (server/grpc-unary.ts) answers plain unary calls itself and passes every other request
// to Connect's handler with the bytes it read. Here raw HTTP/2 requests check both sides of that line: the
// plain call and its compressed twin (which Connect answers) give the same answer, errors and all; and what
// the plain path refuses (several messages, a truncated envelope, undecodable bytes, a malformed timeout, a
// body over the limit) is answered as Connect answers it: a structured error, never INTERNAL.
import { gzipSync } from "node:zlib";
import { fromBinary, toBinary, create } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PingResponseSchema, PingService } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";
import { bindPartial } from "../../src/kernel/module.js";
import { GetGroupRequestSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { grpcFrame, rawGrpc, type GrpcAnswer } from "../support/raw-rpc.js";
import { startTestServer, type TestServer } from "../support/server.js";

const PING = "/chainguard.platform.ping.v2.PingService/Ping";
const GET_GROUP = "/chainguard.platform.iam.v2.GroupsService/GetGroup";
const LIMIT = 64 * 1024;

let server: TestServer;
/** A server whose Ping answers a message that cannot be encoded (a symbol in a string field). */
let broken: TestServer;
beforeAll(async () => {
  server = await startTestServer({ limits: { maxRequestBytes: LIMIT } });
  broken = await startTestServer({ overrides: [bindPartial(PingService, { ping: () => ({ response: Symbol("not a string") as unknown as string }) })] });
});
afterAll(async () => {
  await server?.close();
  await broken?.close();
});

/** The one message of a response body. */
function message(answer: GrpcAnswer): Uint8Array {
  expect(answer.body[0]).toBe(0);
  expect(answer.body.readUInt32BE(1)).toBe(answer.body.byteLength - 5);
  return answer.body.subarray(5);
}

/** What a client reads of an error: status, message, details (the request id in ErrorInfo aside). */
function errorOf(answer: GrpcAnswer) {
  const info = answer.details?.details.map((d) => d.typeUrl);
  return { status: answer.status, message: answer.fields["grpc-message"], reason: answer.reason, details: info, code: answer.details?.code };
}

describe("gRPC unary calls", () => {
  it("a plain call is answered with one message, its content type and grpc-status 0", async () => {
    const got = await rawGrpc(server.baseUrl, PING, grpcFrame(new Uint8Array(0)), { "x-request-id": "unary-plain" });
    expect(got.status).toBe("0");
    expect(got.fields["content-type"]).toBe("application/grpc+proto");
    expect(got.fields["x-request-id"]).toBe("unary-plain");
    expect(fromBinary(PingResponseSchema, message(got)).response).toBe("pong");
  });

  it("a compressed call (Connect's handler) gets the same answer", async () => {
    const plain = await rawGrpc(server.baseUrl, PING, grpcFrame(new Uint8Array(0)));
    const gz = await rawGrpc(server.baseUrl, PING, grpcFrame(gzipSync(new Uint8Array(0)), true), { "grpc-encoding": "gzip" });
    expect(gz.status).toBe("0");
    expect(fromBinary(PingResponseSchema, message(gz))).toEqual(fromBinary(PingResponseSchema, message(plain)));
  });

  it("an error is the same on both paths: status, percent-encoded message, google.rpc.Status details", async () => {
    const request = toBinary(GetGroupRequestSchema, create(GetGroupRequestSchema, { uid: "0123456789abcdef0123456789abcdef01234567" }));
    const plain = await rawGrpc(server.baseUrl, GET_GROUP, grpcFrame(request));
    const gz = await rawGrpc(server.baseUrl, GET_GROUP, grpcFrame(gzipSync(request), true), { "grpc-encoding": "gzip" });
    expect(plain.status).toBe("16");
    expect(plain.reason).toBeTruthy();
    expect(errorOf(plain)).toEqual(errorOf(gz));
    expect(plain.body.byteLength).toBe(0);
  });

  it.each([
    ["two messages for a unary method", Buffer.concat([grpcFrame(new Uint8Array(0)), grpcFrame(new Uint8Array(0))])],
    ["a truncated envelope", grpcFrame(new Uint8Array(8)).subarray(0, 9)],
    ["no envelope at all", Buffer.alloc(0)],
    ["bytes that are not the request message", grpcFrame(Buffer.from([0x0a, 0xff, 0xff, 0xff]))],
    ["an envelope flagged compressed with no encoding", grpcFrame(new Uint8Array(3), true)],
  ])("%s: a structured error from Connect's handler, not INTERNAL", async (_, body) => {
    const got = await rawGrpc(server.baseUrl, GET_GROUP, body);
    expect(got.status).not.toBe("0");
    expect(got.status).not.toBe("13");
    expect(got.reason).toBeTruthy();
  });

  it("a message over the limit, read in part then passed on: RESOURCE_EXHAUSTED", async () => {
    const request = toBinary(GetGroupRequestSchema, create(GetGroupRequestSchema, { uid: "x".repeat(LIMIT * 2) }));
    const got = await rawGrpc(server.baseUrl, GET_GROUP, grpcFrame(request));
    expect(got.status).toBe("8");
    expect(got.reason).toBe("PAYLOAD_TOO_LARGE");
  });

  it("a malformed grpc-timeout is left to Connect: a structured error", async () => {
    const got = await rawGrpc(server.baseUrl, PING, grpcFrame(new Uint8Array(0)), { "grpc-timeout": "soon" });
    expect(got.status).not.toBe("0");
    expect(got.status).not.toBe("13");
    expect(got.reason).toBeTruthy();
  });

  it("an answer that does not encode is INTERNAL with ErrorInfo, as Connect answers it, not a reset stream", async () => {
    const got = await rawGrpc(broken.baseUrl, PING, grpcFrame(new Uint8Array(0)));
    expect(got.status).toBe("13");
    expect(got.reason).toBeTruthy();
    expect(got.body.byteLength).toBe(0);
  });

  it("a client's grpc-timeout within the server's deadline is kept: the call still answers", async () => {
    const got = await rawGrpc(server.baseUrl, PING, grpcFrame(new Uint8Array(0)), { "grpc-timeout": "5S" });
    expect(got.status).toBe("0");
  });
});
