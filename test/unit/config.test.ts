import { describe, expect, it } from "vitest";
import { ConfigError, DEFAULT_TERMS_DOCUMENTS, loadConfig } from "../../src/config.js";

describe("loadConfig", () => {
  it("has working defaults for a fresh clone", () => {
    const c = loadConfig({});
    expect(c.port).toBe(8080);
    expect(c.host).toBe("127.0.0.1");
    expect(c.databaseUrl).toBeUndefined();
    expect(c.dataDir).toMatch(/\.data$/);
    expect(c.tls).toBeUndefined();
    expect(c.serviceDomain).toBe("platform.local");
    expect(c.mode).toBe("development");
    expect(c.shutdownGraceMs).toBe(10_000);
    expect(c.maxRequestBytes).toBe(4 * 1024 * 1024);
    expect(c.requestTimeoutMs).toBe(30_000);
    expect(c.databasePool).toEqual({ max: 10, statementTimeoutMs: 10_000, acquireTimeoutMs: 5_000, mode: "session", listenUrl: undefined });
    expect(c.shutdownDrainMs).toBe(0);
    expect(c.connections).toEqual({ headersTimeoutMs: 10_000, idleTimeoutMs: 65_000, maxPerAddress: 256 });
  });

  it("reads the connection limits (0: no cap per address)", () => {
    const c = loadConfig({ HEADERS_TIMEOUT_MS: "5000", IDLE_TIMEOUT_MS: "120000", MAX_CONNECTIONS_PER_ADDRESS: "0" });
    expect(c.connections).toEqual({ headersTimeoutMs: 5000, idleTimeoutMs: 120_000, maxPerAddress: 0 });
  });

  it("reads the shutdown grace period and drain window", () => {
    expect(loadConfig({ SHUTDOWN_GRACE_MS: "2500" }).shutdownGraceMs).toBe(2500);
    expect(loadConfig({ SHUTDOWN_DRAIN_MS: "3000" }).shutdownDrainMs).toBe(3000);
  });

  it("reads the pool mode and the direct URL of a transaction-mode pooler", () => {
    const pooler = "postgres://app@pgbouncer:6432/app";
    const direct = "postgres://app@db:5432/app";
    expect(loadConfig({ DATABASE_URL: pooler, DATABASE_POOL_MODE: "transaction", DATABASE_LISTEN_URL: direct }).databasePool).toMatchObject({
      mode: "transaction",
      listenUrl: direct,
    });
    // A direct URL is allowed in session mode too (LISTEN and migrations then use it).
    expect(loadConfig({ DATABASE_URL: pooler, DATABASE_LISTEN_URL: direct }).databasePool).toMatchObject({ mode: "session", listenUrl: direct });
  });

  it.each([
    [{ PORT: "x" }, /PORT must be an integer/],
    [{ PORT: "70000" }, /PORT must be an integer between 0 and 65535/],
    [{ SERVER_MODE: "prod" }, /SERVER_MODE must be one of development, production/],
    [{ LOG_LEVEL: "loud" }, /LOG_LEVEL must be one of/],
    [{ TLS_CERT_FILE: "/tmp/cert.pem" }, /must be set together/],
    [{ TLS_CERT_FILE: "/nonexistent/c.pem", TLS_KEY_FILE: "/nonexistent/k.pem" }, /TLS_CERT_FILE: cannot read/],
    [{ SERVICE_DOMAIN: "Not A Domain" }, /SERVICE_DOMAIN/],
    [{ SHUTDOWN_GRACE_MS: "-1" }, /SHUTDOWN_GRACE_MS must be an integer/],
    [{ MAX_REQUEST_BYTES: "10" }, /MAX_REQUEST_BYTES must be an integer between 1024 and/],
    [{ REQUEST_TIMEOUT_MS: "0" }, /REQUEST_TIMEOUT_MS must be an integer between 100 and 3600000/],
    [{ DATABASE_POOL_SIZE: "0" }, /DATABASE_POOL_SIZE must be an integer between 1 and/],
    [{ HEADERS_TIMEOUT_MS: "50" }, /HEADERS_TIMEOUT_MS must be an integer between 100 and 600000/],
    [{ IDLE_TIMEOUT_MS: "x" }, /IDLE_TIMEOUT_MS must be an integer/],
    [{ MAX_CONNECTIONS_PER_ADDRESS: "-1" }, /MAX_CONNECTIONS_PER_ADDRESS must be an integer between 0 and/],
    [{ DATABASE_STATEMENT_TIMEOUT_MS: "-1" }, /DATABASE_STATEMENT_TIMEOUT_MS must be an integer between 0 and/],
    [{ DATABASE_POOL_TIMEOUT_MS: "soon" }, /DATABASE_POOL_TIMEOUT_MS must be an integer/],
    [{ SHUTDOWN_DRAIN_MS: "-5" }, /SHUTDOWN_DRAIN_MS must be an integer between 0 and/],
    [{ DATABASE_URL: "postgres://h/db", DATABASE_POOL_MODE: "statement" }, /DATABASE_POOL_MODE must be one of session, transaction/],
    [{ DATABASE_URL: "postgres://h/db", DATABASE_POOL_MODE: "transaction" }, /DATABASE_POOL_MODE=transaction needs DATABASE_LISTEN_URL: a direct connection/],
    [{ DATABASE_POOL_MODE: "transaction", DATABASE_LISTEN_URL: "postgres://h/db" }, /DATABASE_POOL_MODE=transaction needs DATABASE_URL/],
    [{ DATABASE_LISTEN_URL: "postgres://h/db" }, /DATABASE_LISTEN_URL is set but DATABASE_URL is not/],
    [{ DATABASE_URL: "postgres://h/db", DATABASE_LISTEN_URL: "mysql://h/db" }, /DATABASE_LISTEN_URL must be a PostgreSQL URL/],
  ])("rejects %j with a clear message", (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it("keeps registry blobs on the filesystem by default, with garbage collection on demand only", () => {
    expect(loadConfig({}).registry).toEqual({ storage: { kind: "filesystem" }, uploadTtlMs: 24 * 3_600_000, gcGraceMs: 3_600_000, gcIntervalMs: 0 });
    expect(loadConfig({ REGISTRY_UPLOAD_TTL_HOURS: "2", REGISTRY_GC_GRACE_MINUTES: "30", REGISTRY_GC_INTERVAL_MINUTES: "15" }).registry).toMatchObject({
      uploadTtlMs: 2 * 3_600_000,
      gcGraceMs: 30 * 60_000,
      gcIntervalMs: 15 * 60_000,
    });
  });

  it("reads the S3 storage settings", () => {
    expect(loadConfig({ REGISTRY_STORAGE: "s3", REGISTRY_S3_BUCKET: "blobs" }).registry.storage).toEqual({
      kind: "s3",
      bucket: "blobs",
      region: "us-east-1",
      prefix: "",
      forcePathStyle: false,
    });
    expect(loadConfig({ REGISTRY_STORAGE: "s3", REGISTRY_S3_BUCKET: "blobs", AWS_REGION: "eu-west-3" }).registry.storage).toMatchObject({ region: "eu-west-3" });
    expect(
      loadConfig({
        REGISTRY_STORAGE: "s3",
        REGISTRY_S3_BUCKET: "my.registry-blobs",
        REGISTRY_S3_ENDPOINT: "http://127.0.0.1:9000/",
        REGISTRY_S3_REGION: "eu-central-1",
        REGISTRY_S3_PREFIX: "prod/registry",
        AWS_REGION: "us-west-2",
      }).registry.storage,
    ).toEqual({ kind: "s3", bucket: "my.registry-blobs", endpoint: "http://127.0.0.1:9000", region: "eu-central-1", prefix: "prod/registry/", forcePathStyle: true });
    expect(loadConfig({ REGISTRY_STORAGE: "s3", REGISTRY_S3_BUCKET: "b-1", REGISTRY_S3_ENDPOINT: "https://s3.example.com", REGISTRY_S3_FORCE_PATH_STYLE: "false" }).registry.storage).toMatchObject({
      forcePathStyle: false,
    });
  });

  it.each([
    [{ REGISTRY_STORAGE: "gcs" }, "REGISTRY_STORAGE must be one of filesystem, s3, got \"gcs\""],
    [{ REGISTRY_STORAGE: "s3" }, "REGISTRY_S3_BUCKET must name the bucket when REGISTRY_STORAGE=s3"],
    [{ REGISTRY_S3_BUCKET: "blobs" }, "REGISTRY_S3_BUCKET is set but REGISTRY_STORAGE is not s3: set REGISTRY_STORAGE=s3 to keep blobs in the bucket, or unset REGISTRY_S3_BUCKET"],
    [{ REGISTRY_STORAGE: "s3", REGISTRY_S3_BUCKET: "Blobs_1" }, 'REGISTRY_S3_BUCKET must be a bucket name (3 to 63 of a-z, 0-9, ".", "-"), got "Blobs_1"'],
    [{ REGISTRY_STORAGE: "s3", REGISTRY_S3_BUCKET: "blobs", REGISTRY_S3_ENDPOINT: "127.0.0.1:9000" }, "REGISTRY_S3_ENDPOINT must be an http(s) URL such as http://127.0.0.1:9000"],
    [{ REGISTRY_STORAGE: "s3", REGISTRY_S3_BUCKET: "blobs", REGISTRY_S3_ENDPOINT: "http://key:secret@h:9000" }, "REGISTRY_S3_ENDPOINT must not hold credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"],
    [{ REGISTRY_STORAGE: "s3", REGISTRY_S3_BUCKET: "blobs", REGISTRY_S3_REGION: "EU West" }, 'REGISTRY_S3_REGION must be a region name such as eu-west-1, got "EU West"'],
    [{ REGISTRY_STORAGE: "s3", REGISTRY_S3_BUCKET: "blobs", REGISTRY_S3_PREFIX: "/abs" }, "REGISTRY_S3_PREFIX must be a key prefix such as registry/"],
    [{ REGISTRY_STORAGE: "s3", REGISTRY_S3_BUCKET: "blobs", REGISTRY_S3_PREFIX: "a//b" }, "REGISTRY_S3_PREFIX must be a key prefix"],
    [{ REGISTRY_STORAGE: "s3", REGISTRY_S3_BUCKET: "blobs", REGISTRY_S3_FORCE_PATH_STYLE: "yes" }, 'REGISTRY_S3_FORCE_PATH_STYLE must be true or false, got "yes"'],
    [{ REGISTRY_UPLOAD_TTL_HOURS: "0" }, "REGISTRY_UPLOAD_TTL_HOURS must be an integer between 1 and 720"],
    [{ REGISTRY_GC_GRACE_MINUTES: "1" }, "REGISTRY_GC_GRACE_MINUTES must be an integer between 10 and 10080"],
    [{ REGISTRY_GC_INTERVAL_MINUTES: "-5" }, "REGISTRY_GC_INTERVAL_MINUTES must be an integer between 0 and 10080"],
  ])("rejects registry storage settings %j in one line", (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it("reads the database and port settings", () => {
    const c = loadConfig({
      PORT: "9090",
      DATABASE_URL: "postgres://x@h/db",
      DATA_DIR: "/var/lib/x",
      SERVER_MODE: "production",
      ISSUER_URL: "https://api.example.com/",
    });
    expect(c).toMatchObject({
      port: 9090,
      databaseUrl: "postgres://x@h/db",
      dataDir: "/var/lib/x",
      mode: "production",
      issuerUrl: "https://api.example.com",
      allowInsecureLoopbackIssuers: false,
      allowPrivateOutbound: false,
    });
  });

  it("allows private outbound destinations in development only, unless ALLOW_PRIVATE_OUTBOUND says", () => {
    expect(loadConfig({}).allowPrivateOutbound).toBe(true);
    expect(loadConfig({ SERVER_MODE: "production", ISSUER_URL: "https://api.example.com" }).allowPrivateOutbound).toBe(false);
    expect(loadConfig({ SERVER_MODE: "production", ISSUER_URL: "https://api.example.com", ALLOW_PRIVATE_OUTBOUND: "true" }).allowPrivateOutbound).toBe(true);
    expect(() => loadConfig({ ALLOW_PRIVATE_OUTBOUND: "yes" })).toThrow(/ALLOW_PRIVATE_OUTBOUND must be true or false/);
  });

  it("listens on loopback in development (it prints an owner's token), on every interface in production, unless HOST says", () => {
    expect(loadConfig({}).host).toBe("127.0.0.1");
    expect(loadConfig({ SERVER_MODE: "production", ISSUER_URL: "https://api.example.com" }).host).toBe("0.0.0.0");
    expect(loadConfig({ HOST: "0.0.0.0" }).host).toBe("0.0.0.0");
    expect(loadConfig({ HOST: "::1", SERVER_MODE: "production", ISSUER_URL: "https://api.example.com" }).host).toBe("::1");
  });

  it("reads IDP_SECRET_KEY as base64 of 32 bytes, and never echoes a bad one", () => {
    const key = Buffer.alloc(32, 7);
    expect(loadConfig({}).idpSecretKey).toBeUndefined();
    expect(Buffer.from(loadConfig({ IDP_SECRET_KEY: key.toString("base64") }).idpSecretKey!)).toEqual(key);
    expect(Buffer.from(loadConfig({ IDP_SECRET_KEY: key.toString("base64url") }).idpSecretKey!)).toEqual(key);
    expect(() => loadConfig({ IDP_SECRET_KEY: Buffer.alloc(16).toString("base64") })).toThrow(/IDP_SECRET_KEY must be the base64 of 32 bytes, got 16/);
    expect(() => loadConfig({ IDP_SECRET_KEY: "not base64 at all!" })).toThrow(/^IDP_SECRET_KEY must be base64$/);
  });

  it("reads REFRESH_TOKEN_TTL_HOURS (default 30 days) into seconds, within 1 hour and a year", () => {
    expect(loadConfig({}).refreshTokenTtlSeconds).toBe(30 * 24 * 3600);
    expect(loadConfig({ REFRESH_TOKEN_TTL_HOURS: "2" }).refreshTokenTtlSeconds).toBe(7200);
    expect(() => loadConfig({ REFRESH_TOKEN_TTL_HOURS: "0" })).toThrow(/REFRESH_TOKEN_TTL_HOURS must be an integer between 1 and 8760/);
    expect(() => loadConfig({ REFRESH_TOKEN_TTL_HOURS: "1.5" })).toThrow(/REFRESH_TOKEN_TTL_HOURS/);
  });

  it("accepts postgres:// and postgresql:// as DATABASE_URL, and refuses another scheme without echoing the URL", () => {
    expect(loadConfig({ DATABASE_URL: "postgresql://u:p@h:5433/db?sslmode=require" }).databaseUrl).toBe("postgresql://u:p@h:5433/db?sslmode=require");
    expect(loadConfig({ DATABASE_URL: "" }).databaseUrl).toBeUndefined();
    for (const url of ["mysql://root:hunter2@h/db", "h:5432/db", "sqlite:///tmp/x.db"]) {
      expect(() => loadConfig({ DATABASE_URL: url })).toThrow(/^DATABASE_URL must be a PostgreSQL URL \(postgres:\/\//);
      expect(() => loadConfig({ DATABASE_URL: url })).not.toThrow(/hunter2/);
    }
  });

  it("reads DATABASE_REPLICA_URLS (with DATABASE_URL only) and REPLICA_MAX_LAG, refusing bad entries without echoing them", () => {
    const primary = "postgres://u:hunter2@db-1:5432/api";
    expect(loadConfig({}).replicas).toEqual({ urls: [], maxLagMs: 2_000 });
    expect(loadConfig({ DATABASE_URL: primary, DATABASE_REPLICA_URLS: " postgres://u:hunter2@db-2/api, postgresql://u:p@db-3:5433/api " }).replicas).toEqual({
      urls: ["postgres://u:hunter2@db-2/api", "postgresql://u:p@db-3:5433/api"],
      maxLagMs: 2_000,
    });
    for (const [raw, ms] of [["500ms", 500], ["3s", 3_000], ["1.5", 1_500], ["10", 10_000]] as const) {
      expect(loadConfig({ REPLICA_MAX_LAG: raw }).replicas.maxLagMs).toBe(ms);
    }
    const refused: [Record<string, string>, RegExp][] = [
      [{ DATABASE_REPLICA_URLS: "postgres://u:hunter2@db-2/api" }, /^DATABASE_REPLICA_URLS needs DATABASE_URL/],
      [{ DATABASE_URL: primary, DATABASE_REPLICA_URLS: "postgres://db-2/api,,postgres://db-3/api" }, /^DATABASE_REPLICA_URLS entry 2 is empty/],
      [{ DATABASE_URL: primary, DATABASE_REPLICA_URLS: "mysql://root:hunter2@db-2/api" }, /^DATABASE_REPLICA_URLS entry 1 must be a PostgreSQL URL .*got a mysql: URL/],
      [{ DATABASE_URL: primary, DATABASE_REPLICA_URLS: "postgres://u:hunter2@db-1/api" }, /^DATABASE_REPLICA_URLS entry 1 is DATABASE_URL itself/],
      [{ DATABASE_URL: primary, DATABASE_REPLICA_URLS: "postgres://db-2/api,postgres://x:hunter2@db-2:5432/api" }, /^DATABASE_REPLICA_URLS entry 2 names db-2:5432 a second time/],
      [{ REPLICA_MAX_LAG: "2 minutes" }, /^REPLICA_MAX_LAG must be a duration between 10 ms and 300 s, such as 2s, 500ms or 1.5/],
      [{ REPLICA_MAX_LAG: "5ms" }, /^REPLICA_MAX_LAG must be a duration/],
      [{ REPLICA_MAX_LAG: "301s" }, /^REPLICA_MAX_LAG must be a duration/],
    ];
    for (const [env, message] of refused) {
      expect(() => loadConfig(env)).toThrow(ConfigError);
      expect(() => loadConfig(env)).toThrow(message);
      expect(() => loadConfig(env)).not.toThrow(/hunter2/);
    }
  });

  it("says whether the issuer and the audiences are the defaults (development keeps its first issuer: main.ts)", () => {
    expect(loadConfig({})).toMatchObject({ issuerDefaulted: true, externalAudiencesDefaulted: true });
    expect(loadConfig({ ISSUER_URL: "http://localhost:1" })).toMatchObject({ issuerDefaulted: false, externalAudiencesDefaulted: true });
    expect(loadConfig({ EXTERNAL_AUDIENCES: "a" })).toMatchObject({ issuerDefaulted: true, externalAudiencesDefaulted: false });
  });

  it("defaults the issuer to this server on localhost, and allows loopback http issuers in development only", () => {
    expect(loadConfig({ PORT: "9000" })).toMatchObject({ issuerUrl: "http://localhost:9000", allowInsecureLoopbackIssuers: true });
    expect(loadConfig({ ALLOW_INSECURE_LOOPBACK_ISSUERS: "false" }).allowInsecureLoopbackIssuers).toBe(false);
  });

  it.each([
    [{ SERVER_MODE: "production" }, /ISSUER_URL must use https in production/],
    [{ ISSUER_URL: "not a url" }, /ISSUER_URL must be an absolute URL/],
    [{ ISSUER_URL: "ftp://x" }, /ISSUER_URL must be http/],
    [{ ALLOW_INSECURE_LOOPBACK_ISSUERS: "yes" }, /must be true or false/],
    [{ EXTERNAL_AUDIENCES: " , " }, /EXTERNAL_AUDIENCES must name at least one audience/],
  ])("rejects issuer settings %j", (env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
  });

  it("accepts external tokens for this server's own URL unless EXTERNAL_AUDIENCES lists others", () => {
    expect(loadConfig({ ISSUER_URL: "https://api.example.com/" }).externalAudiences).toEqual(["https://api.example.com"]);
    expect(loadConfig({ EXTERNAL_AUDIENCES: "https://api.example.com, sts.example ,," }).externalAudiences).toEqual(["https://api.example.com", "sts.example"]);
  });

  it("reads the terms documents (default: docs/iam.md's list), the methods needing them, and the access request window", () => {
    const defaults = loadConfig({});
    expect(defaults.terms).toEqual({ documents: DEFAULT_TERMS_DOCUMENTS, requiredFor: [] });
    expect(defaults.terms.documents.map((d) => d.id)).toEqual(["terms-of-service", "privacy-notice"]);
    expect(defaults.groupAccessRequestWindowMs).toBe(3_600_000);
    const c = loadConfig({
      TERMS_DOCUMENTS: '[{"id": "tos", "label": "Terms", "url": "https://legal.example.com/tos"}]',
      TERMS_REQUIRED_FOR: " chainguard.platform.registry.v2.ReposService/CreateRepo, /chainguard.platform.registry.v2.TagsService/CreateTag,,",
      GROUP_ACCESS_REQUEST_WINDOW_MINUTES: "15",
    });
    expect(c.terms).toEqual({
      documents: [{ id: "tos", label: "Terms", url: "https://legal.example.com/tos" }],
      requiredFor: ["chainguard.platform.registry.v2.ReposService/CreateRepo", "chainguard.platform.registry.v2.TagsService/CreateTag"],
    });
    expect(c.groupAccessRequestWindowMs).toBe(15 * 60_000);
  });

  it.each([
    [{ TERMS_DOCUMENTS: "tos" }, /TERMS_DOCUMENTS must be a JSON array/],
    [{ TERMS_DOCUMENTS: '{"id": "tos"}' }, /TERMS_DOCUMENTS must be a JSON array/],
    [{ TERMS_DOCUMENTS: '[{"id": "Bad Id", "label": "x", "url": "https://x.example"}]' }, /TERMS_DOCUMENTS\[0\]\.id/],
    [{ TERMS_DOCUMENTS: '[{"id": "a", "label": "x", "url": "https://x.example"}, {"id": "a", "label": "y", "url": "https://y.example"}]' }, /listed twice/],
    [{ TERMS_DOCUMENTS: '[{"id": "a", "label": "", "url": "https://x.example"}]' }, /TERMS_DOCUMENTS\[0\]\.label/],
    [{ TERMS_DOCUMENTS: '[{"id": "a", "label": "x", "url": "javascript:alert(1)"}]' }, /TERMS_DOCUMENTS\[0\]\.url/],
    [{ TERMS_REQUIRED_FOR: "CreateRepo" }, /TERMS_REQUIRED_FOR: "CreateRepo" is not <package>.<Service>\/<Method>/],
    [{ GROUP_ACCESS_REQUEST_WINDOW_MINUTES: "0" }, /GROUP_ACCESS_REQUEST_WINDOW_MINUTES must be an integer/],
  ])("rejects terms and access request settings %j", (env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });
});

describe("metrics settings", () => {
  it("serve /metrics on a loopback listener of its own by default, and not on the API port", () => {
    expect(loadConfig({}).metrics).toEqual({ listen: { host: "127.0.0.1", port: 9464 }, listenExplicit: false, token: undefined });
  });

  it.each([
    ["0.0.0.0:9100", { host: "0.0.0.0", port: 9100 }],
    ["[::1]:9464", { host: "::1", port: 9464 }],
    ["metrics.internal:0", { host: "metrics.internal", port: 0 }],
    ["off", undefined],
  ])("METRICS_ADDR=%s", (raw, listen) => {
    const c = loadConfig({ METRICS_ADDR: raw });
    expect(c.metrics.listen).toEqual(listen);
    expect(c.metrics.listenExplicit).toBe(true);
  });

  it.each(["9464", "host:", ":9464", "host:70000", "a b:1", "[::1]"])("refuses METRICS_ADDR=%s", (raw) => {
    expect(() => loadConfig({ METRICS_ADDR: raw })).toThrow(/METRICS_ADDR must be <host>:<port>/);
  });

  it("reads METRICS_TOKEN, and refuses a short one or one with spaces without quoting it", () => {
    const token = "0123456789abcdef0123456789abcdef";
    expect(loadConfig({ METRICS_TOKEN: token }).metrics.token).toBe(token);
    for (const bad of ["short-token", `${token} with spaces`]) {
      let message = "";
      try {
        loadConfig({ METRICS_TOKEN: bad });
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        message = (err as Error).message;
      }
      expect(message).toMatch(/METRICS_TOKEN must be 32 to 512 printable ASCII characters/);
      expect(message).not.toContain(bad);
    }
  });
});
