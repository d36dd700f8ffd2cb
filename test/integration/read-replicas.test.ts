// Reads from a streaming replica, on real PostgreSQL replication (a primary made with initdb and a replica
// made with pg_basebackup, scripts/cluster/postgres.ts): read-only calls are served by the replica; after a
// caller's write, that caller's reads go to the primary on every server until the replica has the write;
// a replica that stops or lags too far is skipped without an error to the client, and rejoins.
//
// Two servers in this process over the same primary and replica stand for two servers behind a load
// balancer: each has its own pools and its own memory, and shares only the databases. The replica's replay
// is paused (pg_wal_replay_pause) to make "the replica does not have the write yet" certain.
import { mkdtemp } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Code } from "@connectrpc/connect";
import postgres from "postgres";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SecurityAdvisoryService } from "../../gen/chainguard/platform/advisory/v2/advisory_pb.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { ArtifactsService, Ecosystem } from "../../gen/chainguard/platform/libraries/v2/artifacts_pb.js";
import { ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { AdvisoriesService } from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { destroyInstances, localPostgresUnavailable, startPrimary, startReplica, type PgInstance } from "../../scripts/cluster/postgres.js";
import { openPostgres, type Database } from "../../src/db/client.js";
import { readTarget, type ReplicaStatus } from "../../src/db/read-routing.js";
import { call, protocols } from "../contract/harness.js";
import { until } from "../support/poll.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

const unavailable = !process.env.DATABASE_URL ? "runs once, in the PostgreSQL run (DATABASE_URL set)" : localPostgresUnavailable();
if (unavailable) console.warn(`read replica tests skipped: ${unavailable}`);

/** Generous: a change of state is seen at the next poll (150 ms); a loaded machine may take longer. */
const DEADLINE_MS = 15_000;

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

describe.skipIf(!!unavailable)("read replicas (PostgreSQL streaming replication)", () => {
  let dir: string;
  let primary: PgInstance;
  let replica: PgInstance;
  let onReplica: postgres.Sql;
  let a: TestServer;
  let b: TestServer;
  let world: World;
  const opened: Database[] = [];

  /** The server's view of its replica. */
  const replicaOf = (database: Database): ReplicaStatus => database.stats().reads!.replicas[0]!;
  const counts = (server: TestServer) => {
    const reads = server.database.stats().reads!;
    return { primary: reads.primaryReads, replica: reads.replicas[0]!.reads };
  };
  const open = async (maxLagMs: number) => {
    const database = await openPostgres(primary.url("apiserver"), { max: 4, replicas: { urls: [replica.url("apiserver")], maxLagMs } });
    opened.push(database);
    return database;
  };
  const serve = async (maxLagMs: number) => {
    const database = await open(maxLagMs);
    return startTestServer({ database: { ...database, dispose: async () => {} } });
  };
  const inRotation = (database: Database) => until("the replica in rotation", async () => replicaOf(database).state, (s) => s === "up", DEADLINE_MS);
  const getGroup = async (server: TestServer, uid: string, identity: string) =>
    call("grpc", server.baseUrl, GroupsService.method.getGroup, { uid }, { authorization: `Bearer ${await server.token(identity)}` });

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "apiserver-replicas-"));
    primary = await startPrimary({ dir, port: await freePort() });
    const admin = postgres(primary.url(), { max: 1, onnotice: () => {} });
    await admin.unsafe("create database apiserver");
    await admin.end();
    replica = await startReplica(primary, { dir, port: await freePort() });
    onReplica = postgres(replica.url(), { max: 1, onnotice: () => {}, idle_timeout: 1 });
    // Replay stays paused long enough here: both servers keep the replica in rotation for a minute of lag.
    a = await serve(60_000);
    b = await serve(60_000);
    world = await seedWorld(a);
    await Promise.all([inRotation(a.database), inRotation(b.database)]);
  }, 120_000);

  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await Promise.all(opened.map((d) => d.close()));
    await onReplica?.end({ timeout: 1 });
    if (dir) await destroyInstances(dir);
  }, 60_000);

  it("serves a read-only call from the replica", async () => {
    // The world was written straight to the database: no caller has a write of their own yet.
    await until("the world on the replica", async () => (await getGroup(a, world.org, world.identity.viewer)).error?.code ?? "ok", (c) => c === "ok", DEADLINE_MS);
    const before = counts(a);
    const out = await getGroup(a, world.org, world.identity.viewer);
    expect(out.error).toBeUndefined();
    const after = counts(a);
    expect(after.replica).toBeGreaterThan(before.replica);
    expect(after.primary).toBe(before.primary);
    const { body } = await a.metrics.render();
    expect(body).toMatch(new RegExp(`apiserver_db_reads_total\\{target="replica",replica="127\\.0\\.0\\.1:${replica.port}"\\} [1-9]`));
    expect(body).toContain(`apiserver_db_replica_up{replica="127.0.0.1:${replica.port}"} 1`);
    expect(body).toMatch(/apiserver_db_replica_lag_seconds\{replica="[^"]+"\} [0-9.]+/);
    expect(body).toMatch(/apiserver_db_replica_lag_bytes\{replica="[^"]+"\} \d+/);
  });

  it("serves the read-only calls of every protocol from the replica, the global-data domains' too", async () => {
    await until("the world on the replica", async () => (await getGroup(a, world.org, world.identity.viewer)).error?.code ?? "ok", (c) => c === "ok", DEADLINE_MS);
    const auth = { authorization: `Bearer ${await a.token(world.identity.viewer)}` };
    const reads = [
      ["GetGroup", (p: (typeof protocols)[number]) => call(p, a.baseUrl, GroupsService.method.getGroup, { uid: world.org }, auth)],
      ["ListRepos", (p: (typeof protocols)[number]) => call(p, a.baseUrl, ReposService.method.listRepos, { pageSize: 5 }, auth)],
      ["ListAdvisories", (p: (typeof protocols)[number]) => call(p, a.baseUrl, AdvisoriesService.method.listAdvisories, { pageSize: 5 }, auth)],
      ["ListArtifacts", (p: (typeof protocols)[number]) => call(p, a.baseUrl, ArtifactsService.method.listArtifacts, { ecosystems: [Ecosystem.JAVA], pageSize: 5 }, auth)],
      ["GetArtifactCount", (p: (typeof protocols)[number]) => call(p, a.baseUrl, ArtifactsService.method.getArtifactCount, { ecosystems: [Ecosystem.JAVA] }, auth)],
      ["ListDocuments", (p: (typeof protocols)[number]) => call(p, a.baseUrl, SecurityAdvisoryService.method.listDocuments, { cves: ["CVE-2024-0001"] }, auth)],
      ["ListVulnerabilityMetadata", (p: (typeof protocols)[number]) => call(p, a.baseUrl, SecurityAdvisoryService.method.listVulnerabilityMetadata, { pageSize: 5 }, auth)],
    ] as const;
    const seen: string[] = [];
    for (const protocol of protocols) {
      for (const [name, read] of reads) {
        const before = counts(a);
        const out = await read(protocol);
        expect(out.error, `${name} over ${protocol}`).toBeUndefined();
        const after = counts(a);
        seen.push(`${name} over ${protocol}: replica ${after.replica > before.replica ? "yes" : "no"}, primary ${after.primary === before.primary ? "no" : "yes"}`);
      }
    }
    expect(seen).toEqual(protocols.flatMap((protocol) => reads.map(([name]) => `${name} over ${protocol}: replica yes, primary no`)));
  });

  it("sends a writer's reads to the primary, on every server, until the replica has the write", async () => {
    await onReplica`select pg_wal_replay_pause()`;
    try {
      const created = await call("grpc", a.baseUrl, GroupsService.method.createGroup, { parent: world.org, group: { name: "fresh" } }, world.auth("owner"));
      expect(created.error).toBeUndefined();
      const uid = created.message!.uid;

      // The replica does not have it: a caller without writes, sent there, does not find it.
      const viewerRead = await getGroup(b, uid, world.identity.viewer);
      expect(viewerRead.error?.code).toBe(Code.NotFound);

      // The writer finds it through the server it wrote through, and through the other one: the primary.
      for (const server of [a, b]) {
        const before = counts(server);
        const out = await getGroup(server, uid, world.identity.owner);
        expect(out.error).toBeUndefined();
        expect(out.message!.name).toBe("fresh");
        const after = counts(server);
        expect(after.primary).toBeGreaterThan(before.primary);
        expect(after.replica).toBe(before.replica);
      }
    } finally {
      await onReplica`select pg_wal_replay_resume()`;
    }
    // Once the replica has replayed the write, the writer's reads go to it again.
    await until(
      "the writer's read on the replica",
      async () => {
        const before = counts(b);
        const out = await getGroup(b, world.org, world.identity.owner);
        expect(out.error).toBeUndefined();
        return counts(b).replica - before.replica;
      },
      (n) => n > 0,
      DEADLINE_MS,
    );
  });

  it("keeps a writer on the primary while the replica has replayed a later transaction's commit but not the writer's", async () => {
    // The writer's transaction W takes its xid first; a later transaction L commits, and the replica replays
    // it; then replay pauses and W commits. On the replica W lies between the snapshot's xmin and xmax with no
    // in-progress list printed (a standby keeps them apart): W has not ended there.
    const onPrimary = postgres(primary.url("apiserver"), { max: 2, onnotice: () => {} });
    try {
      const identity = `writer-${Date.now()}`;
      const reserved = await onPrimary.reserve();
      await reserved`begin`;
      await reserved`insert into read_positions (identity, xid, expire_time) values (${identity}, pg_current_xact_id()::text::bigint, now() + interval '1 minute')`;
      const [later] = await onPrimary`select pg_current_xact_id()::text as xid, pg_current_wal_insert_lsn()::text as lsn`;
      await until("the later commit on the replica", async () => (await onReplica`select pg_last_wal_replay_lsn() >= ${later!.lsn}::pg_lsn as replayed`)[0]!.replayed as boolean, (r) => r, DEADLINE_MS);
      await onReplica`select pg_wal_replay_pause()`;
      try {
        await reserved`commit`;
        reserved.release();
        await new Promise((resolve) => setTimeout(resolve, 600)); // a few polls of the paused replica
        const before = counts(a);
        await (await readTarget(a.database.db, identity)).execute(sql`select 1`);
        expect(counts(a)).toEqual({ primary: before.primary + 1, replica: before.replica });
      } finally {
        await onReplica`select pg_wal_replay_resume()`;
      }
    } finally {
      await onPrimary.end({ timeout: 1 });
    }
  });

  it("answers from the primary while the replica is down, and uses the replica again once it is back", async () => {
    await replica.stop();
    try {
      // At once: the first read may still be sent to the replica, meet the closed connection, and run again
      // on the primary. No error reaches the client either way.
      for (let i = 0; i < 3; i++) expect((await getGroup(a, world.org, world.identity.viewer)).error).toBeUndefined();
      await until("the replica out of rotation", async () => replicaOf(a.database).state, (s) => s === "down", DEADLINE_MS);
      const before = counts(a);
      expect((await getGroup(a, world.org, world.identity.viewer)).error).toBeUndefined();
      expect(counts(a).primary).toBeGreaterThan(before.primary);
      // The server stays healthy, and says which replica is down.
      const health = await fetch(`${a.baseUrl}/healthz`);
      expect(health.status).toBe(200);
      expect(await health.json()).toEqual({ status: "SERVING", replicas: [{ replica: `127.0.0.1:${replica.port}`, state: "down", lagSeconds: null, lagBytes: null }] });
      const { body } = await a.metrics.render();
      expect(body).toContain(`apiserver_db_replica_up{replica="127.0.0.1:${replica.port}"} 0`);
    } finally {
      await replica.start();
    }
    await inRotation(a.database);
    await until(
      "a read on the replica again",
      async () => {
        const before = counts(a);
        expect((await getGroup(a, world.org, world.identity.viewer)).error).toBeUndefined();
        return counts(a).replica - before.replica;
      },
      (n) => n > 0,
      DEADLINE_MS,
    );
  }, 60_000);

  it("runs a statement that writes, sent to a replica by mistake, on the primary", async () => {
    await inRotation(a.database);
    const target = await readTarget(a.database.db, undefined);
    expect(target).not.toBe(a.database.db);
    const before = counts(a);
    // The replica refuses it (25006, read-only): it runs again on the primary, and no error reaches the caller.
    await target.execute(sql`create table routed_by_mistake (x int)`);
    expect(counts(a).primary).toBe(before.primary + 1);
    const [row] = (await a.database.db.execute(sql`select to_regclass('routed_by_mistake') is not null as present`)) as unknown as { present: boolean }[];
    expect(row!.present).toBe(true);
  });

  it("skips a replica further behind than REPLICA_MAX_LAG, and takes it back once it has caught up", async () => {
    const strict = await open(200);
    await inRotation(strict);
    const primaryReads = () => strict.stats().reads!.primaryReads;
    await onReplica`select pg_wal_replay_pause()`;
    try {
      // Changes the replica does not replay, for longer than the allowed lag.
      await until(
        "the replica lagging",
        async () => {
          await strict.db.execute(sql`select pg_notify('apiserver_test', 'x'), txid_current()`);
          return replicaOf(strict).state;
        },
        (s) => s === "lagging",
        DEADLINE_MS,
      );
      expect(replicaOf(strict).lagBytes).toBeGreaterThan(0);
      const before = primaryReads();
      await (await readTarget(strict.db, undefined)).execute(sql`select 1`);
      expect(primaryReads()).toBe(before + 1);
    } finally {
      await onReplica`select pg_wal_replay_resume()`;
    }
    await inRotation(strict);
    const before = strict.stats().reads!.replicas[0]!.reads;
    await (await readTarget(strict.db, undefined)).execute(sql`select 1`);
    expect(strict.stats().reads!.replicas[0]!.reads).toBe(before + 1);
  }, 60_000);
});
