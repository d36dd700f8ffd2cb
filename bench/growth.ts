// Growth curves: what a hot call costs as the data under it grows, on real PostgreSQL.
//
//   npm run bench -- growth [--only tags|advisories] [--sizes N,N,N] [--seconds 3] [--concurrency 8] [--rounds 3]
//
// - tags: ListTags page 1 (REST, order_by uid, page_size 50, with its total) of a repo of 10,000 / 1,000,000 /
//   10,000,000 tags. The three repos are in one org of one scratch database (tags seeded by SQL, the secondary
//   indexes rebuilt after), so every size is measured in the same rounds.
// - advisories: ListAdvisories page 1 (REST, page_size 50, with its total) by package (artifact_names: one
//   package of 30 advisories) and by CVE (aliases: one advisory) over 30,000 / 300,000 / 3,000,000 advisories
//   (bench/advisories.ts generateRows: events and OSV records in proportion), one scratch database per size,
//   all three measured in the same rounds; beside them advisory.v2 ListDocuments by the same CVE (REST, no
//   page: the advisory with its events).
//
// Each size is served twice, by two API servers on the same database: one with PostgreSQL's default plan
// choice, one whose connections set plan_cache_mode = force_generic_plan (a named statement's cached generic
// plan, which PostgreSQL may switch to after five runs, is then used from the first run): a statement whose
// plan is only good when made for its values shows it there. BENCH_BEFORE_ROOT=<checkout> adds the same two
// servers running that checkout's code ("before" rows). Every target is measured in each round (interleaved),
// `concurrency` clients for `seconds`; the rows are the medians of the rounds: req/s, p50, the server
// process's CPU per request and the CPU of the PostgreSQL backends serving it (from /proc), and each figure
// as a ratio to the smallest size in the same mode. The server's RSS is read after the last round.
import { loadavg } from "node:os";
import postgres from "postgres";
import { openPostgres } from "../src/db/client.js";
import { setLogLevel } from "../src/kernel/log.js";
import { newChildUid } from "../src/kernel/uidp.js";
import { generateRows } from "./advisories.js";
import { BENCH_APPLICATION, backendsCpu, processCpu } from "./cpu.js";
import { ownedOrganization, withScratchDatabase } from "./database.js";
import { http1Sender, measure, say, textTable, median, type Result } from "./load.js";
import { residentBytes, startApiServer } from "./processes.js";

export interface GrowthOptions {
  only?: string;
  /** The sizes of the one curve `only` names (default: each curve's own). */
  sizes?: number[];
  seconds: number;
  concurrency: number;
  rounds: number;
}

const ISSUER = "https://bench.growth.invalid";
const PAGE = 50;
const MODES = ["default", "force_generic_plan"] as const;
type Mode = (typeof MODES)[number];

interface Server {
  port: number;
  serverPid: number;
  stop(): Promise<void>;
}

/** One measured call: a REST path on a server, with the admin connection its PostgreSQL meter reads. */
interface Target {
  curve: string;
  size: number;
  mode: Mode;
  code: "this" | "before";
  server: Server;
  admin: postgres.Sql;
  path: string;
  auth: Record<string, string>;
}


/** The servers of one database: this code (and the before code) in each plan mode. */
async function startServers(url: string, cleanups: (() => Promise<unknown>)[]): Promise<{ mode: Mode; code: "this" | "before"; server: Server }[]> {
  const out: { mode: Mode; code: "this" | "before"; server: Server }[] = [];
  const roots: ["this" | "before", string | undefined][] = [["this", undefined]];
  if (process.env.BENCH_BEFORE_ROOT) roots.push(["before", process.env.BENCH_BEFORE_ROOT]);
  for (const [code, root] of roots) {
    for (const mode of MODES) {
      // A query parameter of the URL is a startup parameter of each connection (postgres.js).
      const databaseUrl = mode === "default" ? url : `${url}?plan_cache_mode=${mode}`;
      // With the before code the servers are twice as many (four per database, up to twelve): each pool is held
      // to four connections so they fit in PostgreSQL's default max_connections (100) beside other clients.
      const pool: Record<string, string> = process.env.BENCH_BEFORE_ROOT ? { DATABASE_POOL_SIZE: "4" } : {};
      const server = await startApiServer({ DATABASE_URL: databaseUrl, ISSUER_URL: ISSUER, SERVER_MODE: "production", LOG_LEVEL: "warn", METRICS_ADDR: "off", ...pool }, { quiet: true, root });
      cleanups.push(() => server.stop());
      out.push({ mode, code, server });
    }
  }
  return out;
}

/** Checks each target answers 200 with a page, then measures them all in interleaved rounds and prints the curve. */
async function runCurve(title: string, targets: Target[], opts: GrowthOptions): Promise<void> {
  for (const t of targets) {
    const res = await fetch(`http://127.0.0.1:${t.server.port}${t.path}`, { headers: t.auth });
    const body = (await res.json()) as Record<string, unknown>;
    const rows = Object.values(body).find(Array.isArray) as unknown[] | undefined;
    say(`  ${t.curve} ${t.size} (${t.code}, ${t.mode}): HTTP ${res.status}, ${rows?.length ?? 0} rows, total ${String(body.totalCount ?? "")}`);
    if (!res.ok) throw new Error(`${t.curve} at ${t.size}: HTTP ${res.status} ${JSON.stringify(body).slice(0, 300)}`);
  }
  const results = new Map<Target, Result[]>();
  for (let round = 0; round < opts.rounds; round++) {
    for (const t of targets) {
      const r = await measure(`${t.curve} ${t.size} ${t.mode}`, http1Sender(t.server.port, "GET", t.path, undefined, t.auth), {
        concurrency: opts.concurrency,
        seconds: opts.seconds,
        warmupSeconds: Math.max(0.5, opts.seconds / 3),
        cpu: [processCpu("server", t.server.serverPid), backendsCpu("PostgreSQL", t.admin, { not: BENCH_APPLICATION })],
      });
      say(`  round ${round + 1}: ${r.name} (${t.code}): ${r.rps.toFixed(0)} req/s, p50 ${r.p50.toFixed(2)} ms, server ${r.cpu.server!.toFixed(3)} ms/req, PostgreSQL ${r.cpu.PostgreSQL!.toFixed(3)} ms/req, ${r.errors} errors`);
      results.set(t, [...(results.get(t) ?? []), r]);
    }
  }
  const rss = new Map(targets.map((t) => [t.server, residentBytes(t.server.serverPid)]));
  const med = (t: Target) => {
    const rs = results.get(t)!;
    return {
      rps: median(rs.map((r) => r.rps)),
      p50: median(rs.map((r) => r.p50)),
      server: median(rs.map((r) => r.cpu.server!)),
      pg: median(rs.map((r) => r.cpu.PostgreSQL!)),
      errors: rs.reduce((a, r) => a + r.errors, 0),
    };
  };
  const cells = targets.map((t) => {
    const m = med(t);
    // The smallest size of the same call, mode and code: the curve's base.
    const base = med(targets.filter((o) => o.curve === t.curve && o.mode === t.mode && o.code === t.code).sort((a, b) => a.size - b.size)[0]!);
    return [
      t.curve,
      t.size.toLocaleString("en-US"),
      t.code === "this" ? t.mode : `before, ${t.mode}`,
      m.rps.toFixed(0),
      m.p50.toFixed(2),
      m.server.toFixed(3),
      m.pg.toFixed(3),
      `${(m.server / base.server).toFixed(2)} / ${(m.pg / base.pg).toFixed(2)} / ${(m.p50 / base.p50).toFixed(2)}`,
      (rss.get(t.server)! / 2 ** 20).toFixed(0),
      String(m.errors),
    ];
  });
  console.log(`\n${title}; ${opts.concurrency} clients, REST, ${opts.rounds} interleaved rounds of ${opts.seconds}s (medians); node ${process.version}, ${new Date().toISOString()}\n`);
  console.log(textTable(["call", "size", "plan", "req/s", "p50 ms", "server CPU ms/req", "PostgreSQL CPU ms/req", "x smallest (server / PG / p50)", "server RSS MB after", "errors"], cells));
}

/** One org with a repo per size, the tags of every repo inserted by one statement, the indexes rebuilt after. */
export async function seedTags(sqlc: postgres.Sql, org: string, sizes: readonly number[]): Promise<string[]> {
  const repoUids = sizes.map(() => newChildUid(org));
  await sqlc`insert into repos ${sqlc(repoUids.map((uid, i) => ({ uid, group_uid: org, name: `growth/${sizes[i]}`, description: "" })))}`;
  const indexes = await sqlc<{ name: string; def: string }[]>`
    select indexname as name, indexdef as def from pg_indexes where schemaname = 'public' and tablename = 'tags' and indexname <> 'tags_pkey'`;
  const foreignKeys = await sqlc<{ name: string; def: string }[]>`
    select conname as name, pg_get_constraintdef(oid) as def from pg_constraint where conrelid = 'tags'::regclass and contype = 'f'`;
  const t0 = performance.now();
  await sqlc.begin(async (tx) => {
    await tx.unsafe(`set local maintenance_work_mem = '512MB'`);
    await tx.unsafe(`set local work_mem = '256MB'`);
    for (const d of indexes) await tx.unsafe(`drop index "${d.name}"`);
    for (const f of foreignKeys) await tx.unsafe(`alter table tags drop constraint "${f.name}"`);
    // As bench/registry.ts: uids `<repo>/<16 hex>` from md5 of the row number, inserted in uid order.
    await tx`
      insert into tags (uid, repo_uid, name, digest, kind)
      select r.uid || '/' || substr(md5(i::text), 1, 16), r.uid, 'v' || i, 'sha256:' || encode(sha256(int4send(i % 5000)), 'hex'), 0
      from unnest(${repoUids}::text[], ${sizes}::int[]) as r(uid, n), generate_series(1, r.n) as i
      order by 1`;
    say(`  inserted ${sizes.reduce((a, n) => a + n, 0)} tags: ${((performance.now() - t0) / 1000).toFixed(0)}s`);
    for (const d of indexes) await tx.unsafe(d.def);
    for (const f of foreignKeys) await tx.unsafe(`alter table tags add constraint "${f.name}" ${f.def}`);
  });
  await sqlc`vacuum (analyze) tags`;
  say(`  seeded, indexes rebuilt, vacuumed: ${((performance.now() - t0) / 1000).toFixed(0)}s`);
  return repoUids;
}

async function tagsCurve(opts: GrowthOptions, sizes: readonly number[]): Promise<void> {
  await withScratchDatabase("bench_growth_tags", async (url, name) => {
    say(`growth: ListTags over ${sizes.join(" / ")} tags on ${name}; load average ${loadavg()[0]!.toFixed(2)}`);
    const cleanups: (() => Promise<unknown>)[] = [];
    try {
      const database = await openPostgres(url, { max: 2 });
      cleanups.push(() => database.close());
      const sqlc = postgres(url, { max: 2, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
      cleanups.push(() => sqlc.end({ timeout: 5 }));
      const { org, auth } = await ownedOrganization(database.db, ISSUER, 3600);
      const repoUids = await seedTags(sqlc, org, sizes);
      const servers = await startServers(url, cleanups);
      const targets = sizes.flatMap((size, i) =>
        servers.map((s) => ({
          curve: "ListTags page 1",
          size,
          ...s,
          admin: sqlc,
          auth,
          path: `/registry/v2/tags?uidp.children_of=${encodeURIComponent(repoUids[i]!)}&order_by=uid&page_size=${PAGE}`,
        })),
      );
      await runCurve(`ListTags page 1 (order_by uid, page_size ${PAGE}, total) of a repo of ${sizes.join(" / ")} tags`, targets, opts);
    } finally {
      for (const c of cleanups.reverse()) await c().catch((err: unknown) => say(`cleanup: ${String(err)}`));
    }
  });
}

/** Runs `body` with a scratch database per size (nested, so every one is dropped however it ends). */
async function withDatabases<T>(prefix: string, count: number, body: (dbs: { url: string; name: string }[]) => Promise<T>, acc: { url: string; name: string }[] = []): Promise<T> {
  if (acc.length === count) return body(acc);
  return withScratchDatabase(prefix, (url, name) => withDatabases(prefix, count, body, [...acc, { url, name }]));
}

async function advisoriesCurve(opts: GrowthOptions, sizes: readonly number[]): Promise<void> {
  await withDatabases("bench_growth_adv", sizes.length, async (dbs) => {
    say(`growth: ListAdvisories over ${sizes.join(" / ")} advisories on ${dbs.map((d) => d.name).join(", ")}; load average ${loadavg()[0]!.toFixed(2)}`);
    const cleanups: (() => Promise<unknown>)[] = [];
    try {
      const targets: Target[] = [];
      for (const [i, size] of sizes.entries()) {
        const { url } = dbs[i]!;
        const database = await openPostgres(url, { max: 2 });
        cleanups.push(() => database.close());
        const sqlc = postgres(url, { max: 2, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
        cleanups.push(() => sqlc.end({ timeout: 5 }));
        const t0 = performance.now();
        await generateRows(sqlc, size);
        say(`  ${size} advisories generated: ${((performance.now() - t0) / 1000).toFixed(0)}s`);
        const { auth } = await ownedOrganization(database.db, ISSUER, 3600);
        const [found] = await sqlc<{ pkg: string | null; cve: string | null }[]>`
          select (select package from advisories where package = 'pkg-42' limit 1) as pkg, (select aliases[1] from advisories where aliases[1] = 'CVE-2012-000002') as cve`;
        const { pkg, cve } = found ?? {};
        if (!pkg || !cve) throw new Error(`the generated advisories have no pkg-42 or CVE-2012-000002 at ${size}`);
        for (const s of await startServers(url, cleanups)) {
          const base = { size, ...s, admin: sqlc, auth };
          targets.push({ ...base, curve: "ListAdvisories by package", path: `/vulnerabilities/v2/advisories?pageSize=${PAGE}&artifactNames=${pkg}` });
          targets.push({ ...base, curve: "ListAdvisories by CVE", path: `/vulnerabilities/v2/advisories?pageSize=${PAGE}&aliases=${cve}` });
          targets.push({ ...base, curve: "ListDocuments by CVE", path: `/advisory/v2/documents?cves=${cve}` });
        }
      }
      targets.sort((a, b) => a.curve.localeCompare(b.curve) || a.size - b.size);
      await runCurve(`ListAdvisories page 1 (page_size ${PAGE}, total) by one package (30 advisories) and by one CVE, and ListDocuments by that CVE, over ${sizes.join(" / ")} advisories`, targets, opts);
    } finally {
      for (const c of cleanups.reverse()) await c().catch((err: unknown) => say(`cleanup: ${String(err)}`));
    }
  });
}

export async function benchGrowth(opts: GrowthOptions): Promise<void> {
  setLogLevel("warn");
  if (opts.only !== undefined && opts.only !== "tags" && opts.only !== "advisories") throw new Error(`growth --only takes tags or advisories, not ${opts.only}`);
  if (opts.only !== "advisories") await tagsCurve(opts, opts.only === "tags" && opts.sizes ? opts.sizes : [10_000, 1_000_000, 10_000_000]);
  if (opts.only !== "tags") await advisoriesCurve(opts, opts.only === "advisories" && opts.sizes ? opts.sizes : [30_000, 300_000, 3_000_000]);
}
