// The whole server on its one port: reflection and health over the real listener, /healthz, and errors
// raised by the protocol layer itself (before any handler) still carrying ErrorInfo, refusals with a bare
// HTTP status (wrong method, content type, HTTP version) included.
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { fromBinary, type JsonObject } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Health, HealthCheckResponse_ServingStatus } from "../../gen/health/v1/health_pb.js";
import { BadRequestSchema, ErrorInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { StatusSchema } from "../../gen/google/rpc/status_pb.js";
import { grpcWebTrailer, rawGrpc } from "../support/raw-rpc.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld } from "../support/world.js";

const run = promisify(execFile);
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server?.close();
});

async function bufCurl(...args: string[]): Promise<string> {
  const { stdout } = await run("npx", ["--no-install", "buf", "curl", "--http2-prior-knowledge", ...args], { timeout: 60_000 });
  return stdout;
}

describe("reflection through the one port", () => {
  it("lists every API service, health and reflection", async () => {
    const out = (await bufCurl("--list-services", server.baseUrl)).split("\n");
    for (const name of [
      "chainguard.platform.ping.v2.PingService",
      "chainguard.platform.iam.v2.GroupsService",
      "chainguard.platform.registry.v2.TagsService",
      "chainguard.platform.oidc.SecurityTokenService",
      "grpc.health.v1.Health",
      "grpc.reflection.v1.ServerReflection",
    ]) {
      expect(out).toContain(name);
    }
  });

  it("buf curl calls Ping with no local schema", async () => {
    const out = await bufCurl(`${server.baseUrl}/chainguard.platform.ping.v2.PingService/Ping`);
    expect(JSON.parse(out)).toEqual({ response: "pong" });
  });
});

describe("health", () => {
  it("grpc.health.v1 Check answers SERVING overall and per service", async () => {
    const health = createClient(Health, createGrpcTransport({ baseUrl: server.baseUrl }));
    expect((await health.check({ service: "" })).status).toBe(HealthCheckResponse_ServingStatus.SERVING);
    expect((await health.check({ service: "chainguard.platform.ping.v2.PingService" })).status).toBe(
      HealthCheckResponse_ServingStatus.SERVING,
    );
  });

  it("/healthz answers 200 with the database reachable", async () => {
    const res = await fetch(`${server.baseUrl}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "SERVING" });
  });
});

describe("errors raised by the protocol layer", () => {
  it("Connect: an undecodable JSON body is INVALID_ARGUMENT naming the body, with ErrorInfo", async () => {
    const res = await fetch(`${server.baseUrl}/chainguard.platform.ping.v2.PingService/Ping`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{not json",
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { code: string; message: string; details: Array<{ type: string }> };
    expect(body.code).toBe("invalid_argument");
    expect(body.message).toMatch(/^Invalid argument: body: malformed JSON: /);
    expect(body.details.map((d) => d.type)).toEqual(["google.rpc.ErrorInfo", "google.rpc.BadRequest"]);
  });

  /** A Connect error JSON body: code, message and the JSON form of each detail. */
  async function connectError(res: Response): Promise<{ code: string; message: string; details: Array<{ type: string; debug: JsonObject }> }> {
    expect(res.headers.get("content-type")).toBe("application/json");
    return (await res.json()) as never;
  }

  it("Connect GET on a method that does not allow it: 405 with Allow and a structured error", async () => {
    const query = new URLSearchParams({ connect: "v1", encoding: "json", message: "{}" });
    const res = await fetch(`${server.baseUrl}/chainguard.platform.ping.v2.PingService/Ping?${query}`);
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
    const body = await connectError(res);
    expect(body.code).toBe("unimplemented");
    expect(body.message).toBe("Method GET is not allowed on /chainguard.platform.ping.v2.PingService/Ping; allowed: POST");
    expect(body.details[0]).toMatchObject({
      type: "google.rpc.ErrorInfo",
      debug: { reason: "METHOD_NOT_ALLOWED", domain: "ping.platform.test", metadata: { method: "GET", allow: "POST" } },
    });
  });

  it.each([["text/plain"], ["application/xml"], ["application/grpc-web-text"]])(
    "a content type no protocol reads (%s): 415 with a structured error",
    async (contentType) => {
      const res = await fetch(`${server.baseUrl}/chainguard.platform.ping.v2.PingService/Ping`, {
        method: "POST",
        headers: { "content-type": contentType },
        body: "{}",
      });
      expect(res.status).toBe(415);
      const body = await connectError(res);
      expect(body.code).toBe("unimplemented");
      expect(body.message).toContain(JSON.stringify(contentType));
      expect(body.details[0]).toMatchObject({ type: "google.rpc.ErrorInfo", debug: { reason: "UNSUPPORTED_MEDIA_TYPE", domain: "ping.platform.test" } });
    },
  );

  it("a bidirectional stream over HTTP/1.1: 505 with a structured error", async () => {
    const res = await fetch(`${server.baseUrl}/grpc.reflection.v1.ServerReflection/ServerReflectionInfo`, {
      method: "POST",
      headers: { "content-type": "application/connect+json" },
      body: "",
    });
    expect(res.status).toBe(505);
    const body = await connectError(res);
    expect(body.code).toBe("unimplemented");
    expect(body.details[0]).toMatchObject({ type: "google.rpc.ErrorInfo", debug: { reason: "HTTP_VERSION_NOT_SUPPORTED" } });
  });

  it("gRPC: an undecodable message is INVALID_ARGUMENT with grpc-status-details-bin carrying ErrorInfo", async () => {
    // a frame announcing 3 bytes of a message that is not valid protobuf (field 0)
    const { fields: trailers } = await rawGrpc(server.baseUrl, "/chainguard.platform.ping.v2.PingService/Ping", Buffer.from([0, 0, 0, 0, 3, 0x00, 0xff, 0xff]));
    expect(trailers["grpc-status"]).toBe("3");
    const status = fromBinary(StatusSchema, Buffer.from(String(trailers["grpc-status-details-bin"]), "base64"));
    expect(status.details.map((d) => d.typeUrl)).toEqual([
      `type.googleapis.com/${ErrorInfoSchema.typeName}`,
      `type.googleapis.com/${BadRequestSchema.typeName}`,
    ]);
  });
});

describe("errors raised by the protocol layer, gRPC-web", () => {
  it("an undecodable message is INVALID_ARGUMENT with a trailer frame carrying ErrorInfo", async () => {
    const res = await fetch(`${server.baseUrl}/chainguard.platform.ping.v2.PingService/Ping`, {
      method: "POST",
      headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1" },
      body: Buffer.from([0, 0, 0, 0, 3, 0x00, 0xff, 0xff]),
    });
    expect(res.status).toBe(200);
    // the last frame is the trailer (flag 0x80)
    const fields = grpcWebTrailer(new Uint8Array(await res.arrayBuffer()));
    expect(fields["grpc-status"]).toBe("3");
    const status = fromBinary(StatusSchema, Buffer.from(fields["grpc-status-details-bin"]!, "base64"));
    expect(status.details.map((d) => d.typeUrl)).toEqual([
      `type.googleapis.com/${ErrorInfoSchema.typeName}`,
      `type.googleapis.com/${BadRequestSchema.typeName}`,
    ]);
  });
});

describe("large error bodies", () => {
  it("a Connect error over the compression threshold still arrives, compressed, when the client accepts gzip", async () => {
    // A long uid makes a long error message (the permission check names it): over 1 KiB.
    const world = await seedWorld(server, "large-errors");
    const uid = "a".repeat(1000);
    const res = await fetch(`${server.baseUrl}/chainguard.platform.iam.v2.GroupsService/GetGroup`, {
      method: "POST",
      headers: { "content-type": "application/json", "accept-encoding": "gzip", ...world.auth("owner") },
      body: JSON.stringify({ uid }),
      signal: AbortSignal.timeout(10_000),
    });
    expect(res.status).toBe(403);
    expect(Number(res.headers.get("content-length") ?? "0") > 0 || res.headers.get("content-encoding") === "gzip").toBe(true);
    const body = (await res.json()) as { details: Array<{ type: string }> };
    expect(body.details[0]!.type).toBe("google.rpc.ErrorInfo");
  });
});
