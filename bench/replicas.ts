// Read replicas (docs/replicas.md): what routing reads costs the server, and how many reads a replica takes.
// A primary and a streaming replica of it made on free ports from the machine's PostgreSQL binaries
// (scripts/cluster/postgres.ts: initdb and pg_basebackup; DATABASE_URL is not used), and two servers on
// them: one without replicas, one with DATABASE_REPLICA_URLS. Authenticated GetGroup over gRPC:
//   GetGroup                     the same call on both servers: server CPU per call, and the PostgreSQL CPU
//                                of each instance (with the replica: the read-position lookup on the primary,
//                                the group's read on the replica)
//   GetGroup, 1 in 10 writes     the caller updates the group on every tenth call: how many of its reads the
//                                replica still serves (read-your-writes sends the others to the primary)
// In interleaved rounds; each row the median of its rounds. The replica's share is read from /metrics.
// Usage: npm run bench -- replicas [--seconds 3] [--concurrency 16] [--rounds 3]
import { mkdtempSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { create, toBinary } from "@bufbuild/protobuf";
import postgres from "postgres";
import { GetGroupRequestSchema, GroupsService, UpdateGroupRequestSchema } from "../gen/chainguard/platform/iam/v2/groups_pb.js";
import { destroyInstances, localPostgresUnavailable, startPrimary, startReplica } from "../scripts/cluster/postgres.js";
import { openPostgres } from "../src/db/client.js";
import { setLogLevel } from "../src/kernel/log.js";
import { medianOf } from "./compare.js";
import { BENCH_APPLICATION, backendsCpu, processCpu, type CpuMeter } from "./cpu.js";
import { ownedOrganization } from "./database.js";
import { grpcSender, measure, say, textTable, type Result, type Send } from "./load.js";
import { freePort, startApiServer } from "./processes.js";

const ISSUER = "https://bench.replicas.invalid";
const METRICS_TOKEN = "bench-replicas-metrics-token-0123456789abcdef";
const GET_GROUP = `/${GroupsService.typeName}/GetGroup`;
const UPDATE_GROUP = `/${GroupsService.typeName}/UpdateGroup`;

export interface ReplicasBenchOptions {
  seconds: number;
  concurrency: number;
  rounds: number;
}

/** Reads of read-only calls so far, by target, from the server's /metrics. */
async function readsOf(port: number): Promise<{ primary: number; replica: number }> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  const sum = (target: string) =>
    [...text.matchAll(new RegExp(`^apiserver_db_reads_total\\{target="${target}"[^}]*\\} (\\d+)`, "gm"))].reduce((n, m) => n + Number(m[1]), 0);
  return { primary: sum("primary"), replica: sum("replica") };
}

export async function benchReplicas(opts: ReplicasBenchOptions): Promise<void> {
  const why = localPostgresUnavailable();
  if (why) {
    say(`replicas: skipped: ${why}`);
    return;
  }
  setLogLevel("warn");
  const dir = mkdtempSync(join(tmpdir(), "bench-replicas-"));
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    const primary = await startPrimary({ dir, port: await freePort() });
    const admin = postgres(primary.url(), { max: 1, onnotice: () => {} });
    await admin.unsafe("create database bench");
    await admin.end();
    const replica = await startReplica(primary, { dir, port: await freePort() });
    const url = primary.url("bench");
    const database = await openPostgres(url, { max: 2 });
    const { org, auth } = await ownedOrganization(database.db, ISSUER, 3600);
    await database.close();
    const loadBefore = loadavg()[0]!;

    const env = { DATABASE_URL: url, ISSUER_URL: ISSUER, SERVER_MODE: "production", LOG_LEVEL: "warn", METRICS_TOKEN };
    const plain = await startApiServer(env);
    cleanups.push(() => plain.stop());
    const routed = await startApiServer({ ...env, DATABASE_REPLICA_URLS: replica.url("bench") });
    cleanups.push(() => routed.stop());

    const onPrimary = postgres(url, { max: 1, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
    const onReplica = postgres(replica.url("bench"), { max: 1, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
    cleanups.push(() => onPrimary.end({ timeout: 5 }), () => onReplica.end({ timeout: 5 }));
    // The replica in rotation before measuring: a read of the routed server reaches it.
    for (let i = 0; ; i++) {
      const before = await readsOf(routed.port);
      await grpcSender(routed.port, GET_GROUP, toBinary(GetGroupRequestSchema, create(GetGroupRequestSchema, { uid: org })), auth)()();
      if ((await readsOf(routed.port)).replica > before.replica) break;
      if (i > 100) throw new Error("the replica never served a read");
      await new Promise((r) => setTimeout(r, 100));
    }

    const getBytes = toBinary(GetGroupRequestSchema, create(GetGroupRequestSchema, { uid: org }));
    // Every UpdateGroup writes (its update time changes), and records the caller's read position.
    const updateBytes = toBinary(UpdateGroupRequestSchema, create(UpdateGroupRequestSchema, { group: { uid: org, name: "bench", description: "written" }, updateMask: { paths: ["description"] } }));
    let n = 0;
    const mixed = (port: number) => (): Send => {
      const get = grpcSender(port, GET_GROUP, getBytes, auth)();
      const update = grpcSender(port, UPDATE_GROUP, updateBytes, auth)();
      return () => (++n % 10 === 0 ? update() : get());
    };
    const targets: { name: string; port: number; pid: number; send: () => Send; routedReads: boolean }[] = [
      { name: "GetGroup, no replicas", port: plain.port, pid: plain.serverPid, send: grpcSender(plain.port, GET_GROUP, getBytes, auth), routedReads: false },
      { name: "GetGroup, one replica", port: routed.port, pid: routed.serverPid, send: grpcSender(routed.port, GET_GROUP, getBytes, auth), routedReads: true },
      { name: "GetGroup, 1 in 10 writes, no replicas", port: plain.port, pid: plain.serverPid, send: mixed(plain.port), routedReads: false },
      { name: "GetGroup, 1 in 10 writes, one replica", port: routed.port, pid: routed.serverPid, send: mixed(routed.port), routedReads: true },
    ];
    const cpuOf = (pid: number): CpuMeter[] => [
      processCpu("server", pid),
      backendsCpu("primary", onPrimary, { not: BENCH_APPLICATION }),
      backendsCpu("replica", onReplica, { not: BENCH_APPLICATION }),
    ];
    const rounds = new Map<string, Result[]>();
    const shares = new Map<string, number[]>();
    for (let round = 0; round < opts.rounds; round++) {
      for (const t of targets) {
        const before = await readsOf(t.port);
        const r = await measure(t.name, t.send, { concurrency: opts.concurrency, seconds: opts.seconds, warmupSeconds: 0.5, cpu: cpuOf(t.pid) });
        const after = await readsOf(t.port);
        const replicaReads = after.replica - before.replica;
        const all = replicaReads + (after.primary - before.primary);
        rounds.set(t.name, [...(rounds.get(t.name) ?? []), r]);
        if (t.routedReads) shares.set(t.name, [...(shares.get(t.name) ?? []), all > 0 ? replicaReads / all : 0]);
        say(`  round ${round + 1}: ${t.name}: ${r.rps.toFixed(0)} req/s, ${r.errors} errors`);
      }
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[xs.length >> 1]!;
    const rows = targets.map((t) => {
      const r = medianOf(rounds.get(t.name)!);
      const share = shares.get(t.name);
      return [
        t.name,
        r.rps.toFixed(0),
        r.p50.toFixed(2),
        r.p99.toFixed(2),
        r.cpu.server!.toFixed(3),
        r.cpu.primary!.toFixed(3),
        r.cpu.replica!.toFixed(3),
        share ? `${(100 * median(share)).toFixed(1)}%` : "-",
        String(r.errors),
      ];
    });
    console.log(
      `\nRead replicas: authenticated GetGroup over gRPC, ${opts.concurrency} clients, ${opts.seconds}s x ${opts.rounds} rounds (medians); load average ${loadBefore.toFixed(2)} before\n`,
    );
    console.log(textTable(["call", "req/s", "p50 ms", "p99 ms", "server CPU ms", "primary CPU ms", "replica CPU ms", "reads on the replica", "errors"], rows));
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => {});
    await destroyInstances(dir);
    say("removed the PostgreSQL instances");
  }
}
