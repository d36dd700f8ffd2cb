// The compiled row mapper of hot prepared statements (kernel/prepared-rows.ts) gives exactly the rows
// Drizzle's own mapping gives, for every column kind the stores select (text, boolean, arrays, smallint,
// timestamps, jsonb, nulls) and for a page's nested selection (row, keys, total).
import { getTableColumns, sql } from "drizzle-orm";
import * as drizzleUtils from "drizzle-orm/utils";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { advisoryEvents, groups, tags } from "../../src/db/schema/index.js";
import { compileRowMapper, timestamptzDate } from "../../src/kernel/prepared-rows.js";

// Drizzle's own ordering of a selection and its row mapping (internal: not in its type declarations).
type FieldEntry = { path: string[]; field: unknown };
const { orderSelectedFields, mapResultRow } = drizzleUtils as unknown as {
  orderSelectedFields(selection: Record<string, unknown>): FieldEntry[];
  mapResultRow(fields: FieldEntry[], row: unknown[], joins: undefined): Record<string, unknown>;
};

function both(selection: Record<string, unknown>, rows: unknown[][]) {
  const fields = orderSelectedFields(selection);
  const drizzle = rows.map((r) => mapResultRow(fields, r, undefined));
  return { drizzle, compiled: compileRowMapper(fields)(rows) };
}

describe("compiled row mapper", () => {
  it("maps a page of tags (nested row, keyset values, total) as Drizzle does", () => {
    const selection = { row: getTableColumns(tags), keys: { k0: sql<string>`(uid)::text`.as("list_k0") }, total: sql<string>`(1)::text`.as("list_total") };
    const rows = [
      ["r/1", "r", "latest", "sha256:" + "a".repeat(64), false, ["b1", "b2"], 1, "2024-01-02 03:04:05.678901+00", "2024-01-02 03:04:05+00", "r/1", "2"],
      ["r/2", "r", "v1", "sha256:" + "b".repeat(64), true, [], 0, "2023-12-31 23:59:59.999+00", "2024-02-29 12:00:00+00", "r/2", null],
    ];
    const { drizzle, compiled } = both(selection, rows);
    expect(compiled).toEqual(drizzle);
    expect((compiled[0]!.row as { createTime: Date }).createTime).toBeInstanceOf(Date);
  });

  it("maps flat selections with nulls and jsonb as Drizzle does", () => {
    const rows = [
      ["e/0", "a", 0, "2024-05-01 00:00:00+00", 3, "", "", 2, { type: "fixed", "fixed-version": "1.2" }],
      ["e/1", "a", 1, "2024-05-02 00:00:00+00", 1, "me", "you", 1, {}],
    ];
    const events = both(getTableColumns(advisoryEvents), rows);
    expect(events.compiled).toEqual(events.drizzle);
    const groupColumns = getTableColumns(groups);
    const groupRow = Object.values(groupColumns).map((c) => (c.notNull ? (c.columnType === "PgTimestamp" ? "2024-01-01 00:00:00+00" : c.dataType === "boolean" ? true : c.dataType === "number" ? 1 : (c.dataType as string) === "array" ? [] : "x") : null));
    const g = both(groupColumns, [groupRow]);
    expect(g.compiled).toEqual(g.drizzle);
  });
  it("generates its source from any selection names (quotes, dashes, reserved words), with nulls", () => {
    const selection = { 'we"ird': tags.name, "a-b": { "c\\d": tags.kind, return: tags.bundles }, total: sql<string>`(1)::text`.as("list_total") };
    const { drizzle, compiled } = both(selection, [["n", 2, ["x"], "3"], [null, null, null, null]]);
    expect(compiled).toEqual(drizzle);
    expect(Object.keys(compiled[0]!)).toEqual(['we"ird', "a-b", "total"]);
  });
});

describe("timestamptz text to Date", () => {
  const drizzleDecode = (text: string) => tags.createTime.mapFromDriverValue(text) as Date;
  const pad = (n: number, w: number) => String(n).padStart(w, "0");

  it("gives Drizzle's Date for PostgreSQL's output format: any fraction length, offsets with and without minutes", () => {
    fc.assert(
      fc.property(
        fc.date({ min: new Date("1000-01-01T00:00:00Z"), max: new Date("9999-12-31T23:59:59.999Z"), noInvalidDate: true }),
        fc.integer({ min: 0, max: 999 }),
        fc.integer({ min: 0, max: 6 }),
        fc.integer({ min: -15 * 60, max: 15 * 60 }),
        fc.boolean(),
        (date, micros, fractionDigits, offsetMinutes, withMinutes) => {
          const offset = withMinutes ? offsetMinutes : Math.trunc(offsetMinutes / 60) * 60;
          const local = new Date(date.getTime() + offset * 60_000);
          if (local.getUTCFullYear() < 1000 || local.getUTCFullYear() > 9999) return;
          const fraction = pad(local.getUTCMilliseconds() * 1000 + micros, 6).slice(0, fractionDigits);
          const abs = Math.abs(offset);
          const text =
            `${pad(local.getUTCFullYear(), 4)}-${pad(local.getUTCMonth() + 1, 2)}-${pad(local.getUTCDate(), 2)} ` +
            `${pad(local.getUTCHours(), 2)}:${pad(local.getUTCMinutes(), 2)}:${pad(local.getUTCSeconds(), 2)}` +
            (fraction ? `.${fraction}` : "") +
            `${offset < 0 ? "-" : "+"}${pad(Math.trunc(abs / 60), 2)}` +
            (withMinutes || abs % 60 !== 0 ? `:${pad(abs % 60, 2)}` : "");
          expect(timestamptzDate(text)?.getTime(), text).toBe(drizzleDecode(text).getTime());
        },
      ),
      { numRuns: 3000 },
    );
  });

  it("leaves every other text to Drizzle's decoder", () => {
    for (const text of ["0099-01-01 00:00:00+00", "2024-01-01 00:00:00+00 BC", "infinity", "-infinity", "2024-01-01 00:00:00+00:00:30", "12024-01-01 00:00:00+00", "2024-01-01 00:00:00.+00", "2024-01-01T00:00:00Z", "2024-13-01 00:00:00+00", "2024-01-01 0a:00:00+00"]) {
      expect(timestamptzDate(text), text).toBeUndefined();
    }
  });

  it("the compiled mapper decodes timestamptz through it, and gives Drizzle's values for the texts it leaves", () => {
    const selection = { createTime: tags.createTime };
    const r = both(selection, [["2024-02-29 23:59:59.999999+00"], ["0099-01-01 00:00:00+00"], ["infinity"], ["2024-01-01 00:00:00+05:30"]]);
    expect(r.compiled).toEqual(r.drizzle);
  });
});
