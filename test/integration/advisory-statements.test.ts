// The statements of the advisory reads do not multiply with the number of values a filter has: a repeated
// filter of ListAdvisories travels as one array parameter (a filter whose index gives the page in uid order for
// one value only keeps a statement of its own for one value), and the advisory.v2 reads (vulnerability
// metadata by ids, severities, fixed advisories of packages, visible repos by name) take their lists as one
// text[] each. Read through the Drizzle logger, on either database: the SQL text a call runs for 2 and for 3
// values is the same (for the uids and aliases of ListAdvisories and the advisory.v2 reads, for 1 too); the
// answers are those of the filter's values taken together (any of them; exclude_event_authors: none of them).
import { sql } from "drizzle-orm";
import { VulnerabilityMetadataSchema } from "../../gen/chainguard/platform/advisory/v2/advisory_pb.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSecurityAdvisoryStore } from "../../src/advisory/security-advisory.store.js";
import { osvRecords } from "../../src/db/schema/index.js";
import { createListPlanner, defineListSpec } from "../../src/kernel/list/index.js";
import { advisoryList } from "../../src/vulnerabilities/advisories.service.js";
import { createAdvisoryStore, type AdvisoryFilter } from "../../src/vulnerabilities/advisories.store.js";
import { EventType, advisoryFilter, writeAdvisoryDocument } from "../support/advisory-fixtures.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";

let db: TestDatabase;
const statements: string[] = [];

/** The SQL text of each statement `run` sends. */
async function statementsOf(run: () => Promise<unknown>): Promise<string[]> {
  statements.length = 0;
  await run();
  return [...statements];
}

const PACKAGES = [1, 2, 3] as const;
const EVENT_TYPES = [EventType.DETECTION, EventType.FIXED, EventType.PENDING_UPSTREAM_FIX];
/** ReviewState PENDING, APPROVED, REQUEST_CHANGES. */
const REVIEW_STATES = [1, 2, 3];
const ORG = "c".repeat(40);

beforeAll(async () => {
  db = await openTestDatabase({ logger: { logQuery: (query) => void statements.push(query) } });
  // Packages p1, p2, p3, each with advisories a (alias CVE-<i>) and b (alias GHSA-<i>), one event each; every
  // column and event field a filter reads holds a value of its package's own.
  for (const i of PACKAGES) {
    await writeAdvisoryDocument(db.db, `p${i}`, [
      { id: `CGA-p${i}-a`, aliases: [`CVE-${i}`], events: [{ time: `2024-0${i}-01T00:00:00Z`, type: EVENT_TYPES[i - 1]! }] },
      { id: `CGA-p${i}-b`, aliases: [`GHSA-${i}`], events: [{ time: `2024-0${i}-02T00:00:00Z`, type: EVENT_TYPES[i - 1]! }] },
    ]);
    await db.db.execute(sql`update advisories set artifact_type = ${`type-${i}`}, artifact_architecture = ${`arch-${i}`}, component_name = ${`comp-${i}`},
      component_type = ${`ctype-${i}`}, component_location = ${`/loc/${i}`} where package = ${`p${i}`}`);
    await db.db.execute(sql`update advisory_events set author = ${`author-${i}`}, reviewer = ${`reviewer-${i}`}, review_state = ${REVIEW_STATES[i - 1]!}
      where advisory_uid like ${`p${i}:%`}`);
  }
  await db.db.insert(osvRecords).values(PACKAGES.map((i) => ({ id: `CVE-${i}`, source: "test", contentHash: "x", severities: [{ type: "CVSS_V3", score: `score-${i}` }] })));
  await db.db.execute(sql`insert into groups (uid, parent_uid, name) values (${ORG}, null, 'org')`);
  for (const i of PACKAGES) await db.db.execute(sql`insert into repos (uid, group_uid, name) values (${`${ORG}/${String(i).padStart(16, "0")}`}, ${ORG}, ${`p${i}`})`);
}, 120_000);

afterAll(async () => {
  await db?.dispose();
});

const planner = createListPlanner({ secret: new Uint8Array(32).fill(7) });
/** ListVulnerabilityMetadata's list (as security-advisory.service.ts defines it): a first page by id. */
const metadataList = defineListSpec({ name: "advisory.v2.ListVulnerabilityMetadata", message: VulnerabilityMetadataSchema, orderBy: ["id"], defaultOrder: "id" });
const metadataPlan = () => planner.plan({ pageSize: 50 }, metadataList, []);
/** Both advisories of packages p<from>..p<to>. */
const packagesOf = (from: number, to: number) => PACKAGES.filter((i) => i >= from && i <= to).flatMap((i) => [`p${i}:CGA-p${i}-a`, `p${i}:CGA-p${i}-b`]);
/** Advisory a of packages p1..p<n>. */
const firstOf = (n: number) => PACKAGES.filter((i) => i <= n).map((i) => `p${i}:CGA-p${i}-a`);

interface FilterCase {
  filter: (n: number) => Partial<AdvisoryFilter>;
  /** The advisories the first n values select. */
  want: (n: number) => string[];
  /** One statement for any number of values, one included (no statement of its own for one value). */
  oneStatement?: boolean;
}

const values = <T>(f: (i: number) => T) => (n: number) => PACKAGES.slice(0, n).map(f);
const cases: Record<string, FilterCase> = {
  "uidp.ids": { filter: (n) => ({ uids: values((i) => `p${i}:CGA-p${i}-a`)(n) }), want: firstOf, oneStatement: true },
  advisory_ids: { filter: (n) => ({ advisoryIds: values((i) => `CGA-p${i}-a`)(n) }), want: firstOf },
  artifact_names: { filter: (n) => ({ artifactNames: values((i) => `p${i}`)(n) }), want: (n) => packagesOf(1, n) },
  artifact_types: { filter: (n) => ({ artifactTypes: values((i) => `type-${i}`)(n) }), want: (n) => packagesOf(1, n) },
  artifact_architectures: { filter: (n) => ({ artifactArchitectures: values((i) => `arch-${i}`)(n) }), want: (n) => packagesOf(1, n) },
  component_names: { filter: (n) => ({ componentNames: values((i) => `comp-${i}`)(n) }), want: (n) => packagesOf(1, n) },
  component_types: { filter: (n) => ({ componentTypes: values((i) => `ctype-${i}`)(n) }), want: (n) => packagesOf(1, n) },
  component_locations: { filter: (n) => ({ componentLocations: values((i) => `/loc/${i}`)(n) }), want: (n) => packagesOf(1, n) },
  aliases: { filter: (n) => ({ aliases: values((i) => `CVE-${i}`)(n) }), want: firstOf, oneStatement: true },
  event_review_states: { filter: (n) => ({ eventReviewStates: values((i) => REVIEW_STATES[i - 1]!)(n) }), want: (n) => packagesOf(1, n) },
  event_authors: { filter: (n) => ({ eventAuthors: values((i) => `author-${i}`)(n) }), want: (n) => packagesOf(1, n) },
  exclude_event_authors: { filter: (n) => ({ excludeEventAuthors: values((i) => `author-${i}`)(n) }), want: (n) => packagesOf(n + 1, 3) },
  event_reviewers: { filter: (n) => ({ eventReviewers: values((i) => `reviewer-${i}`)(n) }), want: (n) => packagesOf(1, n) },
  event_types: { filter: (n) => ({ eventTypes: values((i) => EVENT_TYPES[i - 1]!)(n) }), want: (n) => packagesOf(1, n) },
};

describe("ListAdvisories: one statement whatever the number of a filter's values", () => {
  it.each(Object.keys(cases))("%s", async (name) => {
    const c = cases[name]!;
    const store = createAdvisoryStore(db.db);
    const texts: string[][] = [];
    for (const n of [1, 2, 3]) {
      const filter = advisoryFilter(c.filter(n));
      texts.push(
        await statementsOf(async () => {
          const page = await store.list(planner.plan({ pageSize: 50 }, advisoryList, []), filter);
          expect({ n, uids: page.rows.map((r) => r.row.uid), total: page.totalCount }).toEqual({ n, uids: c.want(n), total: BigInt(c.want(n).length) });
        }),
      );
      // A page past the end: its total is counted apart, the values bound into a statement of its own.
      const beyond = await store.list(planner.plan({ pageSize: 1, skip: 10 }, advisoryList, []), filter);
      expect({ n, rows: beyond.rows.length, total: beyond.totalCount }).toEqual({ n, rows: 0, total: BigInt(c.want(n).length) });
    }
    expect(texts.map((t) => t.length)).toEqual([1, 1, 1]);
    expect(texts[2]).toEqual(texts[1]);
    if (c.oneStatement) expect(texts[0]).toEqual(texts[1]);
  });

  it("several filters with several values each: one statement for 2 and 3 values of each", async () => {
    const store = createAdvisoryStore(db.db);
    const filter = (n: number) => advisoryFilter({ ...cases.artifact_names!.filter(n), ...cases.event_authors!.filter(n), ...cases.aliases!.filter(n) });
    const texts: string[][] = [];
    for (const n of [2, 3]) {
      texts.push(await statementsOf(async () => expect((await store.list(planner.plan({ pageSize: 50 }, advisoryList, []), filter(n))).rows.map((r) => r.row.uid)).toEqual(firstOf(n))));
    }
    expect(texts[1]).toEqual(texts[0]);
  });
});

describe("advisory.v2 reads: one statement whatever the number of values", () => {
  /** The statements of `read` for the first 1, 2 and 3 values, and its answers. */
  async function runs<T>(read: (n: number) => Promise<T>): Promise<{ texts: string[][]; answers: T[] }> {
    const texts: string[][] = [];
    const answers: T[] = [];
    for (const n of [1, 2, 3]) texts.push(await statementsOf(async () => answers.push(await read(n))));
    return { texts, answers };
  }

  it("ListVulnerabilityMetadata by ids", async () => {
    const store = createSecurityAdvisoryStore(db.db);
    const { texts, answers } = await runs(async (n) => (await store.metadata(metadataPlan(), values((i) => `CVE-${i}`)(n))).rows.map((r) => r.id));
    expect(answers).toEqual([["CVE-1"], ["CVE-1", "CVE-2"], ["CVE-1", "CVE-2", "CVE-3"]]);
    expect(new Set(texts.map((t) => JSON.stringify(t))).size).toBe(1);
  });

  it("severities by ids", async () => {
    const store = createSecurityAdvisoryStore(db.db);
    const { texts, answers } = await runs(async (n) => [...(await store.severities(values((i) => `CVE-${i}`)(n))).keys()].sort());
    expect(answers).toEqual([["CVE-1"], ["CVE-1", "CVE-2"], ["CVE-1", "CVE-2", "CVE-3"]]);
    expect(new Set(texts.map((t) => JSON.stringify(t))).size).toBe(1);
  });

  it("fixed advisories of packages", async () => {
    const store = createSecurityAdvisoryStore(db.db);
    const { texts, answers } = await runs(async (n) =>
      (await store.fixedAdvisories(values((i) => `p${i}`)(n), new Date("2024-01-01T00:00:00Z"), new Date("2024-12-31T00:00:00Z"))).map((r) => `${r.package}:${r.advisoryId}`),
    );
    // Only p2's events are `fixed`.
    expect(answers).toEqual([[], ["p2:CGA-p2-a", "p2:CGA-p2-b"], ["p2:CGA-p2-a", "p2:CGA-p2-b"]]);
    expect(new Set(texts.map((t) => JSON.stringify(t))).size).toBe(1);
  });

  it("visible repos by name", async () => {
    const store = createSecurityAdvisoryStore(db.db);
    const { texts, answers } = await runs(async (n) => [...(await store.visibleRepoNames([ORG], values((i) => `p${i}`)(n)))].sort());
    expect(answers).toEqual([["p1"], ["p1", "p2"], ["p1", "p2", "p3"]]);
    expect(new Set(texts.map((t) => JSON.stringify(t))).size).toBe(1);
  });
});
