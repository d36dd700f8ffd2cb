// Importing OSV records: the test writes a directory of OSV JSON files (valid ones, nested, withdrawn, and
// broken in each way the validator must name: malformed JSON, no id, a bad timestamp, an unknown reference
// type, a bad alias, a bad severity) and zip archives (valid entries beside a non-JSON one, an entry over the
// size limit, an entry lying about its size, an archive declaring more than the total limit, a file that is
// not a zip), imports them, re-imports (nothing changes), changes one record (only its row changes), and runs
// the command end to end.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { asc, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { importOsv } from "../../src/advisory/osv-import.js";
import { osvRecords } from "../../src/db/schema/index.js";
import type { ZipLimits } from "../../src/kernel/zip.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";
import { zip } from "../support/zip.js";
import { runCli } from "../support/cli.js";

function write(path: string, content: string | Buffer) {
  mkdirSync(join(path, ".."), { recursive: true });
  writeFileSync(path, content);
}

const record = (id: string, extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    schema_version: "1.6.0",
    id,
    modified: "2024-09-12T19:03:40Z",
    published: "2024-09-10T07:05:03Z",
    aliases: [`CVE-${id.slice(-4)}`],
    summary: `summary of ${id}`,
    details: `details of ${id}`,
    severity: [{ type: "CVSS_V3", score: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H" }],
    affected: [{ package: { ecosystem: "Go", name: "example.com/x" }, ranges: [{ type: "SEMVER", events: [{ introduced: "0" }, { fixed: "1.2.3" }] }] }],
    references: [
      { type: "ADVISORY", url: `https://example.com/${id}` },
      { type: "GIT", url: "https://github.com/example/x" },
    ],
    ...extra,
  });

const limits: ZipLimits = { maxEntryBytes: 64 * 1024, maxTotalBytes: 1024 * 1024, maxEntries: 100 };

let db: TestDatabase;
let root: string;

beforeAll(async () => {
  db = await openTestDatabase();
  root = mkdtempSync(join(tmpdir(), "osv-"));
  const dir = join(root, "dir");
  write(join(dir, "GHSA-aaaa-0001.json"), record("GHSA-aaaa-0001", { severity: [{ type: "CVSS_V3", score: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H" }, { type: "Ubuntu", score: "medium" }] }));
  write(join(dir, "nested", "deeper", "PYSEC-2024-0002.json"), record("PYSEC-2024-0002"));
  write(join(dir, "GO-2024-0003.json"), record("GO-2024-0003", { withdrawn: "2024-10-01T00:00:00Z" }));
  write(join(dir, "README.md"), "not a record, not read");
  write(join(dir, "bad", "malformed.json"), '{"id": "X-1", ');
  write(join(dir, "bad", "no-id.json"), JSON.stringify({ modified: "2024-01-01T00:00:00Z" }));
  write(join(dir, "bad", "bad-modified.json"), record("X-3", { modified: "yesterday" }));
  write(
    join(dir, "bad", "GHSA-x.json"),
    record("GHSA-x", {
      references: [
        { type: "WEB", url: "https://a.example" },
        { type: "FIX", url: "https://b.example" },
        { type: "FOO", url: "https://c.example" },
      ],
    }),
  );
  write(join(dir, "bad", "bad-alias.json"), record("X-5", { aliases: ["CVE-1", 7] }));
  write(join(dir, "bad", "bad-severity.json"), record("X-6", { severity: [{ type: "CVSS_V9", score: "x" }] }));
  write(join(dir, "bad", "bad-url.json"), record("X-7", { references: [{ type: "WEB", url: "not a url" }] }));
  write(join(dir, "bad", "array.json"), "[]");
  write(join(dir, "bad", "duplicate.json"), record("GHSA-aaaa-0001", { summary: "another file, same id" }));

  write(
    join(root, "osv.zip"),
    zip({
      "ZIP-0010.json": record("ZIP-0010"),
      "all/ZIP-0011.json": record("ZIP-0011"),
      "notes.txt": "a note",
      "huge.json": JSON.stringify({ id: "HUGE-1", modified: "2024-01-01T00:00:00Z", details: " ".repeat(100 * 1024) }),
      "liar.json": { content: record("LIAR-1", { details: "x".repeat(4000) }), declaredSize: 100 },
      "broken.json": "{not json",
    }),
  );
  write(join(root, "bomb.zip"), zip(Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`B-${i}.json`, record(`B-${i}`, { details: "a".repeat(60 * 1024) })]))));
  write(join(root, "not-a-zip.zip"), "hello");
});

afterAll(async () => {
  await db?.dispose();
  if (root) rmSync(root, { recursive: true, force: true });
});

const all = () => db.db.select().from(osvRecords).orderBy(asc(osvRecords.id));

describe("import-osv", () => {
  it("imports directories and zips, skipping each bad file with the field that is wrong", async () => {
    const s = await importOsv(db.db, [join(root, "dir"), join(root, "osv.zip"), join(root, "bomb.zip"), join(root, "not-a-zip.zip")], { zipLimits: limits });
    expect(s.records).toEqual({ added: 5, changed: 0, unchanged: 0 });
    const reasons = Object.fromEntries(s.skipped.map((x) => [x.path.slice(root.length + 1), x.reason]));
    expect(reasons).toEqual({
      "dir/bad/GHSA-x.json": expect.stringMatching(/^references\[2\]\.type: unknown type "FOO"/),
      "dir/bad/array.json": expect.stringMatching(/is a JSON object, not an array/),
      "dir/bad/bad-alias.json": expect.stringMatching(/^aliases\[1\]: must be a string/),
      "dir/bad/bad-modified.json": expect.stringMatching(/^modified: must be an RFC 3339 timestamp/),
      "dir/bad/bad-severity.json": expect.stringMatching(/^severity\[0\]\.type: unknown type "CVSS_V9"/),
      "dir/bad/bad-url.json": expect.stringMatching(/^references\[0\]\.url: must be an absolute URL/),
      "dir/bad/duplicate.json": expect.stringMatching(/duplicate id "GHSA-aaaa-0001": already imported from .*GHSA-aaaa-0001\.json/),
      "dir/bad/malformed.json": expect.stringMatching(/^malformed JSON/),
      "dir/bad/no-id.json": "id: is required",
      "osv.zip!/huge.json": expect.stringMatching(/exceeds the limit of 64 KiB|exceeds the limit of 65536 bytes per entry/),
      "osv.zip!/liar.json": expect.stringMatching(/^unreadable entry: too many bytes in the stream/),
      "osv.zip!/broken.json": expect.stringMatching(/^malformed JSON/),
      "bomb.zip": expect.stringMatching(/declares more than 1\.0 MiB of uncompressed data/),
      "not-a-zip.zip": expect.stringMatching(/^not a zip file/),
    });
    expect(s.ignored).toEqual([{ path: `${join(root, "osv.zip")}!/notes.txt`, reason: "not a .json file" }]);

    const rows = await all();
    expect(rows.map((r) => r.id)).toEqual(["GHSA-aaaa-0001", "GO-2024-0003", "PYSEC-2024-0002", "ZIP-0010", "ZIP-0011"]);
    const ghsa = rows[0]!;
    expect(ghsa).toMatchObject({
      summary: "summary of GHSA-aaaa-0001",
      details: "details of GHSA-aaaa-0001",
      aliases: ["CVE-0001"],
      references: [
        { type: "ADVISORY", url: "https://example.com/GHSA-aaaa-0001" },
        { type: "GIT", url: "https://github.com/example/x" },
      ],
      severities: [
        { type: "CVSS_V3", score: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H" },
        { type: "Ubuntu", score: "medium" },
      ],
      source: join(root, "dir", "GHSA-aaaa-0001.json"),
      withdrawnTime: null,
    });
    expect(ghsa.modifiedTime?.toISOString()).toBe("2024-09-12T19:03:40.000Z");
    expect(ghsa.publishedTime?.toISOString()).toBe("2024-09-10T07:05:03.000Z");
    expect(ghsa.contentHash).toMatch(/^[0-9a-f]{64}$/);
    expect(rows[1]?.withdrawnTime?.toISOString()).toBe("2024-10-01T00:00:00.000Z");
    expect(rows[3]?.source).toBe(`${join(root, "osv.zip")}!/ZIP-0010.json`);
  });

  it("changes nothing on a second run", async () => {
    const before = await all();
    const s = await importOsv(db.db, [join(root, "dir"), join(root, "osv.zip")], { zipLimits: limits });
    expect(s.records).toEqual({ added: 0, changed: 0, unchanged: 5 });
    expect(await all()).toEqual(before);
  });

  it("rewrites only the row of a changed record", async () => {
    const before = new Map((await all()).map((r) => [r.id, r]));
    write(join(root, "dir", "nested", "deeper", "PYSEC-2024-0002.json"), record("PYSEC-2024-0002", { summary: "revised", modified: "2024-12-01T00:00:00Z" }));
    const s = await importOsv(db.db, [join(root, "dir"), join(root, "osv.zip")], { zipLimits: limits });
    expect(s.records).toEqual({ added: 0, changed: 1, unchanged: 4 });
    for (const r of await all()) {
      if (r.id !== "PYSEC-2024-0002") expect(r).toEqual(before.get(r.id));
      else {
        expect(r.summary).toBe("revised");
        expect(r.modifiedTime?.toISOString()).toBe("2024-12-01T00:00:00.000Z");
        expect(r.contentHash).not.toBe(before.get(r.id)?.contentHash);
        expect(r.createTime).toEqual(before.get(r.id)?.createTime);
      }
    }
  });

  it("a fixed file is added on the next run, and a bad file never writes its record", async () => {
    write(join(root, "dir", "bad", "GHSA-x.json"), record("GHSA-x"));
    const s = await importOsv(db.db, [join(root, "dir")], { zipLimits: limits });
    expect(s.records.added).toBe(1);
    expect(s.skipped.some((x) => x.path.endsWith("GHSA-x.json"))).toBe(false);
    const [row] = await db.db.select().from(osvRecords).where(eq(osvRecords.id, "X-3"));
    expect(row).toBeUndefined();
  });

  it("a path that does not exist, or is not a directory, zip or JSON file, is skipped", async () => {
    const s = await importOsv(db.db, [join(root, "missing"), join(root, "dir", "README.md")]);
    expect(s.skipped.map((x) => x.reason)).toEqual([expect.stringMatching(/ENOENT/), "not a directory, a .zip archive or a .json file"]);
  });
});

// The command, end to end on an embedded database in a temporary directory: a usage error exits 2; an import
// with a rejected file exits 1 with the JSON summary on stdout and the skipped files on stderr; an import of
// good files only exits 0 and a second one changes nothing.
describe("npm run import-osv", () => {
  const run = (args: string[], env: Record<string, string>) => runCli("import-osv.ts", args, env);

  it("imports, reports, and is idempotent", { timeout: 120_000 }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "osv-cli-data-"));
    try {
      const env = { DATA_DIR: dataDir };
      expect((await run([], env)).code).toBe(2);
      expect((await run(["--nope"], env)).code).toBe(2);
      const first = await run([join(root, "osv.zip")], env);
      expect(first.code, first.stderr).toBe(1);
      const summary = JSON.parse(first.stdout) as { records: Record<string, number>; skipped: { path: string }[]; ignored: unknown[] };
      expect(summary.records).toEqual({ added: 3, changed: 0, unchanged: 0 }); // huge.json is within the default limits
      expect(summary.skipped.map((x) => x.path.slice(root.length + 1)).sort()).toEqual(["osv.zip!/broken.json", "osv.zip!/liar.json"]);
      expect(summary.ignored).toHaveLength(1);
      expect(first.stderr).toMatch(/skipped .*broken\.json: malformed JSON/);
      const good = join(root, "dir", "nested");
      expect((await run([good], env)).code).toBe(0);
      const again = await run([good], env);
      expect(again.code).toBe(0);
      expect((JSON.parse(again.stdout) as { records: unknown }).records).toEqual({ added: 0, changed: 0, unchanged: 1 });
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
