// Limits every request meets, whatever its protocol: the largest request body, counted after decompression
// too (a few KiB of gzip must not inflate into gigabytes in the server), and the HTTP status of requests the
// protocol layer cannot read (400 with a structured error, never 500).
import type http2 from "node:http2";
import { brotliCompressSync, constants as zlibConstants, gzipSync } from "node:zlib";
import { fromBinary } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { grpcFrame, grpcWebTrailer, rawGrpc } from "../support/raw-rpc.js";
import { startTestServer, type TestServer } from "../support/server.js";

/** The limit the server runs with here: small, so a bomb proving it stays small too. */
const LIMIT = 1024 * 1024;
/** What the bombs inflate to: 64 times the limit, from about 64 KiB of gzip. */
const INFLATED = 64 * LIMIT;

const PING = "/chainguard.platform.ping.v2.PingService/Ping";

let server: TestServer;
let bomb: Buffer;

beforeAll(async () => {
  server = await startTestServer({ limits: { maxRequestBytes: LIMIT } });
  bomb = gzipSync(Buffer.alloc(INFLATED));
  expect(bomb.byteLength).toBeLessThan(LIMIT);
});
afterAll(async () => {
  await server?.close();
});

/** A gRPC call over HTTP/2 with a raw body: the status and the ErrorInfo reason of its trailers. */
async function grpcCall(path: string, body: Buffer, headers: http2.OutgoingHttpHeaders = {}): Promise<{ status: string | undefined; reason: string | undefined }> {
  const { status, reason } = await rawGrpc(server.baseUrl, path, body, headers);
  return { status, reason };
}

/** A gRPC-web call: the fields of its trailer frame, then its response headers. */
async function grpcWebCall(path: string, body: Buffer, headers: Record<string, string> = {}): Promise<Record<string, string>> {
  const res = await fetch(`${server.baseUrl}${path}`, {
    method: "POST",
    headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1", ...headers },
    body,
  });
  const fields = grpcWebTrailer(new Uint8Array(await res.arrayBuffer()));
  for (const [name, value] of res.headers) fields[name] ??= value;
  return fields;
}

/** A Connect unary call with a raw body: status, and the error's code and ErrorInfo. */
async function connectCall(path: string, body: Buffer | string, headers: Record<string, string>) {
  const res = await fetch(`${server.baseUrl}${path}`, { method: "POST", headers, body });
  const json = (await res.json()) as { code?: string; message?: string; details?: Array<{ type: string; debug?: { reason?: string; metadata?: Record<string, string> } }> };
  return { status: res.status, headers: res.headers, body: json, info: json.details?.find((d) => d.type === ErrorInfoSchema.typeName)?.debug };
}

describe("a request body is limited, after decompression too", () => {
  it("Connect JSON: a gzip bomb is RESOURCE_EXHAUSTED (PAYLOAD_TOO_LARGE), not inflated", async () => {
    const got = await connectCall(PING, bomb, { "content-type": "application/json", "content-encoding": "gzip" });
    expect(got.status).toBe(429);
    expect(got.body.code).toBe("resource_exhausted");
    expect(got.info).toMatchObject({ reason: "PAYLOAD_TOO_LARGE", metadata: { limitBytes: String(LIMIT) } });
  });

  it("Connect binary: a gzip bomb is RESOURCE_EXHAUSTED", async () => {
    const got = await connectCall(PING, bomb, { "content-type": "application/proto", "content-encoding": "gzip" });
    expect(got.body.code).toBe("resource_exhausted");
    expect(got.info?.reason).toBe("PAYLOAD_TOO_LARGE");
  });

  it("Connect: a brotli bomb is RESOURCE_EXHAUSTED", async () => {
    const br = brotliCompressSync(Buffer.alloc(INFLATED), { params: { [zlibConstants.BROTLI_PARAM_QUALITY]: 1 } });
    const got = await connectCall(PING, br, { "content-type": "application/proto", "content-encoding": "br" });
    expect(got.body.code).toBe("resource_exhausted");
  });

  it("Connect: a plain body over the limit is RESOURCE_EXHAUSTED", async () => {
    const got = await connectCall(PING, Buffer.alloc(LIMIT + 1, 0x20), { "content-type": "application/json" });
    expect(got.body.code).toBe("resource_exhausted");
    expect(got.info?.reason).toBe("PAYLOAD_TOO_LARGE");
  });

  it("gRPC: a compressed message inflating past the limit is RESOURCE_EXHAUSTED", async () => {
    const got = await grpcCall(PING, grpcFrame(bomb, true), { "grpc-encoding": "gzip" });
    expect(got).toEqual({ status: "8", reason: "PAYLOAD_TOO_LARGE" });
  });

  it("gRPC: a message over the limit is RESOURCE_EXHAUSTED", async () => {
    const got = await grpcCall(PING, grpcFrame(Buffer.alloc(LIMIT + 1), false));
    expect(got).toEqual({ status: "8", reason: "PAYLOAD_TOO_LARGE" });
  });

  it("gRPC-web: a compressed message inflating past the limit is RESOURCE_EXHAUSTED", async () => {
    const fields = await grpcWebCall(PING, grpcFrame(bomb, true), { "grpc-encoding": "gzip" });
    expect(fields["grpc-status"]).toBe("8");
    const status = fromBinary(StatusSchema, Buffer.from(fields["grpc-status-details-bin"]!, "base64"));
    expect(fromBinary(ErrorInfoSchema, status.details[0]!.value).reason).toBe("PAYLOAD_TOO_LARGE");
  });

  it("REST: a body over the limit is 413 PAYLOAD_TOO_LARGE", async () => {
    const res = await fetch(`${server.baseUrl}/registry/v2/repos/${"0".repeat(40)}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: Buffer.alloc(LIMIT + 1, 0x20),
    });
    expect(res.status).toBe(413);
    const body = (await res.json()) as { details: Array<{ "@type": string; reason?: string; metadata?: Record<string, string> }> };
    expect(body.details[0]).toMatchObject({ reason: "PAYLOAD_TOO_LARGE", metadata: { limitBytes: String(LIMIT) } });
  });

  it("a body within the limit is served", async () => {
    const got = await connectCall(PING, gzipSync(JSON.stringify({})), { "content-type": "application/json", "content-encoding": "gzip" });
    expect(got.status).toBe(200);
  });
});

describe("a request the protocol layer cannot read is 400 with a structured error", () => {
  it("Connect binary: a body that is not protobuf", async () => {
    const got = await connectCall(PING, "{", { "content-type": "application/proto" });
    expect(got.status).toBe(400);
    expect(got.body.code).toBe("invalid_argument");
    expect(got.info?.reason).toBe("INVALID_ARGUMENT");
  });

  /** Bodies that are not what their content-encoding says: not compressed, or cut short. */
  const undecompressable: Array<[string, string, Buffer]> = [
    ["gzip", "not compressed", Buffer.from("{")],
    ["gzip", "truncated", gzipSync("{}").subarray(0, 8)],
    ["br", "not compressed", Buffer.from("{")],
    ["br", "truncated", brotliCompressSync(Buffer.from("{}".repeat(1000))).subarray(0, 5)],
  ];

  it.each(undecompressable)("Connect: a %s body, %s", async (encoding, _what, body) => {
    const got = await connectCall(PING, body, { "content-type": "application/json", "content-encoding": encoding });
    expect(got.status).toBe(400);
    expect(got.body.code).toBe("invalid_argument");
    expect(got.info?.reason).toBe("INVALID_ARGUMENT");
  });

  it.each(undecompressable)("gRPC: a %s message, %s, is INVALID_ARGUMENT", async (encoding, _what, body) => {
    const got = await grpcCall(PING, grpcFrame(body, true), { "grpc-encoding": encoding });
    expect(got).toEqual({ status: "3", reason: "INVALID_ARGUMENT" });
  });
});
