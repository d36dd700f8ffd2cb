// The registry at scale: one repo holding 1,000,000 tags on real PostgreSQL, and the API's ListTags, GetRepo
// and GetTag measured beside raw SQL (postgres.js, same database, same run) and the bare node:http server.
//
//   npm run bench -- registry [--seconds 3] [--concurrency 16] [--tags 1000000] [--keep-indexes]
//
// DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres) names a server where the benchmark may
// create a scratch database; it is dropped at the end. The API server runs as a child process on the scratch
// database; the caller's token is minted here with the database's own signing keys (the server's issuer URL
// is fixed), for an identity holding the viewer role on the organization that owns the repo.
//
// What is measured (each a closed loop of N clients, a few seconds, after a warm-up):
//   - ListTags (order_by uid, page_size 50, with total_count) at page 1 (gRPC and REST) and at page 10,000
//     (gRPC); the page-10,000 token is made with the kernel's own encoder (src/kernel/list/page-token.ts)
//     for the keyset position of row 499,950, bound to the same query and scope as the token the server
//     issued for page 1. Beside: the same page read by raw keyset SQL,
//     `select * from tags where repo_uid = $1 and kind = 0 and uid > $2 order by uid limit 51`, on page 1
//     with the total read from tag_counts in the same statement (as the server reads it; later pages carry
//     the total in the token). Each with 16 clients (throughput) and with 1 client (the cost of one page).
//   - ListTags with skip=10000, beside raw `... order by uid limit 51 offset 10000`.
//   - GetRepo and GetTag over gRPC and REST, beside the bare node:http server and a raw point select; gRPC
//     Ping (no database, no credentials) as the framework's own ceiling.
//   - Against the Fastify and grpc-js peers, ListTags page 1 and GetRepo with 16 clients and with one: req/s
//     and whole-system CPU per request (the answering process plus the PostgreSQL backends serving it), the
//     ratios of the goals (bench/compare.ts); the processes' resident memory after the run.
//   - The cost of the parts of a page, in this process (CPU time per page, 16 in flight): the raw read, the
//     same statement prepared with its rows mapped (no list kernel), the store's read through Drizzle, the
//     rows mapped to messages, the response encoded by protobuf-es, by the gRPC path's compiled encoder and
//     as REST's JSON.
import { loadavg } from "node:os";
import { create, toBinary, toJson, type MessageInitShape } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { and, eq, getTableColumns, gt, sql } from "drizzle-orm";
import postgres from "postgres";
import { RelationshipType } from "../gen/chainguard/platform/iam/v2/identities_pb.js";
import { GetRepoRequestSchema, RepoSchema, ReposService } from "../gen/chainguard/platform/registry/v2/repos_pb.js";
import { GetTagRequestSchema, ListTagsRequestSchema, ListTagsResponseSchema, TagsService } from "../gen/chainguard/platform/registry/v2/tags_pb.js";
import { openPostgres } from "../src/db/client.js";
import { groups, identities, repos, roleBindings, tagCounts, tags } from "../src/db/schema/index.js";
import { ensureSecret } from "../src/db/secrets.js";
import { ensureManagedRoles, managedRole } from "../src/iam/managed-roles.js";
import { createKeyStore, mintToken } from "../src/kernel/auth/index.js";
import { createBinaryEncoder } from "../src/kernel/binary.js";
import { registry } from "../src/kernel/descriptors.js";
import { createJsonWriter } from "../src/gateway/json.js";
import { JWKS_PATH } from "../src/server/oidc-routes.js";
import { createListPlanner, decodePageToken, encodePageToken, pageFields } from "../src/kernel/list/index.js";
import { setLogLevel } from "../src/kernel/log.js";
import { hotStatement } from "../src/kernel/prepared-rows.js";
import { newChildUid, newRootUid } from "../src/kernel/uidp.js";
import { toTag } from "../src/registry/tags.mapper.js";
import { listFilterOf, tagList } from "../src/registry/tags.service.js";
import { createTagStore } from "../src/registry/tags.store.js";
import { BENCH_APPLICATION, backendsCpu, processCpu, selfCpu, type CpuMeter } from "./cpu.js";
import { withScratchDatabase } from "./database.js";
import { cpuCell, grpcMessageSender, grpcSender, http1Sender, measure, sqlSender, textTable, type Result, type Send, say } from "./load.js";
import { medianOf, versusPeerTable, wholeCpu } from "./compare.js";
import { PEER_APPLICATION } from "./peer-reads.js";
import { residentBytes, startApiServer, startBareServer, startPeers } from "./processes.js";

/** The issuer the servers under test are started with (ISSUER_URL): the seeded identity and the tokens name it. */
export const BENCH_ISSUER = "https://bench.registry.invalid";
const LIST_TAGS = "/chainguard.platform.registry.v2.TagsService/ListTags";
const GET_TAG = "/chainguard.platform.registry.v2.TagsService/GetTag";
const GET_REPO = "/chainguard.platform.registry.v2.ReposService/GetRepo";
const PING = "/chainguard.platform.ping.v2.PingService/Ping";
const PAGE = 50;
/** Interleaved rounds of the server, its peers and the baselines (--rounds); each row the median of its rounds. */
const DEFAULT_ROUNDS = 3;
const PING_GRPC = "Ping (gRPC): no database, no credentials";
const PING_REST = "Ping (REST): no database, no credentials";

export interface RegistryBenchOptions {
  seconds: number;
  concurrency: number;
  tags: number;
  /** Seed with every index in place instead of dropping the secondary indexes and rebuilding them after. */
  keepIndexes: boolean;
  /** Interleaved rounds of the repeated rows (default 3): more make the medians steadier on a busy machine. */
  rounds?: number;
}

const secondsSince = (t0: number) => ((performance.now() - t0) / 1000).toFixed(1);

interface Seeded {
  org: string;
  repoUid: string;
  identityUid: string;
  seedSeconds: number;
}

/** The organization, the caller (viewer on it), the repo, and `n` tags in the repo, set-based. */
export async function seed(sqlc: postgres.Sql, database: Awaited<ReturnType<typeof openPostgres>>, opts: RegistryBenchOptions): Promise<Seeded> {
  const { db } = database;
  await ensureManagedRoles(db);
  const org = newRootUid();
  const repoUid = newChildUid(org);
  const identityUid = newRootUid();
  await db.insert(groups).values({ uid: org, name: "bench" });
  await db.insert(identities).values({
    uid: identityUid,
    parentUid: null,
    name: "bench viewer",
    relationship: { claimMatch: { issuer: BENCH_ISSUER, subject: "bench" } },
    relationshipType: RelationshipType.CLAIM_MATCH,
    issuer: BENCH_ISSUER,
    subject: "bench",
  });
  await db.insert(roleBindings).values({ uid: newChildUid(org), groupUid: org, identityUid, roleUid: managedRole("viewer").uid });
  await db.insert(repos).values({ uid: repoUid, groupUid: org, name: "bench/app", description: "1,000,000 tags" });

  // Tag uids are <repo uid>/<16 hex> like the server's (newChildUid), here from md5 of the row number: random,
  // unique for this many rows. Rows go in in uid order, so the primary key grows at its right edge instead of
  // taking a million random insertions. Names are regular tags (kind 0); 5,000 distinct digests.
  const insert = (q: postgres.Sql | postgres.TransactionSql) => q`
    insert into tags (uid, repo_uid, name, digest, kind)
    select ${repoUid} || '/' || substr(md5(i::text), 1, 16) as uid, ${repoUid}, 'v' || i, 'sha256:' || encode(sha256(int4send(i % 5000)), 'hex'), 0
    from generate_series(1, ${opts.tags}::int) as i
    order by 1`;

  const t0 = performance.now();
  if (opts.keepIndexes) {
    await insert(sqlc);
    say(`  inserted ${opts.tags} tags with every index, the foreign key and the count trigger in place: ${secondsSince(t0)}s`);
  } else {
    // In one transaction: drop the secondary indexes and the foreign key, insert, then rebuild the indexes
    // from their own definitions (sorted builds instead of a million random insertions into each btree) and
    // re-add the foreign key (validated by one set-based query instead of a check per row). The primary key
    // and the count trigger stay: tag_counts is maintained the way the server maintains it.
    const indexes = await sqlc<{ name: string; def: string }[]>`
      select indexname as name, indexdef as def from pg_indexes
      where schemaname = 'public' and tablename = 'tags' and indexname <> 'tags_pkey'`;
    const foreignKeys = await sqlc<{ name: string; def: string }[]>`
      select conname as name, pg_get_constraintdef(oid) as def from pg_constraint
      where conrelid = 'tags'::regclass and contype = 'f'`;
    await sqlc.begin(async (tx) => {
      await tx.unsafe(`set local maintenance_work_mem = '512MB'`);
      for (const d of indexes) await tx.unsafe(`drop index "${d.name}"`);
      for (const f of foreignKeys) await tx.unsafe(`alter table tags drop constraint "${f.name}"`);
      const t1 = performance.now();
      await insert(tx);
      say(`  inserted ${opts.tags} tags (primary key and count trigger in place): ${secondsSince(t1)}s`);
      const t2 = performance.now();
      for (const d of indexes) await tx.unsafe(d.def);
      say(`  rebuilt the ${indexes.length} secondary indexes: ${secondsSince(t2)}s`);
      const t3 = performance.now();
      for (const f of foreignKeys) await tx.unsafe(`alter table tags add constraint "${f.name}" ${f.def}`);
      say(`  re-added and validated the foreign key: ${secondsSince(t3)}s`);
    });
  }
  const seedSeconds = (performance.now() - t0) / 1000;
  const t4 = performance.now();
  await sqlc`vacuum (analyze) tags`;
  say(`  vacuum analyze tags: ${secondsSince(t4)}s`);
  const [counted] = await sqlc<{ count: string }[]>`select count::text from tag_counts where repo_uid = ${repoUid} and kind = 0`;
  if (counted?.count !== String(opts.tags)) throw new Error(`tag_counts says ${counted?.count}, expected ${opts.tags}`);
  return { org, repoUid, identityUid, seedSeconds };
}

interface Row {
  name: string;
  result: Result;
  /** The measurement this one is compared with (its raw baseline). */
  versus?: string;
}

/** CPU time per call of `f` in this process, `inFlight` calls at a time (after a warm-up), in microseconds. */
async function cpuPerCall(f: () => unknown, calls: number, inFlight = 16): Promise<number> {
  const loop = async (n: number) => {
    for (let i = 0; i < n; i++) await f();
  };
  await Promise.all(Array.from({ length: inFlight }, () => loop(Math.ceil(calls / inFlight / 5))));
  const before = process.cpuUsage();
  await Promise.all(Array.from({ length: inFlight }, () => loop(Math.ceil(calls / inFlight))));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / (inFlight * Math.ceil(calls / inFlight));
}

/** "server 0.412 ms/req, PostgreSQL 0.101 ms/req". */
function cpuSummary(r: Result): string {
  return Object.entries(r.cpu)
    .map(([label, ms]) => `${label} ${ms.toFixed(3)} ms/req`)
    .join(", ");
}

const CPU_LABELS = ["server", "client", "PostgreSQL"];

/**
 * Whether the peers answer what the server answers: the same JSON over REST and the same messages over gRPC,
 * the page token aside (each signs its own; both must give one).
 */
async function checkPeers(c: {
  base: string;
  fastifyPort: number;
  grpcPeerPort: number;
  auth: Record<string, string>;
  restPage1: string;
  restRepo: string;
  listRequest: MessageInitShape<typeof ListTagsRequestSchema>;
  repoUid: string;
}): Promise<string[]> {
  const notes: string[] = [];
  const withoutToken = (v: { nextPageToken?: string }) => {
    const { nextPageToken, ...rest } = v;
    return JSON.stringify({ ...rest, tokenGiven: Boolean(nextPageToken) });
  };
  const rest = async (origin: string, path: string) => (await (await fetch(`${origin}${path}`, { headers: c.auth })).json()) as { nextPageToken?: string };
  const peerOrigin = `http://127.0.0.1:${c.fastifyPort}`;
  const same = (a: string, b: string) => (a === b ? "the same" : `DIFFERENT:\n    server ${a.slice(0, 400)}\n    peer   ${b.slice(0, 400)}`);
  notes.push(`Fastify peer, ListTags page 1 JSON (token aside) against the server's REST: ${same(withoutToken(await rest(c.base, c.restPage1)), withoutToken(await rest(peerOrigin, c.restPage1)))}`);
  notes.push(`Fastify peer, GetRepo JSON against the server's REST: ${same(JSON.stringify(await rest(c.base, c.restRepo)), JSON.stringify(await rest(peerOrigin, c.restRepo)))}`);
  const server = createGrpcTransport({ baseUrl: c.base });
  const peer = createGrpcTransport({ baseUrl: `http://127.0.0.1:${c.grpcPeerPort}` });
  const list = async (t: typeof server) => toJson(ListTagsResponseSchema, await createClient(TagsService, t).listTags(c.listRequest, { headers: c.auth })) as { nextPageToken?: string };
  const repo = async (t: typeof server) => JSON.stringify(toJson(RepoSchema, await createClient(ReposService, t).getRepo({ uid: c.repoUid }, { headers: c.auth })));
  notes.push(`grpc-js peer, ListTags page 1 message (token aside) against the server's gRPC: ${same(withoutToken(await list(server)), withoutToken(await list(peer)))}`);
  notes.push(`grpc-js peer, GetRepo message against the server's gRPC: ${same(await repo(server), await repo(peer))}`);
  return notes;
}

function printTable(rows: Row[], ping: Result | undefined): string {
  const byName = new Map(rows.map((r) => [r.name, r.result]));
  const pingCpu = ping?.cpu.server;
  const cells = rows.map((r) => {
    const base = r.versus ? byName.get(r.versus) : undefined;
    const server = r.result.cpu.server;
    return [
      r.name,
      r.result.rps.toFixed(0),
      r.result.p50.toFixed(2),
      r.result.p99.toFixed(2),
      ...CPU_LABELS.map((l) => cpuCell(r.result, l)),
      server !== undefined && r.result.cpu.PostgreSQL !== undefined ? wholeCpu(r.result).toFixed(3) : "",
      server !== undefined && pingCpu ? (server / pingCpu).toFixed(2) : "",
      base ? (r.result.rps / base.rps).toFixed(2) : "",
      String(r.result.errors),
    ];
  });
  const head = ["target", "req/s", "p50 ms", "p99 ms", ...CPU_LABELS.map((l) => `${l} CPU ms/req`), "whole CPU ms/req", "server CPU x Ping", "x baseline", "errors"];
  return textTable(head, cells);
}

export async function benchRegistry(opts: RegistryBenchOptions): Promise<void> {
  setLogLevel("warn");
  await withScratchDatabase("bench_registry", (scratchUrl, name) => measureOn(scratchUrl, name, opts));
}

async function measureOn(scratchUrl: string, name: string, opts: RegistryBenchOptions): Promise<void> {
  const loadBefore = loadavg()[0]!;
  const rounds = opts.rounds ?? DEFAULT_ROUNDS;
  say(`registry benchmark on scratch database ${name} (${opts.tags} tags); load average ${loadBefore.toFixed(2)}`);
  if (loadBefore > 1.5) say("  warning: the machine is busy; the figures will show it");

  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    const database = await openPostgres(scratchUrl, { max: 10 });
    cleanups.push(() => database.close());
    // The raw-SQL baselines get a pool as large as the API server's own (10 connections).
    const sqlc = postgres(scratchUrl, { max: 10, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
    cleanups.push(() => sqlc.end({ timeout: 5 }));

    const seeded = await seed(sqlc, database, opts);
    const { repoUid } = seeded;
    const secret = await ensureSecret(database.db, "page-token");
    const keys = await createKeyStore(database.db);
    const { token } = await mintToken(keys, { issuer: BENCH_ISSUER, subject: seeded.identityUid, audience: BENCH_ISSUER, ttlSeconds: 3600 });
    const auth = { authorization: `Bearer ${token}` };

    // The deep page: page 10,000 of 50 (rows 499,951 to 500,000 in uid order) continues after row 499,950.
    const pageNumber = Math.floor(opts.tags / 2 / PAGE);
    const cursorRow = (pageNumber - 1) * PAGE;
    const positions = await sqlc<{ uid: string }[]>`
      select uid from tags where repo_uid = ${repoUid} and kind = 0 order by uid offset ${cursorRow - 1} limit 2`;
    const midUid = positions[0]!.uid;
    const midNext = positions[1]!.uid;

    const api = await startApiServer({ DATABASE_URL: scratchUrl, ISSUER_URL: BENCH_ISSUER, SERVER_MODE: "production", LOG_LEVEL: "warn" });
    cleanups.push(() => api.stop());
    const bare = await startBareServer();
    cleanups.push(() => bare.stop());
    // BENCH_BEFORE_ROOT names another checkout (the code before a change): its server runs on the same
    // database, and its Ping, ListTags and GetRepo are measured in the same rounds, as "before" rows.
    const beforeRoot = process.env.BENCH_BEFORE_ROOT;
    const before = beforeRoot
      ? await startApiServer({ DATABASE_URL: scratchUrl, ISSUER_URL: BENCH_ISSUER, SERVER_MODE: "production", LOG_LEVEL: "warn" }, { root: beforeRoot })
      : undefined;
    if (before) cleanups.push(() => before.stop());
    const base = `http://127.0.0.1:${api.port}`;

    // Check the answers once before measuring them, and make the deep page's token.
    const tagsClient = createClient(TagsService, createGrpcTransport({ baseUrl: base }));
    const listRequest = { uidp: { childrenOf: repoUid }, orderBy: "uid", pageSize: PAGE };
    let deepToken = "";
    const notes: string[] = [];
    try {
      const first = await tagsClient.listTags(listRequest, { headers: auth });
      const payload = decodePageToken(first.nextPageToken, [secret]);
      deepToken = encodePageToken({ ...payload, issuedAt: Date.now(), keys: [midUid] }, secret);
      const deep = await tagsClient.listTags({ ...listRequest, pageToken: deepToken }, { headers: auth });
      notes.push(
        `ListTags page 1: ${first.tags.length} tags, total_count ${first.totalCount}; page ${pageNumber}: ${deep.tags.length} tags starting at row ${cursorRow + 1} (${deep.tags[0]?.uid === midNext ? "as expected" : `UNEXPECTED: ${deep.tags[0]?.uid}`}), total_count ${deep.totalCount}`,
      );
      const skipped = await tagsClient.listTags({ ...listRequest, skip: 10_000 }, { headers: auth });
      notes.push(`ListTags skip=10000: ${skipped.tags.length} tags, skipped ${skipped.skipped}, total_count ${skipped.totalCount}`);
    } catch (err) {
      notes.push(`ListTags check failed: ${String(err)}; the measurements below count its errors`);
    }
    for (const n of notes) say(`  ${n}`);

    // The peers: the same reads served by Fastify and by grpc-js (peer-*.ts), each its own process.
    const { fastify, grpc: grpcPeer } = await startPeers({ databaseUrl: scratchUrl, issuer: BENCH_ISSUER, jwksUrl: `${base}${JWKS_PATH}` });
    cleanups.push(() => fastify.stop(), () => grpcPeer.stop());
    const { port: fastifyPort } = fastify;
    const { port: grpcPeerPort } = grpcPeer;
    const restPage1 = `/registry/v2/tags?uidp.children_of=${encodeURIComponent(repoUid)}&order_by=uid&page_size=${PAGE}`;
    const restRepo = `/registry/v2/repos/${repoUid}`;
    for (const n of await checkPeers({ base, fastifyPort, grpcPeerPort, auth, restPage1, restRepo, listRequest, repoUid })) {
      notes.push(n);
      say(`  ${n}`);
    }

    const load = { seconds: opts.seconds, concurrency: opts.concurrency, warmupSeconds: Math.max(1, opts.seconds / 3) };
    // CPU per request: the process answering and the PostgreSQL backends serving it; for raw SQL, the load
    // generator (its closed loop included) and the backends of its pool.
    const meter = postgres(scratchUrl, { max: 1, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
    cleanups.push(() => meter.end({ timeout: 5 }));
    const apiCpu: CpuMeter[] = [processCpu("server", api.serverPid), backendsCpu("PostgreSQL", meter, { not: [BENCH_APPLICATION, PEER_APPLICATION] })];
    const rawCpu: CpuMeter[] = [selfCpu("client"), backendsCpu("PostgreSQL", meter, { only: BENCH_APPLICATION })];
    const bareCpu: CpuMeter[] = [processCpu("server", bare.pid)];
    const fastifyCpu: CpuMeter[] = [processCpu("server", fastify.pid), backendsCpu("PostgreSQL", meter, { only: PEER_APPLICATION })];
    const grpcPeerCpu: CpuMeter[] = [processCpu("server", grpcPeer.pid), backendsCpu("PostgreSQL", meter, { only: PEER_APPLICATION })];
    const beforeCpu: CpuMeter[] = before ? [processCpu("server", before.serverPid), backendsCpu("PostgreSQL", meter, { not: [BENCH_APPLICATION, PEER_APPLICATION] })] : [];
    const cpuOf = (name: string) =>
      name.startsWith("raw SQL")
        ? rawCpu
        : name.startsWith("bare")
          ? bareCpu
          : name.startsWith("Fastify")
            ? fastifyCpu
            : name.startsWith("grpc-js")
              ? grpcPeerCpu
              : name.startsWith("before:")
                ? beforeCpu
                : apiCpu;
    const rows: Row[] = [];
    const run = async (name: string, send: () => Send, versus?: string) => {
      const result = await measure(name, send, { ...load, cpu: cpuOf(name) });
      rows.push({ name, result, ...(versus ? { versus } : {}) });
      say(`  measured ${name}: ${result.rps.toFixed(0)} req/s${result.errors ? `, ${result.errors} errors` : ""}, ${cpuSummary(result)}`);
    };
    /**
     * The targets measured in turn, `rounds` times over (so a slow moment of the machine spreads over all of
     * them instead of landing on one), each row the median of its rounds, column by column.
     */
    const interleaved = async (targets: readonly [name: string, send: () => Send, versus?: string][], concurrency: number) => {
      const results = new Map<string, Result[]>();
      for (let round = 1; round <= rounds; round++) {
        for (const [name, send] of targets) {
          const result = await measure(name, send, { ...load, concurrency, cpu: cpuOf(name) });
          results.set(name, [...(results.get(name) ?? []), result]);
          say(`  round ${round}: ${name}: ${result.rps.toFixed(0)} req/s, p50 ${result.p50.toFixed(2)} ms${result.errors ? `, ${result.errors} errors` : ""}, ${cpuSummary(result)}`);
        }
      }
      for (const [name, , versus] of targets) rows.push({ name, result: medianOf(results.get(name)!), ...(versus ? { versus } : {}) });
    };

    const rawPage1 = "raw SQL keyset page 1 + total";
    const rawDeep = `raw SQL keyset page ${pageNumber}`;
    const rawOffset = "raw SQL offset 10000";
    const rawRepo = "raw SQL point select repo";
    const rawTag = "raw SQL point select tag";
    const bareName = "bare node:http";
    const tagUid = midNext;

    // The same page as raw SQL: page 1 with its total from the maintained counters, in one statement (as the
    // server reads it); later pages carry the total in their token.
    const rawPage1Query = () =>
      sqlc`select *, (select coalesce(sum(count), 0) from tag_counts where repo_uid = ${repoUid} and kind = 0)::text as total
           from tags where repo_uid = ${repoUid} and kind = 0 and uid > ${""} order by uid limit ${PAGE + 1}`;
    const rawDeepQuery = () => sqlc`select * from tags where repo_uid = ${repoUid} and kind = 0 and uid > ${midUid} order by uid limit ${PAGE + 1}`;
    const page1Grpc = () => grpcMessageSender(api.port, LIST_TAGS, ListTagsRequestSchema, listRequest, auth);
    const deepGrpc = () => grpcMessageSender(api.port, LIST_TAGS, ListTagsRequestSchema, { ...listRequest, pageToken: deepToken }, auth);
    const page1Targets = (suffix: string, versus: string): [string, () => Send, string][] => [
      [`ListTags page 1 (gRPC)${suffix}`, page1Grpc(), versus],
      [`grpc-js peer ListTags page 1${suffix}`, grpcMessageSender(grpcPeerPort, LIST_TAGS, ListTagsRequestSchema, listRequest, auth), versus],
      [`ListTags page 1 (REST)${suffix}`, http1Sender(api.port, "GET", restPage1, undefined, auth), versus],
      [`Fastify peer ListTags page 1${suffix}`, http1Sender(fastifyPort, "GET", restPage1, undefined, auth), versus],
    ];

    const repoTargets = (suffix: string, versus: string): [string, () => Send, string][] => [
      [`GetRepo (gRPC)${suffix}`, grpcMessageSender(api.port, GET_REPO, GetRepoRequestSchema, { uid: repoUid }, auth), versus],
      [`grpc-js peer GetRepo${suffix}`, grpcMessageSender(grpcPeerPort, GET_REPO, GetRepoRequestSchema, { uid: repoUid }, auth), versus],
      [`GetRepo (REST)${suffix}`, http1Sender(api.port, "GET", restRepo, undefined, auth), versus],
      [`Fastify peer GetRepo${suffix}`, http1Sender(fastifyPort, "GET", restRepo, undefined, auth), versus],
    ];

    // The server, its peers and the baselines, interleaved: 16 clients, then one client.
    await interleaved(
      [
        [rawPage1, sqlSender(rawPage1Query, PAGE + 1)],
        ...page1Targets("", rawPage1),
        [rawRepo, sqlSender(() => sqlc`select * from repos where uid = ${repoUid}`, 1)],
        ...repoTargets("", rawRepo),
        [bareName, http1Sender(bare.http1, "GET", "/ping/v2/ping")],
        [PING_GRPC, grpcSender(api.port, PING), bareName],
        [PING_REST, http1Sender(api.port, "GET", "/ping/v2/ping"), bareName],
        ...(before
          ? ([
              ["before: ListTags page 1 (gRPC)", grpcMessageSender(before.port, LIST_TAGS, ListTagsRequestSchema, listRequest, auth), rawPage1],
              ["before: ListTags page 1 (REST)", http1Sender(before.port, "GET", restPage1, undefined, auth), rawPage1],
              ["before: GetRepo (gRPC)", grpcMessageSender(before.port, GET_REPO, GetRepoRequestSchema, { uid: repoUid }, auth), rawRepo],
              ["before: GetRepo (REST)", http1Sender(before.port, "GET", restRepo, undefined, auth), rawRepo],
              [`before: ${PING_GRPC}`, grpcSender(before.port, PING), bareName],
              [`before: ${PING_REST}`, http1Sender(before.port, "GET", "/ping/v2/ping"), bareName],
            ] as [string, () => Send, string][])
          : []),
      ],
      opts.concurrency,
    );
    const rawPage1One = `${rawPage1}, 1 client`;
    const rawRepoOne = `${rawRepo}, 1 client`;
    await interleaved(
      [
        [rawPage1One, sqlSender(rawPage1Query, PAGE + 1)],
        ...page1Targets(", 1 client", rawPage1One),
        [rawRepoOne, sqlSender(() => sqlc`select * from repos where uid = ${repoUid}`, 1)],
        ...repoTargets(", 1 client", rawRepoOne),
      ],
      1,
    );

    // Once each: the deep page, skip, GetTag.
    await run(rawDeep, sqlSender(rawDeepQuery, PAGE + 1));
    await run(`ListTags page ${pageNumber} (gRPC)`, deepGrpc(), rawDeep);
    await run(rawOffset, sqlSender(() => sqlc`select * from tags where repo_uid = ${repoUid} and kind = 0 order by uid limit ${PAGE + 1} offset 10000`, PAGE + 1));
    await run("ListTags skip=10000 (gRPC)", grpcMessageSender(api.port, LIST_TAGS, ListTagsRequestSchema, { ...listRequest, skip: 10_000 }, auth), rawOffset);
    await run(rawTag, sqlSender(() => sqlc`select * from tags where uid = ${tagUid}`, 1));
    await run("GetTag (gRPC)", grpcMessageSender(api.port, GET_TAG, GetTagRequestSchema, { uid: tagUid }, auth), rawTag);
    await run("GetTag (REST)", http1Sender(api.port, "GET", `/registry/v2/tags/${tagUid}`, undefined, auth), rawTag);

    // The parts of a page-1 ListTags, each alone in this process (the server is idle meanwhile).
    say("  measuring the parts of a page");
    const listReq = create(ListTagsRequestSchema, listRequest);
    const scopes = [seeded.org];
    const lists = createListPlanner({ secret });
    const tagStore = createTagStore(database.db);
    const storeRead = () => tagStore.list(lists.plan(listReq, tagList, scopes), { scopes, ...listFilterOf(listReq) });
    const page = await storeRead();
    const response = create(ListTagsResponseSchema, { tags: page.rows.map(toTag), ...pageFields(page) });
    const binary = createBinaryEncoder();
    const writeJson = createJsonWriter(registry);
    // The page's statement run alone, as the store runs its own (named, rows mapped by the compiled mapper),
    // without the list kernel (plan, page token) or the store's scope predicate: what the kernel adds.
    const pageTotal = sql<string>`(select coalesce(sum(${tagCounts.count}), 0) from ${tagCounts} where ${tagCounts.repoUid} = ${sql.placeholder("repo")} and ${tagCounts.kind} = 0)::text`;
    const statementAlone = hotStatement(
      database.db
        .select({ row: getTableColumns(tags), keys: { k0: sql<string>`(${tags.uid})::text`.as("list_k0") }, total: pageTotal.as("list_total") })
        .from(tags)
        .where(and(eq(tags.repoUid, sql.placeholder("repo")), eq(tags.kind, 0), gt(tags.uid, "")))
        .orderBy(tags.uid)
        .limit(PAGE + 1)
        .prepare("bench_page_alone"),
    );
    // A part that fails (e.g. PostgreSQL refusing a connection on a busy shared server) is reported as
    // such: the rounds above are measured already.
    const part = async (f: () => unknown): Promise<number> => cpuPerCall(f, 4000).catch((err: unknown) => (say(`  a part failed: ${String(err).slice(0, 200)}`), NaN));
    const parts: [string, number][] = [
      ["raw SQL read of the page and its total (postgres.js)", await part(rawPage1Query)],
      ["the same statement prepared, rows mapped (no list kernel)", await part(() => statementAlone.execute({ repo: repoUid }))],
      ["the store's read (list kernel + Drizzle + postgres.js)", await part(storeRead)],
      ["50 rows mapped to Tag messages", await part(() => create(ListTagsResponseSchema, { tags: page.rows.map(toTag), ...pageFields(page) }))],
      ["the response encoded (protobuf-es toBinary)", await part(() => toBinary(ListTagsResponseSchema, response))],
      ["the response encoded (compiled encoder, the gRPC path's)", await part(() => binary.encode(ListTagsResponseSchema, response, 5))],
      ["the response as JSON text (generated writer, REST's)", await part(() => writeJson(ListTagsResponseSchema, response))],
    ];

    const get = (n: string) => rows.find((r) => r.name === n)!.result;
    const page1 = get("ListTags page 1 (gRPC)");
    const deep = get(`ListTags page ${pageNumber} (gRPC)`);
    console.log(
      `\nRegistry, ${opts.tags} tags in one repo, PostgreSQL ${(await sqlc<{ v: string }[]>`select current_setting('server_version') as v`)[0]!.v}, ` +
        `${opts.concurrency} concurrent clients, ${opts.seconds}s each, node ${process.version}, ${new Date().toISOString()}, ` +
        `load average ${loadBefore.toFixed(2)} at the start and ${loadavg()[0]!.toFixed(2)} at the end\n`,
    );
    console.log(`seeding: ${seeded.seedSeconds.toFixed(1)}s for ${opts.tags} tags (${opts.keepIndexes ? "indexes in place" : "secondary indexes dropped and rebuilt"})`);
    for (const n of notes) console.log(n);
    console.log(`\nThe first ${rows.length - 7} rows: medians of ${rounds} interleaved rounds; the last 7 measured once. "whole" CPU = server + PostgreSQL.\n`);
    console.log(printTable(rows, get(PING_GRPC)));
    console.log(`\nListTags page ${pageNumber} / page 1: ${(deep.rps / page1.rps).toFixed(2)}x the throughput`);
    // Against the peers: whole-system CPU per request (the process answering + the PostgreSQL backends
    // serving it) and req/s, with 16 clients and with one.
    for (const suffix of ["", ", 1 client"]) {
      console.log(`\nAgainst the peers, ${suffix ? "1 client" : `${opts.concurrency} clients`} (medians of ${rounds} interleaved rounds):\n`);
      console.log(
        versusPeerTable([
          ["ListTags page 1, gRPC / grpc-js", get(`ListTags page 1 (gRPC)${suffix}`), get(`grpc-js peer ListTags page 1${suffix}`)],
          ["ListTags page 1, REST / Fastify", get(`ListTags page 1 (REST)${suffix}`), get(`Fastify peer ListTags page 1${suffix}`)],
          ["GetRepo, gRPC / grpc-js", get(`GetRepo (gRPC)${suffix}`), get(`grpc-js peer GetRepo${suffix}`)],
          ["GetRepo, REST / Fastify", get(`GetRepo (REST)${suffix}`), get(`Fastify peer GetRepo${suffix}`)],
        ]),
      );
    }
    const mb = (pid: number) => `${(residentBytes(pid) / 2 ** 20).toFixed(0)} MB`;
    console.log(`\nResident memory after the run: server ${mb(api.serverPid)}${before ? `, before ${mb(before.serverPid)}` : ""}; grpc-js peer ${mb(grpcPeer.pid)}, Fastify peer ${mb(fastify.pid)}`);
    console.log("\nStanding goals (ratios within this run):");
    const cpuRatio = (a: string, b: string) => (get(a).cpu.server! / get(b).cpu.server!).toFixed(2);
    const above = (n: string) => (get(n).p50 - get(rawPage1One).p50).toFixed(2);
    console.log(`  one client, ListTags p50 above its raw SQL: gRPC ${above("ListTags page 1 (gRPC), 1 client")} ms, REST ${above("ListTags page 1 (REST), 1 client")} ms (goal <= 1.5)`);
    if (before) {
      console.log(`  before (${beforeRoot}), the same ratios: ListTags/Ping CPU gRPC ${cpuRatio("before: ListTags page 1 (gRPC)", `before: ${PING_GRPC}`)}, REST ${cpuRatio("before: ListTags page 1 (REST)", `before: ${PING_REST}`)}; GetRepo/Ping CPU gRPC ${cpuRatio("before: GetRepo (gRPC)", `before: ${PING_GRPC}`)}, REST ${cpuRatio("before: GetRepo (REST)", `before: ${PING_REST}`)}`);
      const cpuDrop = (n: string) => `${n} ${get(`before: ${n}`).cpu.server!.toFixed(3)} -> ${get(n).cpu.server!.toFixed(3)} ms`;
      console.log(`  server CPU per request, before -> after: ${["ListTags page 1 (gRPC)", "ListTags page 1 (REST)", "GetRepo (gRPC)", "GetRepo (REST)", PING_GRPC, PING_REST].map(cpuDrop).join("; ")}`);
    }
    console.log("\nCPU time per page-1 ListTags part, in the load generator's process, 16 in flight:");
    for (const [name, micros] of parts) console.log(`  ${name.padEnd(58)} ${(micros / 1000).toFixed(2)} ms`);
  } finally {
    for (const c of cleanups.reverse()) await c().catch((err: unknown) => say(`cleanup: ${String(err)}`));
  }
}
