// Every call has a deadline: the server's (requestTimeoutMs), or a shorter one the client sets, a longer one
// being capped to the server's. A handler that does not notice still answers DEADLINE_EXCEEDED, with
// ErrorInfo, on every protocol; and a mutation cut short by its deadline is rolled back, never committed
// behind that answer.
import type http2 from "node:http2";
import net from "node:net";
import { Code } from "@connectrpc/connect";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { PingService } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";
import { ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { outboxEvents } from "../../src/db/schema/outbox.js";
import { bindPartial } from "../../src/kernel/module.js";
import { assertError, call, protocols } from "./harness.js";
import { grpcFrame, rawGrpc } from "../support/raw-rpc.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

/** The server's deadline here. */
const DEADLINE_MS = 1500;
/** How long a stalled handler takes: well past the deadline. */
const STALL_MS = 20_000;

let server: TestServer;
let world: World;
const stalls = new Set<NodeJS.Timeout>();

/** Waits, ignoring the call's signal (as a handler stuck in a slow dependency would). */
function stall(ms: number): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(() => {
      stalls.delete(t);
      resolve();
    }, ms);
    stalls.add(t);
  });
}

beforeAll(async () => {
  server = await startTestServer({
    limits: { requestTimeoutMs: DEADLINE_MS },
    overrides: [
      // Ping stalls for as long as x-test-stall-ms says.
      bindPartial(PingService, {
        async ping(_req, ctx) {
          await stall(Number(ctx.requestHeader.get("x-test-stall-ms") ?? "0"));
          return { response: "pong" };
        },
      }),
      // CreateRepo answers after its deadline: the unit of work has recorded its event by then.
      bindPartial(ReposService, {
        async createRepo(req) {
          await stall(DEADLINE_MS + 500);
          return { uid: `${req.parent}/0123456789abcdef`, name: req.repo?.name ?? "" };
        },
      }),
    ],
  });
  world = await seedWorld(server, "deadline");
});
afterAll(async () => {
  for (const t of stalls) clearTimeout(t);
  await server?.close();
});

describe("the server's deadline", () => {
  it.each(protocols)("%s: a handler that stalls answers DEADLINE_EXCEEDED with ErrorInfo", async (protocol) => {
    const out = await call(protocol, server.baseUrl, PingService.method.ping, {}, { "x-test-stall-ms": String(STALL_MS) });
    expect(out.error, "an error, not a response").toBeDefined();
    assertError(protocol, out.error!, { code: Code.DeadlineExceeded, reason: "DEADLINE_EXCEEDED", message: /deadline of 1500 ms/ });
  });

  it("a mutation past its deadline is rolled back: its event is not in the outbox", async () => {
    const out = await call("connect-json", server.baseUrl, ReposService.method.createRepo, { parent: world.org, repo: { name: "late" } }, world.auth("owner"));
    expect(out.error?.code).toBe(Code.DeadlineExceeded);
    // The handler finishes after the answer; give its transaction the time to end, then look.
    await new Promise((r) => setTimeout(r, 1500));
    const events = await server.database.db.select().from(outboxEvents).where(eq(outboxEvents.subject, `${world.org}/0123456789abcdef`));
    expect(events).toEqual([]);
  });
});

describe("a request that never finishes arriving", () => {
  // The deadline holds while the request is still arriving too: a client that stalls mid-request is answered,
  // and its connection or stream freed, instead of holding them for as long as it likes.
  const within = DEADLINE_MS + 1500;

  it("gRPC: a stream the client never ends (no END_STREAM) answers DEADLINE_EXCEEDED with ErrorInfo", async () => {
    const t0 = Date.now();
    const half = grpcFrame(new Uint8Array(10)).subarray(0, 8); // a frame announcing 10 bytes, 3 of them sent
    const got = await rawGrpc(server.baseUrl, "/chainguard.platform.ping.v2.PingService/Ping", half, {}, { open: true });
    expect(Date.now() - t0).toBeLessThan(within);
    expect(got).toMatchObject({ status: "4", reason: "REQUEST_TIMEOUT" });
  });

  it("REST and Connect over HTTP/1.1: a body that stops short answers 408 with a google.rpc.Status", async () => {
    for (const path of ["/registry/v2/repos/x", "/chainguard.platform.ping.v2.PingService/Ping"]) {
      const t0 = Date.now();
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = net.connect(server.port, "127.0.0.1", () =>
          socket.write(`POST ${path} HTTP/1.1\r\nhost: a\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"na`),
        );
        let text = "";
        socket.on("data", (c) => (text += c));
        socket.on("close", () => resolve(text));
        socket.on("error", reject);
      });
      expect(Date.now() - t0).toBeLessThan(within);
      expect(answer).toMatch(/^HTTP\/1\.1 408 /);
      expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))).toMatchObject({ code: Code.DeadlineExceeded, details: [expect.objectContaining({ reason: "REQUEST_TIMEOUT" })] });
    }
    // The server is none the worse for it.
    expect(await grpcPing({})).toMatchObject({ status: "0" });
  });
});

/** A raw gRPC call to Ping with the given headers: its trailers' status, message and ErrorInfo reason. */
async function grpcPing(headers: http2.OutgoingHttpHeaders) {
  const { status, details, reason } = await rawGrpc(server.baseUrl, "/chainguard.platform.ping.v2.PingService/Ping", Buffer.alloc(5), headers); // an empty message
  return { status, message: details?.message, reason };
}

describe("the client's deadline", () => {
  it("gRPC: a shorter grpc-timeout is honoured, answered by the server with ErrorInfo", async () => {
    const got = await grpcPing({ "grpc-timeout": "200m", "x-test-stall-ms": String(STALL_MS) });
    expect(got).toMatchObject({ status: "4", reason: "DEADLINE_EXCEEDED", message: expect.stringMatching(/deadline the client set/) });
  });

  it("Connect: a shorter connect-timeout-ms is honoured", async () => {
    const res = await fetch(`${server.baseUrl}/chainguard.platform.ping.v2.PingService/Ping`, {
      method: "POST",
      headers: { "content-type": "application/json", "connect-timeout-ms": "200", "x-test-stall-ms": String(STALL_MS) },
      body: "{}",
    });
    const body = (await res.json()) as { code: string; message: string };
    expect(body).toMatchObject({ code: "deadline_exceeded", message: expect.stringMatching(/deadline the client set/) });
  });

  it.each([["99999999H"], ["2400000S"]])("gRPC: a longer grpc-timeout (%s) is capped to the server's, not refused", async (timeout) => {
    expect(await grpcPing({ "grpc-timeout": timeout, "x-test-stall-ms": "200" })).toMatchObject({ status: "0" });
    const late = await grpcPing({ "grpc-timeout": timeout, "x-test-stall-ms": String(STALL_MS) });
    expect(late).toMatchObject({ status: "4", message: expect.stringMatching(/deadline of 1500 ms/) });
  });

  it("REST: a shorter grpc-timeout is honoured (as grpc-gateway reads it), a longer one capped, a malformed one refused", async () => {
    const ping = (headers: Record<string, string>) => fetch(`${server.baseUrl}/ping/v2/ping`, { headers });
    const short = await ping({ "grpc-timeout": "200m", "x-test-stall-ms": String(STALL_MS) });
    expect(short.status).toBe(504);
    expect(await short.json()).toMatchObject({ code: 4, message: expect.stringMatching(/deadline the client set/), details: [expect.objectContaining({ reason: "DEADLINE_EXCEEDED" })] });
    const long = await ping({ "grpc-timeout": "99999999H", "x-test-stall-ms": "200" });
    expect(long.status).toBe(200);
    const capped = await ping({ "grpc-timeout": "99999999H", "x-test-stall-ms": String(STALL_MS) });
    expect(await capped.json()).toMatchObject({ code: 4, message: expect.stringMatching(/deadline of 1500 ms/) });
    const malformed = await ping({ "grpc-timeout": "soon" });
    expect(malformed.status).toBe(400);
    expect(await malformed.json()).toMatchObject({ code: 3, details: [expect.objectContaining({ reason: "MALFORMED_TIMEOUT", metadata: expect.objectContaining({ header: "grpc-timeout" }) })] });
  });

  it("Connect: a longer connect-timeout-ms is capped to the server's", async () => {
    const res = await fetch(`${server.baseUrl}/chainguard.platform.ping.v2.PingService/Ping`, {
      method: "POST",
      headers: { "content-type": "application/json", "connect-timeout-ms": "9999999999", "x-test-stall-ms": "200" },
      body: "{}",
    });
    expect(res.status).toBe(200);
  });
});
