// The keyset SQL a plan renders to (row comparison for one direction over NOT NULL columns, the expanded
// NULL-aware form otherwise), and how a fetched page is completed (trim, next token, when to count).
import { sql, type SQL } from "drizzle-orm";
import { integer, PgDialect, pgTable, text, timestamp } from "drizzle-orm/pg-core";
import { describe, expect, it, vi } from "vitest";
import {
  completePage,
  decodePageToken,
  defineListSpec,
  keysetOrderBy,
  keysetPredicate,
  pageFields,
  parseListRequest,
  sortKeySelection,
  type ListRequestFields,
} from "../../src/kernel/list/index.js";

const items = pgTable("items", {
  uid: text("uid").primaryKey(),
  name: text("name").notNull(),
  rank: integer("rank"),
  createTime: timestamp("create_time", { withTimezone: true, precision: 6 }).notNull(),
});
const columns = { uid: items.uid, name: items.name, rank: items.rank, create_time: items.createTime, lower_name: sql`lower(${items.name})` };
const spec = defineListSpec({ name: "test.ListItems", orderBy: ["name", "rank", "create_time", "lower_name"] });
const secret = new Uint8Array(32).fill(1);
const dialect = new PgDialect();
const render = (s: SQL | undefined) => (s ? dialect.sqlToQuery(s) : undefined);

function planWithCursor(orderBy: string, cursor: (string | null)[], req: ListRequestFields = {}) {
  const first = parseListRequest({ orderBy }, spec, { secret });
  const token = first.tokens.mint(cursor, 10n);
  return parseListRequest({ orderBy, pageToken: token, ...req }, spec, { secret });
}

describe("keysetPredicate", () => {
  it("first page: none", () => {
    expect(keysetPredicate(parseListRequest({}, spec, { secret }), columns)).toBeUndefined();
  });

  const T = "2025-01-01 00:00:00.000001+00";
  it.each([
    ["uid", ["u"], `("items"."uid") > ($1)`, ["u"]],
    ["uid desc", ["u"], `("items"."uid") < ($1)`, ["u"]],
    ["create_time", [T, "u"], `("items"."create_time", "items"."uid") > ($1, $2)`, [T, "u"]],
    ["create_time desc", [T, "u"], `("items"."create_time", "items"."uid") < ($1, $2)`, [T, "u"]],
    ["name, create_time", ["n", T, "u"], `("items"."name", "items"."create_time", "items"."uid") > ($1, $2, $3)`, ["n", T, "u"]],
    [
      "name, create_time desc",
      ["n", T, "u"],
      `("items"."name" > $1 or ("items"."name" = $2 and "items"."create_time" < $3) or ("items"."name" = $4 and "items"."create_time" = $5 and "items"."uid" < $6))`,
      ["n", "n", T, "n", T, "u"],
    ],
    [
      "rank",
      ["5", "u"],
      `(("items"."rank" > $1 OR "items"."rank" IS NULL) or ("items"."rank" = $2 and "items"."uid" > $3))`,
      ["5", "5", "u"],
    ],
    ["rank", [null, "u"], `("items"."rank" IS NULL and "items"."uid" > $1)`, ["u"]],
    [
      "rank desc",
      ["5", "u"],
      `("items"."rank" < $1 or ("items"."rank" = $2 and "items"."uid" < $3))`,
      ["5", "5", "u"],
    ],
    [
      "rank desc",
      [null, "u"],
      `("items"."rank" IS NOT NULL or ("items"."rank" IS NULL and "items"."uid" < $1))`,
      ["u"],
    ],
    [
      "lower_name",
      ["n", "u"],
      `((lower("items"."name") > $1 OR lower("items"."name") IS NULL) or (lower("items"."name") = $2 and "items"."uid" > $3))`,
      ["n", "n", "u"],
    ],
  ] as [string, (string | null)[], string, unknown[]][])("%s after %j", (orderBy, cursor, text, params) => {
    const q = render(keysetPredicate(planWithCursor(orderBy, cursor), columns));
    expect(q?.sql).toBe(text);
    expect(q?.params).toEqual(params);
  });

  it("order and key selection follow the plan", () => {
    const plan = parseListRequest({ orderBy: "name, create_time desc" }, spec, { secret });
    expect(keysetOrderBy(plan, columns).map((s) => render(s)?.sql)).toEqual([`"items"."name" asc`, `"items"."create_time" desc`, `"items"."uid" desc`]);
    expect(Object.fromEntries(Object.entries(sortKeySelection(plan, columns)).map(([k, s]) => [k, [render(s.sql)?.sql, s.fieldAlias]]))).toEqual({
      k0: [`("items"."name")::text`, "list_k0"],
      k1: [`("items"."create_time")::text`, "list_k1"],
      k2: [`("items"."uid")::text`, "list_k2"],
    });
  });

  it("a missing column is a programming error", () => {
    const plan = parseListRequest({ orderBy: "name" }, spec, { secret });
    expect(() => keysetOrderBy(plan, { uid: items.uid })).toThrow(/no column for order key name/);
    expect(() => keysetOrderBy(plan, { name: items.name })).toThrow(/must include uid/);
  });
});

describe("completePage", () => {
  const rows = (n: number) => Array.from({ length: n }, (_, i) => ({ row: { i }, keys: { k0: `k${i}` } }));
  const plan = (req: ListRequestFields) => parseListRequest({ orderBy: "uid", ...req }, spec, { secret });

  it("limit + 1 rows: trims, mints a token at the last row kept, counts once", async () => {
    const count = vi.fn(async () => 500n);
    const page = await completePage(plan({ pageSize: 3 }), rows(4), count);
    expect(page.rows).toEqual([{ i: 0 }, { i: 1 }, { i: 2 }]);
    expect(page.totalCount).toBe(500n);
    expect(count).toHaveBeenCalledTimes(1);
    const payload = decodePageToken(page.nextPageToken, [secret]);
    expect(payload).toMatchObject({ keys: ["k2"], total: 500n });
    expect(pageFields(page)).toEqual({ nextPageToken: page.nextPageToken, totalCount: 500n, skipped: 0 });
  });

  it("a later page carries the total and does not count", async () => {
    const count = vi.fn(async () => 999n);
    const first = await completePage(plan({ pageSize: 3 }), rows(4), async () => 500n);
    const page = await completePage(plan({ pageSize: 3, pageToken: first.nextPageToken }), rows(2), count);
    expect(page).toMatchObject({ totalCount: 500n, nextPageToken: "" });
    expect(count).not.toHaveBeenCalled();
  });

  it.each([
    [{}, 2, 2n],
    [{ skip: 5 }, 2, 7n],
    [{ skip: 0 }, 0, 0n],
  ])("a first page that is also the last (%j, %s rows) needs no count", async (req, n, total) => {
    const count = vi.fn(async () => 123n);
    const page = await completePage(plan({ pageSize: 3, ...req }), rows(n), count);
    expect(page.totalCount).toBe(total);
    expect(page.nextPageToken).toBe("");
    expect(count).not.toHaveBeenCalled();
  });

  it("skipping past the end counts (the total is not knowable from the page)", async () => {
    const count = vi.fn(async () => 4);
    const page = await completePage(plan({ skip: 10 }), [], count);
    expect(page).toMatchObject({ rows: [], totalCount: 4n, skipped: 10, nextPageToken: "" });
    expect(count).toHaveBeenCalledTimes(1);
  });
});
