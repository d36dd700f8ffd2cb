// The request handler of the whole service: the Connect router (gRPC, gRPC-web, Connect) with its
// interceptors, the REST gateway over the same router, health and reflection, /healthz, and the API
// reference (/openapi.json, /docs).
import type http from "node:http";
import type http2 from "node:http2";
import { sql } from "drizzle-orm";
import { createConnectRouter, type ConnectRouter, type Interceptor } from "@connectrpc/connect";
import { universalRequestFromNodeRequest, universalResponseToNodeResponse } from "@connectrpc/connect-node";
import { compressionBrotli, compressionGzip } from "@connectrpc/connect-node";
import type { UniversalHandler } from "@connectrpc/connect/protocol";
import { allFiles, registry, servedMethods, servedServices } from "../kernel/descriptors.js";
import { createErrorBoundary } from "../kernel/errors/index.js";
import { createUnitOfWork } from "../kernel/unit-of-work.js";
import { createAuthenticator, createAuthInterceptor, type ExternalVerifier, type KeyStore } from "../kernel/auth/index.js";
import type { GrantsCache } from "../kernel/auth/grants-cache.js";
import { bindPartial, type HttpRoute, type KernelHooks, type ServiceBinding } from "../kernel/module.js";
import { createOidcRoutes } from "./oidc-routes.js";
import { createDocsRoutes } from "./docs-routes.js";
import { log } from "../kernel/log.js";
import { DEFAULT_LIMITS, DEFAULT_TERMS, type TermsSettings } from "../config.js";
import { createTermsGate } from "../kernel/terms-gate.js";
import type { Database } from "../db/client.js";
import { createRestGateway } from "../gateway/index.js";
import { createHealth, ServingStatus } from "./health.js";
import { watchDatabase } from "./database-health.js";
import { registerReflection, reflectionServiceNames } from "./reflection.js";
import { Health as HealthService } from "../../gen/health/v1/health_pb.js";
import { SecurityTokenService } from "../../gen/platform/oidc/v1/oidc.platform_pb.js";
import { GroupInviteAcceptanceService } from "../../gen/apiserver/iam/v1/group_invites_pb.js";
import type { RequestHandler } from "./listener.js";
import { withPublicErrors } from "./protocol-errors.js";
import { createDeadline, withClientTimeoutCap } from "./deadline.js";
import { withCors } from "./cors.js";
import { callContextValues, type Protocol } from "../kernel/request.js";
import { createMetrics, type Metrics } from "./metrics.js";
import { createObserver, isClientGone } from "./observe.js";
import { createMetricsRoute } from "./metrics-route.js";
import { createGrpcUnary } from "./grpc-unary.js";
import { unaryImplementationsOf } from "../kernel/invoke.js";

/** How often the health status probes PostgreSQL, and how long a probe may take. */
const DATABASE_PROBE_INTERVAL_MS = 1_000;
const DATABASE_PROBE_TIMEOUT_MS = 1_000;

/** What the server is built from: the kernel's services and what the domain modules give it (src/compose.ts). */
export interface AppDeps {
  database: Database;
  serviceDomain: string;
  /** This server's OIDC issuer URL (the `iss` and audience of the tokens it mints). */
  issuerUrl: string;
  /** Signing keys shared by every replica through the database. */
  keys: KeyStore;
  /** Identities and their grants, as authentication reads them, and the rest the kernel needs of the domains. */
  hooks: KernelHooks;
  /** Verifies tokens of external OIDC issuers against identities' claimMatch. */
  external: ExternalVerifier;
  /** The grants remembered per identity (forgotten after every write that may change them). */
  grants: GrantsCache;
  /** The implementations of the services, from the modules (and the tests' overrides); the last of a service wins. */
  bindings: readonly ServiceBinding[];
  /** Paths the modules serve beside the API, asked in turn before the REST gateway. */
  routes: readonly HttpRoute[];
  /** The documents organizations accept, and the methods that need them (config.ts). Default DEFAULT_TERMS. */
  terms?: TermsSettings;
  /** What one request may use; each limit left out takes its default (defaultRequestLimits). */
  limits?: Partial<RequestLimits>;
  /** Browser origins allowed to call the API (CORS, server/cors.ts). Default none: no CORS header at all. */
  corsAllowedOrigins?: readonly string[];
  /**
   * METRICS_TOKEN: when set, /metrics is also served on this port to requests bearing it. Unset: /metrics is
   * served only by the metrics listener (metrics-route.ts), off the API port.
   */
  metricsToken?: string | undefined;
}

/** What one request may use, on every protocol (config.ts reads them from the environment). */
export interface RequestLimits {
  /**
   * The largest request, in bytes: a Connect or REST body, a gRPC or gRPC-web message, each counted after
   * decompression as well (decompression stops there: a small compressed body cannot inflate beyond it).
   */
  maxRequestBytes: number;
  /**
   * The deadline of every unary call, in ms: it then answers DEADLINE_EXCEEDED (deadline.ts). A client may
   * ask for less (grpc-timeout, connect-timeout-ms); what it asks beyond this is capped to it.
   */
  requestTimeoutMs: number;
}

export const defaultRequestLimits: RequestLimits = {
  maxRequestBytes: DEFAULT_LIMITS.maxRequestBytes,
  requestTimeoutMs: DEFAULT_LIMITS.requestTimeoutMs,
};

export interface App {
  handler: RequestHandler;
  /** Whether a request's body streams (the listener's streamsBody: an idle timeout instead of the request deadline). */
  streamsBody(method: string, path: string): boolean;
  /** This server's metrics (its own registry): the metrics listener serves them; the workers add theirs. */
  metrics: Metrics;
  /**
   * Marks the service NOT_SERVING for health checks, /healthz 503 DRAINING (first step of a graceful stop);
   * requests are still served.
   */
  drain(): void;
  /** Stops what the app runs besides requests (the database probe); the database stays open. */
  close(): Promise<void>;
}

/**
 * The binding of every API service, so every route of the contract exists: a module's implementation, an
 * override, or (a service no module implements) none, whose methods answer UNIMPLEMENTED with ErrorInfo on
 * every protocol.
 */
function serviceBindings(bindings: readonly ServiceBinding[]): ServiceBinding[] {
  const bound = new Map<string, ServiceBinding>();
  for (const b of bindings) bound.set(b.service.typeName, b);
  return servedServices.map((service) => bound.get(service.typeName) ?? bindPartial(service, {}));
}

/**
 * The services whose methods without an event write all the same, outside a unit of work: their calls
 * never read from a replica (db/read-routing.ts). The token exchange stores and rotates refresh tokens;
 * accepting an invite reads the invite, then runs its own unit of work.
 */
export const WRITING_SERVICES = [SecurityTokenService.typeName, GroupInviteAcceptanceService.typeName];

const GRPC_WEB = /^application\/grpc-web/i;
const GRPC = /^application\/grpc/i;

/** The protocol of a call on an RPC path, by its content type (Connect: anything else, JSON or binary). */
function rpcProtocolOf(contentType: string | undefined): Protocol {
  if (contentType === undefined) return "connect";
  if (GRPC_WEB.test(contentType)) return "grpc-web";
  return GRPC.test(contentType) ? "grpc" : "connect";
}

function registerServices(router: ConnectRouter, bindings: readonly ServiceBinding[]): void {
  for (const b of bindings) b.register(router);
}

export function createApp(deps: AppDeps): App {
  const limits: RequestLimits = { ...defaultRequestLimits, ...deps.limits };
  const { directory } = deps.hooks;
  const authenticator = createAuthenticator({
    directory,
    keys: deps.keys,
    issuer: deps.issuerUrl,
    audience: deps.issuerUrl,
    external: deps.external,
    grants: deps.grants.get,
  });
  const termsGate = createTermsGate({
    ...(deps.terms ?? DEFAULT_TERMS),
    methods: servedMethods,
    accepted: deps.hooks.termsAccepted,
  });
  const interceptors: Interceptor[] = [
    createErrorBoundary(deps.serviceDomain),
    createDeadline(limits.requestTimeoutMs),
    createAuthInterceptor({
      authenticator,
      openServices: [HealthService.typeName, ...reflectionServiceNames],
      grantServices: deps.hooks.grantServices,
      grantsChanged: deps.grants.clear,
    }),
    // After authorization (a caller who may not call learns nothing of the terms), before the unit of work.
    ...(termsGate ? [termsGate] : []),
    createUnitOfWork({ db: deps.database.db, registry, writingServices: WRITING_SERVICES }),
  ];
  const compression = [compressionGzip, compressionBrotli];
  const router = createConnectRouter({
    interceptors,
    acceptCompression: compression,
    // Bounds each message read, and each decompression (zlib's maxOutputLength), on every RPC protocol.
    readMaxBytes: limits.maxRequestBytes,
    jsonOptions: { registry },
  });
  const bindings = serviceBindings(deps.bindings);
  registerServices(router, bindings);

  const health = createHealth();
  health.register(router);
  registerReflection(router, { files: allFiles, services: () => [...new Set(router.handlers.map((h) => h.service.typeName))] });

  // Each RPC path: its handler (behind the protocol layer's error completion) and its metric labels.
  const rpcByPath = new Map<string, { handler: UniversalHandler; service: string; method: string }>(
    router.handlers.map((h) => [
      h.requestPath,
      {
        handler: withClientTimeoutCap(withPublicErrors(h, { serviceDomain: deps.serviceDomain, registry, compression, maxRequestBytes: limits.maxRequestBytes }), limits.requestTimeoutMs),
        service: h.service.typeName,
        method: h.method.name,
      },
    ]),
  );
  // The unary methods, called in process by the gRPC unary path and the REST gateway.
  const implementations = unaryImplementationsOf((r) => registerServices(r, bindings));
  // gRPC unary calls in their plain form, answered without Connect's stream machinery (grpc-unary.ts).
  const grpcUnary = createGrpcUnary(implementations, {
    interceptors,
    serviceDomain: deps.serviceDomain,
    maxRequestBytes: limits.maxRequestBytes,
    requestTimeoutMs: limits.requestTimeoutMs,
  });
  const gateway = createRestGateway({
    implementations,
    interceptors,
    methods: servedMethods,
    registry,
    serviceDomain: deps.serviceDomain,
    maxBodyBytes: limits.maxRequestBytes,
    requestTimeoutMs: limits.requestTimeoutMs,
  });

  // The whole server ("") is NOT_SERVING while its database does not answer. PostgreSQL is probed every
  // second; the embedded database cannot become unreachable, and is probed only by /healthz.
  const database = watchDatabase({
    probe: () => deps.database.db.execute(sql`select 1`),
    onChange: (ok) => health.setStatus("", ok ? ServingStatus.SERVING : ServingStatus.NOT_SERVING),
    intervalMs: deps.database.kind === "postgres" ? DATABASE_PROBE_INTERVAL_MS : 0,
    timeoutMs: DATABASE_PROBE_TIMEOUT_MS,
  });
  // Draining (a graceful stop has begun): 503 DRAINING, while requests are still served for SHUTDOWN_DRAIN_MS,
  // so a load balancer's check takes the server out of rotation before it stops accepting.
  let draining = false;
  const healthz = async (res: http.ServerResponse | http2.Http2ServerResponse) => {
    const ok = !draining && (await database.check()) && health.getStatus("") === ServingStatus.SERVING;
    // Replicas are listed with their state and lag; one that is down does not make the server unhealthy
    // (its reads go to the primary).
    const reads = deps.database.stats().reads;
    const replicas = reads?.replicas.map(({ replica, state, lagSeconds, lagBytes }) => ({ replica, state, lagSeconds: lagSeconds ?? null, lagBytes: lagBytes ?? null }));
    const body = JSON.stringify({ status: ok ? "SERVING" : draining ? "DRAINING" : "NOT_SERVING", ...(replicas ? { replicas } : {}) });
    (res as http.ServerResponse).writeHead(ok ? 200 : 503, { "content-type": "application/json" }).end(body);
  };

  const oidc = createOidcRoutes({ issuerUrl: deps.issuerUrl, keys: deps.keys, serviceDomain: deps.serviceDomain });

  // The API reference: /openapi.json generated from the descriptors of what this server serves, and /docs.
  const docs = createDocsRoutes({ methods: servedMethods, serviceDomain: deps.serviceDomain });

  const metrics = createMetrics();
  metrics.observeDatabase(deps.database.stats);
  for (const r of deps.routes) r.observe?.(metrics.registry);
  const observer = createObserver(metrics);
  const metricsRoute = deps.metricsToken ? createMetricsRoute(metrics, deps.metricsToken) : undefined;

  // Every request passes here first, on every protocol and route: observer.begin gives it its id and record
  // (the access line and the metrics at its end), which the layers below complete.
  const handler: RequestHandler = (req, res) => {
    const url = req.url ?? "/";
    const path = url.split("?", 1)[0]!;
    const rpc = rpcByPath.get(path);
    if (rpc) {
      const record = observer.begin(req, res, rpcProtocolOf(req.headers["content-type"]), rpc.service, rpc.method);
      // Connect's handler for the protocol; `body` when the gRPC unary path read the request and passed it on.
      const viaConnect = (body?: AsyncIterable<Uint8Array>) => {
        const uReq = universalRequestFromNodeRequest(req, res, undefined, callContextValues(req, record));
        rpc
          .handler(body ? { ...uReq, body } : uReq)
          .then((uRes) => universalResponseToNodeResponse(uRes, res))
          .catch((err: unknown) => {
            // A client that went away is the access line's "clientClosed" (info); anything else is a fault.
            if (!isClientGone(err, res)) log.warn("rpc response failed", { requestId: record.id, path, err });
          });
      };
      const procedure = `${rpc.service}/${rpc.method}`;
      if (req.httpVersionMajor === 2 && grpcUnary.takes(req as http2.Http2ServerRequest, procedure)) {
        grpcUnary.handle(req as http2.Http2ServerRequest, res as http2.Http2ServerResponse, procedure, record, viaConnect);
      } else viaConnect();
      return;
    }
    if (oidc.handles(path)) {
      const record = observer.begin(req, res, "rest", "http", "oidc");
      void oidc.handle(req, res, path, record.id);
      return;
    }
    if (docs.handles(path)) {
      void docs.handle(req, res, path);
      return;
    }
    const route = deps.routes.find((r) => r.handles(path));
    if (route) {
      const record = observer.begin(req, res, "rest", "http", route.name);
      void route.handle(req, res, path, url.slice(path.length + 1), record);
      return;
    }
    if (path === "/healthz" && (req.method === "GET" || req.method === "HEAD")) {
      observer.begin(req, res, "rest", "http", "healthz");
      void healthz(res);
      return;
    }
    if (metricsRoute && path === "/metrics") {
      observer.begin(req, res, "rest", "http", "metrics");
      void metricsRoute(req, res);
      return;
    }
    // Labelled "unknown" until the gateway matches a route (it then names the method).
    const record = observer.begin(req, res, "rest", "unknown", "unknown");
    gateway.handle(req, res, record).catch((err: unknown) => log.error("gateway failed", { requestId: record.id, path, err }));
  };

  const streaming = deps.routes.filter((r) => r.streamsBody);
  return {
    handler: withCors(handler, deps.corsAllowedOrigins ?? []),
    streamsBody: (method, path) => streaming.some((r) => r.handles(path) && r.streamsBody!(method, path)),
    metrics,
    drain() {
      draining = true;
      health.shutdown();
    },
    async close() {
      database.close();
    },
  };
}
