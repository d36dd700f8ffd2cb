// The IAM hot path: an authenticated GetGroup and a hydrated ListRoleBindings page of 50, over gRPC and REST,
// against the grpc-js and Fastify peers (bench/peer-grpc.ts, bench/peer-fastify.ts: postgres.js, jose, the
// same token check, the caller's grants and the page read in one statement each) and the SQL run raw, on
// PostgreSQL, in interleaved rounds with 16 clients and with one; each row the median of its rounds.
//   GetGroup                 raw: the caller's identity-and-bindings query + the group's point select
//   ListRoleBindings page 1  raw: the identity-and-bindings query + the hydrated keyset page + its count
// Usage: DATABASE_URL=postgres://... npm run bench -- iam [--seconds 3] [--concurrency 16] [--bindings 2000] [--rounds 3]
// BENCH_BEFORE_ROOT=<checkout> adds that checkout's server to the same rounds, as "before:" rows.
import { loadavg } from "node:os";
import { create, toJson } from "@bufbuild/protobuf";
import { createClient } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import postgres from "postgres";
import { GetGroupRequestSchema, GroupSchema, GroupsService } from "../gen/chainguard/platform/iam/v2/groups_pb.js";
import { ListRoleBindingsRequestSchema, ListRoleBindingsResponseSchema, RoleBindingsService } from "../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { openPostgres } from "../src/db/client.js";
import { ensureSecret } from "../src/db/secrets.js";
import { managedRole } from "../src/iam/managed-roles.js";
import { setLogLevel } from "../src/kernel/log.js";
import { JWKS_PATH } from "../src/server/oidc-routes.js";
import { medianOf, versusPeerTable } from "./compare.js";
import { BENCH_APPLICATION, backendsCpu, processCpu, selfCpu, type CpuMeter } from "./cpu.js";
import { ownedOrganization, withScratchDatabase } from "./database.js";
import { cpuCell, grpcMessageSender, http1Sender, measure, say, sqlSender, textTable, type Result, type Send } from "./load.js";
import { PEER_APPLICATION } from "./peer-reads.js";
import { residentBytes, startApiServer, startPeers } from "./processes.js";

const ISSUER = "https://bench.iam.invalid";
const PAGE = 50;
const GET_GROUP = "/chainguard.platform.iam.v2.GroupsService/GetGroup";
const LIST_BINDINGS = "/chainguard.platform.iam.v2.RoleBindingsService/ListRoleBindings";

export interface IamBenchOptions {
  seconds: number;
  concurrency: number;
  /** Role bindings in the organization. */
  bindings: number;
  /** Interleaved rounds (default 3). */
  rounds?: number;
}

export async function benchIam(opts: IamBenchOptions): Promise<void> {
  setLogLevel("warn");
  await withScratchDatabase("bench_iam", (url) => measureOn(url, opts));
}

async function measureOn(url: string, opts: IamBenchOptions): Promise<void> {
  const rounds = opts.rounds ?? 3;
  const loadBefore = loadavg()[0]!;
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    const database = await openPostgres(url, { max: 2 });
    cleanups.push(() => database.close());
    const sqlc = postgres(url, { max: 10, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
    cleanups.push(() => sqlc.end({ timeout: 5 }));

    // An organization owned by the caller, with `bindings` identities bound as viewers, set-based.
    await ensureSecret(database.db, "page-token");
    const { org, owner: identity, auth } = await ownedOrganization(database.db, ISSUER, 3600);
    const t0 = performance.now();
    await sqlc`
      insert into identities (uid, parent_uid, name, relationship, relationship_type, issuer, subject)
      select ${org} || '/' || lpad(to_hex(i), 16, '0'), ${org}, 'robot ' || i,
             jsonb_build_object('claimMatch', jsonb_build_object('issuer', 'https://ci.invalid', 'subject', 'robot-' || i)),
             1, 'https://ci.invalid', 'robot-' || i
      from generate_series(1, ${opts.bindings}) i`;
    await sqlc`
      insert into role_bindings (uid, group_uid, identity_uid, role_uid)
      select ${org} || '/' || lpad(to_hex(1000000 + i), 16, '0'), ${org}, ${org} || '/' || lpad(to_hex(i), 16, '0'), ${managedRole("viewer").uid}
      from generate_series(1, ${opts.bindings}) i`;
    await sqlc`analyze`;
    say(`seeded ${opts.bindings} identities and role bindings in ${((performance.now() - t0) / 1000).toFixed(1)}s; load average ${loadBefore.toFixed(2)}`);

    const env = { DATABASE_URL: url, ISSUER_URL: ISSUER, SERVER_MODE: "production", LOG_LEVEL: "warn" };
    const api = await startApiServer(env);
    cleanups.push(() => api.stop());
    const beforeRoot = process.env.BENCH_BEFORE_ROOT;
    const before = beforeRoot ? await startApiServer(env, { root: beforeRoot }) : undefined;
    if (before) cleanups.push(() => before.stop());
    const base = `http://127.0.0.1:${api.port}`;
    const { fastify, grpc: grpcPeer } = await startPeers({ databaseUrl: url, issuer: ISSUER, jwksUrl: `${base}${JWKS_PATH}` });
    cleanups.push(() => fastify.stop(), () => grpcPeer.stop());

    const restGroup = `/iam/v2/groups/${org}`;
    const restPage = `/iam/v2/roleBindings?uidp.descendants_of=${org}&page_size=${PAGE}`;
    const listRequest = { uidp: { descendantsOf: org }, pageSize: PAGE };
    const notes = await checkPeers({ base, fastifyPort: fastify.port, grpcPeerPort: grpcPeer.port, auth, org, restGroup, restPage, listRequest });
    for (const n of notes) say(`  ${n}`);

    // The SQL these calls need when nothing is remembered, run raw by the load generator.
    const grants = () => sqlc`
      select i.parent_uid, b.group_uid, r.capabilities from identities i
      left join role_bindings b on b.identity_uid = i.uid left join roles r on r.uid = b.role_uid
      where i.uid = ${identity}`;
    const like = `${org}/%`;
    const rawGetGroup = async () => {
      await grants();
      return sqlc`select * from groups where uid = ${org}`;
    };
    const rawListPage = async () => {
      await grants();
      const [page] = await Promise.all([
        sqlc`
          select b.uid, b.create_time, b.update_time, i.uid, i.name, i.description, i.issuer, i.subject, i.email,
                 g.uid, g.name, g.description, r.uid, r.name, r.description
          from role_bindings b join identities i on i.uid = b.identity_uid join groups g on g.uid = b.group_uid
          join roles r on r.uid = b.role_uid
          where (b.group_uid = ${org} or b.group_uid like ${like}) and (b.uid like ${like})
          order by b.create_time, b.uid limit ${PAGE + 1}`,
        sqlc`select count(*) from role_bindings b where (b.group_uid = ${org} or b.group_uid like ${like}) and (b.uid like ${like})`,
      ]);
      return page;
    };

    // CPU per request: the answering process and the PostgreSQL backends serving it (told apart by
    // application_name); for raw SQL, the load generator and its pool's backends.
    const meter = postgres(url, { max: 1, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
    cleanups.push(() => meter.end({ timeout: 5 }));
    const others = [BENCH_APPLICATION, PEER_APPLICATION];
    const cpuOf = (name: string): CpuMeter[] =>
      name.startsWith("raw SQL")
        ? [selfCpu("client"), backendsCpu("PostgreSQL", meter, { only: BENCH_APPLICATION })]
        : name.startsWith("Fastify")
          ? [processCpu("server", fastify.pid), backendsCpu("PostgreSQL", meter, { only: PEER_APPLICATION })]
          : name.startsWith("grpc-js")
            ? [processCpu("server", grpcPeer.pid), backendsCpu("PostgreSQL", meter, { only: PEER_APPLICATION })]
            : name.startsWith("before:")
              ? [processCpu("server", before!.serverPid), backendsCpu("PostgreSQL", meter, { not: others })]
              : [processCpu("server", api.serverPid), backendsCpu("PostgreSQL", meter, { not: others })];
    const servers = [["", api.port] as const, ...(before ? [["before: ", before.port] as const] : [])];
    const targets: [string, () => Send][] = [
      ["raw SQL: grants + group", sqlSender(rawGetGroup, 1)],
      ...servers.flatMap(([prefix, port]): [string, () => Send][] => [
        [`${prefix}GetGroup (gRPC)`, grpcMessageSender(port, GET_GROUP, GetGroupRequestSchema, { uid: org }, auth)],
        [`${prefix}GetGroup (REST)`, http1Sender(port, "GET", restGroup, undefined, auth)],
      ]),
      ["grpc-js peer GetGroup", grpcMessageSender(grpcPeer.port, GET_GROUP, GetGroupRequestSchema, { uid: org }, auth)],
      ["Fastify peer GetGroup", http1Sender(fastify.port, "GET", restGroup, undefined, auth)],
      ["raw SQL: grants + page + count", sqlSender(rawListPage, PAGE + 1)],
      ...servers.flatMap(([prefix, port]): [string, () => Send][] => [
        [`${prefix}ListRoleBindings page (gRPC)`, grpcMessageSender(port, LIST_BINDINGS, ListRoleBindingsRequestSchema, listRequest, auth)],
        [`${prefix}ListRoleBindings page (REST)`, http1Sender(port, "GET", restPage, undefined, auth)],
      ]),
      ["grpc-js peer ListRoleBindings page", grpcMessageSender(grpcPeer.port, LIST_BINDINGS, ListRoleBindingsRequestSchema, listRequest, auth)],
      ["Fastify peer ListRoleBindings page", http1Sender(fastify.port, "GET", restPage, undefined, auth)],
    ];

    const load = { seconds: opts.seconds, warmupSeconds: Math.max(1, opts.seconds / 3) };
    const byConcurrency = new Map<number, Map<string, Result>>();
    for (const concurrency of [opts.concurrency, 1]) {
      const results = new Map<string, Result[]>();
      for (let round = 1; round <= rounds; round++) {
        for (const [name, send] of targets) {
          const r = await measure(name, send, { ...load, concurrency, cpu: cpuOf(name) });
          results.set(name, [...(results.get(name) ?? []), r]);
          say(`  ${concurrency} clients, round ${round}: ${name}: ${r.rps.toFixed(0)} req/s${r.errors ? `, ${r.errors} errors` : ""}, server ${r.cpu.server?.toFixed(3) ?? "-"} ms, PostgreSQL ${r.cpu.PostgreSQL!.toFixed(3)} ms`);
        }
      }
      byConcurrency.set(concurrency, new Map([...results].map(([n, rs]) => [n, medianOf(rs)])));
    }
    const rss = (pid: number) => `${(residentBytes(pid) / 2 ** 20).toFixed(0)} MB`;

    console.log(
      `\nIAM, ${opts.bindings} role bindings in one organization, ${opts.seconds}s per measurement, medians of ${rounds} interleaved rounds, ` +
        `node ${process.version}, ${new Date().toISOString()}, load average ${loadBefore.toFixed(2)} at the start and ${loadavg()[0]!.toFixed(2)} at the end\n`,
    );
    for (const n of notes) console.log(n);
    for (const [concurrency, rows] of byConcurrency) {
      console.log(`\n${concurrency} client${concurrency === 1 ? "" : "s"}:\n`);
      const head = ["target", "req/s", "p50 ms", "p99 ms", "server CPU ms/req", "client CPU ms/req", "PostgreSQL CPU ms/req", "errors"];
      console.log(textTable(head, [...rows].map(([n, r]) => [n, r.rps.toFixed(0), r.p50.toFixed(2), r.p99.toFixed(2), cpuCell(r, "server"), cpuCell(r, "client"), cpuCell(r, "PostgreSQL"), String(r.errors)])));
      const get = (n: string) => rows.get(n)!;
      console.log(`\nAgainst the peers, ${concurrency} client${concurrency === 1 ? "" : "s"}:\n`);
      console.log(
        versusPeerTable([
          ["GetGroup, gRPC / grpc-js", get("GetGroup (gRPC)"), get("grpc-js peer GetGroup")],
          ["GetGroup, REST / Fastify", get("GetGroup (REST)"), get("Fastify peer GetGroup")],
          ["ListRoleBindings, gRPC / grpc-js", get("ListRoleBindings page (gRPC)"), get("grpc-js peer ListRoleBindings page")],
          ["ListRoleBindings, REST / Fastify", get("ListRoleBindings page (REST)"), get("Fastify peer ListRoleBindings page")],
          ...(before
            ? ([
                ["before: GetGroup, gRPC / grpc-js", get("before: GetGroup (gRPC)"), get("grpc-js peer GetGroup")],
                ["before: GetGroup, REST / Fastify", get("before: GetGroup (REST)"), get("Fastify peer GetGroup")],
                ["before: ListRoleBindings, gRPC / grpc-js", get("before: ListRoleBindings page (gRPC)"), get("grpc-js peer ListRoleBindings page")],
                ["before: ListRoleBindings, REST / Fastify", get("before: ListRoleBindings page (REST)"), get("Fastify peer ListRoleBindings page")],
              ] as const)
            : []),
        ]),
      );
    }
    console.log(`\nResident memory after the run: server ${rss(api.serverPid)}${before ? `, before ${rss(before.serverPid)}` : ""}; grpc-js peer ${rss(grpcPeer.pid)}, Fastify peer ${rss(fastify.pid)}`);
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  }
}

/** Whether the peers answer what the server answers (the page token aside: each signs its own; both give one). */
async function checkPeers(c: {
  base: string;
  fastifyPort: number;
  grpcPeerPort: number;
  auth: Record<string, string>;
  org: string;
  restGroup: string;
  restPage: string;
  listRequest: { uidp: { descendantsOf: string }; pageSize: number };
}): Promise<string[]> {
  const withoutToken = (v: { nextPageToken?: string }) => {
    const { nextPageToken, ...rest } = v;
    return JSON.stringify({ ...rest, tokenGiven: Boolean(nextPageToken) });
  };
  const same = (a: string, b: string) => (a === b ? "the same" : `DIFFERENT:\n    server ${a.slice(0, 600)}\n    peer   ${b.slice(0, 600)}`);
  const rest = async (origin: string, path: string) => (await (await fetch(`${origin}${path}`, { headers: c.auth })).json()) as { nextPageToken?: string };
  const peerOrigin = `http://127.0.0.1:${c.fastifyPort}`;
  const server = createGrpcTransport({ baseUrl: c.base });
  const peer = createGrpcTransport({ baseUrl: `http://127.0.0.1:${c.grpcPeerPort}` });
  const group = async (t: typeof server) => JSON.stringify(toJson(GroupSchema, await createClient(GroupsService, t).getGroup({ uid: c.org }, { headers: c.auth })));
  const page = async (t: typeof server) =>
    toJson(ListRoleBindingsResponseSchema, await createClient(RoleBindingsService, t).listRoleBindings(create(ListRoleBindingsRequestSchema, c.listRequest), { headers: c.auth })) as {
      nextPageToken?: string;
    };
  return [
    `Fastify peer, GetGroup JSON against the server's REST: ${same(JSON.stringify(await rest(c.base, c.restGroup)), JSON.stringify(await rest(peerOrigin, c.restGroup)))}`,
    `Fastify peer, ListRoleBindings page JSON (token aside) against the server's REST: ${same(withoutToken(await rest(c.base, c.restPage)), withoutToken(await rest(peerOrigin, c.restPage)))}`,
    `grpc-js peer, GetGroup message against the server's gRPC: ${same(await group(server), await group(peer))}`,
    `grpc-js peer, ListRoleBindings page message (token aside) against the server's gRPC: ${same(withoutToken(await page(server)), withoutToken(await page(peer)))}`,
  ];
}
