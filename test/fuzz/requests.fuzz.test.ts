// Fuzzing every RPC on every protocol and every REST route, from the descriptors: at least FUZZ_RUNS
// (default 10,000) generated requests per run, seeded (FUZZ_SEED, default fixed, printed), most of them
// authenticated as an owner so that handlers and the database are reached, not only the authentication
// layer. Properties: no server fault (5xx, or a gRPC code that maps to one) but structured UNIMPLEMENTED,
// every error a structured AIP-193 status in its protocol's form, every request answered before its
// deadline, and the server still answering Ping on every protocol afterwards.
//
// To reproduce a failure: FUZZ_SEED=<printed seed> npx vitest run test/fuzz; the failing request is printed
// with the property's own seed and path. FUZZ_RUNS scales the run (FUZZ_RUNS=100000 for a long one). While
// hunting: FUZZ_COLLECT=1 prints every failure and goes on; FUZZ_SLOW=<ms> prints requests slower than that.
import { gzipSync } from "node:zlib";
import type { DescMethod } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PingService } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";
import { apiMethods } from "../../src/kernel/descriptors.js";
import { managedRoleUid } from "../../src/iam/managed-roles.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { call, protocols as contractProtocols } from "../contract/harness.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { binaryOf, grpcFrames, jsonBytes, messageValue, rawProtobuf, restBindingsOf, restPath, restQuery, type Pools, type RestBinding } from "./generators.js";
import { judge } from "./verdict.js";
import { createWireClient, type RawRequest, type RawResponse, type WireClient } from "./wire.js";

const seed = Number(process.env.FUZZ_SEED ?? 20_261_124);
const runs = Number(process.env.FUZZ_RUNS ?? 10_000);
/** Every request must be answered within this (the client aborts it then). */
const deadlineMs = 5_000;
/** Targets fuzzed at once. */
const concurrency = 8;

type Protocol = "grpc" | "grpc-web" | "connect-json" | "connect-binary" | "rest";
const protocols: readonly Protocol[] = ["grpc", "grpc-web", "connect-json", "connect-binary", "rest"];

interface FuzzRequest extends RawRequest {
  target: string;
  note: string;
}

function describeRequest(r: FuzzRequest): string {
  const headers = Object.fromEntries(Object.entries(r.headers).map(([k, v]) => [k, v.length > 120 ? `${v.slice(0, 60)}…(${v.length} chars)` : v]));
  const body = r.body ? Buffer.from(r.body) : undefined;
  const bodyText = body ? `${body.byteLength} bytes: hex ${body.subarray(0, 160).toString("hex")}${body.byteLength > 160 ? "…" : ""} text ${JSON.stringify(body.subarray(0, 300).toString("utf8"))}` : "none";
  return `${r.target} (${r.note}) over HTTP/${r.http}: ${r.method} ${r.path.length > 300 ? `${r.path.slice(0, 300)}…(${r.path.length} chars)` : r.path}\n  headers ${JSON.stringify(headers)}\n  body ${bodyText}`;
}

function describeResponse(res: RawResponse): string {
  if (res.kind !== "answer") return res.kind === "timeout" ? `no answer within ${deadlineMs} ms` : `no answer: ${res.reason}`;
  return `${res.prev ? `(previous on socket: ${res.prev}) ` : ""}HTTP ${res.status} ${JSON.stringify(res.headers)} trailers ${JSON.stringify(res.trailers)} body ${JSON.stringify(res.body.subarray(0, 400).toString("utf8"))}`;
}

/** Headers around every request: a token (mostly the owner's), timeouts, and now and then a huge header. */
function commonHeaders(pools: Pools): fc.Arbitrary<Record<string, string>> {
  return fc
    .record({
      authorization: pools.tokens,
      // Within the listener's limit of 64 KiB of headers, with a 30 KB token and an 8 KB path.
      big: fc.option(fc.integer({ min: 1_000, max: 15_000 }), { freq: 25 }),
      // Within the HTTP/2 server's limit of 128 header fields (beyond it, nghttp2 resets the stream).
      many: fc.option(fc.integer({ min: 10, max: 50 }), { freq: 40 }),
    })
    .map(({ authorization, big, many }) => {
      const h: Record<string, string> = {};
      if (authorization !== undefined) h.authorization = authorization;
      if (big !== null) h["x-fuzz-big"] = "b".repeat(big);
      if (many !== null) for (let i = 0; i < many; i++) h[`x-fuzz-${i}`] = String(i);
      return h;
    });
}

/** content-encoding values (Connect and REST): none mostly, a real gzip, garbage under a real name, unknown. */
const bodyEncoding = fc.constantFrom<"none" | "gzip" | "bad-gzip" | "br" | "unknown" | "identity">("none", "none", "none", "none", "none", "none", "none", "none", "gzip", "bad-gzip", "br", "unknown", "identity");

function encodeBody(bytes: Uint8Array, encoding: string, header: string, headers: Record<string, string>): Uint8Array {
  switch (encoding) {
    case "gzip":
      headers[header] = "gzip";
      return gzipSync(bytes);
    case "bad-gzip":
      headers[header] = "gzip";
      return bytes;
    case "br":
      headers[header] = "br";
      return bytes; // not brotli
    case "unknown":
      headers[header] = "zstd";
      return bytes;
    case "identity":
      headers[header] = "identity";
      return bytes;
    default:
      return bytes;
  }
}

/** Message bytes for the binary protocols: a generated message that encodes, or raw protobuf that does not. */
function binaryBody(method: DescMethod, pools: Pools): fc.Arbitrary<Uint8Array> {
  const encoded = messageValue(method.input, { pools, depth: 0 }).map((v) => binaryOf(method.input, v) ?? new Uint8Array([0x7b]));
  return fc.oneof({ weight: 4, arbitrary: encoded }, { weight: 1, arbitrary: rawProtobuf(method.input) });
}

const garbageContentType = fc.constantFrom("text/plain", "application/x-www-form-urlencoded", "", "application/xml", "application/json; charset=latin1", "application/grpc-web-text", "application/connect+json", "application/grpc+json", "multipart/form-data; boundary=x", "*/*", "application/proto; charset=utf-8", "\u00ff");

function rpcRequest(protocol: Exclude<Protocol, "rest">, method: DescMethod, pools: Pools): fc.Arbitrary<FuzzRequest> {
  const path = `/${method.parent.typeName}/${method.name}`;
  const target = `${protocol} ${method.parent.typeName}.${method.name}`;
  const verb = fc.constantFrom("POST", "POST", "POST", "POST", "POST", "POST", "POST", "POST", "GET", "PUT");
  switch (protocol) {
    case "grpc":
    case "grpc-web": {
      const web = protocol === "grpc-web";
      const contentType = fc.oneof({ weight: 9, arbitrary: fc.constantFrom(...(web ? ["application/grpc-web+proto", "application/grpc-web"] : ["application/grpc", "application/grpc+proto"])) }, { weight: 1, arbitrary: garbageContentType });
      const encoding = fc.constantFrom<string | undefined>(undefined, undefined, undefined, undefined, undefined, undefined, "gzip", "identity", "br", "snappy");
      const timeout = fc.constantFrom<string | undefined>(undefined, undefined, undefined, undefined, undefined, undefined, "1n", "99999999S", "-1S", "abc", "5S", "");
      return fc.record({ headers: commonHeaders(pools), contentType, encoding, timeout, frame: grpcFrames(binaryBody(method, pools)), verb, h2: fc.boolean() }).map(({ headers, contentType, encoding, timeout, frame, verb, h2 }) => {
        const h: Record<string, string> = { ...headers, "content-type": contentType };
        if (web) h["x-grpc-web"] = "1";
        else h.te = "trailers";
        if (encoding !== undefined) h["grpc-encoding"] = encoding;
        if (timeout !== undefined) h["grpc-timeout"] = timeout;
        return { http: web && !h2 ? "1.1" : "2", method: verb, path, headers: h, body: frame.bytes, target, note: frame.note };
      });
    }
    case "connect-json":
    case "connect-binary": {
      const json = protocol === "connect-json";
      const body = json ? jsonBytes(messageValue(method.input, { pools, depth: 0 })) : binaryBody(method, pools).map((bytes) => ({ bytes, note: "binary" }));
      const contentType = fc.oneof({ weight: 12, arbitrary: fc.constant(json ? "application/json" : "application/proto") }, { weight: 1, arbitrary: fc.constant(json ? "application/json; charset=utf-8" : "application/proto") }, { weight: 1, arbitrary: garbageContentType });
      const version = fc.constantFrom<string | undefined>("1", "1", "1", "1", "1", undefined, "2", "");
      const timeout = fc.constantFrom<string | undefined>(undefined, undefined, undefined, undefined, undefined, undefined, "0", "1", "-1", "abc", "99999999999", "10000000000");
      return fc.record({ headers: commonHeaders(pools), contentType, version, timeout, body, encoding: bodyEncoding, verb, h2: json ? fc.boolean() : fc.constant(true) }).map(({ headers, contentType, version, timeout, body, encoding, verb, h2 }) => {
        const h: Record<string, string> = { ...headers, "content-type": contentType };
        if (version !== undefined) h["connect-protocol-version"] = version;
        if (timeout !== undefined) h["connect-timeout-ms"] = timeout;
        const bytes = encodeBody(body.bytes, encoding, "content-encoding", h);
        return { http: h2 ? "2" : "1.1", method: verb, path, headers: h, body: bytes, target, note: `${body.note}${encoding === "none" ? "" : `, ${encoding}`}` };
      });
    }
  }
}

/** A REST request on one binding: its path, query and body, sometimes under another verb or content type. */
function restRequest(method: DescMethod, binding: RestBinding, pools: Pools): fc.Arbitrary<FuzzRequest> {
  const target = `rest ${binding.verb} ${binding.template} (${method.name})`;
  const value = messageValue(method.input, { pools, depth: 0 });
  const bodyField = binding.body && binding.body !== "*" ? method.input.fields.find((f) => f.name === binding.body) : undefined;
  const bodyValue = bodyField?.fieldKind === "message" ? messageValue(bodyField.message, { pools, depth: 1 }) : value;
  const body = binding.body
    ? fc.oneof({ weight: 30, arbitrary: jsonBytes(bodyValue) }, { weight: 1, arbitrary: fc.constant({ bytes: Buffer.alloc(4_500_000, 0x20), note: "body beyond the gateway's limit" }) })
    : fc.option(jsonBytes(bodyValue), { freq: 6 }).map((b) => b ?? { bytes: undefined, note: "no body" });
  const verb = fc.oneof({ weight: 12, arbitrary: fc.constant(binding.verb) }, { weight: 1, arbitrary: fc.constantFrom("GET", "POST", "PATCH", "DELETE", "PUT", "OPTIONS", "HEAD", "FUZZ") });
  const contentType = fc.oneof({ weight: 10, arbitrary: fc.constant("application/json") }, { weight: 1, arbitrary: garbageContentType });
  return fc
    .record({ headers: commonHeaders(pools), path: restPath(binding.template, pools), query: restQuery(value), body, verb, contentType, encoding: bodyEncoding, h2: fc.boolean() })
    .map(({ headers, path, query, body, verb, contentType, encoding, h2 }) => {
      const h: Record<string, string> = { ...headers };
      let bytes = body.bytes;
      if (bytes !== undefined) {
        h["content-type"] = contentType;
        bytes = encodeBody(bytes, encoding, "content-encoding", h);
      }
      // Bodies beyond 64 KiB over HTTP/1.1 only: over HTTP/2 they reset every stream of the one session all
      // requests share (NGHTTP2_ENHANCE_YOUR_CALM): not investigated yet.
      const http2 = h2 && (bytes?.byteLength ?? 0) < 65_536;
      return { http: http2 ? "2" : "1.1", method: h1Verb(verb, http2), path: query ? `${path}?${query}` : path, headers: h, ...(bytes !== undefined ? { body: bytes } : {}), target, note: body.note };
    });
}

/** An unknown verb over HTTP/2; over HTTP/1.1, whose parser refuses unknown methods, one it knows but no route has. */
const h1Verb = (verb: string, h2: boolean) => (h2 || verb !== "FUZZ" ? verb : "PROPFIND");

/** Requests to no route: unknown paths under the API's prefixes, traversal, encodings, odd verbs. */
function strayRequest(pools: Pools): fc.Arbitrary<FuzzRequest> {
  const path = fc.oneof(
    fc.constantFrom("/", "//", "/iam/v2", "/iam/v2/", "/iam/v2/groups/", "/iam/v2/groups:nosuch", "/registry/v2/repos/a/b/c/d/readme/x", "/%", "/%zz", "/%ff%fe", "/..", "/iam/v2/../v2/groups", "/iam/v2/groups/%2F%2F", "/chainguard.platform.iam.v2.GroupsService/", "/chainguard.platform.iam.v2.GroupsService/NoSuch", "/grpc.health.v1.Health/Check", "/.well-known/jwks.json", "/healthz", "/iam/v2/groups:", "/iam/v2/groups/*"),
    fc.tuple(fc.constantFrom("/iam/v2/", "/registry/v2/", "/sts/", "/"), fc.string({ maxLength: 40 })).map(([p, s]) => p + encodeURI(s.replace(/[\uD800-\uDFFF]/g, "x"))),
    fc.integer({ min: 2_000, max: 8_000 }).map((n) => `/iam/v2/groups/${"a".repeat(n)}`),
  );
  return fc
    .record({ headers: commonHeaders(pools), path, verb: fc.constantFrom("GET", "POST", "DELETE", "PATCH", "OPTIONS", "HEAD", "TRACE", "FUZZ"), h2: fc.boolean() })
    .map(({ headers, path, verb, h2 }) => ({ http: h2 ? "2" : "1.1", method: h1Verb(verb, h2), path, headers, target: "rest (no route)", note: "stray" }));
}

describe("fuzzing every method on every protocol", () => {
  let server: TestServer;
  let world: World;
  let client: WireClient;
  let pools: Pools;
  let sent = 0;

  beforeAll(async () => {
    server = await startTestServer();
    world = await seedWorld(server);
    client = createWireClient(server.baseUrl);
    const expired = await server.token(world.identity.viewer, { ttlSeconds: -120 });
    pools = {
      // Groups and identities of the world (never the owner itself, whose deletion would lock the run out),
      // roles, and uids that exist nowhere.
      uids: [world.org, world.team, world.other, world.identity.viewer, world.identity.stranger, world.identity.confined, managedRoleUid("viewer"), managedRoleUid("owner"), newChildUid(world.team), newRootUid(), "0".repeat(40)],
      tokens: fc.oneof(
        { weight: 60, arbitrary: fc.constant(`Bearer ${world.token.owner}`) },
        { weight: 6, arbitrary: fc.constantFrom(`Bearer ${world.token.viewer}`, `Bearer ${world.token.teamViewer}`, `Bearer ${world.token.stranger}`) },
        { weight: 6, arbitrary: fc.constant(undefined) },
        { weight: 6, arbitrary: fc.constantFrom("Bearer", "Bearer ", "Bearer garbage", "Basic YTpi", `Bearer ${expired}`, `bearer ${world.token.owner}`, `Bearer ${world.token.owner}x`, `Bearer ${world.token.owner.split(".").slice(0, 2).join(".")}.`, `Bearer ${"a".repeat(30_000)}`, "Bearer \u00ff\u00fe") },
      ),
    };
    console.log(`fuzz: FUZZ_SEED=${seed} FUZZ_RUNS=${runs}`);
  });

  afterAll(async () => {
    client?.close();
    await server?.close();
  });

  /** Sends one request and fails on anything but a success or a structured, non-fault error. */
  async function check(req: FuzzRequest): Promise<void> {
    sent++;
    const started = performance.now();
    const res = await client.send(req, deadlineMs);
    if (process.env.FUZZ_SLOW && performance.now() - started > Number(process.env.FUZZ_SLOW)) console.log(`fuzz: slow ${Math.round(performance.now() - started)} ms ${describeRequest(req).slice(0, 300)}`);
    const judged = judge(res, req.method);
    if (!judged.problem) return;
    // A deadline the client itself asked for (grpc-timeout, connect-timeout-ms) may expire: not a fault.
    const clientDeadline = "grpc-timeout" in req.headers || "connect-timeout-ms" in req.headers;
    if (clientDeadline && judged.code === Code.DeadlineExceeded && res.kind === "answer") return;
    if (process.env.FUZZ_COLLECT) {
      console.log(`fuzz: ${judged.problem}\nrequest: ${describeRequest(req)}\nresponse: ${describeResponse(res)}`);
      return;
    }
    throw new Error(`${judged.problem}\nrequest: ${describeRequest(req)}\nresponse: ${describeResponse(res)}`);
  }

  const withToString = (arb: fc.Arbitrary<FuzzRequest>) =>
    arb.map((r) => Object.assign(r, { [fc.toStringMethod]: () => describeRequest(r) }));

  /** One property per target, so every target gets its share of the runs whatever the seed. */
  async function fuzzTargets(targets: ReadonlyArray<fc.Arbitrary<FuzzRequest>>, share: number): Promise<void> {
    const perTarget = Math.max(1, Math.ceil(share / targets.length));
    // A few targets at a time, each its own seeded property: the server sees concurrent requests, and the
    // run stays short.
    let next = 0;
    let failed = false;
    const worker = async () => {
      for (let i = next++; i < targets.length && !failed; i = next++) {
        await fc.assert(fc.asyncProperty(withToString(targets[i]!), check), { seed: seed + i, numRuns: perTarget }).catch((err: unknown) => {
          failed = true;
          throw err;
        });
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  }

  const methods = apiMethods.filter((m) => m.methodKind === "unary");

  it.each(protocols)("%s: no fault, no hang, every error structured", async (protocol) => {
    const share = runs / protocols.length;
    if (protocol === "rest") {
      const targets = methods.flatMap((m) => restBindingsOf(m).map((b) => restRequest(m, b, pools)));
      await fuzzTargets([...targets, strayRequest(pools)], share);
    } else {
      await fuzzTargets(methods.map((m) => rpcRequest(protocol, m, pools)), share);
    }
  }, 600_000);

  // What the fuzzer found, kept as fixed examples (each answered 5xx before its fix).
  const frame = (flag: number, data: Uint8Array) => Buffer.concat([Buffer.from([flag, 0, 0, 0, data.byteLength]), data]);
  const regressions: Array<{ name: string; request: () => FuzzRequest; code: Code }> = [
    {
      name: "gRPC: a message flagged compressed with no grpc-encoding is INVALID_ARGUMENT, not INTERNAL",
      request: () => ({ http: "2", method: "POST", path: "/chainguard.platform.ping.v2.PingService/Ping", headers: { "content-type": "application/grpc", te: "trailers" }, body: frame(1, Buffer.from([0x7b])), target: "grpc Ping", note: "regression" }),
      code: Code.InvalidArgument,
    },
    {
      name: "gRPC-web: the same, over HTTP/1.1",
      request: () => ({ http: "1.1", method: "POST", path: "/chainguard.platform.iam.v2.GroupsService/ListGroups", headers: { "content-type": "application/grpc-web+proto", authorization: `Bearer ${world.token.owner}` }, body: frame(1, Buffer.from([0x0a, 0x00])), target: "grpc-web ListGroups", note: "regression" }),
      code: Code.InvalidArgument,
    },
    {
      name: "gRPC: a gzip message cut short (decompression failed) is INVALID_ARGUMENT, not INTERNAL",
      request: () => ({ http: "2", method: "POST", path: "/chainguard.platform.ping.v2.PingService/Ping", headers: { "content-type": "application/grpc", te: "trailers", "grpc-encoding": "gzip" }, body: frame(1, gzipSync(Buffer.from("a".repeat(64))).subarray(0, 12)), target: "grpc Ping", note: "regression" }),
      code: Code.InvalidArgument,
    },
    {
      name: "gRPC: an error quoting a 20 KB field mask path is answered (its trailers were too large for clients)",
      request: () => {
        const mask = Buffer.concat([Buffer.from([0x0a, 0xa0, 0x9c, 0x01]), Buffer.alloc(20_000, "é")]); // FieldMask.paths
        const msg = Buffer.concat([Buffer.from([0x12, 0xa4, 0x9c, 0x01]), mask]); // UpdateIdentityMetadataRequest.update_mask
        const body = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), msg]);
        body.writeUInt32BE(msg.byteLength, 1);
        return { http: "2", method: "POST", path: "/chainguard.platform.iam.v2.IdentitiesService/UpdateIdentityMetadata", headers: { "content-type": "application/grpc", te: "trailers", authorization: `Bearer ${world.token.owner}` }, body, target: "grpc UpdateIdentityMetadata", note: "regression" };
      },
      code: Code.InvalidArgument,
    },
    {
      name: "OIDC routes: a method other than GET is refused with a structured 405 (it had no body)",
      request: () => ({ http: "1.1", method: "DELETE", path: "/.well-known/jwks.json", headers: {}, target: "jwks", note: "regression" }),
      code: Code.Unimplemented,
    },
    {
      name: "REST: a NUL character in a text field reaching the database is INVALID_ARGUMENT, not INTERNAL",
      request: () => ({ http: "1.1", method: "GET", path: "/iam/v2/identities:lookupIdentity?issuer=%00&subject=x", headers: { authorization: `Bearer ${world.token.owner}` }, target: "rest LookupIdentity", note: "regression" }),
      code: Code.InvalidArgument,
    },
  ];
  it.each(regressions)("regression: $name", async ({ request, code }) => {
    const req = request();
    const res = await client.send(req, deadlineMs);
    const judged = judge(res, req.method);
    expect(judged.problem, describeResponse(res)).toBeUndefined();
    expect(Code[judged.code], describeResponse(res)).toBe(Code[code]);
  });

  it("sent the runs asked for, and the server still answers Ping on every protocol", async () => {
    expect(sent).toBeGreaterThanOrEqual(runs);
    for (const protocol of contractProtocols) {
      const out = await call(protocol, server.baseUrl, PingService.method.ping, {});
      expect(out.error, `${protocol}: ${out.error?.message}`).toBeUndefined();
    }
  });
});
