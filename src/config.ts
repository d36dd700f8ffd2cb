// The environment, parsed and validated once at start-up. Nothing else reads process.env.
import { readFileSync } from "node:fs";
import { join, resolve } from "node:path";

export interface Config {
  /** Port serving gRPC, gRPC-web, Connect and REST (HTTP/1.1 and HTTP/2; TLS too when configured). */
  port: number;
  /**
   * Address to listen on. Default: loopback (127.0.0.1) in development, which prints an owner's token at
   * start, so nothing else on the network reaches that server; every interface (0.0.0.0) in production.
   */
  host: string;
  /** PostgreSQL connection string; when unset, an embedded PGlite database under dataDir is used. */
  databaseUrl: string | undefined;
  /** Where the embedded database keeps its files. */
  dataDir: string;
  /**
   * Where the registry's filesystem blob store keeps blobs and uploads (REGISTRY_STORAGE_DIR); default
   * <dataDir>/registry, also when DATABASE_URL is set (DATA_DIR then holds only the blobs: default ./.data).
   */
  registryStorageDir: string;
  /** PEM certificate and key; when both are set, TLS is served on the same port as cleartext. */
  tls: { cert: Buffer; key: Buffer } | undefined;
  /** Suffix of every ErrorInfo.domain: "<api>.<serviceDomain>", for example iam.platform.local. */
  serviceDomain: string;
  /** development (the default) or production. */
  mode: "development" | "production";
  /**
   * This server's OIDC issuer URL: the `iss` of the tokens it mints, and where its discovery document
   * (/.well-known/openid-configuration) and keys are published. Default http://localhost:<port>.
   */
  issuerUrl: string;
  /**
   * Whether issuerUrl is the default (ISSUER_URL unset). In development the server then keeps the issuer of
   * its first start, stored with the data, so that changing PORT changes neither the tokens nor the local
   * organization (main.ts).
   */
  issuerDefaulted: boolean;
  /**
   * Whether external issuers on loopback addresses may be fetched over plain http (for local identity
   * providers and tests). Other external issuers are always fetched over https. Default: development only.
   */
  allowInsecureLoopbackIssuers: boolean;
  /**
   * Whether the server may connect to private, loopback and link-local addresses on a user's word: event
   * sinks and external OIDC issuers (identity providers, tokens presented for an invite). Default:
   * development only. In production, allow it only when every organization is trusted (one tenant) and its
   * identity providers or sinks live on the private network.
   */
  allowPrivateOutbound: boolean;
  /**
   * The audiences an external token must carry one of, when the identity it assumes names no audience of
   * its own (RFC 8725, section 3.9): a token meant for another application is not accepted here. Default:
   * this server's issuer URL.
   */
  externalAudiences: string[];
  /** Whether externalAudiences is the default (EXTERNAL_AUDIENCES unset): the issuer URL. */
  externalAudiencesDefaulted: boolean;
  /**
   * IDP_SECRET_KEY: the AES-256 key (base64 of 32 bytes) that encrypts identity providers' OIDC client
   * secrets at rest (iam/secret-box.ts). Unset: in development a key kept in the database is used; in
   * production no client secret can be stored (providers using PKCE only still work).
   */
  idpSecretKey: Uint8Array | undefined;
  /** REFRESH_TOKEN_TTL_HOURS: lifetime of a refresh token chain of the token exchange, from the exchange that started it (default 720: 30 days). */
  refreshTokenTtlSeconds: number;
  logLevel: "debug" | "info" | "warn" | "error" | "silent";
  /**
   * On SIGTERM or SIGINT, how long requests in flight may take to finish before their connections are
   * closed (SHUTDOWN_GRACE_MS, default 10 s).
   */
  shutdownGraceMs: number;
  /**
   * On SIGTERM or SIGINT, how long the server keeps serving while its health checks already answer
   * NOT_SERVING (/healthz: 503 DRAINING), so a load balancer takes it out of rotation before it stops
   * accepting (SHUTDOWN_DRAIN_MS, default 0: it stops accepting at once).
   */
  shutdownDrainMs: number;
  /** The largest request body or message, in bytes, counted after decompression too. Default 4 MiB. */
  maxRequestBytes: number;
  /**
   * The deadline of every call, in ms (default 30 s): past it the call answers DEADLINE_EXCEEDED, and a
   * mutation rolls back. A client may ask for less (grpc-timeout, connect-timeout-ms), not for more.
   */
  requestTimeoutMs: number;
  /**
   * What a connection may hold (server/listener.ts). Every request must also arrive whole (headers and body,
   * or an HTTP/2 stream's END_STREAM) within requestTimeoutMs, or it is answered 408 / DEADLINE_EXCEEDED.
   */
  connections: ConnectionLimits;
  /**
   * Delivery of events to subscriptions (events/delivery/worker.ts). Every server process runs a worker unless
   * EVENTS_DELIVERY=false; replicas share the work through the database.
   */
  events: {
    delivery: boolean;
    /** EVENTS_DELIVERY_TIMEOUT_MS: an attempt's limit (default 10 s). */
    timeoutMs: number;
    /** EVENTS_RETRY_HOURS: how long a delivery is retried before it is marked failed (default 24). */
    retryForMs: number;
    /** EVENTS_RETRY_BASE_MS: the first retry's delay, doubling with each attempt up to an hour (default 1 s). */
    retryBaseMs: number;
    /** EVENTS_SINK_CONCURRENCY: deliveries one subscription may have in flight per process (default 32). */
    perSubscription: number;
    /** EVENTS_RETENTION_HOURS: how long delivered rows and their events are kept (default 72). */
    retentionMs: number;
    /** EVENTS_FAILED_RETENTION_HOURS: how long failed deliveries are kept for inspection (default 720). */
    failedRetentionMs: number;
  };
  /**
   * Terms of service (iam TermsService). TERMS_DOCUMENTS: the documents an organization may accept, as a JSON
   * array of {id, label, url} (default DEFAULT_TERMS_DOCUMENTS). TERMS_REQUIRED_FOR: comma-separated methods
   * (`<package>.<Service>/<Method>`) that answer FAILED_PRECONDITION until the call's organization has accepted
   * every document (default none); the server refuses to start when one names no scoped method.
   */
  terms: TermsSettings;
  /** GROUP_ACCESS_REQUEST_WINDOW_MINUTES: how long a repeat of a group access request is refused (default 60). */
  groupAccessRequestWindowMs: number;
  /**
   * CORS_ALLOWED_ORIGINS: the browser origins (comma-separated, exact: scheme://host[:port]) whose pages may call
   * the API (Connect-web, gRPC-web, fetch on REST paths); server/cors.ts. Default none: no CORS header at all.
   */
  corsAllowedOrigins: readonly string[];
  /**
   * Where Prometheus reads /metrics (server/metrics-route.ts). `listen`: METRICS_ADDR, a listener of its own,
   * off the API port (default 127.0.0.1:9464; "off": none). `token`: METRICS_TOKEN, when set, also serves
   * /metrics on the API port to requests bearing it (Authorization: Bearer <token>).
   */
  metrics: {
    listen: { host: string; port: number } | undefined;
    /** Whether METRICS_ADDR was set: a listener the operator asked for must start; the default one may not. */
    listenExplicit: boolean;
    token: string | undefined;
  };
  /** The PostgreSQL pool (unused with the embedded database). */
  databasePool: {
    /** Connections (default 10). */
    max: number;
    /** statement_timeout of each connection, in ms (default 10 s; 0: none). */
    statementTimeoutMs: number;
    /** How long a query waits for a free connection before the call answers UNAVAILABLE (default 5 s). */
    acquireTimeoutMs: number;
    /**
     * DATABASE_POOL_MODE: `session` (the default: DATABASE_URL is PostgreSQL itself or a session-mode pooler)
     * or `transaction` (DATABASE_URL is a transaction-mode pooler such as PgBouncer: no named statements, no
     * startup parameters, nothing kept in a session).
     */
    mode: PoolMode;
    /**
     * DATABASE_LISTEN_URL: a direct connection to the same database (not through a transaction-mode pooler),
     * for LISTEN and for the migrations' session advisory lock. Required when mode is transaction; unset:
     * DATABASE_URL.
     */
    listenUrl: string | undefined;
  };
  /** The registry's data plane (OCI Distribution under /v2/): where blobs live, and their garbage collection. */
  registry: RegistrySettings;
  /** Streaming replicas of the PostgreSQL primary that serve reads (docs/replicas.md); none by default. */
  replicas: ReplicaSettings;
}

export interface ReplicaSettings {
  /** DATABASE_REPLICA_URLS: one PostgreSQL URL per replica (empty: every read goes to the primary). */
  urls: readonly string[];
  /** REPLICA_MAX_LAG: a replica further behind the primary than this is taken out of rotation. */
  maxLagMs: number;
}

/** REPLICA_MAX_LAG's default: 2 s. */
export const DEFAULT_REPLICA_MAX_LAG_MS = 2_000;

/**
 * REGISTRY_STORAGE: `filesystem` (under the data directory; the default) or `s3` (S3-compatible object storage,
 * shared by replicas). Credentials for S3 come from the AWS SDK's default chain (AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY, AWS_PROFILE, web identity, instance or task roles), never from this file.
 */
export type RegistryStorageSettings =
  | { kind: "filesystem" }
  | {
      kind: "s3";
      /** REGISTRY_S3_BUCKET (required). */
      bucket: string;
      /** REGISTRY_S3_ENDPOINT: an S3-compatible service's URL; unset: AWS S3. */
      endpoint?: string;
      /** REGISTRY_S3_REGION, else AWS_REGION, else us-east-1. */
      region: string;
      /** REGISTRY_S3_PREFIX: the key prefix of everything the registry writes ("" or ending in "/"). */
      prefix: string;
      /** REGISTRY_S3_FORCE_PATH_STYLE: bucket in the path, not the host name (default: true when an endpoint is set). */
      forcePathStyle: boolean;
    };

export interface RegistrySettings {
  storage: RegistryStorageSettings;
  /** REGISTRY_UPLOAD_TTL_HOURS: an upload that has not grown for this long is removed by garbage collection (default 24). */
  uploadTtlMs: number;
  /** REGISTRY_GC_GRACE_MINUTES: a blob written more recently than this is never removed (default 60). */
  gcGraceMs: number;
  /** REGISTRY_GC_INTERVAL_MINUTES: how often this process collects garbage; 0 (the default): never (run `npm run registry-gc`). */
  gcIntervalMs: number;
}

/** The defaults of the registry's garbage collection (registry/oci/gc.ts). */
export const DEFAULT_REGISTRY_GC = { uploadTtlMs: 24 * 3_600_000, graceMs: 3_600_000 } as const;

const S3_BUCKET = /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/;
const S3_REGION = /^[a-z0-9-]{1,32}$/;
const S3_PREFIX = /^[A-Za-z0-9!_.*'()/-]*$/;

/** The REGISTRY_STORAGE and REGISTRY_S3_* settings. */
export function parseRegistryStorage(env: NodeJS.ProcessEnv): RegistryStorageSettings {
  const kind = oneOf("REGISTRY_STORAGE", env.REGISTRY_STORAGE, ["filesystem", "s3"] as const, "filesystem");
  const bucket = env.REGISTRY_S3_BUCKET || undefined;
  if (kind === "filesystem") {
    // A bucket named while the store is the filesystem is most likely a forgotten REGISTRY_STORAGE=s3.
    if (bucket) throw new ConfigError("REGISTRY_S3_BUCKET is set but REGISTRY_STORAGE is not s3: set REGISTRY_STORAGE=s3 to keep blobs in the bucket, or unset REGISTRY_S3_BUCKET");
    return { kind };
  }
  if (!bucket) throw new ConfigError("REGISTRY_S3_BUCKET must name the bucket when REGISTRY_STORAGE=s3");
  if (!S3_BUCKET.test(bucket)) throw new ConfigError(`REGISTRY_S3_BUCKET must be a bucket name (3 to 63 of a-z, 0-9, ".", "-"), got ${JSON.stringify(bucket)}`);
  let endpoint: string | undefined;
  if (env.REGISTRY_S3_ENDPOINT) {
    let url: URL | undefined;
    try {
      url = new URL(env.REGISTRY_S3_ENDPOINT);
    } catch {
      url = undefined;
    }
    // Only the scheme and host are echoed: a URL may carry credentials.
    if (!url || (url.protocol !== "http:" && url.protocol !== "https:")) throw new ConfigError("REGISTRY_S3_ENDPOINT must be an http(s) URL such as http://127.0.0.1:9000");
    if (url.username || url.password) throw new ConfigError("REGISTRY_S3_ENDPOINT must not hold credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
    endpoint = url.href.replace(/\/+$/, "");
  }
  const region = env.REGISTRY_S3_REGION || env.AWS_REGION || "us-east-1";
  if (!S3_REGION.test(region)) throw new ConfigError(`REGISTRY_S3_REGION must be a region name such as eu-west-1, got ${JSON.stringify(region)}`);
  const rawPrefix = env.REGISTRY_S3_PREFIX ?? "";
  if (!S3_PREFIX.test(rawPrefix) || rawPrefix.startsWith("/") || rawPrefix.includes("//") || rawPrefix.length > 512) {
    throw new ConfigError(`REGISTRY_S3_PREFIX must be a key prefix such as registry/ (letters, digits, !_.*'()-/, no leading or doubled /), got ${JSON.stringify(rawPrefix)}`);
  }
  const prefix = rawPrefix === "" || rawPrefix.endsWith("/") ? rawPrefix : `${rawPrefix}/`;
  const forcePathStyle = flag("REGISTRY_S3_FORCE_PATH_STYLE", env.REGISTRY_S3_FORCE_PATH_STYLE, endpoint !== undefined);
  return { kind, bucket, ...(endpoint ? { endpoint } : {}), region, prefix, forcePathStyle };
}

/** How DATABASE_URL's server hands out connections (DATABASE_POOL_MODE). */
export type PoolMode = "session" | "transaction";

/**
 * DATABASE_POOL_MODE and DATABASE_LISTEN_URL. Behind a transaction-mode pooler, LISTEN and session advisory
 * locks cannot work (the next statement may run on another server connection), and the server always
 * listens (grants, keys, events), so a direct URL is required there.
 */
export function parsePoolMode(env: NodeJS.ProcessEnv, databaseUrl: string | undefined): { mode: PoolMode; listenUrl: string | undefined } {
  const mode = oneOf("DATABASE_POOL_MODE", env.DATABASE_POOL_MODE, ["session", "transaction"] as const, "session");
  const listenUrl = env.DATABASE_LISTEN_URL ? parseDatabaseUrl(env.DATABASE_LISTEN_URL, "DATABASE_LISTEN_URL") : undefined;
  if (!databaseUrl) {
    if (mode === "transaction") throw new ConfigError("DATABASE_POOL_MODE=transaction needs DATABASE_URL (the pooler's URL); the embedded database has no pooler");
    if (listenUrl) throw new ConfigError("DATABASE_LISTEN_URL is set but DATABASE_URL is not: set DATABASE_URL too, or unset DATABASE_LISTEN_URL");
  }
  if (mode === "transaction" && !listenUrl) {
    throw new ConfigError(
      "DATABASE_POOL_MODE=transaction needs DATABASE_LISTEN_URL: a direct connection to the same database, not through the pooler, for LISTEN (grants, keys, events) and the migrations' lock",
    );
  }
  return { mode, listenUrl };
}

export interface ConnectionLimits {
  /**
   * HEADERS_TIMEOUT_MS: a new connection must have sent its first request's headers (an HTTP/2 connection: opened
   * its first stream) within this, and every HTTP/1.1 request its headers from its first byte (default 10 s).
   */
  headersTimeoutMs: number;
  /** IDLE_TIMEOUT_MS: a connection with no request under way is closed after this (default 65 s). */
  idleTimeoutMs: number;
  /** MAX_CONNECTIONS_PER_ADDRESS: open connections from one client address; more are closed at once (0: no cap; default 256). */
  maxPerAddress: number;
}

/** The defaults of the limits, read by the code that applies them as well (app.ts, db/client.ts, listener.ts). */
export const DEFAULT_LIMITS = {
  maxRequestBytes: 4 * 1024 * 1024,
  requestTimeoutMs: 30_000,
  // Idle: longer than the 60 s idle timeout of common load balancers, so they, not this server, close a pooled
  // connection (a close racing their next request would fail it).
  connections: { headersTimeoutMs: 10_000, idleTimeoutMs: 65_000, maxPerAddress: 256 },
  databasePool: { max: 10, statementTimeoutMs: 10_000, acquireTimeoutMs: 5_000 },
} as const;

const HOUR = 3_600_000;

/** A document an organization accepts (TermsService), as TERMS_DOCUMENTS lists it. */
export interface TermsDocument {
  id: string;
  label: string;
  url: string;
}

export interface TermsSettings {
  documents: readonly TermsDocument[];
  /** Full method names (`chainguard.platform.registry.v2.ReposService/CreateRepo`) needing accepted terms. */
  requiredFor: readonly string[];
}

/** The documents known when TERMS_DOCUMENTS is unset (docs/iam.md lists them). */
export const DEFAULT_TERMS_DOCUMENTS: readonly TermsDocument[] = [
  { id: "terms-of-service", label: "Terms of Service", url: "https://www.chainguard.dev/legal/terms-of-service" },
  { id: "privacy-notice", label: "Privacy Notice", url: "https://www.chainguard.dev/legal/privacy-notice" },
];

export const DEFAULT_TERMS: TermsSettings = { documents: DEFAULT_TERMS_DOCUMENTS, requiredFor: [] };

/** The default window in which a repeated group access request is refused. */
export const DEFAULT_GROUP_ACCESS_REQUEST_WINDOW_MS = HOUR;

const DOCUMENT_ID = /^[a-z0-9][a-z0-9._-]{0,62}$/;
const METHOD_NAME = /^[A-Za-z_][A-Za-z0-9_.]*\/[A-Za-z_][A-Za-z0-9_]*$/;

/** TERMS_DOCUMENTS: a JSON array of {id, label, url}; ids unique, lowercase; urls absolute http(s). */
export function parseTermsDocuments(raw: string | undefined): readonly TermsDocument[] {
  if (raw === undefined || raw.trim() === "") return DEFAULT_TERMS_DOCUMENTS;
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new ConfigError("TERMS_DOCUMENTS must be a JSON array of {\"id\", \"label\", \"url\"}");
  }
  if (!Array.isArray(parsed)) throw new ConfigError("TERMS_DOCUMENTS must be a JSON array of {\"id\", \"label\", \"url\"}");
  const seen = new Set<string>();
  return parsed.map((d: unknown, i) => {
    const { id, label, url } = (d ?? {}) as Record<string, unknown>;
    if (typeof id !== "string" || !DOCUMENT_ID.test(id)) {
      throw new ConfigError(`TERMS_DOCUMENTS[${i}].id must be 1-63 characters of a-z, 0-9, ".", "_", "-", got ${JSON.stringify(id)}`);
    }
    if (seen.has(id)) throw new ConfigError(`TERMS_DOCUMENTS[${i}].id ${JSON.stringify(id)} is listed twice`);
    seen.add(id);
    if (typeof label !== "string" || label.trim() === "") throw new ConfigError(`TERMS_DOCUMENTS[${i}].label must be a non-empty string`);
    let ok = false;
    try {
      ok = typeof url === "string" && ["http:", "https:"].includes(new URL(url).protocol);
    } catch {
      ok = false;
    }
    if (!ok) throw new ConfigError(`TERMS_DOCUMENTS[${i}].url must be an absolute http(s) URL`);
    return { id, label, url: url as string };
  });
}

/** TERMS_REQUIRED_FOR: comma-separated `<package>.<Service>/<Method>` (checked against the API when the server starts). */
export function parseTermsRequiredFor(raw: string | undefined): readonly string[] {
  const names = (raw ?? "")
    .split(",")
    .map((m) => m.trim().replace(/^\//, ""))
    .filter((m) => m !== "");
  for (const name of names) {
    if (!METHOD_NAME.test(name)) throw new ConfigError(`TERMS_REQUIRED_FOR: ${JSON.stringify(name)} is not <package>.<Service>/<Method>`);
  }
  return [...new Set(names)];
}

/** CORS_ALLOWED_ORIGINS: comma-separated exact origins (scheme://host[:port], no path); empty: none. */
export function parseAllowedOrigins(raw: string | undefined): readonly string[] {
  const origins = (raw ?? "")
    .split(",")
    .map((o) => o.trim())
    .filter((o) => o !== "");
  for (const o of origins) {
    let url: URL | undefined;
    try {
      url = new URL(o);
    } catch {
      url = undefined;
    }
    // URL.origin is the canonical form: lower-case scheme and host, no default port, no path or trailing slash,
    // which is what a browser sends in Origin, so the comparison can be exact.
    if (!url || (url.protocol !== "http:" && url.protocol !== "https:") || url.origin !== o) {
      throw new ConfigError(`CORS_ALLOWED_ORIGINS must list origins such as https://app.example.com (scheme, host and port only), got ${JSON.stringify(o)}`);
    }
  }
  return [...new Set(origins)];
}

/** The defaults of event delivery (events/delivery/worker.ts DeliveryOptions). */
export const DEFAULT_DELIVERY_OPTIONS = {
  timeoutMs: 10_000,
  retryForMs: 24 * HOUR,
  retryBaseMs: 1_000,
  retryMaxMs: HOUR,
  perSubscription: 32,
  maxInFlight: 1024,
  pollMs: 1_000,
  retentionMs: 72 * HOUR,
  failedRetentionMs: 30 * 24 * HOUR,
  pruneEveryMs: 60_000,
} as const;

export class ConfigError extends Error {}

/** The metrics listener when METRICS_ADDR is unset: loopback, the port OpenTelemetry's Prometheus exporter uses. */
const DEFAULT_METRICS_ADDR = { host: "127.0.0.1", port: 9464 } as const;

/** METRICS_ADDR: "off", or "<host>:<port>" (an IPv6 host in brackets: "[::1]:9464"). */
export function parseMetricsAddr(raw: string | undefined): { host: string; port: number } | undefined {
  if (raw === undefined || raw === "") return { ...DEFAULT_METRICS_ADDR };
  if (raw === "off") return undefined;
  const m = /^(?:\[([0-9A-Fa-f:.]+)\]|([A-Za-z0-9.-]+)):(\d{1,5})$/.exec(raw);
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535) throw new ConfigError(`METRICS_ADDR must be <host>:<port> (for example 0.0.0.0:9464) or off, got ${JSON.stringify(raw)}`);
  return { host: m[1] ?? m[2]!, port };
}

/** METRICS_TOKEN: at least 32 characters, none of them white space or control characters (never echoed). */
export function parseMetricsToken(raw: string | undefined): string | undefined {
  if (raw === undefined || raw === "") return undefined;
  if (raw.length < 32 || raw.length > 512 || !/^[\x21-\x7e]+$/.test(raw)) {
    throw new ConfigError("METRICS_TOKEN must be 32 to 512 printable ASCII characters without spaces (for example: openssl rand -hex 32)");
  }
  return raw;
}

/**
 * DATABASE_URL: a postgres:// or postgresql:// URL; unset or empty: the embedded database. Anything else is
 * refused here, before a connection is tried (the PostgreSQL driver would take `mysql://h/db` for PostgreSQL
 * on h). Only the scheme is echoed: the URL may hold a password.
 */
export function parseDatabaseUrl(raw: string | undefined, name = "DATABASE_URL"): string | undefined {
  if (raw === undefined || raw === "") return undefined;
  const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(raw)?.[1]?.toLowerCase();
  const expected = `postgres://<user>:<password>@<host>:5432/<database>, or unset it${name === "DATABASE_URL" ? " to use the embedded database" : ""}`;
  if (scheme !== "postgres" && scheme !== "postgresql") {
    throw new ConfigError(`${name} must be a PostgreSQL URL (${expected}), got ${scheme ? `a ${scheme}: URL` : "no URL"}`);
  }
  return raw;
}

function integer(name: string, raw: string | undefined, fallback: number, min: number, max: number): number {
  if (raw === undefined || raw === "") return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) {
    throw new ConfigError(`${name} must be an integer between ${min} and ${max}, got ${JSON.stringify(raw)}`);
  }
  return n;
}

function flag(name: string, raw: string | undefined, fallback: boolean): boolean {
  if (raw === undefined || raw === "") return fallback;
  if (raw !== "true" && raw !== "false") throw new ConfigError(`${name} must be true or false, got ${JSON.stringify(raw)}`);
  return raw === "true";
}

function oneOf<T extends string>(name: string, raw: string | undefined, allowed: readonly T[], fallback: T): T {
  if (raw === undefined || raw === "") return fallback;
  if (!(allowed as readonly string[]).includes(raw)) {
    throw new ConfigError(`${name} must be one of ${allowed.join(", ")}, got ${JSON.stringify(raw)}`);
  }
  return raw as T;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const certFile = env.TLS_CERT_FILE || undefined;
  const keyFile = env.TLS_KEY_FILE || undefined;
  if (Boolean(certFile) !== Boolean(keyFile)) {
    throw new ConfigError("TLS_CERT_FILE and TLS_KEY_FILE must be set together");
  }
  const read = (name: string, file: string): Buffer => {
    try {
      return readFileSync(file);
    } catch (err) {
      throw new ConfigError(`${name}: cannot read ${file}: ${(err as Error).message}`);
    }
  };
  const serviceDomain = env.SERVICE_DOMAIN || "platform.local";
  if (!/^[a-z0-9.-]+$/.test(serviceDomain)) throw new ConfigError("SERVICE_DOMAIN must be a DNS-like name");
  const port = integer("PORT", env.PORT, 8080, 0, 65535);
  const mode = oneOf("SERVER_MODE", env.SERVER_MODE, ["development", "production"] as const, "development");
  const issuerUrl = (env.ISSUER_URL || `http://localhost:${port}`).replace(/\/+$/, "");
  let issuer: URL;
  try {
    issuer = new URL(issuerUrl);
  } catch {
    throw new ConfigError(`ISSUER_URL must be an absolute URL, got ${JSON.stringify(issuerUrl)}`);
  }
  if (issuer.protocol !== "https:" && issuer.protocol !== "http:") throw new ConfigError("ISSUER_URL must be http(s)");
  if (mode === "production" && issuer.protocol !== "https:") throw new ConfigError("ISSUER_URL must use https in production");
  const insecure = env.ALLOW_INSECURE_LOOPBACK_ISSUERS;
  if (insecure !== undefined && insecure !== "" && insecure !== "true" && insecure !== "false") {
    throw new ConfigError("ALLOW_INSECURE_LOOPBACK_ISSUERS must be true or false");
  }
  const externalAudiences = (env.EXTERNAL_AUDIENCES || issuerUrl)
    .split(",")
    .map((a) => a.trim())
    .filter((a) => a !== "");
  if (externalAudiences.length === 0) throw new ConfigError("EXTERNAL_AUDIENCES must name at least one audience (comma-separated)");
  let idpSecretKey: Uint8Array | undefined;
  if (env.IDP_SECRET_KEY) {
    const parsed = parseSecretKey(env.IDP_SECRET_KEY);
    // The value itself is never echoed: it is a secret.
    if (!(parsed instanceof Uint8Array)) throw new ConfigError(`IDP_SECRET_KEY ${parsed.refused}`);
    idpSecretKey = parsed;
  }
  const databaseUrl = parseDatabaseUrl(env.DATABASE_URL);
  return {
    port,
    host: env.HOST || (mode === "development" ? "127.0.0.1" : "0.0.0.0"),
    databaseUrl,
    dataDir: resolve(env.DATA_DIR || ".data"),
    registryStorageDir: resolve(env.REGISTRY_STORAGE_DIR || join(env.DATA_DIR || ".data", "registry")),
    tls: certFile && keyFile ? { cert: read("TLS_CERT_FILE", certFile), key: read("TLS_KEY_FILE", keyFile) } : undefined,
    serviceDomain,
    mode,
    issuerUrl,
    issuerDefaulted: !env.ISSUER_URL,
    allowInsecureLoopbackIssuers: insecure ? insecure === "true" : mode === "development",
    allowPrivateOutbound: flag("ALLOW_PRIVATE_OUTBOUND", env.ALLOW_PRIVATE_OUTBOUND, mode === "development"),
    externalAudiences,
    externalAudiencesDefaulted: !env.EXTERNAL_AUDIENCES,
    idpSecretKey,
    refreshTokenTtlSeconds: 3600 * integer("REFRESH_TOKEN_TTL_HOURS", env.REFRESH_TOKEN_TTL_HOURS, 720, 1, 24 * 365),
    logLevel: oneOf("LOG_LEVEL", env.LOG_LEVEL, ["debug", "info", "warn", "error", "silent"] as const, "info"),
    shutdownGraceMs: integer("SHUTDOWN_GRACE_MS", env.SHUTDOWN_GRACE_MS, 10_000, 0, 3_600_000),
    shutdownDrainMs: integer("SHUTDOWN_DRAIN_MS", env.SHUTDOWN_DRAIN_MS, 0, 0, 3_600_000),
    maxRequestBytes: integer("MAX_REQUEST_BYTES", env.MAX_REQUEST_BYTES, DEFAULT_LIMITS.maxRequestBytes, 1024, 1024 * 1024 * 1024),
    requestTimeoutMs: integer("REQUEST_TIMEOUT_MS", env.REQUEST_TIMEOUT_MS, DEFAULT_LIMITS.requestTimeoutMs, 100, 3_600_000),
    connections: {
      headersTimeoutMs: integer("HEADERS_TIMEOUT_MS", env.HEADERS_TIMEOUT_MS, DEFAULT_LIMITS.connections.headersTimeoutMs, 100, 600_000),
      idleTimeoutMs: integer("IDLE_TIMEOUT_MS", env.IDLE_TIMEOUT_MS, DEFAULT_LIMITS.connections.idleTimeoutMs, 100, 3_600_000),
      maxPerAddress: integer("MAX_CONNECTIONS_PER_ADDRESS", env.MAX_CONNECTIONS_PER_ADDRESS, DEFAULT_LIMITS.connections.maxPerAddress, 0, 1_000_000),
    },
    events: {
      delivery: flag("EVENTS_DELIVERY", env.EVENTS_DELIVERY, true),
      timeoutMs: integer("EVENTS_DELIVERY_TIMEOUT_MS", env.EVENTS_DELIVERY_TIMEOUT_MS, DEFAULT_DELIVERY_OPTIONS.timeoutMs, 100, 600_000),
      retryForMs: HOUR * integer("EVENTS_RETRY_HOURS", env.EVENTS_RETRY_HOURS, DEFAULT_DELIVERY_OPTIONS.retryForMs / HOUR, 24, 24 * 30),
      retryBaseMs: integer("EVENTS_RETRY_BASE_MS", env.EVENTS_RETRY_BASE_MS, DEFAULT_DELIVERY_OPTIONS.retryBaseMs, 10, HOUR),
      perSubscription: integer("EVENTS_SINK_CONCURRENCY", env.EVENTS_SINK_CONCURRENCY, DEFAULT_DELIVERY_OPTIONS.perSubscription, 1, 1024),
      retentionMs: HOUR * integer("EVENTS_RETENTION_HOURS", env.EVENTS_RETENTION_HOURS, DEFAULT_DELIVERY_OPTIONS.retentionMs / HOUR, 1, 24 * 365),
      failedRetentionMs: HOUR * integer("EVENTS_FAILED_RETENTION_HOURS", env.EVENTS_FAILED_RETENTION_HOURS, DEFAULT_DELIVERY_OPTIONS.failedRetentionMs / HOUR, 1, 24 * 365),
    },
    terms: { documents: parseTermsDocuments(env.TERMS_DOCUMENTS), requiredFor: parseTermsRequiredFor(env.TERMS_REQUIRED_FOR) },
    groupAccessRequestWindowMs:
      60_000 * integer("GROUP_ACCESS_REQUEST_WINDOW_MINUTES", env.GROUP_ACCESS_REQUEST_WINDOW_MINUTES, DEFAULT_GROUP_ACCESS_REQUEST_WINDOW_MS / 60_000, 1, 60 * 24 * 30),
    corsAllowedOrigins: parseAllowedOrigins(env.CORS_ALLOWED_ORIGINS),
    metrics: {
      listen: parseMetricsAddr(env.METRICS_ADDR),
      listenExplicit: env.METRICS_ADDR !== undefined && env.METRICS_ADDR !== "",
      token: parseMetricsToken(env.METRICS_TOKEN),
    },
    databasePool: {
      max: integer("DATABASE_POOL_SIZE", env.DATABASE_POOL_SIZE, DEFAULT_LIMITS.databasePool.max, 1, 1000),
      statementTimeoutMs: integer("DATABASE_STATEMENT_TIMEOUT_MS", env.DATABASE_STATEMENT_TIMEOUT_MS, DEFAULT_LIMITS.databasePool.statementTimeoutMs, 0, 3_600_000),
      acquireTimeoutMs: integer("DATABASE_POOL_TIMEOUT_MS", env.DATABASE_POOL_TIMEOUT_MS, DEFAULT_LIMITS.databasePool.acquireTimeoutMs, 1, 600_000),
      ...parsePoolMode(env, databaseUrl),
    },
    registry: {
      storage: parseRegistryStorage(env),
      uploadTtlMs: HOUR * integer("REGISTRY_UPLOAD_TTL_HOURS", env.REGISTRY_UPLOAD_TTL_HOURS, DEFAULT_REGISTRY_GC.uploadTtlMs / HOUR, 1, 24 * 30),
      gcGraceMs: 60_000 * integer("REGISTRY_GC_GRACE_MINUTES", env.REGISTRY_GC_GRACE_MINUTES, DEFAULT_REGISTRY_GC.graceMs / 60_000, 10, 60 * 24 * 7),
      gcIntervalMs: 60_000 * integer("REGISTRY_GC_INTERVAL_MINUTES", env.REGISTRY_GC_INTERVAL_MINUTES, 0, 0, 60 * 24 * 7),
    },
    replicas: {
      urls: parseReplicaUrls(env.DATABASE_REPLICA_URLS, parseDatabaseUrl(env.DATABASE_URL)),
      maxLagMs: parseDuration("REPLICA_MAX_LAG", env.REPLICA_MAX_LAG, DEFAULT_REPLICA_MAX_LAG_MS, 10, 300_000),
    },
  };
}

/** The length of IDP_SECRET_KEY (an AES-256 key: iam/secret-box.ts). */
export const SECRET_KEY_BYTES = 32;

/**
 * DATABASE_REPLICA_URLS: comma-separated PostgreSQL URLs of streaming replicas of DATABASE_URL's database.
 * Only with DATABASE_URL (the embedded database has no replicas). As for DATABASE_URL, a URL is never
 * echoed (it may hold a password): a refusal names the entry by its position.
 */
export function parseReplicaUrls(raw: string | undefined, databaseUrl: string | undefined): readonly string[] {
  if (raw === undefined || raw.trim() === "") return [];
  if (!databaseUrl) throw new ConfigError("DATABASE_REPLICA_URLS needs DATABASE_URL: replicas serve reads of a PostgreSQL primary, and the embedded database has none");
  const urls = raw.split(",").map((u) => u.trim());
  const seen = new Set<string>();
  urls.forEach((url, i) => {
    const which = `DATABASE_REPLICA_URLS entry ${i + 1}`;
    if (url === "") throw new ConfigError(`${which} is empty: list URLs separated by single commas`);
    const scheme = /^([A-Za-z][A-Za-z0-9+.-]*):/.exec(url)?.[1]?.toLowerCase();
    if (scheme !== "postgres" && scheme !== "postgresql") {
      throw new ConfigError(`${which} must be a PostgreSQL URL (postgres://<user>:<password>@<host>:5432/<database>), got ${scheme ? `a ${scheme}: URL` : "no URL"}`);
    }
    let host: string;
    try {
      const parsed = new URL(url);
      host = `${parsed.hostname}:${parsed.port || "5432"}`;
    } catch {
      throw new ConfigError(`${which} is not a valid URL`);
    }
    if (hostPortPath(url) === hostPortPath(databaseUrl)) throw new ConfigError(`${which} is DATABASE_URL itself: list the replicas' URLs only`);
    if (seen.has(host)) throw new ConfigError(`${which} names ${host} a second time`);
    seen.add(host);
  });
  if (urls.length > 16) throw new ConfigError(`DATABASE_REPLICA_URLS lists ${urls.length} replicas; at most 16`);
  return urls;
}

/** A URL's host:port (5432 when it names none) and database path, or the text itself when it is not a URL. */
function hostPortPath(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || "5432"}${u.pathname}`;
  } catch {
    return url;
  }
}

/**
 * A duration: `<n>ms`, `<n>s`, or a plain number of seconds (fractions allowed: `0.5`), between `minMs` and
 * `maxMs`. Undefined or empty: the fallback.
 */
export function parseDuration(name: string, raw: string | undefined, fallbackMs: number, minMs: number, maxMs: number): number {
  if (raw === undefined || raw.trim() === "") return fallbackMs;
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s)?\s*$/.exec(raw);
  const ms = m ? Number(m[1]) * (m[2] === "ms" ? 1 : 1000) : NaN;
  if (!Number.isFinite(ms) || ms < minMs || ms > maxMs) {
    throw new ConfigError(`${name} must be a duration between ${minMs} ms and ${maxMs / 1000} s, such as 2s, 500ms or 1.5 (seconds), got ${JSON.stringify(raw)}`);
  }
  return Math.round(ms);
}

/** Parses IDP_SECRET_KEY: base64 (standard or url-safe) of exactly 32 bytes; the reason otherwise. */
export function parseSecretKey(raw: string): Uint8Array | { refused: string } {
  const text = raw.trim();
  if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(text)) return { refused: "must be base64" };
  const bytes = Buffer.from(text.replace(/-/g, "+").replace(/_/g, "/"), "base64");
  if (bytes.length !== SECRET_KEY_BYTES) return { refused: `must be the base64 of ${SECRET_KEY_BYTES} bytes, got ${bytes.length}` };
  return new Uint8Array(bytes);
}
