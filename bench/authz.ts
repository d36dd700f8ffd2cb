// Authorization as a caller's grants grow: the same calls for callers bound (viewer) in 1 / 100 / 10,000
// groups, each seeing the same data (10,000 groups, one repo in each: a caller bound in 1 group sees it and
// its 9,999 subgroups, one bound in 100 sees those and 99 subgroups of each, one bound in 10,000 sees those
// groups alone), so the curve is the cost of the number of grants, not of the rows. And a caller bound at the
// top of a chain of 20 nested groups reading a repo at depth 1 / 5 / 20.
//
//   DATABASE_URL=postgres://... npm run bench -- authz [--seconds 2] [--concurrency 8] [--rounds 3]
//   BENCH_BEFORE_ROOT=<checkout> ... : the code before a change measured too, in the same rounds
//
// REST, 8 clients by default. Per target: server CPU and PostgreSQL CPU per request (bench/cpu.ts), req/s,
// p50, errors; each the median of interleaved rounds (every target once per round), and its ratio to the
// 1-group caller (depth 1 for the chain). The server's RSS after the last round.
import { loadavg } from "node:os";
import postgres from "postgres";
import { RelationshipType } from "../gen/chainguard/platform/iam/v2/identities_pb.js";
import { openPostgres } from "../src/db/client.js";
import { ensureSecret } from "../src/db/secrets.js";
import { ensureManagedRoles, managedRole } from "../src/iam/managed-roles.js";
import { createKeyStore, mintToken } from "../src/kernel/auth/index.js";
import { setLogLevel } from "../src/kernel/log.js";
import { BENCH_APPLICATION, backendsCpu, processCpu, type CpuMeter } from "./cpu.js";
import { withScratchDatabase } from "./database.js";
import { http1Sender, measure, say, type Result, type Send } from "./load.js";
import { residentBytes, startApiServer } from "./processes.js";

const ISSUER = "https://bench.authz.invalid";
const PAGE = 50;
/** The groups (and repos) every grant-count caller sees. */
const VISIBLE = 10_000;
const BOUND = [1, 100, 10_000] as const;
const DEPTHS = [1, 5, 20] as const;

export interface AuthzBenchOptions {
  seconds: number;
  concurrency: number;
  rounds: number;
}

export async function benchAuthz(opts: AuthzBenchOptions): Promise<void> {
  setLogLevel("warn");
  await withScratchDatabase("bench_authz", (url) => measureOn(url, opts));
}

/** A group uid beneath `parent`, from a text the SQL below also hashes (16 hex, as the server's). */
const hex16 = (seed: string) => `substr(md5(${seed}), 1, 16)`;

async function seed(sqlc: postgres.Sql, url: string) {
  const database = await openPostgres(url, { max: 2 });
  try {
    await ensureManagedRoles(database.db);
    await ensureSecret(database.db, "page-token");
    const keys = await createKeyStore(database.db);
    const viewer = managedRole("viewer").uid;
    const org = "a".repeat(40);
    await sqlc`insert into groups (uid, name) values (${org}, 'bench')`;
    const token = async (identity: string) =>
      `Bearer ${(await mintToken(keys, { issuer: ISSUER, subject: identity, audience: ISSUER, ttlSeconds: 3600 })).token}`;
    const person = async (n: string) => {
      const uid = n.padStart(40, "b");
      await sqlc`
        insert into identities (uid, name, relationship, relationship_type, issuer, subject)
        values (${uid}, ${"caller " + n}, ${sqlc.json({ claimMatch: { issuer: ISSUER, subject: n } })}, ${RelationshipType.CLAIM_MATCH}, ${ISSUER}, ${n})`;
      return uid;
    };

    const callers: Array<{ bound: number; auth: string; repo: string }> = [];
    for (const bound of BOUND) {
      // Under the org: a layout group, the caller's `bound` groups beneath it, each with VISIBLE/bound - 1
      // subgroups; one repo in every group the caller sees.
      const layout = `${org}/${"c".repeat(12)}${bound.toString(16).padStart(4, "0")}`;
      const perBound = VISIBLE / bound;
      await sqlc`insert into groups (uid, parent_uid, name) values (${layout}, ${org}, ${"layout " + bound})`;
      await sqlc.unsafe(
        `insert into groups (uid, parent_uid, name)
         select $1::text || '/' || ${hex16("$1::text || i")}, $1::text, 'bound ' || i from generate_series(1, $2::int) i`,
        [layout, bound],
      );
      await sqlc.unsafe(
        `insert into groups (uid, parent_uid, name)
         select g.uid || '/' || ${hex16("g.uid || j")}, g.uid, 'sub ' || j
         from groups g, generate_series(1, $2::int) j where g.parent_uid = $1::text`,
        [layout, perBound - 1],
      );
      await sqlc.unsafe(
        `insert into repos (uid, group_uid, name)
         select g.uid || '/' || ${hex16("'repo' || g.uid")}, g.uid, 'repo-' || ${hex16("g.uid")}
         from groups g where g.uid like $1::text || '/%'`,
        [layout],
      );
      const identity = await person(bound.toString(16));
      await sqlc.unsafe(
        `insert into role_bindings (uid, group_uid, identity_uid, role_uid)
         select g.uid || '/' || ${hex16("'binding' || g.uid")}, g.uid, $2::text, $3::text from groups g where g.parent_uid = $1::text`,
        [layout, identity, viewer],
      );
      const [last] = await sqlc<{ uid: string }[]>`
        select r.uid from repos r join groups g on g.uid = r.group_uid where g.parent_uid = ${layout} order by g.uid desc limit 1`;
      callers.push({ bound, auth: await token(identity), repo: last!.uid });
    }

    // A chain of 20 nested groups under the org, a repo at each depth; the caller bound at its top.
    let parent = `${org}/${"d".repeat(16)}`;
    await sqlc`insert into groups (uid, parent_uid, name) values (${parent}, ${org}, 'chain')`;
    const chainTop = parent;
    const atDepth = new Map<number, string>();
    for (let d = 1; d <= 20; d++) {
      const uid = `${parent}/${d.toString(16).padStart(16, "0")}`;
      await sqlc`insert into groups (uid, parent_uid, name) values (${uid}, ${parent}, ${"depth " + d})`;
      await sqlc`insert into repos (uid, group_uid, name) values (${uid + "/" + "e".repeat(16)}, ${uid}, 'app')`;
      atDepth.set(d, `${uid}/${"e".repeat(16)}`);
      parent = uid;
    }
    const chainCaller = await person("c4a1");
    await sqlc`insert into role_bindings (uid, group_uid, identity_uid, role_uid) values (${chainTop + "/" + "f".repeat(16)}, ${chainTop}, ${chainCaller}, ${viewer})`;
    await sqlc`analyze`;
    return { callers, chain: { auth: await token(chainCaller), atDepth } };
  } finally {
    await database.close();
  }
}

async function measureOn(url: string, opts: AuthzBenchOptions): Promise<void> {
  const cleanups: (() => Promise<unknown>)[] = [];
  try {
    const sqlc = postgres(url, { max: 2, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
    cleanups.push(() => sqlc.end({ timeout: 5 }));
    const t0 = performance.now();
    const { callers, chain } = await seed(sqlc, url);
    say(`seeded 3 x ${VISIBLE} groups and repos, ${BOUND.join(" + ")} bindings, a chain of 20 in ${((performance.now() - t0) / 1000).toFixed(1)}s`);

    const env = { DATABASE_URL: url, ISSUER_URL: ISSUER, SERVER_MODE: "production", LOG_LEVEL: "warn", METRICS_ADDR: "off" };
    const after = await startApiServer(env, { quiet: true });
    cleanups.push(() => after.stop());
    const beforeRoot = process.env.BENCH_BEFORE_ROOT;
    const before = beforeRoot ? await startApiServer(env, { quiet: true, root: beforeRoot }) : undefined;
    if (before) cleanups.push(() => before.stop());
    const sides = before ? ([["after", after], ["before", before]] as const) : ([["after", after]] as const);

    // The targets: [call, caller] -> a sender for a port.
    type Target = { call: string; caller: string; sender: (port: number) => () => Send };
    const get = (path: string, auth: string) => (port: number) => http1Sender(port, "GET", path, undefined, { authorization: auth });
    const targets: Target[] = [];
    for (const c of callers) {
      const caller = `${c.bound} group${c.bound > 1 ? "s" : ""}`;
      targets.push({ call: "GetRepo", caller, sender: get(`/registry/v2/repos/${c.repo}`, c.auth) });
      targets.push({ call: "ListRepos page 1", caller, sender: get(`/registry/v2/repos?page_size=${PAGE}`, c.auth) });
      targets.push({ call: "ListGroups page 1", caller, sender: get(`/iam/v2/groups?page_size=${PAGE}`, c.auth) });
      targets.push({ call: "ListRoleBindings page 1", caller, sender: get(`/iam/v2/roleBindings?page_size=${PAGE}`, c.auth) });
    }
    for (const d of DEPTHS) {
      targets.push({ call: "GetRepo (nested)", caller: `depth ${d}`, sender: get(`/registry/v2/repos/${chain.atDepth.get(d)}`, chain.auth) });
    }

    const meter = postgres(url, { max: 1, onnotice: () => {}, connection: { application_name: BENCH_APPLICATION } });
    cleanups.push(() => meter.end({ timeout: 5 }));
    const load = { seconds: opts.seconds, concurrency: opts.concurrency, warmupSeconds: Math.min(1, opts.seconds / 2) };
    const results = new Map<string, Result[]>();
    for (let round = 1; round <= opts.rounds; round++) {
      // Every target once per round, the sides alternating their order from one round to the next.
      for (const t of targets) {
        for (const [side, server] of round % 2 ? sides : [...sides].reverse()) {
          const cpu: CpuMeter[] = [processCpu("server", server.serverPid), backendsCpu("PostgreSQL", meter, { not: BENCH_APPLICATION })];
          const key = `${side}|${t.call}|${t.caller}`;
          const r = await measure(key, t.sender(server.port), { ...load, cpu });
          results.set(key, [...(results.get(key) ?? []), r]);
          say(`  round ${round} ${side}: ${t.call}, ${t.caller}: ${r.rps.toFixed(0)} req/s, server ${r.cpu.server!.toFixed(3)} ms/req, ${r.errors} errors`);
        }
      }
    }
    const rss = sides.map(([side, server]) => `${side} ${(residentBytes(server.serverPid) / 2 ** 20).toFixed(0)} MB`).join(", ");

    const median = (xs: number[]) => {
      const s = [...xs].sort((a, b) => a - b);
      return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
    };
    const figure = (rs: Result[]) => ({
      server: median(rs.map((r) => r.cpu.server!)),
      pg: median(rs.map((r) => r.cpu.PostgreSQL!)),
      rps: median(rs.map((r) => r.rps)),
      p50: median(rs.map((r) => r.p50)),
      errors: rs.reduce((n, r) => n + r.errors, 0),
    });
    console.log(
      `\nAuthorization by grants, REST, ${opts.concurrency} clients, ${opts.seconds}s x ${opts.rounds} interleaved rounds (medians), node ${process.version}, load average ${loadavg()[0]!.toFixed(2)}; server RSS after: ${rss}\n`,
    );
    console.log(
      "| side | call | caller | server CPU ms/req | PostgreSQL CPU ms/req | req/s | p50 ms | errors | server CPU × first | PostgreSQL CPU × first | p50 × first |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    );
    for (const [side] of sides) {
      for (const call of [...new Set(targets.map((t) => t.call))]) {
        const rows = targets.filter((t) => t.call === call).map((t) => ({ caller: t.caller, f: figure(results.get(`${side}|${call}|${t.caller}`)!) }));
        const first = rows[0]!.f;
        for (const { caller, f } of rows) {
          console.log(
            `| ${side} | ${call} | ${caller} | ${f.server.toFixed(3)} | ${f.pg.toFixed(3)} | ${f.rps.toFixed(0)} | ${f.p50.toFixed(2)} | ${f.errors} | ${(f.server / first.server).toFixed(2)} | ${(f.pg / first.pg).toFixed(2)} | ${(f.p50 / first.p50).toFixed(2)} |`,
          );
        }
      }
    }
  } finally {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  }
}
