// Authenticated IAM reads against the same SQL run raw, in one run, on PostgreSQL:
//   GetGroup                 vs. the caller's identity-and-bindings query + the group's point select
//   ListRoleBindings page 1  vs. the identity-and-bindings query + the hydrated keyset page + its count
// Usage: DATABASE_URL=postgres://... npm run bench -- iam [--seconds 3] [--concurrency 16]
import { loadavg } from "node:os";
import postgres from "postgres";
import { GetGroupRequestSchema } from "../gen/chainguard/platform/iam/v2/groups_pb.js";
import { ListRoleBindingsRequestSchema } from "../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { openPostgres } from "../src/db/client.js";
import { ensureSecret } from "../src/db/secrets.js";
import { managedRole } from "../src/iam/managed-roles.js";
import { setLogLevel } from "../src/kernel/log.js";
import { BENCH_APPLICATION, backendsCpu, processCpu, selfCpu, type CpuMeter } from "./cpu.js";
import { ownedOrganization, withScratchDatabase } from "./database.js";
import { cpuCell, grpcMessageSender, http1Sender, measure, sqlSender, type Result, type Send } from "./load.js";
import { startApiServer } from "./processes.js";

const ISSUER = "https://bench.iam.invalid";
const PAGE = 50;

export interface IamBenchOptions {
  seconds: number;
  concurrency: number;
  /** Role bindings in the organization. */
  bindings: number;
}

export async function benchIam(opts: IamBenchOptions): Promise<void> {
  setLogLevel("warn");
  await withScratchDatabase("bench_iam", (url) => measureOn(url, opts));
}

async function measureOn(url: string, opts: IamBenchOptions): Promise<void> {
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
    process.stderr.write(`seeded ${opts.bindings} identities and role bindings in ${((performance.now() - t0) / 1000).toFixed(1)}s\n`);

    const api = await startApiServer({ DATABASE_URL: url, ISSUER_URL: ISSUER, SERVER_MODE: "production", LOG_LEVEL: "warn" });
    cleanups.push(() => api.stop());
    // BENCH_BEFORE_ROOT names another checkout (the code before a change): its server is measured too.
    const beforeRoot = process.env.BENCH_BEFORE_ROOT;
    const before = beforeRoot
      ? await startApiServer({ DATABASE_URL: url, ISSUER_URL: ISSUER, SERVER_MODE: "production", LOG_LEVEL: "warn" }, { root: beforeRoot })
      : undefined;
    if (before) cleanups.push(() => before.stop());

    // The SQL the server runs for these calls, written out and run raw by the load generator.
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

    const rows: Array<{ name: string; result: Result; versus?: string }> = [];
    const load = { seconds: opts.seconds, concurrency: opts.concurrency, warmupSeconds: Math.max(1, opts.seconds / 3) };
    // CPU per request: the server and the PostgreSQL backends serving it; for raw SQL, the load generator
    // (its closed loop included) and the backends of its pool.
    const meter = postgres(url, { max: 1, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
    cleanups.push(() => meter.end({ timeout: 5 }));
    const apiCpu: CpuMeter[] = [processCpu("server", api.serverPid), backendsCpu("PostgreSQL", meter, { not: BENCH_APPLICATION })];
    const rawCpu: CpuMeter[] = [selfCpu("client"), backendsCpu("PostgreSQL", meter, { only: BENCH_APPLICATION })];
    const beforeCpu: CpuMeter[] = before ? [processCpu("server", before.serverPid), backendsCpu("PostgreSQL", meter, { not: BENCH_APPLICATION })] : [];
    const run = async (label: string, send: () => Send, versus?: string) => {
      const result = await measure(label, send, { ...load, cpu: label.startsWith("before:") ? beforeCpu : versus ? apiCpu : rawCpu });
      rows.push({ name: label, result, ...(versus ? { versus } : {}) });
      process.stderr.write(`  measured ${label}: ${result.rps.toFixed(0)} req/s, ${result.errors} errors\n`);
    };
    const GET_GROUP = "/chainguard.platform.iam.v2.GroupsService/GetGroup";
    const LIST_BINDINGS = "/chainguard.platform.iam.v2.RoleBindingsService/ListRoleBindings";
    await run("raw SQL: grants + group", sqlSender(rawGetGroup, 1));
    await run("GetGroup (gRPC)", grpcMessageSender(api.port, GET_GROUP, GetGroupRequestSchema, { uid: org }, auth), "raw SQL: grants + group");
    await run("GetGroup (REST)", http1Sender(api.port, "GET", `/iam/v2/groups/${org}`, undefined, auth), "raw SQL: grants + group");
    await run("raw SQL: grants + page + count", sqlSender(rawListPage, PAGE + 1));
    await run(
      "ListRoleBindings page (gRPC)",
      grpcMessageSender(api.port, LIST_BINDINGS, ListRoleBindingsRequestSchema, { uidp: { descendantsOf: org }, pageSize: PAGE }, auth),
      "raw SQL: grants + page + count",
    );
    await run(
      "ListRoleBindings page (REST)",
      http1Sender(api.port, "GET", `/iam/v2/roleBindings?uidp.descendants_of=${org}&page_size=${PAGE}`, undefined, auth),
      "raw SQL: grants + page + count",
    );
    if (before) {
      await run("before: GetGroup (gRPC)", grpcMessageSender(before.port, GET_GROUP, GetGroupRequestSchema, { uid: org }, auth), "raw SQL: grants + group");
      await run("before: GetGroup (REST)", http1Sender(before.port, "GET", `/iam/v2/groups/${org}`, undefined, auth), "raw SQL: grants + group");
      await run(
        "before: ListRoleBindings page (gRPC)",
        grpcMessageSender(before.port, LIST_BINDINGS, ListRoleBindingsRequestSchema, { uidp: { descendantsOf: org }, pageSize: PAGE }, auth),
        "raw SQL: grants + page + count",
      );
      await run(
        "before: ListRoleBindings page (REST)",
        http1Sender(before.port, "GET", `/iam/v2/roleBindings?uidp.descendants_of=${org}&page_size=${PAGE}`, undefined, auth),
        "raw SQL: grants + page + count",
      );
    }

    const byName = new Map(rows.map((r) => [r.name, r.result]));
    console.log(
      `\nIAM, ${opts.bindings} role bindings in one organization, ${opts.concurrency} concurrent clients, ${opts.seconds}s each, node ${process.version}, load average ${loadavg()[0]!.toFixed(2)}\n`,
    );
    console.log(
      "| target | req/s | p50 ms | p99 ms | server CPU ms/req | client CPU ms/req | PostgreSQL CPU ms/req | × raw SQL | errors |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    );
    for (const r of rows) {
      const base = r.versus ? byName.get(r.versus) : undefined;
      const ratio = base ? (r.result.rps / base.rps).toFixed(2) : "";
      const cpu = ["server", "client", "PostgreSQL"].map((l) => cpuCell(r.result, l)).join(" | ");
      console.log(`| ${r.name} | ${r.result.rps.toFixed(0)} | ${r.result.p50.toFixed(2)} | ${r.result.p99.toFixed(2)} | ${cpu} | ${ratio} | ${r.result.errors} |`);
    }
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  }
}
