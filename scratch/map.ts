import { getTableColumns, sql, is, Column, SQL } from "drizzle-orm";
import { orderSelectedFields, mapResultRow } from "drizzle-orm/utils";
import { tags } from "../src/db/schema/index.js";
const fields = orderSelectedFields({ row: getTableColumns(tags), keys: { k0: sql<string>`x`.as("list_k0") }, total: sql<string>`y`.as("list_total") } as any) as any[];
console.log(fields.length, fields.map((f: any) => f.path.join(".")).join(","));
const row = fields.map((f: any) => (f.path[1] === "createTime" || f.path[1] === "updateTime" ? "2024-01-01 00:00:00.123456+00" : f.path[0] === "row" && f.field.dataType === "array" ? ["a"] : "v"));
const rows = Array.from({ length: 51 }, () => [...row]);
const decoders = fields.map((f: any) => (is(f.field, Column) ? f.field : is(f.field, SQL) ? f.field.decoder : f.field.sql.decoder));
const compiled = (rs: unknown[][]) => rs.map((r) => { const out: any = {}; for (let i = 0; i < fields.length; i++) { const p = fields[i].path; const v = r[i]; const value = v === null ? null : decoders[i].mapFromDriverValue(v); if (p.length === 1) out[p[0]] = value; else (out[p[0]] ??= {})[p[1]] = value; } return out; });
for (const [name, fn] of [["drizzle", (rs: any[]) => rs.map((r) => mapResultRow(fields, r, undefined))], ["compiled", compiled]] as const) {
  for (let i = 0; i < 2000; i++) fn(rows as any);
  const t = process.hrtime.bigint(); for (let i = 0; i < 5000; i++) fn(rows as any); console.log(name, Number(process.hrtime.bigint() - t) / 5000 / 1e6, "ms/page");
}
