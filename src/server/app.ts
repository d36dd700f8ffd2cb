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
import { createListPlanner } from "../kernel/list/index.js";
import { createUnitOfWork } from "../kernel/unit-of-work.js";
import { createAuthenticator, createAuthInterceptor, type ExternalVerifier, type IdentityDirectory, type KeyStore } from "../kernel/auth/index.js";
import { createGrantsCache, type GrantsCache } from "../kernel/auth/grants-cache.js";
import { canAssume, createExternalVerifier } from "../kernel/auth/external.js";
import { createOidcRoutes } from "./oidc-routes.js";
import { createDocsRoutes } from "./docs-routes.js";
import { createScimRoutes } from "../iam/scim.routes.js";
import { log } from "../kernel/log.js";
import type { RateLimits } from "../kernel/rate-limit.js";
import { DEFAULT_GROUP_ACCESS_REQUEST_WINDOW_MS, DEFAULT_LIMITS, DEFAULT_TERMS, type TermsSettings } from "../config.js";
import { createTermsGate } from "../kernel/terms-gate.js";
import { createTermsStore } from "../iam/terms.store.js";
import type { Database } from "../db/client.js";
import { createRestGateway } from "../gateway/index.js";
import { pingBindings } from "../ping/ping.service.js";
import { bindPartial, type DomainDeps, type ServiceBinding } from "./bindings.js";
import { grantServiceNames, iamBindings } from "../iam/index.js";
import { createProviderLogin } from "../iam/sso-login.js";
import { stsBindings } from "../sts/index.js";
import { registryBindings } from "../registry/index.js";
import { librariesBindings } from "../libraries/index.js";
import { advisoryBindings } from "../advisory/index.js";
import { vulnerabilitiesBindings } from "../vulnerabilities/index.js";
import { eventsBindings } from "../events/index.js";
import { sinkPolicyFor, type SinkPolicy } from "../events/sinks.js";
import { createSecretBox } from "../iam/secret-box.js";
import { createHealth, ServingStatus } from "./health.js";
import { watchDatabase } from "./database-health.js";
import { registerReflection, reflectionServiceNames } from "./reflection.js";
import { Health as HealthService } from "../../gen/health/v1/health_pb.js";
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

export interface AppDeps {
  database: Database;
  serviceDomain: string;
  /** Signs list page tokens; shared by every replica through the database (see db/secrets.ts). */
  pageTokenSecret: Uint8Array;
  /** This server's OIDC issuer URL (the `iss` and audience of the tokens it mints). */
  issuerUrl: string;
  /** Signing keys shared by every replica through the database. */
  keys: KeyStore;
  /** Identities and their grants, as authentication reads them (the IAM domain's: iam/directory.ts). */
  directory: IdentityDirectory;
  /**
   * Verifies tokens of external OIDC issuers against identities' claimMatch. Default: the OIDC verifier
   * (kernel/auth/external.ts) with plain-http loopback issuers refused.
   */
  external?: ExternalVerifier;
  /** Budgets of repeated failures per caller (kernel/rate-limit.ts). Default DEFAULT_RATE_LIMITS. */
  rateLimits?: Partial<RateLimits>;
  /** Which event sinks subscriptions may name. Default: the production policy (https, public addresses only). */
  sinks?: SinkPolicy;
  /**
   * The key that encrypts identity providers' OIDC client secrets (iam/secret-box.ts). Default none: no
   * client secret can be stored.
   */
  idpSecretKey?: Uint8Array | undefined;
  /** Whether identity providers may name a loopback issuer over plain http (development). Default false. */
  allowInsecureLoopbackIssuers?: boolean;
  /** Lifetime of a refresh token of the token exchange. Default 30 days. */
  refreshTokenTtlSeconds?: number;
  /** The documents organizations accept, and the methods that need them (config.ts). Default DEFAULT_TERMS. */
  terms?: TermsSettings;
  /** How long a repeated request for access to one group is refused. Default one hour. */
  groupAccessRequestWindowMs?: number;
  /** Implementations replacing or completing the domain ones (tests use this to inject behaviour). */
  overrides?: readonly ServiceBinding[];
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
  /** This server's metrics (its own registry): the metrics listener serves them; main adds the event worker. */
  metrics: Metrics;
  /** Marks the service NOT_SERVING for health checks (first step of a graceful stop). */
  drain(): void;
  /** Stops what the app runs besides requests (the grants subscription); the database stays open. */
  close(): Promise<void>;
}

/**
 * What the domains built so far implement. Domains add their bindings here; the authorization matrix and
 * the outbox tests read this list to find the services they must cover.
 */
export function domainBindings(domain: DomainDeps): ServiceBinding[] {
  return [...pingBindings, ...iamBindings(domain), ...stsBindings(domain), ...registryBindings(domain), ...eventsBindings(domain), ...librariesBindings(domain), ...vulnerabilitiesBindings(domain), ...advisoryBindings(domain)];
}

/**
 * The binding of every API service, so every route of the contract exists: a domain's implementation, an
 * override, or (a service no domain builds yet) none, whose methods answer UNIMPLEMENTED with ErrorInfo on
 * every protocol. Domains add their bindings here.
 */
function serviceBindings(deps: AppDeps, external: ExternalVerifier, grants: GrantsCache): ServiceBinding[] {
  const grantsChanged = grants.clear;
  const domain: DomainDeps = {
    db: deps.database.db,
    lists: createListPlanner({ secret: deps.pageTokenSecret }),
    issuerUrl: deps.issuerUrl,
    keys: deps.keys,
    external,
    grants: grants.get,
    // Logins through identity providers verify ID tokens with the same verifier (its discovery and key caches).
    providerLogin: canAssume(external) ? createProviderLogin({ db: deps.database.db, verifier: external, grantsChanged }) : undefined,
    rateLimits: deps.rateLimits,
    sinks: deps.sinks ?? sinkPolicyFor("production"),
    secretBox: createSecretBox(deps.idpSecretKey),
    allowInsecureLoopbackIssuers: deps.allowInsecureLoopbackIssuers ?? false,
    refreshTokenTtlSeconds: deps.refreshTokenTtlSeconds,
    terms: deps.terms ?? DEFAULT_TERMS,
    groupAccessRequestWindowMs: deps.groupAccessRequestWindowMs ?? DEFAULT_GROUP_ACCESS_REQUEST_WINDOW_MS,
  };
  const bound = new Map<string, ServiceBinding>();
  for (const b of [...domainBindings(domain), ...(deps.overrides ?? [])]) {
    bound.set(b.service.typeName, b);
  }
  return servedServices.map((service) => bound.get(service.typeName) ?? bindPartial(service, {}));
}

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
  const external =
    deps.external ??
    createExternalVerifier({ directory: deps.directory, allowInsecureLoopback: false, self: { issuer: deps.issuerUrl, keys: deps.keys } });
  const grants = createGrantsCache({ load: (uid) => deps.directory.grants(uid), subscribe: deps.database.listen });
  const authenticator = createAuthenticator({
    directory: deps.directory,
    keys: deps.keys,
    issuer: deps.issuerUrl,
    audience: deps.issuerUrl,
    external,
    grants: grants.get,
  });
  const termsStore = createTermsStore(deps.database.db);
  const termsGate = createTermsGate({
    ...(deps.terms ?? DEFAULT_TERMS),
    methods: servedMethods,
    accepted: (uid) => termsStore.acceptedFor(uid),
  });
  const interceptors: Interceptor[] = [
    createErrorBoundary(deps.serviceDomain),
    createDeadline(limits.requestTimeoutMs),
    createAuthInterceptor({
      authenticator,
      openServices: [HealthService.typeName, ...reflectionServiceNames],
      grantServices: grantServiceNames,
      grantsChanged: grants.clear,
    }),
    // After authorization (a caller who may not call learns nothing of the terms), before the unit of work.
    ...(termsGate ? [termsGate] : []),
    createUnitOfWork({ db: deps.database.db, registry }),
  ];
  const compression = [compressionGzip, compressionBrotli];
  const router = createConnectRouter({
    interceptors,
    acceptCompression: compression,
    // Bounds each message read, and each decompression (zlib's maxOutputLength), on every RPC protocol.
    readMaxBytes: limits.maxRequestBytes,
    jsonOptions: { registry },
  });
  const bindings = serviceBindings(deps, external, grants);
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
  const healthz = async (res: http.ServerResponse | http2.Http2ServerResponse) => {
    const ok = (await database.check()) && health.getStatus("") === ServingStatus.SERVING;
    const body = JSON.stringify({ status: ok ? "SERVING" : "NOT_SERVING" });
    (res as http.ServerResponse).writeHead(ok ? 200 : 503, { "content-type": "application/json" }).end(body);
  };

  const oidc = createOidcRoutes({ issuerUrl: deps.issuerUrl, keys: deps.keys, serviceDomain: deps.serviceDomain });

  // The API reference: /openapi.json generated from the descriptors of what this server serves, and /docs.
  const docs = createDocsRoutes({ methods: servedMethods, serviceDomain: deps.serviceDomain });

  // SCIM 2.0 (identity providers provisioning their users): its own paths and shapes, outside the contract.
  const scim = createScimRoutes({ db: deps.database.db, issuerUrl: deps.issuerUrl, maxBodyBytes: limits.maxRequestBytes, grantsChanged: grants.clear });

  const metrics = createMetrics();
  metrics.observeDatabase(deps.database.stats);
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
    if (scim.handles(path)) {
      const record = observer.begin(req, res, "rest", "http", "scim");
      void scim.handle(req, res, path, url.slice(path.length + 1), record);
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

  return {
    handler: withCors(handler, deps.corsAllowedOrigins ?? []),
    metrics,
    drain: () => health.shutdown(),
    async close() {
      database.close();
      await grants.close();
    },
  };
}
