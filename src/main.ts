// The one wiring point: config -> database -> services -> server.
import { ConfigError, loadConfig, type Config } from "./config.js";
import { openDatabase } from "./db/client.js";
import { DataDirLockedError } from "./db/data-dir-lock.js";
import { ensureSecret } from "./db/secrets.js";
import { bootstrap } from "./iam/bootstrap.js";
import { createIdentityDirectory } from "./iam/directory.js";
import { ensureManagedRoles } from "./iam/managed-roles.js";
import { createKeyStore, mintToken, type KeyStore } from "./kernel/auth/index.js";
import { createExternalVerifier } from "./kernel/auth/external.js";
import { publicOnlyFetch, systemResolver } from "./kernel/outbound.js";
import { log, setLogLevel } from "./kernel/log.js";
import type { Db } from "./db/client.js";
import { createApp } from "./server/app.js";
import { sinkPolicyFor } from "./events/sinks.js";
import { startDeliveryWorker } from "./events/delivery/worker.js";
import { listen } from "./server/listener.js";

/**
 * Development only: make sure a local organization with an owner exists, and print a token for that owner,
 * so a first authenticated call works in one paste. Never runs in production mode.
 */
async function developmentLogin(db: Db, keys: KeyStore, config: Config): Promise<void> {
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
  process.stdout.write(
    [
      "",
      `Development mode: ${created ? "created" : "found"} organization "local" (${group}) owned by identity ${identity}.`,
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

async function main(): Promise<void> {
  const config = loadConfig();
  setLogLevel(config.logLevel);
  const database = await openDatabase({ databaseUrl: config.databaseUrl, dataDir: config.dataDir, postgres: config.databasePool });
  const pageTokenSecret = await ensureSecret(database.db, "page-token");
  // Development without IDP_SECRET_KEY: a key kept in the database (as safe as the database itself).
  const idpSecretKey = config.idpSecretKey ?? (config.mode === "development" ? await ensureSecret(database.db, "idp-secret-key") : undefined);
  if (!idpSecretKey) log.warn("IDP_SECRET_KEY is not set: identity providers cannot be given an OIDC client secret (PKCE only)");
  const keys = await createKeyStore(database.db, { subscribe: database.listen });
  await ensureManagedRoles(database.db);
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
    external: createExternalVerifier({
      directory,
      allowInsecureLoopback: config.allowInsecureLoopbackIssuers,
      audiences: config.externalAudiences,
      self: { issuer: config.issuerUrl, keys },
      ...(config.allowPrivateOutbound ? {} : { fetch: publicOnlyFetch(systemResolver) }),
    }),
  });
  const listener = await listen(app.handler, { port: config.port, host: config.host, tls: config.tls });
  const { delivery, ...deliveryOptions } = config.events;
  const events = delivery
    ? await startDeliveryWorker({ db: database.db, keys, issuer: config.issuerUrl, sinks, listen: database.listen, options: deliveryOptions })
    : undefined;
  if (config.mode === "development") await developmentLogin(database.db, keys, config);

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
      await Promise.all([listener.close(config.shutdownGraceMs), events?.stop(config.shutdownGraceMs)]);
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
}

main().catch((err: unknown) => {
  if (err instanceof ConfigError) {
    log.error(`configuration error: ${err.message}`);
  } else if (err instanceof DataDirLockedError) {
    log.error(`failed to start: ${err.message}`);
  } else {
    log.error("failed to start", { err });
  }
  process.exit(1);
});
