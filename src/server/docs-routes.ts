// The API reference: the OpenAPI document at /openapi.json, generated once when the server starts, and
// Swagger UI at /docs rendering it. Swagger UI's files come from the swagger-ui-dist package, served by this
// server (no CDN: the machines it runs on may have no internet); its "Try it out" calls this same origin.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import type http from "node:http";
import type http2 from "node:http2";
import path from "node:path";
import { promisify } from "node:util";
import { gzip as gzipCallback } from "node:zlib";
import type { DescMethod } from "@bufbuild/protobuf";
import { createOpenApiDocument } from "../gateway/openapi.js";
import { registry } from "../kernel/descriptors.js";
import { methodNotAllowed, routeNotFound, toRestError } from "../kernel/errors/index.js";
import { log } from "../kernel/log.js";

export const OPENAPI_PATH = "/openapi.json";
export const DOCS_PATH = "/docs";

const gzip = promisify(gzipCallback);

type Request = http.IncomingMessage | http2.Http2ServerRequest;
type Response = http.ServerResponse | http2.Http2ServerResponse;

/** One response body: its bytes, made once, and its gzip form, made on first demand. */
interface Asset {
  type: string;
  cacheControl: string;
  load: () => Promise<Buffer>;
}

interface LoadedAsset {
  body: Buffer;
  gzipped: Promise<Buffer> | undefined;
  etag: string;
}

/**
 * The folder of swagger-ui-dist, resolved from this module at run time, so it is found from src/ (tsx) and
 * from a compiled dist/ alike.
 */
function swaggerUiDirectory(): string {
  return path.dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"));
}

const PAGE = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Platform API v2 reference</title>
<link rel="stylesheet" href="docs/swagger-ui.css">
<link rel="stylesheet" href="docs/index.css">
<link rel="icon" type="image/png" href="docs/favicon-32x32.png" sizes="32x32">
<link rel="icon" type="image/png" href="docs/favicon-16x16.png" sizes="16x16">
</head>
<body>
<div id="swagger-ui"></div>
<noscript>This page needs JavaScript. The OpenAPI document itself is at <a href="openapi.json">openapi.json</a>.</noscript>
<script src="docs/swagger-ui-bundle.js"></script>
<script src="docs/init.js"></script>
</body>
</html>
`;

// Paths are relative to the page (/docs), so the page also works behind a proxy that mounts the server under
// a prefix. The interceptor un-encodes "%2F" in the URL path of this server's requests: Swagger UI encodes every
// path parameter, while the API's {uid=**} parameters are uids that contain "/" (which the gateway would keep
// as a literal "%2F", as the HTTP rule says).
const INITIALIZER = `// Starts Swagger UI on this server's OpenAPI document (served by the API server at /docs/init.js).
window.addEventListener("load", function () {
  window.ui = SwaggerUIBundle({
    url: "openapi.json",
    dom_id: "#swagger-ui",
    presets: [SwaggerUIBundle.presets.apis],
    layout: "BaseLayout",
    deepLinking: true,
    persistAuthorization: true,
    displayRequestDuration: true,
    filter: true,
    docExpansion: "list",
    defaultModelsExpandDepth: 0,
    validatorUrl: null,
    requestInterceptor: function (request) {
      var url = new URL(request.url, window.location.href);
      if (url.origin === window.location.origin && /%2F/i.test(url.pathname)) {
        url.pathname = url.pathname.replace(/%2F/gi, "/");
        request.url = url.toString();
      }
      return request;
    },
  });
});
`;

/** The page may load only what this server serves; Swagger UI sets inline styles, never inline scripts. */
const PAGE_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'self'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

export interface DocsRoutesOptions {
  /** The methods to document (servedMethods). */
  methods: readonly DescMethod[];
  serviceDomain: string;
}

export function createDocsRoutes(opts: DocsRoutesOptions) {
  // Built now, once: a binding the generator cannot describe fails the start, not the first reader.
  const document = Buffer.from(JSON.stringify(createOpenApiDocument({ methods: opts.methods })));
  const dist = swaggerUiDirectory();
  const fromPackage = (file: string, type: string): Asset => ({ type, cacheControl: "public, max-age=3600", load: () => readFile(path.join(dist, file)) });
  const fixed = (body: string | Buffer, type: string, cacheControl: string): Asset => {
    const bytes = Buffer.from(body);
    return { type, cacheControl, load: () => Promise.resolve(bytes) };
  };
  const assets = new Map<string, Asset>([
    [OPENAPI_PATH, fixed(document, "application/json", "no-cache")],
    [DOCS_PATH, fixed(PAGE, "text/html; charset=utf-8", "no-cache")],
    [`${DOCS_PATH}/init.js`, fixed(INITIALIZER, "text/javascript; charset=utf-8", "no-cache")],
    [`${DOCS_PATH}/swagger-ui-bundle.js`, fromPackage("swagger-ui-bundle.js", "text/javascript; charset=utf-8")],
    [`${DOCS_PATH}/swagger-ui.css`, fromPackage("swagger-ui.css", "text/css; charset=utf-8")],
    [`${DOCS_PATH}/index.css`, fromPackage("index.css", "text/css; charset=utf-8")],
    [`${DOCS_PATH}/favicon-32x32.png`, fromPackage("favicon-32x32.png", "image/png")],
    [`${DOCS_PATH}/favicon-16x16.png`, fromPackage("favicon-16x16.png", "image/png")],
  ]);
  const loaded = new Map<string, Promise<LoadedAsset>>();
  const load = (key: string, asset: Asset): Promise<LoadedAsset> => {
    let entry = loaded.get(key);
    if (!entry) {
      entry = asset.load().then((body) => ({ body, gzipped: undefined, etag: `W/"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"` }));
      // A failed read (the package removed under a running server) is retried on the next request.
      entry.catch(() => loaded.delete(key));
      loaded.set(key, entry);
    }
    return entry;
  };

  const sendError = (res: Response, err: unknown) => {
    const error = toRestError(err, opts.serviceDomain, registry);
    const headers: Record<string, string> = { "content-type": "application/json", "x-content-type-options": "nosniff" };
    error.headers.forEach((value, name) => (headers[name] = value));
    (res as http.ServerResponse).writeHead(error.status, headers).end(error.body);
  };

  async function serve(req: Request, res: Response, urlPath: string): Promise<void> {
    const method = req.method ?? "GET";
    // "/docs/" would resolve the page's relative links one level too deep.
    if (urlPath === `${DOCS_PATH}/`) {
      (res as http.ServerResponse).writeHead(301, { location: `../${DOCS_PATH.slice(1)}`, "cache-control": "public, max-age=3600" }).end();
      return;
    }
    const asset = assets.get(urlPath);
    if (!asset) return sendError(res, routeNotFound(method, urlPath));
    if (method !== "GET" && method !== "HEAD") return sendError(res, methodNotAllowed(method, urlPath, ["GET", "HEAD"]));
    const entry = await load(urlPath, asset);
    const headers: Record<string, string> = {
      "content-type": asset.type,
      "cache-control": asset.cacheControl,
      "x-content-type-options": "nosniff",
      etag: entry.etag,
      vary: "accept-encoding",
    };
    if (urlPath === DOCS_PATH) {
      headers["content-security-policy"] = PAGE_POLICY;
      headers["referrer-policy"] = "no-referrer";
    }
    if (req.headers["if-none-match"] === entry.etag) {
      (res as http.ServerResponse).writeHead(304, headers).end();
      return;
    }
    let body = entry.body;
    if (body.length > 1024 && acceptsGzip(req.headers["accept-encoding"])) {
      entry.gzipped ??= gzip(entry.body);
      body = await entry.gzipped;
      headers["content-encoding"] = "gzip";
    }
    headers["content-length"] = String(body.length);
    (res as http.ServerResponse).writeHead(200, headers).end(method === "HEAD" ? undefined : body);
  }

  return {
    handles: (urlPath: string) => urlPath === OPENAPI_PATH || urlPath === DOCS_PATH || urlPath.startsWith(`${DOCS_PATH}/`),
    async handle(req: Request, res: Response, urlPath: string): Promise<void> {
      try {
        await serve(req, res, urlPath);
      } catch (err) {
        log.error("docs route failed", { path: urlPath, err });
        if (!res.headersSent) sendError(res, err);
        else res.end();
      }
    },
  };
}

function acceptsGzip(header: string | undefined): boolean {
  if (!header) return false;
  return header.split(",").some((part) => {
    const [coding, ...params] = part.trim().split(";");
    if (coding?.trim().toLowerCase() !== "gzip") return false;
    return !params.some((p) => /^\s*q\s*=\s*0(\.0*)?\s*$/.test(p));
  });
}
