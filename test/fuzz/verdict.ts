// What the fuzzer accepts as an answer: a success, or an error that is a structured AIP-193 status (a
// google.rpc.Status with an ErrorInfo naming a reason and a domain) in the protocol's own form, and never a
// server fault (HTTP 5xx, or the gRPC codes that map to one) except UNIMPLEMENTED for methods not built yet.
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { fromBinary, type JsonValue } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import type { RawResponse } from "./wire.js";

/** gRPC codes whose HTTP mapping is a 5xx: a server fault, whatever the transport. UNIMPLEMENTED is apart. */
const serverFaults = new Set<Code>([Code.Unknown, Code.Internal, Code.DataLoss, Code.Unavailable, Code.DeadlineExceeded]);

const connectCodes: Record<string, Code> = Object.fromEntries(
  Object.entries(Code)
    .filter(([, v]) => typeof v === "number")
    .map(([k, v]) => [k.replace(/[A-Z]/g, (c, i: number) => (i ? "_" : "") + c.toLowerCase()), v as Code]),
);

export interface Judged {
  /** The code of the answer: 0 for a success. */
  code: Code | 0;
  /** Why the answer is not acceptable, or undefined. */
  problem?: string;
}

function hasErrorInfo(details: Array<{ type: string; value: Uint8Array }>): string | undefined {
  const info = details.find((d) => d.type === "google.rpc.ErrorInfo" || d.type.endsWith("/google.rpc.ErrorInfo"));
  if (!info) return `no ErrorInfo among details [${details.map((d) => d.type).join(", ")}]`;
  const decoded = fromBinary(ErrorInfoSchema, info.value);
  if (!decoded.reason || !decoded.domain) return `ErrorInfo without reason or domain: ${JSON.stringify({ reason: decoded.reason, domain: decoded.domain })}`;
  return undefined;
}

function judgeCode(code: Code, structure: string | undefined): Judged {
  if (structure) return { code, problem: `unstructured ${Code[code]} error: ${structure}` };
  if (serverFaults.has(code)) return { code, problem: `server fault ${Code[code]}` };
  return { code };
}

/** A gRPC status (trailers, trailers-only headers, or a gRPC-web trailer frame). */
function judgeGrpcStatus(fields: Record<string, string>): Judged | undefined {
  const raw = fields["grpc-status"];
  if (raw === undefined) return undefined;
  if (raw === "0") return { code: 0 };
  const code = Number(raw) as Code;
  const bin = fields["grpc-status-details-bin"];
  if (!bin) return judgeCode(code, "no grpc-status-details-bin");
  let structure: string | undefined;
  try {
    const status = fromBinary(StatusSchema, Buffer.from(bin, "base64"));
    if (status.code !== code) structure = `grpc-status ${code} but Status.code ${status.code}`;
    else structure = hasErrorInfo(status.details.map((d) => ({ type: d.typeUrl, value: d.value })));
  } catch (err) {
    structure = `undecodable grpc-status-details-bin: ${(err as Error).message}`;
  }
  return judgeCode(code, structure);
}

function parseTrailerFrame(body: Buffer): Record<string, string> | undefined {
  let offset = 0;
  while (body.byteLength - offset >= 5) {
    const flag = body[offset]!;
    const length = body.readUInt32BE(offset + 1);
    const data = body.subarray(offset + 5, offset + 5 + length);
    offset += 5 + length;
    if (flag & 0x80) {
      const out: Record<string, string> = {};
      for (const line of data.toString("utf8").split("\r\n")) {
        const i = line.indexOf(":");
        if (i > 0) out[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      return out;
    }
  }
  return undefined;
}

/** A JSON error body: a Connect error ({code: "name", details: [{type, value}]}) or REST's google.rpc.Status. */
function judgeJsonError(status: number, body: Buffer, encoding: string | undefined): Judged {
  let json: JsonValue;
  try {
    const plain = encoding === "gzip" ? gunzipSync(body) : encoding === "br" ? brotliDecompressSync(body) : body;
    json = JSON.parse(plain.toString("utf8")) as JsonValue;
  } catch {
    return { code: Code.Unknown, problem: `HTTP ${status} with a body that is not JSON: ${JSON.stringify(body.subarray(0, 200).toString("utf8"))}` };
  }
  const e = json as { code?: unknown; details?: Array<Record<string, unknown>> };
  if (typeof e.code === "string") {
    const code = connectCodes[e.code];
    if (code === undefined) return { code: Code.Unknown, problem: `unknown Connect code ${e.code}` };
    let structure: string | undefined;
    try {
      structure = hasErrorInfo((e.details ?? []).map((d) => ({ type: String(d.type), value: Buffer.from(String(d.value), "base64") })));
    } catch (err) {
      structure = `undecodable detail: ${(err as Error).message}`;
    }
    return judgeCode(code, structure);
  }
  if (typeof e.code === "number") {
    const info = (e.details ?? []).find((d) => d["@type"] === "type.googleapis.com/google.rpc.ErrorInfo") as { reason?: string; domain?: string } | undefined;
    return judgeCode(e.code as Code, !info ? "no ErrorInfo in details" : !info.reason || !info.domain ? "ErrorInfo without reason or domain" : undefined);
  }
  return { code: Code.Unknown, problem: `HTTP ${status} with a JSON body that is no status: ${body.subarray(0, 200).toString("utf8")}` };
}

/** Judges one answer. A 5xx is a fault whatever its body, except a structured 501 UNIMPLEMENTED. */
export function judge(res: RawResponse, verb: string): Judged {
  if (res.kind === "timeout") return { code: Code.DeadlineExceeded, problem: "no answer before the deadline (hang)" };
  if (res.kind === "no-answer") return { code: Code.Unknown, problem: `no answer: ${res.reason}` };
  const contentType = res.headers["content-type"] ?? "";
  let judged: Judged;
  if (/^application\/grpc-web/i.test(contentType)) {
    judged = judgeGrpcStatus(res.headers) ?? judgeGrpcStatus(parseTrailerFrame(res.body) ?? {}) ?? { code: Code.Unknown, problem: "gRPC-web answer without a status" };
  } else if (/^application\/grpc/i.test(contentType)) {
    judged = judgeGrpcStatus(res.headers) ?? judgeGrpcStatus(res.trailers) ?? { code: Code.Unknown, problem: "gRPC answer without grpc-status" };
  } else if (res.status >= 200 && res.status < 300) {
    return { code: 0 };
  } else if (verb === "HEAD") {
    // A response to HEAD has no body: only its status can be judged.
    judged = { code: res.status === 501 ? Code.Unimplemented : Code.InvalidArgument };
  } else {
    judged = judgeJsonError(res.status, res.body, res.headers["content-encoding"]);
  }
  if (res.status >= 500 && !(res.status === 501 && judged.code === Code.Unimplemented && !judged.problem)) {
    return { code: judged.code, problem: `HTTP ${res.status}${judged.problem ? `; ${judged.problem}` : ""}` };
  }
  return judged;
}
