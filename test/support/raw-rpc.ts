// Raw gRPC and gRPC-web calls, for tests that send what no Connect client would (hand-made frames, odd
// headers) and read the status as it travels: gRPC trailers, and the trailer frame of a gRPC-web body.
import http2 from "node:http2";
import { fromBinary } from "@bufbuild/protobuf";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema, type Status } from "../../gen/google/rpc/status_pb.js";

export interface GrpcAnswer {
  /** The response headers and trailers, merged. */
  fields: http2.IncomingHttpHeaders;
  /** grpc-status. */
  status: string | undefined;
  /** The google.rpc.Status of grpc-status-details-bin, when sent. */
  details: Status | undefined;
  /** Its ErrorInfo's reason, when it has one. */
  reason: string | undefined;
  /** The response body (its frames). */
  body: Buffer;
}

/** A gRPC length-prefixed message: [flags][length][data], flagged compressed when said. */
export function grpcFrame(data: Uint8Array, compressed = false): Buffer {
  const head = Buffer.alloc(5);
  head[0] = compressed ? 1 : 0;
  head.writeUInt32BE(data.byteLength, 1);
  return Buffer.concat([head, data]);
}

/**
 * A gRPC call over HTTP/2 (prior knowledge) with a raw body (frames included); with `open`, the request is
 * never ended (no END_STREAM), as from a client that stalls.
 */
export async function rawGrpc(baseUrl: string, path: string, body: Uint8Array, headers: http2.OutgoingHttpHeaders = {}, opts: { open?: boolean } = {}): Promise<GrpcAnswer> {
  const session = http2.connect(baseUrl);
  try {
    const chunks: Buffer[] = [];
    const fields = await new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
      const stream = session.request({ ":method": "POST", ":path": path, "content-type": "application/grpc+proto", te: "trailers", ...headers });
      let got: http2.IncomingHttpHeaders = {};
      stream.on("response", (h) => (got = h));
      stream.on("trailers", (t) => (got = { ...got, ...t }));
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => resolve(got));
      stream.on("error", reject);
      if (opts.open) stream.write(body);
      else stream.end(body);
    });
    const bin = fields["grpc-status-details-bin"];
    const details = bin ? fromBinary(StatusSchema, Buffer.from(String(bin), "base64")) : undefined;
    const info = details?.details.find((d) => d.typeUrl.endsWith(ErrorInfoSchema.typeName));
    return {
      fields,
      status: fields["grpc-status"] as string | undefined,
      details,
      reason: info ? fromBinary(ErrorInfoSchema, info.value).reason : undefined,
      body: Buffer.concat(chunks),
    };
  } finally {
    session.close();
  }
}

/** The fields of the trailer frame (flag 0x80: "key: value\r\n" lines) of a gRPC-web response body. */
export function grpcWebTrailer(bytes: Uint8Array): Record<string, string> {
  let offset = 0;
  let trailer = "";
  while (offset + 5 <= bytes.length) {
    const length = new DataView(bytes.buffer, bytes.byteOffset + offset + 1, 4).getUint32(0);
    if (bytes[offset]! & 0x80) trailer = Buffer.from(bytes.subarray(offset + 5, offset + 5 + length)).toString();
    offset += 5 + length;
  }
  return Object.fromEntries(trailer.split("\r\n").filter(Boolean).map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
}
