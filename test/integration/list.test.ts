// listPage against real databases: an in-memory PGlite always, and PostgreSQL too when DATABASE_URL is set
// (a scratch database created here and dropped afterwards). ~500 rows with many duplicate sort values, all
// create_times inside one millisecond (so only microsecond-exact cursors can page through them), NULLs in
// a sortable column, and a uid hierarchy for the UIDP filter.
import { randomBytes } from "node:crypto";
import { Code, ConnectError } from "@connectrpc/connect";
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { and, eq, sql, type SQL } from "drizzle-orm";
import { integer, pgTable, text, timestamp } from "drizzle-orm/pg-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BadRequestSchema } from "../../gen/google/rpc/error_details_pb.js";
import { UIDPFilterSchema } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import {
  PAGE_TOKEN_LIFETIME_MS,
  createPreparedList,
  defineListSpec,
  listPage,
  parseListRequest,
  type AnyPgDatabase,
  type ListRequestFields,
} from "../../src/kernel/list/index.js";
import { scopePredicate, scopePredicateOver, scopeValues } from "../../src/kernel/auth/scope-sql.js";
import { matchesUidp, uidpCanonical, uidpPredicate } from "../../src/kernel/uidp.js";

const items = pgTable("list_items", {
  uid: text("uid").primaryKey(),
  parent: text("parent"),
  name: text("name").notNull(),
  rank: integer("rank"),
  createTime: timestamp("create_time", { withTimezone: true, precision: 6 }).notNull(),
});
const orderColumns = { uid: items.uid, name: items.name, rank: items.rank, create_time: items.createTime };
const spec = defineListSpec({ name: "test.ListItems", orderBy: ["name", "rank", "create_time"], defaultOrder: "create_time" });
const secret = new Uint8Array(randomBytes(32));

const DDL = `
  create table list_items (
    uid text collate "C" primary key,
    parent text collate "C",
    name text collate "C" not null,
    rank integer,
    create_time timestamptz(6) not null
  );
  create index list_items_create_time on list_items (create_time, uid);
  create index list_items_name on list_items (name, uid);
  create index list_items_parent on list_items (parent, uid)`;

// --- data -------------------------------------------------------------------------------------------------
interface Item {
  uid: string;
  parent: string | null;
  name: string;
  rank: number | null;
  micros: number; // microseconds after BASE; all < 1000, so every create_time is in the same millisecond
}
const BASE = "2024-05-01 12:00:00";
const R1 = "1".repeat(40);
const R2 = "2".repeat(40);
const groups = [`${R1}/00000000000000a1`, `${R1}/00000000000000a2`, `${R1}/ab_c`, `${R1}/abxc`, `${R2}/00000000000000b1`, `${R1}/00000000000000a1/00000000000000c1`];
const data: Item[] = [];
for (const [i, uid] of [R1, R2, ...groups].entries()) {
  const parent = uid.includes("/") ? uid.slice(0, uid.lastIndexOf("/")) : null;
  data.push({ uid, parent, name: `g${i % 3}`, rank: i % 2 ? null : i, micros: i % 37 });
}
for (let i = 0; i < 500; i++) {
  const parent = groups[i % groups.length]!;
  data.push({ uid: `${parent}/item-${String(i).padStart(3, "0")}`, parent, name: `n${i % 10}`, rank: i % 7 === 0 ? null : i % 5, micros: (i * 13) % 37 });
}

const cmpText = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
const cmpNullable = (a: number | null, b: number | null) => (a === b ? 0 : a === null ? 1 : b === null ? -1 : a - b);
const keyCmp: Record<string, (a: Item, b: Item) => number> = {
  uid: (a, b) => cmpText(a.uid, b.uid),
  name: (a, b) => cmpText(a.name, b.name),
  rank: (a, b) => cmpNullable(a.rank, b.rank),
  create_time: (a, b) => a.micros - b.micros,
};
/** The expected order, computed in JavaScript from the plan's terms. */
function expectedOrder(orderBy: string, rows: Item[] = data): string[] {
  const { order } = parseListRequest({ orderBy }, spec, { secret });
  const sorted = [...rows].sort((a, b) => {
    for (const t of order) {
      const c = keyCmp[t.key]!(a, b);
      if (c !== 0) return t.desc ? -c : c;
    }
    return 0;
  });
  return sorted.map((r) => r.uid);
}

function violationsOf(e: unknown): { field: string; description: string }[] {
  const err = ConnectError.from(e);
  expect(err.code).toBe(Code.InvalidArgument);
  return err.findDetails(BadRequestSchema).flatMap((b) => b.fieldViolations.map((v) => ({ field: v.field, description: v.description })));
}

// --- backends ---------------------------------------------------------------------------------------------
/** Every statement the kernel runs, in order (Drizzle's query logger), to see where counts happen. */
const statements: string[] = [];
const logger = { logQuery: (query: string) => void statements.push(query) };
/** Runs `f` and returns the statements it ran: their number, and how many of them count rows. */
async function traced<T>(f: () => Promise<T>): Promise<{ result: T; statements: number; counting: number }> {
  const from = statements.length;
  const result = await f();
  const ran = statements.slice(from);
  return { result, statements: ran.length, counting: ran.filter((q) => q.includes("count(*)")).length };
}

interface Backend {
  name: string;
  open(): Promise<{ db: AnyPgDatabase; close(): Promise<void> }>;
}

const backends: Backend[] = [
  {
    name: "pglite",
    async open() {
      const { PGlite } = await import("@electric-sql/pglite");
      const { drizzle } = await import("drizzle-orm/pglite");
      const client = new PGlite();
      return { db: drizzle(client, { logger }), close: () => client.close() };
    },
  },
];
const databaseUrl = process.env.DATABASE_URL;
if (databaseUrl) {
  backends.push({
    name: "postgres",
    async open() {
      const { default: postgres } = await import("postgres");
      const { drizzle } = await import("drizzle-orm/postgres-js");
      const name = `list_test_${process.pid}_${randomBytes(4).toString("hex")}`;
      const admin = postgres(databaseUrl, { max: 1, onnotice: () => {} });
      await admin.unsafe(`create database ${name}`);
      const target = new URL(databaseUrl);
      target.pathname = `/${name}`;
      const client = postgres(target.toString(), { max: 4, onnotice: () => {} });
      return {
        db: drizzle(client, { logger }),
        async close() {
          await client.end({ timeout: 5 });
          await admin.unsafe(`drop database if exists ${name} with (force)`);
          await admin.end();
        },
      };
    },
  });
}

describe.each(backends)("listPage on $name", (backend) => {
  let db: AnyPgDatabase;
  let close: () => Promise<void>;

  beforeAll(async () => {
    ({ db, close } = await backend.open());
    for (const statement of DDL.split(";")) await db.execute(sql.raw(statement));
    const values = data.map((r) => sql`(${r.uid}, ${r.parent}, ${r.name}, ${r.rank}, ${`${BASE}.${String(r.micros).padStart(6, "0")}+00`})`);
    await db.execute(sql`insert into list_items (uid, parent, name, rank, create_time) values ${sql.join(values, sql`, `)}`);
  });
  afterAll(async () => {
    await close?.();
  });

  interface WalkOptions {
    where?: SQL;
    filters?: unknown;
    sizes?: number[];
  }
  /** Follows next_page_token to the end; returns the uids in order, and on which pages a count ran. */
  async function walk(orderBy: string, pageSize: number, opts: WalkOptions = {}) {
    const uids: string[] = [];
    const countedOnPages: number[] = [];
    const totals = new Set<bigint>();
    let token = "";
    let pageNo = 0;
    do {
      const size = opts.sizes ? opts.sizes[pageNo % opts.sizes.length]! : pageSize;
      const plan = parseListRequest({ orderBy, pageSize: size, pageToken: token }, spec, { secret, filters: opts.filters });
      const { result: page, statements: ran, counting } = await traced(() => listPage(db, { table: items, where: opts.where, orderColumns, plan }));
      expect(ran).toBe(1); // the page and, when needed, its count: one statement
      if (counting > 0) countedOnPages.push(pageNo);
      expect(page.rows.length).toBeLessThanOrEqual(size);
      if (page.nextPageToken) expect(page.rows.length).toBe(size);
      uids.push(...page.rows.map((r) => r.uid));
      totals.add(page.totalCount);
      token = page.nextPageToken;
      pageNo++;
      if (pageNo > 1000) throw new Error("runaway walk");
    } while (token);
    return { uids, countedOnPages, totals: [...totals], pages: pageNo };
  }

  it.each([
    ["create_time", 50],
    ["create_time desc", 37],
    ["created_at", 1],
    ["name", 64],
    ["name desc", 200],
    ["rank", 29],
    ["rank desc", 50],
    ["name, create_time desc", 41],
    ["rank desc, name", 33],
    ["uid desc", 50],
    ["", 45],
  ])("order %j, pages of %s: every row exactly once, in order; counted once, within the first page's statement", async (orderBy, size) => {
    const { uids, countedOnPages, totals, pages } = await walk(orderBy, size);
    expect(uids).toEqual(expectedOrder(orderBy));
    expect(new Set(uids).size).toBe(data.length);
    expect(totals).toEqual([BigInt(data.length)]);
    expect(countedOnPages).toEqual([0]);
    expect(pages).toBe(Math.ceil(data.length / size)); // limit + 1 rows: never an empty trailing page
  });

  it("page_size may change between pages", async () => {
    const { uids } = await walk("name desc, create_time", 0, { sizes: [7, 200, 1, 50] });
    expect(uids).toEqual(expectedOrder("name desc, create_time"));
  });

  it("rows are the table's typed rows (the Date loses the microseconds the cursor keeps)", async () => {
    const page = await listPage(db, { table: items, orderColumns, plan: parseListRequest({ pageSize: 2, orderBy: "uid" }, spec, { secret }) });
    expect(page.rows[0]).toMatchObject({ uid: R1, parent: null, name: "g0" });
    expect(page.rows[0]!.createTime).toBeInstanceOf(Date);
    expect(page.rows[0]!.createTime.toISOString()).toBe("2024-05-01T12:00:00.000Z");
  });

  it("skip without a cursor: an offset from the start, echoed", async () => {
    const expected = expectedOrder("create_time");
    const page = await listPage(db, { table: items, orderColumns, plan: parseListRequest({ orderBy: "create_time", pageSize: 10, skip: 25 }, spec, { secret }) });
    expect(page.rows.map((r) => r.uid)).toEqual(expected.slice(25, 35));
    expect(page).toMatchObject({ skipped: 25, totalCount: BigInt(data.length) });
    // the next page continues right after the rows returned
    const next = await listPage(db, { table: items, orderColumns, plan: parseListRequest({ orderBy: "create_time", pageSize: 10, pageToken: page.nextPageToken }, spec, { secret }) });
    expect(next.rows.map((r) => r.uid)).toEqual(expected.slice(35, 45));
    expect(next.skipped).toBe(0);
  });

  it("skip with a cursor: skips rows after the cursor position", async () => {
    const expected = expectedOrder("name desc");
    const first = await listPage(db, { table: items, orderColumns, plan: parseListRequest({ orderBy: "name desc", pageSize: 20 }, spec, { secret }) });
    const { result: page, counting } = await traced(() =>
      listPage(db, {
        table: items,
        orderColumns,
        plan: parseListRequest({ orderBy: "name desc", pageSize: 20, skip: 5, pageToken: first.nextPageToken }, spec, { secret }),
      }),
    );
    expect(page.rows.map((r) => r.uid)).toEqual(expected.slice(25, 45));
    expect(page).toMatchObject({ skipped: 5, totalCount: BigInt(data.length) });
    expect(counting).toBe(0); // the total comes from the token
  });

  it("skip past the end: no rows, no token, the total still right (counted in a statement of its own)", async () => {
    const { result: page, statements: ran, counting } = await traced(() =>
      listPage(db, { table: items, orderColumns, plan: parseListRequest({ skip: 100_000 }, spec, { secret }) }),
    );
    expect(page).toEqual({ rows: [], nextPageToken: "", totalCount: BigInt(data.length), skipped: 100_000 });
    expect([ran, counting]).toEqual([2, 2]);
  });

  it("a single-page result: the total is the page's own size, in one statement", async () => {
    const where = eq(items.parent, groups[2]!);
    const { result: page, statements: ran } = await traced(() =>
      listPage(db, { table: items, where, orderColumns, plan: parseListRequest({ pageSize: 200 }, spec, { secret }) }),
    );
    expect(page.totalCount).toBe(BigInt(data.filter((r) => r.parent === groups[2]).length));
    expect(page.nextPageToken).toBe("");
    expect(ran).toBe(1);
  });

  it("a store's own total expression (a maintained counter) replaces the count, and is read only when needed", async () => {
    const total = sql`(select 4242::bigint)`;
    const req: ListRequestFields = { orderBy: "name", pageSize: 10 };
    const first = await listPage(db, { table: items, orderColumns, total, plan: parseListRequest(req, spec, { secret }) });
    expect(first.totalCount).toBe(4242n);
    const next = await traced(() => listPage(db, { table: items, orderColumns, total, plan: parseListRequest({ ...req, pageToken: first.nextPageToken }, spec, { secret }) }));
    expect(next.result.totalCount).toBe(4242n);
    expect(statements.at(-1)).not.toContain("4242");
    const past = await listPage(db, { table: items, orderColumns, total, plan: parseListRequest({ ...req, skip: 100_000 }, spec, { secret }) });
    expect(past.totalCount).toBe(4242n);
  });

  const filters: [string, Exclude<MessageInitShape<typeof UIDPFilterSchema>, { $typeName: string }>][] = [
    ["descendants_of a root", { descendantsOf: R1 }],
    ["descendants_of a group whose uid has an underscore (escaped in LIKE)", { descendantsOf: `${R1}/ab_c` }],
    ["children_of a root", { childrenOf: R1 }],
    ["children_of a group", { childrenOf: groups[0]! }],
    ["ancestors_of a nested group", { ancestorsOf: groups[5]! }],
    ["in_root", { inRoot: true }],
    ["ids", { ids: [R2, groups[1]!, `${groups[1]!}/item-001`, "not-there"] }],
    ["descendants_of and children_of", { descendantsOf: R1, childrenOf: groups[0]! }],
  ];
  it.each(filters)("uidp %s: SQL agrees with matchesUidp, with and without a parent column", async (_, init) => {
    const filter = create(UIDPFilterSchema, init);
    const expected = expectedOrder("name", data.filter((r) => matchesUidp(filter, r.uid)));
    expect(expected.length).toBeGreaterThan(0);
    if (init.descendantsOf === `${R1}/ab_c`) expect(expected.every((u) => u.startsWith(`${R1}/ab_c/`))).toBe(true);
    for (const columns of [{ uid: items.uid }, { uid: items.uid, parent: items.parent }]) {
      const where = uidpPredicate(filter, columns);
      const { uids, totals } = await walk("name", 17, { where, filters: { uidp: uidpCanonical(filter) } });
      expect(uids).toEqual(expected);
      expect(totals).toEqual([BigInt(expected.length)]);
    }
  });

  it.each([
    ["name", 64, false],
    ["uid desc", 50, false],
    ["name, create_time desc", 41, true],
    ["create_time", 50, true],
    ["rank desc, name", 33, true],
  ])("prepared pages (createPreparedList), order %j: the same walk; a text column's keyset value is read from the row, not selected again", async (orderBy, size, selectsKeys) => {
    const pages = createPreparedList(db, { name: `walk_${backend.name}`, table: items, orderColumns });
    const uids: string[] = [];
    let token = "";
    do {
      const plan = parseListRequest({ orderBy, pageSize: size, pageToken: token }, spec, { secret });
      const from = statements.length;
      const page = await pages.page(plan, { shape: "all", where: () => undefined, total: () => sql`(select count(*) from list_items)`, values: {} });
      // PGlite's statements go through Drizzle's logger (on postgres.js a hot statement runs named, unlogged).
      for (const q of statements.slice(from)) expect(q.includes('"list_k'), q).toBe(selectsKeys);
      uids.push(...page.rows.map((r) => r.uid));
      token = page.nextPageToken;
    } while (token);
    expect(uids).toEqual(expectedOrder(orderBy));
  });

  it("a filtered walk: filters and scope predicate in where, the total counts only matching rows", async () => {
    const where = and(uidpPredicate(create(UIDPFilterSchema, { descendantsOf: R1 }), { uid: items.uid }), eq(items.name, "n3"));
    const expected = expectedOrder("create_time desc", data.filter((r) => r.uid.startsWith(`${R1}/`) && r.name === "n3"));
    const { uids, totals, countedOnPages } = await walk("create_time desc", 8, { where, filters: { descendantsOf: R1, name: "n3" } });
    expect(uids).toEqual(expected);
    expect(totals).toEqual([BigInt(expected.length)]);
    expect(countedOnPages).toEqual([0]);
  });

  it("the scope predicate (a uid range), over literals or over named values, selects the uids at or beneath a scope", async () => {
    const scopeSets = [[R1], [`${R1}/ab_c`], [`${R1}/00000000000000a1`], [R2, `${R1}/abxc`], [`${R1}/00000000000000a`], [`${R1}/ab%c`], ["1"]];
    for (const scopes of scopeSets) {
      const values = scopeValues(scopes);
      const select = (where: SQL) => db.select({ uid: items.uid }).from(items).where(where).orderBy(items.uid);
      const overLiterals = (await select(scopePredicate(items.uid, scopes))).map((r) => r.uid);
      const overValues = (await select(scopePredicateOver(items.uid, scopes.length, (name) => sql`${values[name]}`))).map((r) => r.uid);
      const expected = data.filter((r) => scopes.some((s) => r.uid === s || r.uid.startsWith(`${s}/`))).map((r) => r.uid).sort(cmpText);
      expect(overLiterals, scopes.join()).toEqual(expected);
      expect(overValues, scopes.join()).toEqual(expected);
    }
  });

  it("changing the filters with a token is INVALID_ARGUMENT on page_token", async () => {
    const req: ListRequestFields = { orderBy: "name", pageSize: 10 };
    const first = await listPage(db, { table: items, orderColumns, plan: parseListRequest(req, spec, { secret, filters: { name: "n1" } }) });
    expect(first.nextPageToken).not.toBe("");
    let error: unknown;
    try {
      parseListRequest({ ...req, pageToken: first.nextPageToken }, spec, { secret, filters: { name: "n2" } });
    } catch (e) {
      error = e;
    }
    expect(violationsOf(error).map((v) => v.field)).toEqual(["page_token"]);
    try {
      parseListRequest({ ...req, orderBy: "name desc", pageToken: first.nextPageToken }, spec, { secret, filters: { name: "n1" } });
      error = undefined;
    } catch (e) {
      error = e;
    }
    expect(violationsOf(error).map((v) => v.field)).toEqual(["page_token"]);
  });

  it("an expired token restarts from the first page, and recounts", async () => {
    let now = Date.UTC(2025, 0, 1);
    const ctx = { secret, now: () => now };
    const req: ListRequestFields = { orderBy: "create_time", pageSize: 30 };
    const { result: first, counting: counted1 } = await traced(() => listPage(db, { table: items, orderColumns, plan: parseListRequest(req, spec, ctx) }));
    expect(counted1).toBe(1);

    now += PAGE_TOKEN_LIFETIME_MS - 1000;
    const { result: second, counting: counted2 } = await traced(() =>
      listPage(db, { table: items, orderColumns, plan: parseListRequest({ ...req, pageToken: first.nextPageToken }, spec, ctx) }),
    );
    expect(second.rows.map((r) => r.uid)).toEqual(expectedOrder("create_time").slice(30, 60));
    expect(counted2).toBe(0);

    now = Date.UTC(2025, 0, 1) + PAGE_TOKEN_LIFETIME_MS + 1000;
    const plan = parseListRequest({ ...req, pageToken: first.nextPageToken }, spec, ctx);
    expect(plan.restarted).toBe(true);
    const { result: restarted, counting: counted3 } = await traced(() => listPage(db, { table: items, orderColumns, plan }));
    expect(restarted.rows.map((r) => r.uid)).toEqual(first.rows.map((r) => r.uid));
    expect(restarted.totalCount).toBe(BigInt(data.length));
    expect(counted3).toBe(1);
  });

  it("rows inserted after the first page show up once, in place; the carried total stays as counted", async () => {
    await db.transaction(async (tx) => {
      const req: ListRequestFields = { orderBy: "create_time", pageSize: 100 };
      const first = await listPage(tx, { table: items, orderColumns, plan: parseListRequest(req, spec, { secret }) });
      const late = `${R2}/late-arrival`;
      // latest timestamp of all: sorts last
      await tx.execute(sql`insert into list_items (uid, parent, name, rank, create_time) values (${late}, ${R2}, 'n0', 1, ${`${BASE}.000999+00`})`);
      const uids = first.rows.map((r) => r.uid);
      let token = first.nextPageToken;
      while (token) {
        const page = await listPage(tx, { table: items, orderColumns, plan: parseListRequest({ ...req, pageToken: token }, spec, { secret }) });
        expect(page.totalCount).toBe(BigInt(data.length));
        uids.push(...page.rows.map((r) => r.uid));
        token = page.nextPageToken;
      }
      expect(uids).toEqual([...expectedOrder("create_time"), late]);
      await tx.execute(sql`delete from list_items where uid = ${late}`);
    });
  });
});
