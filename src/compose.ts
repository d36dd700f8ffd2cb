// The one composition root: configuration -> database -> kernel services -> domain modules -> server, workers
// and metrics. main.ts keeps only the process's life (signals, exit codes); tests build the same app through
// composeApp, with their overrides.
//
// Start-up time (bench/cold-start.ts): what serves requests is hundreds of modules (Connect, the generated
// descriptors, every domain), and loading them is most of a start. So only what reads the configuration is
// imported up front; the rest is imported at once, while the database connects and checks its migrations,
// which is time spent waiting on the network.
import { createServer } from "node:net";
import { ConfigError, DEFAULT_GROUP_ACCESS_REQUEST_WINDOW_MS, DEFAULT_TERMS, loadConfig, type Config, type TermsSettings } from "./config.js";
import { log, setLogLevel } from "./kernel/log.js";
import type { Database, Db } from "./db/client.js";
import type { ExternalVerifier, KeyStore } from "./kernel/auth/index.js";
import type { ExternalVerifierOptions } from "./kernel/auth/external.js";
import type { DomainInstance, DomainModule, KernelDeps, KernelHooks, RunningWorker, ServiceBinding } from "./kernel/module.js";
import type { RateLimits } from "./kernel/rate-limit.js";
import type { SinkPolicy } from "./events/sinks.js";
import type { DeliveryOptions, DeliveryWorker } from "./events/delivery/worker.js";
import type { App, RequestLimits } from "./server/app.js";
import type { BlobStore } from "./registry/oci/contracts.js";
import type { listenMetrics, MetricsListener } from "./server/metrics-route.js";

/** The modules that serve, loaded side by side with the database's start. */
async function loadServing() {
  const [client, secrets, iamBootstrap, managedRoles, auth, external, grantsCache, lists, outbound, modules, iam, secretBox, sinks, app, listener, metricsRoute] = await Promise.all([
    import("./db/client.js"),
    import("./db/secrets.js"),
    import("./iam/bootstrap.js"),
    import("./iam/managed-roles.js"),
    import("./kernel/auth/index.js"),
    import("./kernel/auth/external.js"),
    import("./kernel/auth/grants-cache.js"),
    import("./kernel/list/index.js"),
    import("./kernel/outbound.js"),
    import("./modules.js"),
    import("./iam/index.js"),
    import("./iam/secret-box.js"),
    import("./events/sinks.js"),
    import("./server/app.js"),
    import("./server/listener.js"),
    import("./server/metrics-route.js"),
  ]);
  return {
    ...client,
    ...secrets,
    ...iamBootstrap,
    ...managedRoles,
    ...auth,
    ...external,
    ...grantsCache,
    ...lists,
    ...outbound,
    ...modules,
    createProviderLogin: iam.createProviderLogin,
    ...secretBox,
    ...sinks,
    ...app,
    ...listener,
    ...metricsRoute,
  };
}

let serving: ReturnType<typeof loadServing> | undefined;

function loaded(): ReturnType<typeof loadServing> {
  if (!serving) {
    serving = loadServing();
    // Awaited later; a failure meanwhile (while the database opens) must not count as unhandled.
    serving.catch(() => {});
  }
  return serving;
}

/** What the app is built from: the database and secrets, and every setting a deployment or a test may choose. */
export interface ComposeDeps {
  database: Database;
  serviceDomain: string;
  /** Signs list page tokens; shared by every replica through the database (see db/secrets.ts). */
  pageTokenSecret: Uint8Array;
  /** This server's OIDC issuer URL (the `iss` and audience of the tokens it mints). */
  issuerUrl: string;
  /** Signing keys shared by every replica through the database. */
  keys: KeyStore;
  /** Verifies tokens of external OIDC issuers against identities' claimMatch. Default: the OIDC verifier (kernel/auth/external.ts). */
  external?: ExternalVerifier;
  /** Options of the default external verifier. Default: plain-http loopback issuers refused. */
  externalOptions?: Partial<Omit<ExternalVerifierOptions, "directory" | "self">>;
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
  /** Implementations replacing or completing the modules' ones (tests use this to inject behaviour). */
  overrides?: readonly ServiceBinding[];
  /** What one request may use; each limit left out takes its default (defaultRequestLimits). */
  limits?: Partial<RequestLimits>;
  /** Browser origins allowed to call the API (CORS, server/cors.ts). Default none: no CORS header at all. */
  corsAllowedOrigins?: readonly string[];
  /** METRICS_TOKEN: when set, /metrics is also served on the API port to requests bearing it. */
  metricsToken?: string | undefined;
  /** The event delivery worker's settings, when it is started (startEventDelivery). */
  delivery?: Partial<DeliveryOptions>;
  /** Where the registry keeps blobs (/v2/). Default none: the registry's data plane is not served. */
  blobs?: BlobStore | undefined;
}

export interface Composed {
  app: App;
  /** Starts the event delivery worker; its metrics join the app's. */
  startEventDelivery(): Promise<DeliveryWorker>;
  /** Stops what runs besides requests (the app's database probe, the grants subscription); the database stays open. */
  close(): Promise<void>;
}

/** Creates a module, checking that it implements exactly the services it lists. */
export function buildModule<D, W extends RunningWorker>(module: DomainModule<D, W>, deps: D): DomainInstance<W> {
  const instance = module.create(deps);
  const listed = module.services.map((s) => s.typeName).sort();
  const bound = instance.bindings.map((b) => b.service.typeName).sort();
  if (listed.join() !== bound.join()) throw new Error(`module ${module.name} lists the services ${listed.join(", ")} but binds ${bound.join(", ")}`);
  return instance;
}

/** The hooks of the one module that owns identities. */
function kernelHooks(modules: readonly DomainModule<never>[], db: Db): KernelHooks {
  const owners = modules.filter((m) => m.hooks);
  if (owners.length !== 1) throw new Error(`exactly one module must give the kernel its hooks; ${owners.length} do`);
  return owners[0]!.hooks!({ db });
}

/** The kernel's services, the domain modules each given its dependencies, and the server over them. */
export async function composeApp(deps: ComposeDeps): Promise<Composed> {
  const s = await loaded();
  const { modules } = s;
  const db = deps.database.db;
  const hooks = kernelHooks(s.domainModules, db);
  const external =
    deps.external ??
    s.createExternalVerifier({ allowInsecureLoopback: false, ...deps.externalOptions, directory: hooks.directory, self: { issuer: deps.issuerUrl, keys: deps.keys } });
  const grants = s.createGrantsCache({ load: (uid) => hooks.directory.grants(uid), subscribe: deps.database.listen });
  const limits: RequestLimits = { ...s.defaultRequestLimits, ...deps.limits };
  const kernel: KernelDeps = { db, lists: s.createListPlanner({ secret: deps.pageTokenSecret }), issuerUrl: deps.issuerUrl, keys: deps.keys };
  const sinks = deps.sinks ?? s.sinkPolicyFor("production");
  const terms = deps.terms ?? DEFAULT_TERMS;
  const events = buildModule(modules.events, { ...kernel, sinks, listen: deps.database.listen, delivery: deps.delivery });
  const instances: DomainInstance[] = [
    buildModule(modules.ping, undefined),
    buildModule(modules.iam, {
      ...kernel,
      external,
      grants: grants.get,
      rateLimits: deps.rateLimits,
      sinks,
      secretBox: s.createSecretBox(deps.idpSecretKey),
      allowInsecureLoopbackIssuers: deps.allowInsecureLoopbackIssuers ?? false,
      terms,
      groupAccessRequestWindowMs: deps.groupAccessRequestWindowMs ?? DEFAULT_GROUP_ACCESS_REQUEST_WINDOW_MS,
      grantsChanged: grants.clear,
      maxBodyBytes: limits.maxRequestBytes,
    }),
    buildModule(modules.sts, {
      ...kernel,
      external,
      grants: grants.get,
      // Logins through identity providers verify ID tokens with the same verifier (its discovery and key caches).
      providerLogin: s.canAssume(external) ? s.createProviderLogin({ db, verifier: external, grantsChanged: grants.clear }) : undefined,
      rateLimits: deps.rateLimits,
      refreshTokenTtlSeconds: deps.refreshTokenTtlSeconds,
    }),
    buildModule(modules.registry, {
      ...kernel,
      dataPlane: deps.blobs ? { blobs: deps.blobs, directory: hooks.directory, external, grants: grants.get } : undefined,
    }),
    events,
    buildModule(modules.libraries, kernel),
    buildModule(modules.vulnerabilities, kernel),
    buildModule(modules.advisory, kernel),
  ];
  const app = s.createApp({
    database: deps.database,
    serviceDomain: deps.serviceDomain,
    issuerUrl: deps.issuerUrl,
    keys: deps.keys,
    hooks,
    external,
    grants,
    bindings: [...instances.flatMap((i) => i.bindings), ...(deps.overrides ?? [])],
    routes: instances.flatMap((i) => i.routes ?? []),
    terms,
    limits,
    corsAllowedOrigins: deps.corsAllowedOrigins,
    metricsToken: deps.metricsToken,
  });
  return {
    app,
    async startEventDelivery() {
      const worker = await events.startWorker!();
      app.metrics.observeWorker(worker);
      return worker;
    },
    async close() {
      await app.close();
      await grants.close();
    },
  };
}

/**
 * Development only: make sure a local organization with an owner exists, and print a token for that owner,
 * so a first authenticated call works in one paste. Never runs in production mode.
 */
async function developmentLogin(db: Db, keys: KeyStore, config: Config): Promise<void> {
  const { bootstrap, mintToken } = await loaded();
  const { group, identity, created } = await bootstrap(db, {
    issuer: config.issuerUrl,
    subject: "local-admin",
    organization: "local",
    identityName: "local admin",
  });
  const { token, expiry } = await mintToken(keys, {
    issuer: config.issuerUrl,
    subject: identity,
    audience: config.issuerUrl,
    ttlSeconds: 12 * 3600,
  });
  const base = `http://localhost:${config.port}`;
  const kept = config.issuerUrl !== base && config.issuerDefaulted;
  process.stdout.write(
    [
      "",
      `Development mode: ${created ? "created" : "found"} organization "local" (${group}) owned by identity ${identity}.`,
      ...(kept ? [`Its tokens keep the issuer ${config.issuerUrl} of the first start on this data (set ISSUER_URL to change it).`] : []),
      `A token for it, valid until ${expiry.toISOString()} (a new one is printed at every start):`,
      "",
      `  export TOKEN=${token}`,
      `  curl -H "Authorization: Bearer $TOKEN" ${base}/iam/v2/groups/${group}`,
      "",
      "Set SERVER_MODE=production to disable this.",
      "",
    ].join("\n") + "\n",
  );
}

/** The API port's listen failures the user can act on, as a ConfigError naming PORT or HOST. */
/** Listens on the configured address for a moment and lets go: rejects as listen() would (EADDRINUSE, EACCES...). */
function portAvailable(config: Config): Promise<void> {
  if (config.port === 0) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen({ port: config.port, host: config.host, exclusive: true }, () => probe.close(() => resolve()));
  });
}

function listenFailure(err: unknown, config: Config): ConfigError | undefined {
  const at = `${config.host}:${config.port}`;
  switch ((err as NodeJS.ErrnoException).code) {
    case "EADDRINUSE":
      return new ConfigError(`PORT ${config.port}: another process already listens on ${at}: stop it, or set PORT to a free port (PORT=${config.port === 8080 ? 8081 : 8080} npm start)`);
    case "EACCES":
      return new ConfigError(`PORT ${config.port}: not allowed to listen on ${at} (ports below 1024 need privileges): set PORT to 1024 or above`);
    case "EADDRNOTAVAIL":
      return new ConfigError(`HOST ${config.host}: not an address of this machine: set HOST to one of its addresses (127.0.0.1, or 0.0.0.0 for every interface)`);
    case "ENOTFOUND":
    case "EAI_AGAIN":
      return new ConfigError(`HOST ${config.host}: the name is not known: set HOST to an address of this machine`);
  }
  return undefined;
}

/**
 * The metrics listener (METRICS_ADDR). One the operator named must start; the default one (127.0.0.1:9464)
 * is given up with a warning when its port is taken (another server on the same machine has it), so a second
 * replica on one host still serves the API.
 */
async function startMetricsListener(app: { metrics: Parameters<typeof listenMetrics>[0] }, config: Config): Promise<MetricsListener | undefined> {
  const at = config.metrics.listen;
  if (!at) return undefined;
  const serve = (await loaded()).listenMetrics;
  try {
    return await serve(app.metrics, at);
  } catch (err) {
    if (config.metrics.listenExplicit) throw new ConfigError(`METRICS_ADDR ${at.host}:${at.port}: cannot listen: ${(err as Error).message}`);
    log.warn("metrics: the default listener cannot start; set METRICS_ADDR (or off)", { host: at.host, port: at.port, err: (err as Error).message });
    return undefined;
  }
}

/**
 * Development without ISSUER_URL: the issuer is http://localhost:<PORT> of the first start on this data, kept
 * with it. Tokens name their issuer and the local organization's owner is found by it, so an issuer that
 * followed PORT made a restart on another port refuse every token printed before and create a second
 * "local" organization. The discovery document and keys are served on the port in use; what differs is said.
 */
async function keepDevelopmentIssuer(db: Db, config: Config): Promise<Config> {
  if (config.mode !== "development" || !config.issuerDefaulted) return config;
  const { ensureStored } = await loaded();
  const issuerUrl = await ensureStored(db, "development-issuer", config.issuerUrl);
  if (issuerUrl === config.issuerUrl) return config;
  log.info(
    `development issuer ${issuerUrl} kept from the first start on this data although PORT is ${config.port}: ` +
      "the tokens and organization made before still work; set ISSUER_URL to choose another issuer",
    { issuer: issuerUrl, port: config.port },
  );
  return { ...config, issuerUrl, externalAudiences: config.externalAudiencesDefaulted ? [issuerUrl] : config.externalAudiences };
}

/** The server while it runs. */
export interface Running {
  /**
   * A graceful stop: NOT_SERVING for health checks (and SHUTDOWN_DRAIN_MS of serving still), no new connections or streams (HTTP/2 GOAWAY), requests
   * in flight finish (for at most the grace period), then the database closes.
   */
  stop(signal: string): Promise<void>;
  /** Development: prints an owner's token for a first call (nothing in production). */
  greet(): Promise<void>;
}

/** Reads the configuration and starts serving: database, kernel, modules, server, workers, metrics. */
export async function start(): Promise<Running> {
  let config = loadConfig();
  setLogLevel(config.logLevel);
  void loaded();
  // db/client.js is among them: the database opens as soon as it is loaded, while the rest go on loading.
  // A port that cannot be had is said at once, not after the database opened (a first start creates the
  // embedded one: tens of seconds). The listener still binds it below; this only answers early.
  await portAvailable(config).catch((err: unknown) => {
    throw listenFailure(err, config) ?? err;
  });
  const { openDatabase } = await import("./db/client.js");
  const { createFsBlobStore } = await import("./registry/oci/fs-store.js");
  const { openBlobStore } = await import("./registry/oci/storage.js");
  const { startConfiguredGcWorker } = await import("./registry/oci/gc.js");
  const { createDbBlobReferences } = await import("./registry/oci/blob-references.js");
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, postgres: { ...config.databasePool, replicas: config.replicas }, share: "serve" });
  const { ensureSecret, createKeyStore, ensureManagedRoles, sinkPolicyFor, publicOnlyFetch, systemResolver, listen } = await loaded();
  config = await keepDevelopmentIssuer(database.db, config);
  // Independent of each other: side by side (on PostgreSQL, each is a few round trips).
  const [pageTokenSecret, storedIdpKey, keys] = await Promise.all([
    ensureSecret(database.db, "page-token"),
    // Development without IDP_SECRET_KEY: a key kept in the database (as safe as the database itself).
    config.idpSecretKey === undefined && config.mode === "development" ? ensureSecret(database.db, "idp-secret-key") : undefined,
    createKeyStore(database.db, { subscribe: database.listen }),
    ensureManagedRoles(database.db),
  ]);
  const idpSecretKey = config.idpSecretKey ?? storedIdpKey;
  if (!idpSecretKey) log.warn("IDP_SECRET_KEY is not set: identity providers cannot be given an OIDC client secret (PKCE only)");
  // Where the server may connect on a user's word (event sinks, external issuers): public addresses only,
  // unless the operator allows private ones (ALLOW_PRIVATE_OUTBOUND; the default in development).
  const sinks = { ...sinkPolicyFor(config.mode), publicOnly: !config.allowPrivateOutbound };
  const { delivery, ...deliveryOptions } = config.events;
  // REGISTRY_STORAGE: S3-compatible storage shared by replicas, or the filesystem (the default).
  const blobs = openBlobStore(config.registry.storage, () => createFsBlobStore(config.registryStorageDir));
  const composed = await composeApp({
    database,
    serviceDomain: config.serviceDomain,
    pageTokenSecret,
    issuerUrl: config.issuerUrl,
    keys,
    sinks,
    idpSecretKey,
    allowInsecureLoopbackIssuers: config.allowInsecureLoopbackIssuers,
    refreshTokenTtlSeconds: config.refreshTokenTtlSeconds,
    terms: config.terms,
    groupAccessRequestWindowMs: config.groupAccessRequestWindowMs,
    limits: { maxRequestBytes: config.maxRequestBytes, requestTimeoutMs: config.requestTimeoutMs },
    corsAllowedOrigins: config.corsAllowedOrigins,
    metricsToken: config.metrics.token,
    externalOptions: {
      allowInsecureLoopback: config.allowInsecureLoopbackIssuers,
      audiences: config.externalAudiences,
      ...(config.allowPrivateOutbound ? {} : { fetch: publicOnlyFetch(systemResolver) }),
    },
    delivery: deliveryOptions,
    blobs,
  });
  const { app } = composed;
  const listener = await listen(app.handler, {
    port: config.port,
    host: config.host,
    tls: config.tls,
    errorDomain: config.serviceDomain,
    limits: { ...config.connections, requestTimeoutMs: config.requestTimeoutMs },
    streamsBody: app.streamsBody,
  }).catch((err: unknown) => {
    throw listenFailure(err, config) ?? err;
  });
  const events = delivery ? await composed.startEventDelivery() : undefined;
  const metricsListener = await startMetricsListener(app, config);
  // REGISTRY_GC_INTERVAL_MINUTES: this process also collects the registry's garbage (off by default).
  const gc = startConfiguredGcWorker(blobs, createDbBlobReferences(database.db), config.registry);

  return {
    async stop(signal) {
      log.info("stopping", { signal, drainMs: config.shutdownDrainMs, graceMs: config.shutdownGraceMs });
      app.drain();
      // SHUTDOWN_DRAIN_MS: health checks answer NOT_SERVING while requests are still accepted and served, long
      // enough for a load balancer's checks to take this server out of rotation; then it stops accepting.
      if (config.shutdownDrainMs > 0) await new Promise((resolve) => setTimeout(resolve, config.shutdownDrainMs));
      // Requests and deliveries in flight finish side by side, each within the grace period.
      await Promise.all([listener.close(config.shutdownGraceMs), events?.stop(config.shutdownGraceMs), metricsListener?.close(), gc?.stop()]);
      await composed.close();
      await blobs.close?.();
      await database.close();
      log.info("stopped");
    },
    async greet() {
      if (config.mode === "development") await developmentLogin(database.db, keys, config);
    },
  };
}
