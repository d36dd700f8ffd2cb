// The request handler of the whole service: the Connect router (gRPC, gRPC-web, Connect) with its
// interceptors, the REST gateway over the same router, health and reflection, and /healthz.
import type http from "node:http";
import type http2 from "node:http2";
import { sql } from "drizzle-orm";
import { createConnectRouter, type ConnectRouter, type Interceptor } from "@connectrpc/connect";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { allFiles, apiMethods, apiServices, registry } from "../kernel/descriptors.js";
import { createErrorBoundary } from "../kernel/errors/index.js";
import { createAuthenticator, createAuthInterceptor, createIdentityLoader, type ExternalVerifier, type KeyStore } from "../kernel/auth/index.js";
import { createGrantsCache } from "../kernel/auth/grants-cache.js";
import { createExternalVerifier } from "../kernel/auth/external.js";
import { createOidcRoutes } from "./oidc-routes.js";
import { log } from "../kernel/log.js";
import type { Database } from "../db/client.js";
import { createRestGateway } from "../gateway/index.js";
import { pingBindings } from "../ping/ping.service.js";
import type { DomainDeps, ServiceBinding } from "./bindings.js";
import { grantServiceNames, iamBindings } from "../iam/index.js";
import { stsBindings } from "../sts/index.js";
import { registryBindings } from "../registry/index.js";
import { createHealth } from "./health.js";
import { registerReflection, reflectionServiceNames } from "./reflection.js";
import { Health as HealthService } from "../../gen/health/v1/health_pb.js";
import type { RequestHandler } from "./listener.js";
import { withPublicErrors } from "./protocol-errors.js";

export interface AppDeps {
  database: Database;
  serviceDomain: string;
  /** Signs list page tokens; shared by every replica through the database (see db/secrets.ts). */
  pageTokenSecret: Uint8Array;
  /** This server's OIDC issuer URL (the `iss` and audience of the tokens it mints). */
  issuerUrl: string;
  /** Signing keys shared by every replica through the database. */
  keys: KeyStore;
  /**
   * Verifies tokens of external OIDC issuers against identities' claimMatch. Default: the OIDC verifier
   * (kernel/auth/external.ts) with plain-http loopback issuers refused.
   */
  external?: ExternalVerifier;
  /** Implementations replacing or completing the domain ones (tests use this to inject behaviour). */
  overrides?: readonly ServiceBinding[];
}

export interface App {
  handler: RequestHandler;
  /** Marks the service NOT_SERVING for health checks (first step of a graceful stop). */
  drain(): void;
  /** Stops what the app runs besides requests (the grants subscription); the database stays open. */
  close(): Promise<void>;
}

/**
 * Every API service is registered, so every route of the contract exists; a method no domain implements
 * yet answers UNIMPLEMENTED (with ErrorInfo) on every protocol. Domains add their implementations here.
 */
function serviceImplementations(deps: AppDeps, external: ExternalVerifier): Map<string, object> {
  const domain: DomainDeps = {
    db: deps.database.db,
    pageTokenSecret: deps.pageTokenSecret,
    issuerUrl: deps.issuerUrl,
    keys: deps.keys,
    external,
  };
  const bindings: ServiceBinding[] = [...pingBindings, ...iamBindings(domain), ...stsBindings(domain), ...registryBindings(domain), ...(deps.overrides ?? [])];
  const impls = new Map<string, object>();
  for (const { service, impl } of bindings) impls.set(service.typeName, impl);
  return impls;
}

function registerServices(router: ConnectRouter, impls: ReadonlyMap<string, object>): void {
  for (const service of apiServices) {
    router.service(service, (impls.get(service.typeName) ?? {}) as never);
  }
}

export function createApp(deps: AppDeps): App {
  const external =
    deps.external ??
    createExternalVerifier({ db: deps.database.db, allowInsecureLoopback: false, self: { issuer: deps.issuerUrl, keys: deps.keys } });
  const grants = createGrantsCache({ load: createIdentityLoader(deps.database.db), subscribe: deps.database.listen });
  const authenticator = createAuthenticator({
    db: deps.database.db,
    keys: deps.keys,
    issuer: deps.issuerUrl,
    audience: deps.issuerUrl,
    external,
    grants: grants.get,
  });
  const interceptors: Interceptor[] = [
    createErrorBoundary(deps.serviceDomain),
    createAuthInterceptor({
      authenticator,
      openServices: [HealthService.typeName, ...reflectionServiceNames],
      grantServices: grantServiceNames,
      grantsChanged: grants.clear,
    }),
  ];
  const compression = [compressionGzip, compressionBrotli];
  const router = createConnectRouter({
    interceptors,
    acceptCompression: compression,
    jsonOptions: { registry },
  });
  const impls = serviceImplementations(deps, external);
  registerServices(router, impls);

  const health = createHealth();
  health.register(router);
  registerReflection(router, { files: allFiles, services: () => [...new Set(router.handlers.map((h) => h.service.typeName))] });

  const rpcByPath = new Map<string, UniversalHandler>(
    router.handlers.map((h) => [h.requestPath, withPublicErrors(h, { serviceDomain: deps.serviceDomain, registry, compression })]),
  );
  const gateway = createRestGateway({
    register: (restRouter) => registerServices(restRouter, impls),
    interceptors,
    methods: apiMethods,
    registry,
    serviceDomain: deps.serviceDomain,
  });

  const healthz = async (res: http.ServerResponse | http2.Http2ServerResponse) => {
    let ok = true;
    try {
      await deps.database.db.execute(sql`select 1`);
    } catch (err) {
      ok = false;
      log.warn("healthz: database unreachable", { err });
    }
    const body = JSON.stringify({ status: ok ? "SERVING" : "NOT_SERVING" });
    (res as http.ServerResponse).writeHead(ok ? 200 : 503, { "content-type": "application/json" }).end(body);
  };

  const oidc = createOidcRoutes({ issuerUrl: deps.issuerUrl, keys: deps.keys });

  const handler: RequestHandler = (req, res) => {
    const path = (req.url ?? "/").split("?", 1)[0]!;
    if (oidc.handles(path)) {
      void oidc.handle(req, res, path);
      return;
    }
    const rpc = rpcByPath.get(path);
    if (rpc) {
      const uReq = universalRequestFromNodeRequest(req, res, undefined, undefined);
      rpc(uReq)
        .then((uRes) => universalResponseToNodeResponse(uRes, res))
        .catch((err: unknown) => log.warn("rpc response failed", { path, err }));
      return;
    }
    if (path === "/healthz" && (req.method === "GET" || req.method === "HEAD")) {
      void healthz(res);
      return;
    }
    gateway.handle(req, res).catch((err: unknown) => log.error("gateway failed", { path, err }));
  };

  return { handler, drain: () => health.shutdown(), close: () => grants.close() };
}
