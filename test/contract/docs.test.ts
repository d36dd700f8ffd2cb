// The API reference over HTTP: /openapi.json (the generated document, as generated) and /docs with the files
// of Swagger UI, all served by the server itself.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { request } from "node:http";
import http2 from "node:http2";
import { gunzipSync } from "node:zlib";
import { createOpenApiDocument } from "../../src/gateway/openapi.js";
import { servedMethods } from "../../src/kernel/descriptors.js";
import { startTestServer, type TestServer } from "../support/server.js";

let server: TestServer;

beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => {
  await server?.close();
});

/** A raw GET (fetch would decompress, and hides content-encoding). */
function get(path: string, headers: Record<string, string> = {}, method = "GET"): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request(server.baseUrl + path, { method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

describe("/openapi.json", () => {
  it("is the document generated from the served methods", async () => {
    const res = await get("/openapi.json");
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toBe("application/json");
    expect(res.headers["x-content-type-options"]).toBe("nosniff");
    expect(JSON.parse(res.body.toString("utf8"))).toEqual(createOpenApiDocument({ methods: servedMethods }));
  });

  it("is gzipped when the client accepts it, and answers 304 to its own ETag", async () => {
    const plain = await get("/openapi.json");
    const zipped = await get("/openapi.json", { "accept-encoding": "br, gzip;q=0.8" });
    expect(zipped.headers["content-encoding"]).toBe("gzip");
    expect(gunzipSync(zipped.body).equals(plain.body)).toBe(true);
    const etag = String(plain.headers.etag);
    const again = await get("/openapi.json", { "if-none-match": etag });
    expect(again.status).toBe(304);
    expect(again.body.length).toBe(0);
  });

  it("refuses other methods with 405 and a google.rpc.Status", async () => {
    const res = await get("/openapi.json", {}, "POST");
    expect(res.status).toBe(405);
    expect(res.headers.allow).toBe("GET, HEAD");
    expect(JSON.parse(res.body.toString("utf8"))).toMatchObject({ details: [expect.objectContaining({ reason: "METHOD_NOT_ALLOWED" })] });
  });
});

describe("/docs", () => {
  it("is a page loading Swagger UI from this server, with no inline script", async () => {
    const res = await get("/docs");
    expect(res.status).toBe(200);
    expect(res.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(res.headers["cache-control"]).toBe("no-cache");
    expect(res.headers["x-content-type-options"]).toBe("nosniff");
    expect(res.headers["content-security-policy"]).toContain("script-src 'self'");
    const html = res.body.toString("utf8");
    const scripts = [...html.matchAll(/<script([^>]*)>([^<]*)<\/script>/g)];
    expect(scripts.map((m) => m[1]!.trim())).toEqual(['src="docs/swagger-ui-bundle.js"', 'src="docs/init.js"']);
    expect(scripts.every((m) => m[2] === "")).toBe(true);
    expect(html).not.toMatch(/https?:\/\//);
  });

  it("serves every file the page names, from the swagger-ui-dist package", async () => {
    const html = (await get("/docs")).body.toString("utf8");
    const files = [...html.matchAll(/(?:src|href)="(docs\/[^"]+)"/g)].map((m) => "/" + m[1]!);
    expect(files).toContain("/docs/swagger-ui.css");
    for (const file of files) {
      const res = await get(file);
      expect(res.status, file).toBe(200);
      expect(res.body.length, file).toBeGreaterThan(100);
      expect(res.headers["x-content-type-options"]).toBe("nosniff");
    }
    const bundle = await get("/docs/swagger-ui-bundle.js");
    expect(bundle.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(bundle.body.toString("utf8")).toContain("SwaggerUIBundle");
    const init = (await get("/docs/init.js")).body.toString("utf8");
    expect(init).toContain('url: "openapi.json"');
    expect(init).toContain("persistAuthorization: true");
  });

  it("answers HEAD with the headers only", async () => {
    const res = await get("/docs/swagger-ui.css", {}, "HEAD");
    expect(res.status).toBe(200);
    expect(Number(res.headers["content-length"])).toBeGreaterThan(1000);
    expect(res.body.length).toBe(0);
  });

  it("redirects /docs/ to /docs, and answers 404 for a file it does not serve", async () => {
    const slash = await get("/docs/");
    expect(slash.status).toBe(301);
    expect(new URL(String(slash.headers.location), server.baseUrl + "/docs/").pathname).toBe("/docs");
    const missing = await get("/docs/package.json");
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body.toString("utf8"))).toMatchObject({ code: 5, details: [expect.objectContaining({ reason: "ROUTE_NOT_FOUND" })] });
    const outside = await get("/docs/..%2Fpackage.json");
    expect(outside.status).toBe(404);
  });
});

describe("over HTTP/2 cleartext (h2c), as a gRPC client's connection reads them", () => {
  /** A GET on an h2c session: status, headers and body. */
  function h2Get(path: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: http2.IncomingHttpHeaders; body: Buffer }> {
    return new Promise((resolve, reject) => {
      const session = http2.connect(server.baseUrl);
      session.on("error", reject);
      const stream = session.request({ ":path": path, ...headers });
      const chunks: Buffer[] = [];
      let head: http2.IncomingHttpHeaders = {};
      stream.on("response", (h) => (head = h));
      stream.on("data", (c: Buffer) => chunks.push(c));
      stream.on("end", () => {
        session.close();
        resolve({ status: Number(head[":status"]), headers: head, body: Buffer.concat(chunks) });
      });
      stream.on("error", reject);
      stream.end();
    });
  }

  it("serves /openapi.json (gzipped when asked), /docs and its files", async () => {
    const doc = await h2Get("/openapi.json");
    expect(doc.status).toBe(200);
    expect(JSON.parse(doc.body.toString("utf8"))).toEqual(createOpenApiDocument({ methods: servedMethods }));
    const zipped = await h2Get("/openapi.json", { "accept-encoding": "gzip" });
    expect(zipped.headers["content-encoding"]).toBe("gzip");
    expect(gunzipSync(zipped.body).equals(doc.body)).toBe(true);
    const page = await h2Get("/docs");
    expect(page.status).toBe(200);
    expect(page.body.toString("utf8")).toContain("swagger-ui");
    const css = await h2Get("/docs/swagger-ui.css");
    expect(css.status).toBe(200);
    expect(css.body.length).toBeGreaterThan(1000);
  });
});
