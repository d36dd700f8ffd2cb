// This server as an OIDC issuer: the discovery document and the public signing keys (JWKS), so that other
// systems can verify the tokens it mints.
import type http from "node:http";
import type http2 from "node:http2";
import type { KeyStore } from "../kernel/auth/index.js";
import { registry } from "../kernel/descriptors.js";
import { methodNotAllowed, toRestError } from "../kernel/errors/index.js";
import { log } from "../kernel/log.js";

export const DISCOVERY_PATH = "/.well-known/openid-configuration";
export const JWKS_PATH = "/.well-known/jwks.json";

export function createOidcRoutes(opts: { issuerUrl: string; keys: KeyStore; serviceDomain: string }) {
  const discovery = JSON.stringify({
    issuer: opts.issuerUrl,
    jwks_uri: opts.issuerUrl + JWKS_PATH,
    token_endpoint: opts.issuerUrl + "/sts/exchange",
    response_types_supported: ["id_token"],
    subject_types_supported: ["public"],
    id_token_signing_alg_values_supported: ["ES256"],
    claims_supported: ["iss", "sub", "aud", "exp", "iat", "act"],
  });
  const send = (res: http.ServerResponse | http2.Http2ServerResponse, status: number, body: string, cache: string) => {
    (res as http.ServerResponse)
      .writeHead(status, { "content-type": "application/json", "cache-control": cache })
      .end(body);
  };
  return {
    handles: (path: string) => path === DISCOVERY_PATH || path === JWKS_PATH,
    /** `requestId`: the request's id (kernel/request.ts), for the ErrorInfo of an error. */
    async handle(req: http.IncomingMessage | http2.Http2ServerRequest, res: http.ServerResponse | http2.Http2ServerResponse, path: string, requestId?: string) {
      if (req.method !== "GET" && req.method !== "HEAD") {
        const error = toRestError(methodNotAllowed(req.method ?? "", path, ["GET", "HEAD"]), opts.serviceDomain, registry, requestId);
        const headers: Record<string, string> = { "content-type": "application/json" };
        error.headers.forEach((value, name) => (headers[name] = value));
        (res as http.ServerResponse).writeHead(error.status, headers).end(error.body);
        return;
      }
      if (path === DISCOVERY_PATH) return send(res, 200, discovery, "public, max-age=3600");
      try {
        send(res, 200, JSON.stringify(await opts.keys.publicJwks()), "public, max-age=300");
      } catch (err) {
        log.error("jwks unavailable", { err });
        send(res, 503, JSON.stringify({ error: "keys unavailable" }), "no-store");
      }
    },
  };
}
