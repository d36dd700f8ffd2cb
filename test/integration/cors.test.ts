// CORS for browser clients: an origin the operator allows gets the preflight answer and the headers on the
// call, for Connect, gRPC-web and REST; any other origin gets no CORS header at all; with no origin configured
// (the default) there is none either. Last, a real browser (headless Chromium) on a page of another port calls
// Ping with fetch() as Connect-web does.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { existsSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { chromium } from "playwright-core";
import { parseAllowedOrigins, ConfigError, loadConfig } from "../../src/config.js";
import { withCors } from "../../src/server/cors.js";
import { startTestServer, type TestServer } from "../support/server.js";

const ALLOWED = "http://app.example.test";
const OTHER = "http://evil.example.test";
const CONNECT_PING = "/chainguard.platform.ping.v2.PingService/Ping";

// The browser's page is served from its own port; its origin is one of those allowed, beside ALLOWED.
let page: http.Server;
let pageOrigin: string;
let server: TestServer;
beforeAll(async () => {
  page = http.createServer((_req, res) => res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>client</title>"));
  await new Promise<void>((resolve) => page.listen(0, "127.0.0.1", resolve));
  pageOrigin = `http://127.0.0.1:${(page.address() as AddressInfo).port}`;
  server = await startTestServer({ corsAllowedOrigins: [ALLOWED, pageOrigin] });
});
afterAll(async () => {
  await server?.close();
  await new Promise((resolve) => page?.close(resolve));
});

function corsHeaders(res: Response): Record<string, string> {
  return Object.fromEntries([...res.headers].filter(([k]) => k.startsWith("access-control-")));
}

const list = (value: string | null) => (value ?? "").split(",").map((v) => v.trim().toLowerCase());

async function preflight(path: string, origin: string, method: string, headers: string[]): Promise<Response> {
  return fetch(server.baseUrl + path, {
    method: "OPTIONS",
    headers: { origin, "access-control-request-method": method, "access-control-request-headers": headers.join(",") },
  });
}

const connectHeaders = ["content-type", "connect-protocol-version", "connect-timeout-ms", "authorization", "x-request-id"];
const grpcWebHeaders = ["content-type", "x-grpc-web", "x-user-agent", "grpc-timeout", "authorization", "x-request-id"];
const grpcWebPing = () => ({
  method: "POST",
  headers: { "content-type": "application/grpc-web+proto", "x-grpc-web": "1" },
  body: new Uint8Array([0, 0, 0, 0, 0]), // one uncompressed frame holding an empty PingRequest
});

describe("an allowed origin", () => {
  it("Connect: the preflight allows the method and Connect's headers; the call carries the origin and exposes the ids", async () => {
    const pre = await preflight(CONNECT_PING, ALLOWED, "POST", connectHeaders);
    expect(pre.status).toBe(204);
    expect(pre.headers.get("access-control-allow-origin")).toBe(ALLOWED);
    expect(list(pre.headers.get("access-control-allow-methods"))).toContain("post");
    expect(list(pre.headers.get("access-control-allow-headers"))).toEqual(expect.arrayContaining(connectHeaders));
    expect(Number(pre.headers.get("access-control-max-age"))).toBeGreaterThan(0);
    expect(list(pre.headers.get("vary"))).toContain("origin");

    const res = await fetch(server.baseUrl + CONNECT_PING, {
      method: "POST",
      headers: { origin: ALLOWED, "content-type": "application/json", "connect-protocol-version": "1" },
      body: "{}",
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ response: "pong" });
    expect(res.headers.get("access-control-allow-origin")).toBe(ALLOWED);
    expect(list(res.headers.get("access-control-expose-headers"))).toEqual(expect.arrayContaining(["x-request-id", "grpc-status", "grpc-message", "grpc-status-details-bin"]));
  });

  it("gRPC-web: the preflight allows its headers; the call exposes grpc-status and grpc-message", async () => {
    const pre = await preflight(CONNECT_PING, ALLOWED, "POST", grpcWebHeaders);
    expect(pre.status).toBe(204);
    expect(pre.headers.get("access-control-allow-origin")).toBe(ALLOWED);
    expect(list(pre.headers.get("access-control-allow-headers"))).toEqual(expect.arrayContaining(grpcWebHeaders));

    const { headers, ...init } = grpcWebPing();
    const res = await fetch(server.baseUrl + CONNECT_PING, { ...init, headers: { ...headers, origin: ALLOWED } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toMatch(/^application\/grpc-web/);
    expect(res.headers.get("access-control-allow-origin")).toBe(ALLOWED);
    expect(list(res.headers.get("access-control-expose-headers"))).toEqual(expect.arrayContaining(["grpc-status", "grpc-message"]));
  });

  it("REST: preflights of GET and PATCH succeed, and the call carries the origin", async () => {
    const get = await preflight("/ping/v2/ping", ALLOWED, "GET", ["authorization", "x-request-id"]);
    expect(get.status).toBe(204);
    expect(get.headers.get("access-control-allow-origin")).toBe(ALLOWED);
    expect(list(get.headers.get("access-control-allow-headers"))).toEqual(expect.arrayContaining(["authorization", "x-request-id"]));
    const patch = await preflight("/iam/v2/groups/0123456789012345678901234567890123456789", ALLOWED, "PATCH", ["authorization", "content-type"]);
    expect(patch.status).toBe(204);
    expect(list(patch.headers.get("access-control-allow-methods"))).toEqual(expect.arrayContaining(["get", "post", "patch", "delete"]));

    const res = await fetch(server.baseUrl + "/ping/v2/ping", { headers: { origin: ALLOWED } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ response: "pong" });
    expect(res.headers.get("access-control-allow-origin")).toBe(ALLOWED);
  });
});

describe("any other origin", () => {
  it("gets no CORS header, on preflights and calls of every protocol", async () => {
    const responses = [
      await preflight(CONNECT_PING, OTHER, "POST", connectHeaders),
      await preflight("/ping/v2/ping", OTHER, "GET", ["authorization"]),
      await fetch(server.baseUrl + CONNECT_PING, { method: "POST", headers: { origin: OTHER, "content-type": "application/json" }, body: "{}" }),
      await fetch(server.baseUrl + CONNECT_PING, { ...grpcWebPing(), headers: { ...grpcWebPing().headers, origin: OTHER } }),
      await fetch(server.baseUrl + "/ping/v2/ping", { headers: { origin: OTHER } }),
      // an allowed origin's spelling variant is another origin
      await fetch(server.baseUrl + "/ping/v2/ping", { headers: { origin: ALLOWED + "/" } }),
    ];
    for (const res of responses) expect(corsHeaders(res)).toEqual({});
    // The calls themselves are answered as ever (the browser, not the server, withholds them from the page).
    expect(responses[4]!.status).toBe(200);
  });

  it("and requests without an Origin get none", async () => {
    const res = await fetch(server.baseUrl + "/ping/v2/ping");
    expect(corsHeaders(res)).toEqual({});
  });
});

describe("configuration", () => {
  it("allows no origin by default: the handler is left as it is", () => {
    expect(loadConfig({}).corsAllowedOrigins).toEqual([]);
    const handler = () => {};
    expect(withCors(handler, [])).toBe(handler);
  });

  it("takes comma-separated exact origins and refuses anything else", () => {
    expect(parseAllowedOrigins(" https://a.example.com, http://localhost:5173 ,https://a.example.com")).toEqual(["https://a.example.com", "http://localhost:5173"]);
    for (const bad of ["*", "https://a.example.com/", "https://a.example.com/app", "a.example.com", "ftp://a.example.com", "https://A.example.com", "https://a.example.com:443"]) {
      expect(() => parseAllowedOrigins(bad), bad).toThrow(ConfigError);
    }
  });
});

const CHROMIUM = "/usr/bin/chromium";
describe.skipIf(!existsSync(CHROMIUM))("a browser", () => {
  it("on a page of an allowed origin calls Ping over Connect with fetch(); on another origin the call is refused", async () => {
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    try {
      const tab = await browser.newPage();
      const callPing = (url: string) =>
        tab.evaluate(async (u) => {
          try {
            const res = await fetch(u, {
              method: "POST",
              // A header outside the CORS-safelisted ones: the browser sends a preflight first.
              headers: { "content-type": "application/json", "connect-protocol-version": "1", "x-request-id": "browser-1" },
              body: "{}",
            });
            return { status: res.status, body: await res.text(), requestId: res.headers.get("x-request-id") };
          } catch (err) {
            return { error: String(err) };
          }
        }, url);
      await tab.goto(pageOrigin + "/");
      const allowed = await callPing(server.baseUrl + CONNECT_PING);
      expect(allowed).toMatchObject({ status: 200, body: JSON.stringify({ response: "pong" }) });

      // The same page, reached by another name (localhost is another origin than 127.0.0.1), is not allowed.
      await tab.goto(pageOrigin.replace("127.0.0.1", "localhost") + "/");
      const refused = await callPing(server.baseUrl + CONNECT_PING);
      expect(refused).toMatchObject({ error: expect.stringMatching(/Failed to fetch/) });
    } finally {
      await browser.close();
    }
  });
});
