// The one wiring point: config -> database -> services -> server.
//
// Start-up time (bench/cold-start.ts): what serves requests is hundreds of modules (Connect, the generated
// descriptors, every domain), and loading them is most of a start. So only what reads the configuration is
// imported up front; the rest is imported at once, while the database connects and checks its migrations,
// which is time spent waiting on the network.
import { ConfigError, loadConfig, type Config } from "./config.js";
import { DataDirLockedError } from "./db/data-dir-lock.js";
import { DatabaseOpenError } from "./db/open-errors.js";
import { log, setLogLevel } from "./kernel/log.js";
import type { Db } from "./db/client.js";
import type { KeyStore } from "./kernel/auth/index.js";
import type { listenMetrics, MetricsListener } from "./server/metrics-route.js";

/** The modules that serve, loaded side by side with the database's start. */
async function loadServing() {
  const [client, secrets, iamBootstrap, directory, managedRoles, auth, external, outbound, app, sinks, worker, listener, metricsRoute] = await Promise.all([
    import("./db/client.js"),
    import("./db/secrets.js"),
    import("./iam/bootstrap.js"),
    import("./iam/directory.js"),
    import("./iam/managed-roles.js"),
    import("./kernel/auth/index.js"),
    import("./kernel/auth/external.js"),
    import("./kernel/outbound.js"),
    import("./server/app.js"),
    import("./events/sinks.js"),
    import("./events/delivery/worker.js"),
    import("./server/listener.js"),
    import("./server/metrics-route.js"),
  ]);
  return {
    ...client,
    ...secrets,
    ...iamBootstrap,
    ...directory,
    ...managedRoles,
    ...auth,
    ...external,
    ...outbound,
    ...app,
    ...sinks,
    ...worker,
    ...listener,
    ...metricsRoute,
  };
}

/**
 * Development only: make sure a local organization with an owner exists, and print a token for that owner,
 * so a first authenticated call works in one paste. Never runs in production mode.
 */
async function developmentLogin(db: Db, keys: KeyStore, config: Config): Promise<void> {
  const { bootstrap, mintToken } = await serving;
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

let serving: ReturnType<typeof loadServing>;

/** The API port's listen failures the user can act on, as a ConfigError naming PORT or HOST. */
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
  const serve = (await serving).listenMetrics;
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
  const { ensureStored } = await serving;
  const issuerUrl = await ensureStored(db, "development-issuer", config.issuerUrl);
  if (issuerUrl === config.issuerUrl) return config;
  log.info(
    `development issuer ${issuerUrl} kept from the first start on this data although PORT is ${config.port}: ` +
      "the tokens and organization made before still work; set ISSUER_URL to choose another issuer",
    { issuer: issuerUrl, port: config.port },
  );
  return { ...config, issuerUrl, externalAudiences: config.externalAudiencesDefaulted ? [issuerUrl] : config.externalAudiences };
}

async function main(): Promise<void> {
  let config = loadConfig();
  setLogLevel(config.logLevel);
  serving = loadServing();
  // Awaited below; a failure meanwhile (while the database opens) must not count as unhandled.
  serving.catch(() => {});
  // db/client.js is among them: the database opens as soon as it is loaded, while the rest go on loading.
  const { openDatabase } = await import("./db/client.js");
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, postgres: config.databasePool, share: "serve" });
  const {
    ensureSecret,
    createKeyStore,
    ensureManagedRoles,
    createIdentityDirectory,
    sinkPolicyFor,
    createApp,
    createExternalVerifier,
    publicOnlyFetch,
    systemResolver,
    listen,
    startDeliveryWorker,
  } = await serving;
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
  const directory = createIdentityDirectory(database.db);
  // Where the server may connect on a user's word (event sinks, external issuers): public addresses only,
  // unless the operator allows private ones (ALLOW_PRIVATE_OUTBOUND; the default in development).
  const sinks = { ...sinkPolicyFor(config.mode), publicOnly: !config.allowPrivateOutbound };
  const app = createApp({
    database,
    serviceDomain: config.serviceDomain,
    pageTokenSecret,
    issuerUrl: config.issuerUrl,
    keys,
    directory,
    sinks,
    idpSecretKey,
    allowInsecureLoopbackIssuers: config.allowInsecureLoopbackIssuers,
    refreshTokenTtlSeconds: config.refreshTokenTtlSeconds,
    terms: config.terms,
    groupAccessRequestWindowMs: config.groupAccessRequestWindowMs,
    limits: { maxRequestBytes: config.maxRequestBytes, requestTimeoutMs: config.requestTimeoutMs },
    corsAllowedOrigins: config.corsAllowedOrigins,
    metricsToken: config.metrics.token,
    external: createExternalVerifier({
      directory,
      allowInsecureLoopback: config.allowInsecureLoopbackIssuers,
      audiences: config.externalAudiences,
      self: { issuer: config.issuerUrl, keys },
      ...(config.allowPrivateOutbound ? {} : { fetch: publicOnlyFetch(systemResolver) }),
    }),
  });
  const listener = await listen(app.handler, {
    port: config.port,
    host: config.host,
    tls: config.tls,
    errorDomain: config.serviceDomain,
    limits: { ...config.connections, requestTimeoutMs: config.requestTimeoutMs },
  }).catch((err: unknown) => {
    throw listenFailure(err, config) ?? err;
  });
  const { delivery, ...deliveryOptions } = config.events;
  const events = delivery
    ? await startDeliveryWorker({ db: database.db, keys, issuer: config.issuerUrl, sinks, listen: database.listen, options: deliveryOptions })
    : undefined;
  if (events) app.metrics.observeEvents(events);
  const metricsListener = await startMetricsListener(app, config);

  // A graceful stop: NOT_SERVING for health checks, no new connections or streams (HTTP/2 GOAWAY), requests
  // in flight finish (for at most the grace period), then the database closes and the process exits 0.
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    log.info("stopping", { signal, graceMs: config.shutdownGraceMs });
    try {
      app.drain();
      // Requests and deliveries in flight finish side by side, each within the grace period.
      await Promise.all([listener.close(config.shutdownGraceMs), events?.stop(config.shutdownGraceMs), metricsListener?.close()]);
      await app.close();
      await database.close();
    } catch (err) {
      log.error("stopping failed", { err });
      process.exit(1);
    }
    log.info("stopped");
    process.exit(0);
  };
  process.on("SIGINT", () => void stop("SIGINT"));
  process.on("SIGTERM", () => void stop("SIGTERM"));
  // Once a signal stops the server gracefully: whoever reads the token may stop it at once.
  if (config.mode === "development") await developmentLogin(database.db, keys, config);
}

// A failure the user can act on is one line saying what to do (which setting, which process); anything else
// is a bug, logged with its stack.
main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    log.error(`configuration error: ${err.message}`);
  } else if (err instanceof DataDirLockedError || err instanceof DatabaseOpenError) {
    log.error(`failed to start: ${err.message}`);
  } else {
    log.error("failed to start", { err });
  }
  process.exit(1);
});
