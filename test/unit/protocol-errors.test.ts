import { fromBinary } from "@bufbuild/protobuf";
import { compressionGzip } from "@connectrpc/connect-node";
import { contentTypeMatcher, type UniversalHandler, type UniversalServerRequest, type UniversalServerResponse } from "@connectrpc/connect/protocol";
import { trailerParse, trailerSerialize } from "@connectrpc/connect/protocol-grpc-web";
import { describe, expect, it } from "vitest";
import { PingService } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { registry } from "../../src/kernel/descriptors.js";
import { setLogLevel } from "../../src/kernel/log.js";
import { encodeGrpcMessage, withPublicErrors } from "../../src/server/protocol-errors.js";

setLogLevel("silent");

describe("encodeGrpcMessage: percent-encoding as the gRPC over HTTP/2 protocol says", () => {
  it.each([
    ["", ""],
    ["Invalid argument: digest: is required", "Invalid argument: digest: is required"],
    ["a/b?c=d&e#f, (g) [h] {i} ~j 'k' \"l\" <m> @n $o +p", "a/b?c=d&e#f, (g) [h] {i} ~j 'k' \"l\" <m> @n $o +p"],
    ["100%", "100%25"],
    ["%41", "%2541"],
    ["é", "%C3%A9"],
    ["✓", "%E2%9C%93"],
    ["😀", "%F0%9F%98%80"],
    ["tab\there", "tab%09here"],
    ["line\r\nbreak", "line%0D%0Abreak"],
    ["\x7f", "%7F"],
  ])("%j -> %j", (message, encoded) => {
    expect(encodeGrpcMessage(message)).toBe(encoded);
    expect(decodeURIComponent(encoded)).toBe(message);
  });
});

/** A handler of Ping answering every request with `res`. */
function handlerAnswering(res: UniversalServerResponse): UniversalHandler {
  return Object.assign(async () => res, {
    service: PingService,
    method: PingService.method.ping,
    requestPath: "/chainguard.platform.ping.v2.PingService/Ping",
    protocolNames: ["grpc", "grpc-web"],
    allowedMethods: ["POST"],
    supportedContentType: contentTypeMatcher(/^application\/grpc/),
  });
}

function request(contentType: string): UniversalServerRequest {
  return {
    httpVersion: "2.0",
    url: "http://localhost/chainguard.platform.ping.v2.PingService/Ping",
    method: "POST",
    header: new Headers({ "content-type": contentType }),
    body: (async function* () {})(),
    signal: new AbortController().signal,
  };
}

async function bodyOf(res: UniversalServerResponse): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const c of res.body ?? []) chunks.push(c);
  return Buffer.concat(chunks);
}

const options = { serviceDomain: "platform.test", registry, compression: [compressionGzip], maxRequestBytes: 4 * 1024 * 1024 };
// What Connect writes for an error of its own: the message encoded as a URI component, no details.
// (Not RESOURCE_EXHAUSTED: that one, the read limit, is replaced by PAYLOAD_TOO_LARGE; see limits.contract.)
const message = "deadline: é/✓ is over 100% of the timeout";
const connectStatus = { "grpc-status": "4", "grpc-message": encodeURIComponent(message) };

function expectCompleted(fields: Headers): void {
  expect(fields.get("grpc-status")).toBe("4");
  expect(fields.get("grpc-message")).toBe("deadline: %C3%A9/%E2%9C%93 is over 100%25 of the timeout");
  const status = fromBinary(StatusSchema, Buffer.from(fields.get("grpc-status-details-bin")!, "base64"));
  expect(status.message).toBe(message);
  const info = fromBinary(ErrorInfoSchema, status.details[0]!.value);
  expect(info).toMatchObject({ reason: "DEADLINE_EXCEEDED", domain: "ping.platform.test" });
}

describe("withPublicErrors on gRPC", () => {
  it("completes and re-encodes the status of a trailers-only response, in the headers", async () => {
    const header = new Headers({ "content-type": "application/grpc+proto", ...connectStatus });
    const handler = withPublicErrors(handlerAnswering({ status: 200, header }), options);
    const res = await handler(request("application/grpc"));
    expect(res.header!.get("content-type")).toBe("application/grpc+proto");
    expectCompleted(res.header!);
  });

  it("re-encodes the message of an error that already carries details, in the trailers", async () => {
    const trailer = new Headers({ "grpc-status": "5", "grpc-message": encodeURIComponent("repo \"a/b\" not found"), "grpc-status-details-bin": "AA" });
    const handler = withPublicErrors(handlerAnswering({ status: 200, header: new Headers(), body: (async function* () {})(), trailer }), options);
    const res = await handler(request("application/grpc"));
    await bodyOf(res); // the trailers are patched once the body has ended
    expect(res.trailer!.get("grpc-message")).toBe('repo "a/b" not found');
    expect(res.trailer!.get("grpc-status-details-bin")).toBe("AA");
  });
});

describe("withPublicErrors on gRPC-web", () => {
  it("completes and re-encodes a compressed trailer frame, sent uncompressed", async () => {
    const data = await compressionGzip.compress(trailerSerialize(new Headers(connectStatus)));
    const frame = Buffer.alloc(5 + data.byteLength);
    frame[0] = 0x81; // trailer, compressed
    frame.writeUInt32BE(data.byteLength, 1);
    frame.set(data, 5);
    const header = new Headers({ "content-type": "application/grpc-web+proto", "grpc-encoding": "gzip" });
    const handler = withPublicErrors(handlerAnswering({ status: 200, header, body: (async function* () { yield frame; })() }), options);
    const out = await bodyOf(await handler(request("application/grpc-web+proto")));
    expect(out[0]).toBe(0x80);
    expect(out.readUInt32BE(1)).toBe(out.byteLength - 5);
    expectCompleted(trailerParse(out.subarray(5)));
  });
});
