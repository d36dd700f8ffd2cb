// advisory_aliases, the table ListAdvisories' alias filter reads: random advisories with aliases drawn from a
// small pool (so they overlap), written, re-written with other aliases, upserted and deleted as the importer
// does; after each history the table holds exactly the advisories' aliases, and the filter answers exactly
// the advisories whose `aliases` array overlaps the requested ones (the filter's meaning before the table).
// ListDocuments' cve filter reads the same table: it answers exactly the advisories the old predicate
// (`aliases && cves or advisory_id in cves`) did, in the same order, and is "too broad" at the same limits.
// The migration that adds the table fills it for advisories stored before it.
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import fc from "fast-check";
import { and, arrayOverlaps, asc, eq, inArray, or, sql, type SQL } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { migrationsFolder } from "../../src/db/client.js";
import { advisories, advisoryDocuments } from "../../src/db/schema/index.js";
import { createSecurityAdvisoryStore } from "../../src/advisory/security-advisory.store.js";
import { createListPlanner } from "../../src/kernel/list/index.js";
import { advisoryList } from "../../src/vulnerabilities/advisories.service.js";
import { createAdvisoryStore, type AdvisoryFilter } from "../../src/vulnerabilities/advisories.store.js";
import { advisoryFilter } from "../support/advisory-fixtures.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";

const POOL = ["CVE-1", "CVE-2", "CVE-3", "GHSA-a", "GHSA-b", "GHSA-c"];
const PACKAGES = ["p0", "p1", "p2"];

let db: TestDatabase;
/** A raw statement's rows: postgres.js answers an array, PGlite `{ rows }`. */
const rowsOf = <T>(result: unknown): T[] => (Array.isArray(result) ? (result as T[]) : (result as { rows: T[] }).rows);
beforeAll(async () => {
  db = await openTestDatabase();
});
afterAll(async () => {
  await db?.dispose();
});

const filterOf = (aliases: readonly string[], artifactNames: readonly string[] = []): AdvisoryFilter => advisoryFilter({ aliases, artifactNames });

const aliasList = fc.subarray(POOL).chain((xs) => fc.shuffledSubarray([...xs, ...xs], { minLength: xs.length }));
const advisoryArb = fc.record({ pkg: fc.constantFrom(...PACKAGES), id: fc.integer({ min: 0, max: 7 }), aliases: aliasList });
const opArb = fc.oneof(
  fc.record({ kind: fc.constant("update" as const), i: fc.nat(), aliases: aliasList }),
  fc.record({ kind: fc.constant("upsert" as const), i: fc.nat(), aliases: aliasList }),
  fc.record({ kind: fc.constant("delete" as const), i: fc.nat() }),
);
const queryArb = fc.record({ aliases: fc.subarray([...POOL, "CVE-none"], { minLength: 1, maxLength: 3 }), pkg: fc.option(fc.constantFrom(...PACKAGES), { nil: undefined }) });

/** Writes the advisories, then applies the operations (update, upsert, delete) as the importer would. */
type ValueOf<A> = A extends fc.Arbitrary<infer T> ? T : never;

async function writeHistory(rows: ValueOf<typeof advisoryArb>[], ops: ValueOf<typeof opArb>[]): Promise<void> {
  await db.db.execute(sql`truncate advisory_documents cascade`);
  await db.db.insert(advisoryDocuments).values(PACKAGES.map((p) => ({ package: p, schemaVersion: "2", source: `${p}.yaml`, contentHash: p })));
  const byUid = new Map(rows.map((r) => [`${r.pkg}:CGA-${r.id}`, r]));
  const uids = [...byUid.keys()];
  if (uids.length) await db.db.insert(advisories).values([...byUid].map(([uid, r]) => ({ uid, package: r.pkg, advisoryId: `CGA-${r.id}`, aliases: r.aliases })));
  for (const op of ops) {
    const uid = uids.length ? uids[op.i % uids.length]! : "p0:CGA-0";
    if (op.kind === "update") await db.db.update(advisories).set({ aliases: op.aliases }).where(eq(advisories.uid, uid));
    else if (op.kind === "delete") await db.db.delete(advisories).where(inArray(advisories.uid, [uid]));
    else {
      const [pkg, id] = uid.split(":") as [string, string];
      await db.db
        .insert(advisories)
        .values({ uid, package: pkg, advisoryId: id, aliases: op.aliases })
        .onConflictDoUpdate({ target: advisories.uid, set: { aliases: sql`excluded.aliases` } });
    }
  }
}

/** ListDocuments requests: cves among the aliases, advisory ids (CGA-n) and an unknown one; a package or none; a limit. */
const documentQueryArb = fc.record({
  cves: fc.subarray([...POOL, "CGA-1", "CGA-2", "CGA-5", "CVE-none"], { minLength: 1, maxLength: 4 }),
  pkg: fc.option(fc.constantFrom(...PACKAGES), { nil: undefined }),
  limit: fc.integer({ min: 1, max: 12 }),
});

describe("advisory_aliases", () => {
  it("gives ListDocuments by cve the rows, order and too-broad verdicts of `aliases && cves or advisory_id in cves`", async () => {
    const store = createSecurityAdvisoryStore(db.db);
    await fc.assert(
      fc.asyncProperty(fc.array(advisoryArb, { maxLength: 12 }), fc.array(opArb, { maxLength: 8 }), fc.array(documentQueryArb, { minLength: 1, maxLength: 4 }), async (rows, ops, queries) => {
        await writeHistory(rows, ops);
        for (const q of queries) {
          const old = await db.db
            .select({ uid: advisories.uid, package: advisories.package, advisoryId: advisories.advisoryId, aliases: advisories.aliases })
            .from(advisories)
            .where(and(q.pkg !== undefined ? eq(advisories.package, q.pkg) : undefined, or(arrayOverlaps(advisories.aliases, q.cves), inArray(advisories.advisoryId, q.cves))))
            .orderBy(asc(advisories.package), asc(advisories.advisoryId));
          const got = await store.documents({ packageName: q.pkg, cves: q.cves }, q.limit);
          const want = old.length > q.limit ? undefined : old.map((r) => ({ ...r, events: [] }));
          expect({ q, rows: got }).toEqual({ q, rows: want });
        }
      }),
      { numRuns: 40, seed: 2929 },
    );
  });

  it("holds the advisories' aliases through writes, and the alias filter answers as `aliases && $1` did", async () => {
    const store = createAdvisoryStore(db.db);
    const planner = createListPlanner({ secret: new Uint8Array(32).fill(3) });
    await fc.assert(
      fc.asyncProperty(fc.array(advisoryArb, { maxLength: 12 }), fc.array(opArb, { maxLength: 8 }), fc.array(queryArb, { minLength: 1, maxLength: 4 }), async (rows, ops, queries) => {
        await writeHistory(rows, ops);
        const pairs = (text: SQL) => db.db.execute(text).then((r) => rowsOf<{ alias: string; uid: string }>(r));
        expect(await pairs(sql`select alias, advisory_uid as uid from advisory_aliases order by 1, 2`)).toEqual(
          await pairs(sql`select distinct x.alias, a.uid from advisories a cross join unnest(a.aliases) x(alias) order by 1, 2`),
        );
        for (const q of queries) {
          const pkgs = q.pkg === undefined ? [] : [q.pkg];
          const old = await db.db
            .select({ uid: advisories.uid })
            .from(advisories)
            .where(and(arrayOverlaps(advisories.aliases, q.aliases), pkgs.length ? inArray(advisories.package, pkgs) : undefined))
            .orderBy(advisories.uid);
          const plan = planner.plan({ pageSize: 200 }, advisoryList, []);
          const page = await store.list(plan, filterOf(q.aliases, pkgs));
          expect({ q, uids: page.rows.map((r) => r.row.uid), total: page.totalCount }).toEqual({ q, uids: old.map((r) => r.uid), total: BigInt(old.length) });
        }
      }),
      { numRuns: 25, seed: 29 },
    );
  });
});

/** The migrations up to and including `tag`, in a folder of their own (the journal cut after it). */
function migrationsUpTo(tag: string): string {
  const dir = mkdtempSync(join(tmpdir(), "migrations-"));
  cpSync(migrationsFolder, dir, { recursive: true });
  const journalPath = join(dir, "meta", "_journal.json");
  const journal = JSON.parse(readFileSync(journalPath, "utf8")) as { entries: { tag: string }[] };
  const at = journal.entries.findIndex((e) => e.tag === tag);
  if (at < 0) throw new Error(`no migration ${tag}`);
  journal.entries = journal.entries.slice(0, at + 1);
  writeFileSync(journalPath, JSON.stringify(journal));
  return dir;
}

/** A fresh database driven by `run(migrate, query)`: PGlite in memory, or a scratch PostgreSQL database. */
async function withFreshDatabase(run: (migrate: (folder: string) => Promise<void>, query: (text: string) => Promise<Record<string, unknown>[]>) => Promise<void>) {
  const url = process.env.DATABASE_URL;
  if (!url) {
    const { PGlite } = await import("@electric-sql/pglite");
    const { pg_trgm } = await import("@electric-sql/pglite/contrib/pg_trgm");
    const { drizzle } = await import("drizzle-orm/pglite");
    const { migrate } = await import("drizzle-orm/pglite/migrator");
    const client = await PGlite.create({ extensions: { pg_trgm } });
    try {
      await run(
        (folder) => migrate(drizzle(client), { migrationsFolder: folder }),
        async (text) => (await client.query<Record<string, unknown>>(text)).rows,
      );
    } finally {
      await client.close();
    }
    return;
  }
  const { default: postgres } = await import("postgres");
  const { drizzle } = await import("drizzle-orm/postgres-js");
  const { migrate } = await import("drizzle-orm/postgres-js/migrator");
  const name = `t_${process.pid}_${randomBytes(4).toString("hex")}`;
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const target = new URL(url);
  target.pathname = `/${name}`;
  const client = postgres(target.toString(), { max: 1, onnotice: () => {} });
  try {
    await run(
      (folder) => migrate(drizzle(client), { migrationsFolder: folder }),
      async (text) => [...(await client.unsafe<Record<string, unknown>[]>(text))],
    );
  } finally {
    await client.end();
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  }
}

describe("migration advisory_aliases", () => {
  it("fills the table for the advisories stored before it", { timeout: 120_000 }, async () => {
    const before = migrationsUpTo("0029_oci_distribution");
    try {
      await withFreshDatabase(async (migrate, query) => {
        await migrate(before);
        await query(`insert into advisory_documents (package, schema_version, source, content_hash) values ('p', '2', 'p.yaml', 'h')`);
        await query(`insert into advisories (uid, package, advisory_id, aliases) values
          ('p:CGA-1', 'p', 'CGA-1', array['CVE-1', 'GHSA-1', 'CVE-1']), ('p:CGA-2', 'p', 'CGA-2', array['CVE-1']), ('p:CGA-3', 'p', 'CGA-3', '{}')`);
        await migrate(migrationsFolder);
        expect(await query(`select alias, advisory_uid from advisory_aliases order by 1, 2`)).toEqual([
          { alias: "CVE-1", advisory_uid: "p:CGA-1" },
          { alias: "CVE-1", advisory_uid: "p:CGA-2" },
          { alias: "GHSA-1", advisory_uid: "p:CGA-1" },
        ]);
        // And the triggers keep it from then on.
        await query(`update advisories set aliases = array['CVE-2'] where uid = 'p:CGA-1'`);
        await query(`delete from advisories where uid = 'p:CGA-2'`);
        expect(await query(`select alias, advisory_uid from advisory_aliases order by 1, 2`)).toEqual([{ alias: "CVE-2", advisory_uid: "p:CGA-1" }]);
      });
    } finally {
      rmSync(before, { recursive: true, force: true });
    }
  });
});
