// The plans of the hot lists with a parent, whatever plan PostgreSQL chooses. A named statement may switch to
// its cached generic plan after five runs, made without the values: a predicate narrow only for the values
// (the caller's scope as a uid range) can then drive a scan of everything in that range. And a plan made for
// the values may read the primary key in uid order, estimating a large repo's tags spread evenly through it,
// and walk past every tag that sorts before them. Here the store runs on connections with plan_cache_mode =
// force_custom_plan and force_generic_plan, and auto_explain reports the plan of each statement it runs
// (EXPLAIN ANALYZE, BUFFERS, JSON) as a notice: a page of 50 from a parent among 200,000 rows in the
// caller's scope must read a bounded number of rows and buffers, and no node may discard rows by a filter.
// PostgreSQL only: PGlite has one connection and no auto_explain.
import { drizzle } from "drizzle-orm/postgres-js";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { create } from "@bufbuild/protobuf";
import { UIDPFilterSchema } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { createSecurityAdvisoryStore } from "../../src/advisory/security-advisory.store.js";
import { MAX_DOCUMENT_ADVISORIES } from "../../src/advisory/security-advisory.validate.js";
import { createListPlanner } from "../../src/kernel/list/index.js";
import { createRepoStore } from "../../src/registry/repos.store.js";
import { tagList } from "../../src/registry/tags.service.js";
import { createTagStore } from "../../src/registry/tags.store.js";
import { repoList } from "../../src/registry/repos.service.js";
import { advisoryList } from "../../src/vulnerabilities/advisories.service.js";
import { createAdvisoryStore, type AdvisoryFilter } from "../../src/vulnerabilities/advisories.store.js";
import { advisoryFilter } from "../support/advisory-fixtures.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";

const ORG = "b".repeat(40);
/**
 * The repo listed, and a repo of a tenth as many tags that all come before its in uid order (the listed repo
 * holds most of the table: the case where a plan for the values may walk the primary key from the start).
 */
const REPO = `${ORG}/a000000000000002`;
const EARLIER_REPO = `${ORG}/a000000000000001`;
/** Subgroups of the org, 100 repos each (200,000 in all); the repos listed are those of the first. */
const GROUPS = 2_000;
const GROUP = `${ORG}/${"1".padStart(16, "0")}`;
const CHILDREN = 200_000;
/** Rows and buffers a page of 50 may touch: index pages, 51 rows and their heap pages, the total's counters. */
const ROW_BOUND = 1_000;
/** Advisories for ListAdvisories by alias. */
const ADVISORIES = 100_000;
const BUFFER_BOUND = 1_000;

const url = process.env.DATABASE_URL;
let database: TestDatabase | undefined;
/** A connection per plan choice: PostgreSQL's plan for each call's values, and the generic plan. */
const MODES = ["force_custom_plan", "force_generic_plan"] as const;
const clients = new Map<string, postgres.Sql>();
let plans: PlanNode[] = [];
let explainable = "";

interface PlanNode {
  "Node Type": string;
  "Actual Rows"?: number;
  "Actual Loops"?: number;
  "Rows Removed by Filter"?: number;
  "Rows Removed by Index Recheck"?: number;
  "Shared Hit Blocks"?: number;
  "Shared Read Blocks"?: number;
  Filter?: string;
  "Index Cond"?: string;
  "Recheck Cond"?: string;
  "Relation Name"?: string;
  "Index Name"?: string;
  "Plan Rows"?: number;
  Plans?: PlanNode[];
}

/** Every node of a plan tree. */
function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}

beforeAll(async () => {
  if (!url) return;
  database = await openTestDatabase({ max: 1, statementTimeoutMs: 0 });
  const [{ name }] = (await database.db.execute<{ name: string }>(`select current_database() as name` as never)) as unknown as [{ name: string }];
  // An org with two repos of 200,000 and 20,000 tags, and 2,000 subgroups of 100 repos each: each list below names
  // one parent among siblings whose children a scope range over the org would also cover.
  await database.db.execute(`
    insert into groups (uid, parent_uid, name) values ('${ORG}', null, 'org');
    insert into groups (uid, parent_uid, name) select '${ORG}/' || lpad(to_hex(g), 16, '0'), '${ORG}', 'g' || g from generate_series(1, ${GROUPS}) g;
    insert into repos (uid, group_uid, name) values ('${REPO}', '${ORG}', 'app'), ('${EARLIER_REPO}', '${ORG}', 'other');
    insert into tags (uid, repo_uid, name, digest, kind)
      select r || '/' || lpad(to_hex(i), 16, '0'), r, 'v' || i, 'sha256:' || md5(i::text), 0
      from unnest(array['${REPO}', '${EARLIER_REPO}'], array[${CHILDREN}, ${CHILDREN / 10}]) r(r, n), generate_series(1, n) i;
    insert into repos (uid, group_uid, name)
      select '${ORG}/' || lpad(to_hex(g), 16, '0') || '/' || lpad(to_hex(i), 16, '0'), '${ORG}/' || lpad(to_hex(g), 16, '0'), 'r' || i
      from generate_series(1, ${GROUPS}) g, generate_series(1, ${CHILDREN / GROUPS}) i;
` as never);
  // 100,000 advisories with two aliases each (ListAdvisories by one alias).
  await database.db.execute(`
    insert into advisory_documents (package, schema_version, source, content_hash) select 'pkg-' || p, '2', 'g', 'h' from generate_series(0, 999) p;
    insert into advisories (uid, package, advisory_id, aliases)
      select 'pkg-' || (i % 1000) || ':CGA-' || i, 'pkg-' || (i % 1000), 'CGA-' || i, array['CVE-2024-' || i, 'GHSA-' || i]
      from generate_series(1, ${ADVISORIES}) i;
  ` as never);
  await database.db.execute(`analyze advisories` as never);
  await database.db.execute(`analyze advisory_aliases` as never);
  await database.db.execute(`analyze tags` as never);
  await database.db.execute(`analyze repos` as never);
  const target = new URL(url);
  target.pathname = `/${name}`;
  // One connection per plan choice, every statement's plan reported as a notice.
  for (const mode of MODES) {
    const client = postgres(target.toString(), {
      max: 1,
      connection: { plan_cache_mode: mode },
      onnotice: (n) => {
        const text = String(n.message);
        const at = text.indexOf("{");
        if (text.includes("plan:") && at >= 0) plans.push((JSON.parse(text.slice(at)) as { Plan: PlanNode }).Plan);
      },
    });
    clients.set(mode, client);
    try {
      await client.unsafe(`load 'auto_explain'`);
      for (const s of ["log_min_duration = 0", "log_analyze = on", "log_buffers = on", "log_format = json", "log_level = notice"]) await client.unsafe(`set auto_explain.${s}`);
      explainable = "yes";
    } catch (err) {
      explainable = `auto_explain cannot be loaded: ${String(err)}`;
    }
  }
}, 180_000);

afterAll(async () => {
  for (const c of clients.values()) await c.end({ timeout: 5 });
  await database?.dispose();
});

/** The plan of each statement `run` runs, with plans of pages before it discarded. */
async function plansOf(run: () => Promise<unknown>): Promise<PlanNode[]> {
  plans = [];
  await run();
  return plans;
}

/**
 * Checks a plan reads a bounded number of rows and buffers, and discards no rows by a filter. `rowBound`: a page
 * that must read every row its filter selects (several values of a filter: no index gives them in page order)
 * may read a few times those beside the page's own.
 */
function expectBounded(plan: PlanNode, rowBound = ROW_BOUND): void {
  const all = nodes(plan);
  const rows = all.reduce((a, n) => a + (n["Actual Rows"] ?? 0) * (n["Actual Loops"] ?? 1), 0);
  const removed = all.reduce((a, n) => a + (n["Rows Removed by Filter"] ?? 0) + (n["Rows Removed by Index Recheck"] ?? 0), 0);
  const buffers = (plan["Shared Hit Blocks"] ?? 0) + (plan["Shared Read Blocks"] ?? 0);
  const summary = JSON.stringify(all.map((n) => [n["Node Type"], n["Index Cond"] ?? n.Filter ?? "", n["Actual Rows"]]));
  expect({ removed, summary }).toEqual({ removed: 0, summary });
  expect({ rows, summary }).toSatisfy((v: { rows: number }) => v.rows <= rowBound);
  expect({ buffers, summary }).toSatisfy((v: { buffers: number }) => v.buffers <= BUFFER_BOUND);
}

const planner = createListPlanner({ secret: new Uint8Array(32).fill(7) });
// The caller sees the org (a grant on it): the lists' scope.
const scopes = [ORG];

describe.skipIf(!url)("list plans under a generic plan (PostgreSQL)", () => {
  const cases = MODES.flatMap((mode) => ["", "uid", "name", "update_time desc"].map((orderBy) => [orderBy, mode] as const));
  it.each(cases)("ListTags page 1 of a repo of 200,000 tags reads a bounded page (order_by %j, %s)", async (orderBy, mode) => {
    if (explainable !== "yes") return expect.soft(explainable, "the plans are read through auto_explain").toBe("yes");
    const store = createTagStore(drizzle(clients.get(mode)!));
    const uidp = create(UIDPFilterSchema, { childrenOf: REPO });
    const filter = { scopes, uidp, name: "", digest: "", updatedSince: undefined, kinds: [0] };
    // Seven pages: past the five runs after which PostgreSQL may switch a named statement to its generic plan.
    for (let i = 0; i < 6; i++) await store.list(planner.plan({ orderBy, pageSize: 50 }, tagList, scopes), filter);
    const seen = await plansOf(async () => {
      const page = await store.list(planner.plan({ orderBy, pageSize: 50 }, tagList, scopes), filter);
      expect(page.rows).toHaveLength(50);
      expect(page.totalCount).toBe(BigInt(CHILDREN));
    });
    expect(seen).toHaveLength(1);
    expectBounded(seen[0]!);
  });

  it.each(MODES)("ListRepos page 1 of a group of 100 repos among 200,000 in the scope reads a bounded page (%s)", async (mode) => {
    if (explainable !== "yes") return expect.soft(explainable, "the plans are read through auto_explain").toBe("yes");
    const store = createRepoStore(drizzle(clients.get(mode)!));
    const filter = { scopes, uidp: create(UIDPFilterSchema, { childrenOf: GROUP }), name: "" };
    for (const orderBy of ["", "uid", "name"]) {
      const plan = planner.plan({ orderBy, pageSize: 50 }, repoList, scopes);
      const seen = await plansOf(async () => expect((await store.list(plan, filter)).rows).toHaveLength(50));
      expect(seen.length).toBeGreaterThan(0);
      for (const p of seen) expectBounded(p);
    }
  });
});

describe.skipIf(!url)("ListAdvisories by alias under a generic plan (PostgreSQL)", () => {
  // The alias lookup's estimate must not depend on the value: over the aliases array's GIN index a generic
  // plan took the default selectivity of `&&` (0.5% of the table), far above the one row a plan for the value
  // estimates, so PostgreSQL re-planned the statement on every call; a btree lookup on advisory_aliases
  // (`alias = any($1)`, the aliases one array) is estimated at a few rows either way.
  const filter = (alias: string): AdvisoryFilter => advisoryFilter({ aliases: [alias] });

  it.each(MODES)("estimates the advisories of one alias at a few rows and reads a bounded page (%s)", async (mode) => {
    if (explainable !== "yes") return expect.soft(explainable, "the plans are read through auto_explain").toBe("yes");
    const store = createAdvisoryStore(drizzle(clients.get(mode)!));
    for (let i = 0; i < 6; i++) await store.list(planner.plan({ pageSize: 50 }, advisoryList, []), filter(`CVE-2024-${i + 1}`));
    const seen = await plansOf(async () => {
      const page = await store.list(planner.plan({ pageSize: 50 }, advisoryList, []), filter("GHSA-4242"));
      expect(page.rows.map((r) => r.row.uid)).toEqual(["pkg-242:CGA-4242"]);
    });
    expectOneBoundedAliasLookup(seen);
  });
});

describe.skipIf(!url)("ListAdvisories by several values of a filter under a generic plan (PostgreSQL)", () => {
  // Several values of a filter travel as one array parameter (`= any($1::text[])`), so one named statement of
  // the connection serves 2 to 6 values, and under force_generic_plan every run uses the plan made without
  // them. That plan must read the filter's btree index (an index condition `= ANY ($n)`), not scan or walk
  // the advisories table: a package's (package, uid) index for packages, advisory_aliases' for aliases.
  const statementsLike = async (client: postgres.Sql, like: string) =>
    (await client<{ generic: string; custom: string }[]>`
      select generic_plans::text as generic, custom_plans::text as custom from pg_prepared_statements where statement like ${like}`).map((s) => ({ ...s }));
  const runs = (mode: (typeof MODES)[number]) => (mode === "force_generic_plan" ? { generic: "7", custom: "0" } : { generic: "0", custom: "7" });
  /** No node scans the advisories table, and some condition on `index` is `= ANY` (of a parameter in a generic plan). */
  function expectIndexDriven(plan: PlanNode, index: string): void {
    const all = nodes(plan);
    const summary = JSON.stringify(all.map((n) => [n["Node Type"], n["Index Name"] ?? n["Relation Name"] ?? "", n["Index Cond"] ?? n.Filter ?? ""]));
    expect({ scans: all.filter((n) => n["Node Type"] === "Seq Scan" && n["Relation Name"] === "advisories").length, summary }).toEqual({ scans: 0, summary });
    const byArray = all.filter((n) => n["Index Name"] === index && /= ANY \(/.test(n["Index Cond"] ?? ""));
    expect({ byArray: byArray.length > 0, summary }).toEqual({ byArray: true, summary });
  }

  it.each(MODES)("reads several packages by their index, one named statement for 2 to 6 packages (%s)", async (mode) => {
    if (explainable !== "yes") return expect.soft(explainable, "the plans are read through auto_explain").toBe("yes");
    const client = clients.get(mode)!;
    const store = createAdvisoryStore(drizzle(client));
    const packages = (n: number) => Array.from({ length: n }, (_, j) => `pkg-${10 + j}`);
    for (let i = 0; i < 6; i++) {
      const n = (i % 5) + 2;
      const page = await store.list(planner.plan({ pageSize: 50 }, advisoryList, []), advisoryFilter({ artifactNames: packages(n) }));
      expect(page.totalCount).toBe(BigInt(n * (ADVISORIES / 1000)));
    }
    const seen = await plansOf(async () => {
      const page = await store.list(planner.plan({ pageSize: 50 }, advisoryList, []), advisoryFilter({ artifactNames: ["pkg-7", "pkg-8"] }));
      expect(page.rows).toHaveLength(50);
      expect(page.rows[0]!.row.uid).toBe("pkg-7:CGA-10007");
      expect(page.totalCount).toBe(BigInt(2 * (ADVISORIES / 1000)));
    });
    expect(seen).toHaveLength(1);
    // The page reads the 200 advisories of the two packages (sorted for the page, and counted): a few reads of
    // each beside the page's own rows.
    expectBounded(seen[0]!, ROW_BOUND + 4 * 200);
    expectIndexDriven(seen[0]!, "advisories_package_uid_idx");
    expect(await statementsLike(client, '%"advisories"."package" = any(%')).toEqual([runs(mode)]);
  });

  it.each(MODES)("reads several CVEs by the aliases' index, one named statement for 1 to 6 aliases (%s)", async (mode) => {
    if (explainable !== "yes") return expect.soft(explainable, "the plans are read through auto_explain").toBe("yes");
    const client = clients.get(mode)!;
    const store = createAdvisoryStore(drizzle(client));
    // The alias test above ran this statement on the connection too (7 runs of one alias).
    const [already] = await statementsLike(client, '%"advisory_aliases"."alias" = any(%');
    for (let i = 0; i < 6; i++) {
      const aliases = Array.from({ length: i + 1 }, (_, j) => `CVE-2024-${j + 1}`);
      expect((await store.list(planner.plan({ pageSize: 50 }, advisoryList, []), advisoryFilter({ aliases }))).rows).toHaveLength(i + 1);
    }
    const seen = await plansOf(async () => {
      const page = await store.list(planner.plan({ pageSize: 50 }, advisoryList, []), advisoryFilter({ aliases: ["GHSA-4242", "CVE-2024-77", "CVE-2024-999999"] }));
      expect(page.rows.map((r) => r.row.uid)).toEqual(["pkg-242:CGA-4242", "pkg-77:CGA-77"]);
    });
    expectOneBoundedAliasLookup(seen);
    expectIndexDriven(seen[0]!, "advisory_aliases_alias_advisory_uid_pk");
    const before = already ?? { generic: "0", custom: "0" };
    const after = runs(mode);
    expect(await statementsLike(client, '%"advisory_aliases"."alias" = any(%')).toEqual([
      { generic: String(Number(before.generic) + Number(after.generic)), custom: String(Number(before.custom) + Number(after.custom)) },
    ]);
  });
});

/** One statement, reading a bounded set, whose alias lookups are each estimated at a few rows. */
function expectOneBoundedAliasLookup(seen: Parameters<typeof nodes>[0][]): void {
  expect(seen).toHaveLength(1);
  expectBounded(seen[0]!);
  const lookups = nodes(seen[0]!).filter((n) => /alias/.test(`${n["Index Cond"] ?? ""} ${n["Recheck Cond"] ?? ""}`));
  expect(lookups.length).toBeGreaterThan(0);
  for (const n of lookups) expect({ estimate: n["Plan Rows"], node: n["Node Type"], cond: n["Index Cond"] ?? n["Recheck Cond"] }).toSatisfy((v: { estimate: number }) => v.estimate <= 10);
}

describe.skipIf(!url)("ListDocuments by CVE under a generic plan (PostgreSQL)", () => {
  // The same lookup for advisory.v2's ListDocuments (an advisory id or an alias equal to a cve): over the
  // aliases array's GIN index a generic plan estimated `aliases && $1` at 0.5% of the table; the alias table's
  // btree equality is estimated at about one row per cve under either plan choice. The read is a named
  // statement of the connection, one for every number of cves (they travel as one array): with
  // force_generic_plan every run of it uses its generic plan.
  it.each(MODES)("estimates the advisories of one cve at a few rows and reads a bounded set, one named statement for any number of cves (%s)", async (mode) => {
    if (explainable !== "yes") return expect.soft(explainable, "the plans are read through auto_explain").toBe("yes");
    const client = clients.get(mode)!;
    const store = createSecurityAdvisoryStore(drizzle(client));
    for (let i = 0; i < 6; i++) {
      const cves = Array.from({ length: i + 1 }, (_, j) => `CVE-2024-${j + 1}`);
      expect((await store.documents({ packageName: undefined, cves }, MAX_DOCUMENT_ADVISORIES))?.length).toBe(i + 1);
    }
    const seen = await plansOf(async () => {
      const rows = await store.documents({ packageName: undefined, cves: ["GHSA-4242"] }, MAX_DOCUMENT_ADVISORIES);
      expect(rows?.map((r) => r.uid)).toEqual(["pkg-242:CGA-4242"]);
    });
    expectOneBoundedAliasLookup(seen);
    const statements = await client<{ generic: string; custom: string }[]>`
      select generic_plans::text as generic, custom_plans::text as custom from pg_prepared_statements where statement like 'with "matched"%'`;
    const runs = mode === "force_generic_plan" ? { generic: "7", custom: "0" } : { generic: "0", custom: "7" };
    expect(statements.map((s) => ({ ...s }))).toEqual([runs]);
  });
});

describe.skipIf(!url)("the server's connections (PostgreSQL)", () => {
  it("run without JIT: a generic plan's cost estimate, which grows with the table, does not compile each call", async () => {
    const [row] = (await database!.db.execute(`select current_setting('jit') as jit` as never)) as unknown as [{ jit: string }];
    expect(row.jit).toBe("off");
  });
});

describe.skipIf(Boolean(url))("list plans under a generic plan", () => {
  it.skip("need PostgreSQL (DATABASE_URL): the embedded database has one connection and no auto_explain", () => {});
});
