// A real server on a real port (127.0.0.1, ephemeral), on a test database, for contract tests. Its issuer
// is its own base URL; `token()` mints an access token for any identity, as the service itself would.
import { mkdtemp, rm } from "node:fs/promises";
import type { Logger } from "drizzle-orm/logger";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createFsBlobStore } from "../../src/registry/oci/fs-store.js";
import { composeApp, type ComposeDeps, type Composed } from "../../src/compose.js";
import { listen } from "../../src/server/listener.js";
import { setLogLevel } from "../../src/kernel/log.js";
import { ensureSecret } from "../../src/db/secrets.js";
import { ensureManagedRoles } from "../../src/iam/managed-roles.js";
import { createKeyStore, mintToken, type KeyStore } from "../../src/kernel/auth/index.js";
import { openTestDatabase, type TestDatabase } from "./database.js";
import { sinkPolicyFor } from "../../src/events/sinks.js";
import type { DeliveryOptions, DeliveryWorker } from "../../src/events/delivery/worker.js";
import type { Metrics } from "../../src/server/metrics.js";
import { registerSecret } from "./secrets.js";

export interface TestServer {
  baseUrl: string;
  port: number;
  database: TestDatabase;
  keys: KeyStore;
  /** An access token of this server for the identity (default lifetime 10 minutes; negative: already expired). */
  token(identityUid: string, opts?: { ttlSeconds?: number }): Promise<string>;
  /** The event delivery worker, when the server was started with `delivery`. */
  events: DeliveryWorker | undefined;
  /** The server's metrics (its own registry; the worker's counts included when it runs one). */
  metrics: Metrics;
  close(): Promise<void>;
}

export type TestServerOptions = Partial<Pick<ComposeDeps, "blobs" | "serviceDomain" | "overrides" | "external" | "rateLimits" | "limits" | "sinks" | "idpSecretKey" | "refreshTokenTtlSeconds" | "terms" | "groupAccessRequestWindowMs" | "corsAllowedOrigins" | "metricsToken">> & {
  /**
   * Options of the default external OIDC verifier (used unless `external` is given). Plain-http loopback
   * issuers (test/support/fake-issuer.ts) are allowed unless this says otherwise.
   */
  externalOptions?: ComposeDeps["externalOptions"];
  /** Runs an event delivery worker with these options (none by default: most tests deliver nothing). */
  delivery?: Partial<DeliveryOptions>;
  /**
   * Hands the app each database notification (a grant changed, ...) this many ms after it arrives: a
   * notification as late as one from another replica on a loaded machine. Only what the server clears for
   * itself is then fresh at once.
   */
  notificationDelayMs?: number;
  /** Hears every statement the server's database is sent (test/integration/shard-statements.test.ts). */
  databaseLogger?: Logger;
  /** The database to serve (disposed when the server closes). Default: openTestDatabase(). */
  database?: TestDatabase;
};

const UNLIMITED = { burst: 1_000_000, perMinute: 1_000_000 };

export async function startTestServer(opts: TestServerOptions = {}): Promise<TestServer> {
  setLogLevel((process.env.LOG_LEVEL as "silent" | undefined) ?? "silent");
  const database = opts.database ?? (await openTestDatabase({ logger: opts.databaseLogger }));
  const pageTokenSecret = await ensureSecret(database.db, "page-token");
  // As in development: the client-secret key kept in the database.
  const idpSecretKey = await ensureSecret(database.db, "idp-secret-key");
  const keys = await createKeyStore(database.db, { subscribe: database.listen });
  await ensureManagedRoles(database.db);
  // Listen first: the issuer URL is the server's own address.
  const late: { app?: Composed["app"] } = {};
  // The listener keeps the app's request timeout, as in main.ts: a request must arrive within its deadline. No
  // cap of connections per address: every test client connects from 127.0.0.1, many of them with a transport
  // (and an HTTP/2 connection, kept for minutes) per call.
  const listener = await listen((req, res) => late.app!.handler(req, res), {
    port: 0,
    host: "127.0.0.1",
    errorDomain: opts.serviceDomain ?? "platform.test",
    limits: { requestTimeoutMs: opts.limits?.requestTimeoutMs, maxPerAddress: 0 },
    streamsBody: (method, path) => late.app!.streamsBody(method, path),
  });
  const port = listener.address.port;
  const baseUrl = `http://127.0.0.1:${port}`;
  const { externalOptions, delivery, notificationDelayMs, databaseLogger: _logger, database: _database, ...appOpts } = opts;
  // The registry's blobs, in a directory of this server's own (removed when it closes).
  const blobsDir = opts.blobs ? undefined : await mkdtemp(join(tmpdir(), "apiserver-blobs-"));
  const blobs = opts.blobs ?? createFsBlobStore(blobsDir!);
  // Contract tables send many refused exchanges from one address: generous budgets unless a test sets its own.
  const rateLimits = appOpts.rateLimits ?? {
    exchangeFailures: { bySubject: UNLIMITED, byAddress: UNLIMITED },
    inviteFailures: { bySubject: UNLIMITED, byAddress: UNLIMITED },
  };
  // Sinks: the development policy (loopback http allowed) unless a test sets its own.
  const sinks = appOpts.sinks ?? sinkPolicyFor("development");
  const allowInsecureLoopbackIssuers = externalOptions?.allowInsecureLoopback ?? true;
  // Built as main.ts builds it (compose.ts), with the test's settings.
  const composed = await composeApp({
    database: notificationDelayMs === undefined ? database : withLateNotifications(database, notificationDelayMs),
    serviceDomain: "platform.test",
    pageTokenSecret,
    issuerUrl: baseUrl,
    keys,
    idpSecretKey,
    allowInsecureLoopbackIssuers,
    ...appOpts,
    externalOptions: { allowInsecureLoopback: true, ...externalOptions },
    rateLimits,
    sinks,
    delivery,
    blobs,
  });
  const { app } = composed;
  late.app = app;
  const events = delivery ? await composed.startEventDelivery() : undefined;
  return {
    baseUrl,
    port,
    database,
    keys,
    async token(identityUid, t = {}) {
      const ttl = t.ttlSeconds ?? 600;
      const { token } =
        ttl >= 0
          ? await mintToken(keys, { issuer: baseUrl, subject: identityUid, audience: baseUrl, ttlSeconds: ttl })
          : // An expired token: issued and expired in the past, beyond the verifier's clock tolerance.
            await mintToken(keys, { issuer: baseUrl, subject: identityUid, audience: baseUrl, ttlSeconds: 1, notAfter: Math.floor(Date.now() / 1000) + ttl });
      registerSecret(token); // never to be logged (log-capture.ts)
      return token;
    },
    events,
    metrics: app.metrics,
    async close() {
      app.drain();
      await Promise.all([listener.close(1000), events?.stop(1000)]);
      await composed.close();
      await database.dispose();
      if (blobsDir) await rm(blobsDir, { recursive: true, force: true });
    },
  };
}

/** The database with each notification handed to its listener `ms` after it arrives. */
function withLateNotifications(database: TestDatabase, ms: number): TestDatabase {
  return {
    ...database,
    listen: (channel, onNotify, onReady, onLost) =>
      database.listen(channel, (payload) => void setTimeout(() => onNotify(payload), ms).unref(), onReady, onLost),
  };
}
