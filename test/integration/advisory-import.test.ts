// Importing package advisory documents: the test writes `<package>.advisories.yaml` files (valid ones in the
// three schema versions seen, malformed YAML, no package.name, another schema major, a bad timestamp, an
// unknown false-positive type, unknown event types and keys), imports them, re-imports (nothing changes),
// changes one file (only its rows change; a removed advisory is deleted), and runs the command end to end.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { asc, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EventTypeFilter, ReviewState } from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { advisories, advisoryDocuments, advisoryEvents } from "../../src/db/schema/index.js";
import { parseAdvisoryDocument } from "../../src/vulnerabilities/document.js";
import { importAdvisories } from "../../src/vulnerabilities/import.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";
import { runCli } from "../support/cli.js";

function write(path: string, content: string) {
  mkdirSync(join(path, ".."), { recursive: true });
  writeFileSync(path, content);
}

const curl = (fixed = "8.9.1-r0") => `schema-version: 2.0.2
package:
  name: curl
advisories:
  - id: CGA-aaaa-bbbb-cccc
    aliases: [CVE-2024-0001, GHSA-xxxx-yyyy-zzzz]
    events:
      - timestamp: 2024-09-10T07:05:03Z
        type: detection
        data:
          type: scan/v1
          data:
            subpackageName: curl
            componentID: 1234abcd
            componentName: libcurl
            componentVersion: 8.9.0
            componentType: apk
            componentLocation: /usr/lib/libcurl.so.4
            scanner: grype
      - timestamp: 2024-09-12T19:03:40Z
        type: fixed
        data:
          fixed-version: ${fixed}
  - id: CGA-dddd-eeee-ffff
    aliases: [CVE-2024-0002]
    events:
      - timestamp: 2024-10-01T00:00:00Z
        type: detection
        data:
          type: nvdapi
          data:
            cpeSearched: cpe:2.3:a:haxx:curl:*:*:*:*:*:*:*:*
            cpeFound: cpe:2.3:a:haxx:curl:8.9.0:*:*:*:*:*:*:*
      - timestamp: 2024-10-02T00:00:00Z
        type: false-positive-determination
        data:
          type: vulnerable-code-not-in-execution-path
          note: not reachable
`;

const zlib = `schema-version: "2"
package:
  name: zlib
advisories:
  - id: CGA-1111-2222-3333
    aliases: [CVE-2023-45853]
    events:
      - timestamp: 2024-01-01T00:00:00+02:00
        type: detection
        data:
          type: manual
      - timestamp: 2024-01-02T00:00:00Z
        type: pending-upstream-fix
        data:
          note: waiting
        mood: hopeful
      - timestamp: 2024-01-03T00:00:00Z
        type: quantum-entanglement
        data:
          note: from the future
  - id: CGA-4444-5555-6666
`;

const openssl = `schema-version: 2.0.1
package:
  name: openssl
advisories:
  - id: CGA-7777-8888-9999
    aliases: [CVE-2024-0727]
    events:
      - timestamp: 2024-02-01T00:00:00Z
        type: fix-not-planned
        data:
          note: end of life
`;

let db: TestDatabase;
let root = "";
const dir = () => join(root, "advisories");

beforeAll(async () => {
  db = await openTestDatabase();
  root = mkdtempSync(join(tmpdir(), "advisory-import-"));
  write(join(dir(), "curl.advisories.yaml"), curl());
  write(join(dir(), "zlib.advisories.yaml"), zlib);
  write(join(dir(), "openssl.advisories.yaml"), openssl);
  write(join(dir(), "broken.advisories.yaml"), "schema-version: 2\npackage: {name: broken\nadvisories: [");
  write(join(dir(), "nameless.advisories.yaml"), "schema-version: 2\npackage: {}\nadvisories: []\n");
  write(join(dir(), "future.advisories.yaml"), "schema-version: 3.0.0\npackage:\n  name: future\n");
  write(
    join(dir(), "badtime.advisories.yaml"),
    `schema-version: 2\npackage:\n  name: badtime\nadvisories:\n  - id: CGA-a\n    events:\n      - timestamp: 2024-01-01T00:00:00Z\n        type: fixed\n        data: {fixed-version: "1"}\n      - timestamp: yesterday\n        type: fixed\n        data: {fixed-version: "2"}\n`,
  );
  write(
    join(dir(), "badfp.advisories.yaml"),
    `schema-version: 2\npackage:\n  name: badfp\nadvisories:\n  - id: CGA-b\n    events:\n      - timestamp: 2024-01-01T00:00:00Z\n        type: false-positive-determination\n        data: {type: looks-fine-to-me}\n`,
  );
  write(join(dir(), "README.md"), "not an advisory file");
});

afterAll(async () => {
  await db?.dispose();
  if (root) rmSync(root, { recursive: true, force: true });
});

const reasonsOf = (s: { skipped: { path: string; reason: string }[] }) => Object.fromEntries(s.skipped.map((x) => [x.path.slice(dir().length + 1), x.reason]));

describe("parseAdvisoryDocument", () => {
  it("names the field of a bad value by its path", () => {
    expect(() => parseAdvisoryDocument("schema-version: 2\npackage:\n  name: p\nadvisories:\n  - id: A\n  - id: B\n  - id: C\n  - id: D\n    events:\n      - {timestamp: 2024-01-01T00:00:00Z, type: fixed, data: {fixed-version: '1'}}\n      - {timestamp: '2024-13-45', type: fixed}\n")).toThrow(
      /^advisories\[3\]\.events\[1\]\.timestamp: not an RFC 3339 time/,
    );
    expect(() => parseAdvisoryDocument("schema-version: 2\npackage:\n  name: p\nadvisories:\n  - id: A\n  - id: A\n")).toThrow(/^advisories\[1\]\.id: "A" is already the id of advisories\[0\]/);
    expect(() => parseAdvisoryDocument("schema-version: 2\npackage:\n  name: a:b\n")).toThrow(/^package\.name: /);
    expect(() => parseAdvisoryDocument("schema-version: 2\npackage:\n  name: p\nadvisories:\n  - id: A\n    events:\n      - {timestamp: 2024-01-01T00:00:00Z, type: fixed, data: {}}\n")).toThrow(
      /^advisories\[0\]\.events\[0\]\.data\.fixed-version: is required/,
    );
  });

  it("keeps versions as written and maps the events it knows", () => {
    const doc = parseAdvisoryDocument(curl("1.10"));
    expect(doc.package).toBe("curl");
    expect(doc.schemaVersion).toBe("2.0.2");
    expect(doc.advisories[0]?.events[1]?.data).toEqual({ "fixed-version": "1.10" });
    expect(doc.advisories.map((a) => [a.uid, a.latestEventType, a.componentName])).toEqual([
      ["curl:CGA-aaaa-bbbb-cccc", EventTypeFilter.FIXED, "libcurl"],
      ["curl:CGA-dddd-eeee-ffff", EventTypeFilter.FALSE_POSITIVE_DETERMINATION, ""],
    ]);
    expect(doc.unknown).toEqual([]);
  });
});

describe("import-advisories", () => {
  it("imports the valid files and skips the others with the reason", async () => {
    const s = await importAdvisories(db.db, [dir()]);
    expect(reasonsOf(s)).toEqual({
      "badfp.advisories.yaml": expect.stringMatching(/^advisories\[0\]\.events\[0\]\.data\.type: must be one of vulnerability-record-analysis-contested, .* not "looks-fine-to-me"/),
      "badtime.advisories.yaml": expect.stringMatching(/^advisories\[0\]\.events\[1\]\.timestamp: not an RFC 3339 time: "yesterday"/),
      "broken.advisories.yaml": expect.stringMatching(/^not valid YAML: /),
      "future.advisories.yaml": expect.stringMatching(/^schema-version: "3\.0\.0" is not supported/),
      "nameless.advisories.yaml": "package.name: is required",
    });
    expect(s.files).toEqual({ added: 3, changed: 0, unchanged: 0, skipped: 5 });
    expect(s.advisories).toEqual({ added: 5, changed: 0, unchanged: 0, removed: 0 });
    expect(s.events).toEqual({ added: 7, changed: 0, unchanged: 0, removed: 0 });
    expect(s.unknown.eventTypes).toEqual({ count: 1, examples: ['zlib.advisories.yaml: advisories[0].events[2].type = "quantum-entanglement"'] });
    expect(s.unknown.keys).toEqual({ count: 1, examples: ["zlib.advisories.yaml: advisories[0].events[1].mood"] });

    const rows = await db.db.select().from(advisories).orderBy(asc(advisories.uid));
    expect(rows.map((r) => [r.uid, r.package, r.advisoryId, r.artifactType, r.componentName, r.componentType, r.componentLocation, r.aliases, r.latestEventType])).toEqual([
      ["curl:CGA-aaaa-bbbb-cccc", "curl", "CGA-aaaa-bbbb-cccc", "apk", "libcurl", "apk", "/usr/lib/libcurl.so.4", ["CVE-2024-0001", "GHSA-xxxx-yyyy-zzzz"], EventTypeFilter.FIXED],
      ["curl:CGA-dddd-eeee-ffff", "curl", "CGA-dddd-eeee-ffff", "apk", "", "", "", ["CVE-2024-0002"], EventTypeFilter.FALSE_POSITIVE_DETERMINATION],
      ["openssl:CGA-7777-8888-9999", "openssl", "CGA-7777-8888-9999", "apk", "", "", "", ["CVE-2024-0727"], EventTypeFilter.FIX_NOT_PLANNED],
      ["zlib:CGA-1111-2222-3333", "zlib", "CGA-1111-2222-3333", "apk", "", "", "", ["CVE-2023-45853"], EventTypeFilter.PENDING_UPSTREAM_FIX],
      ["zlib:CGA-4444-5555-6666", "zlib", "CGA-4444-5555-6666", "apk", "", "", "", [], EventTypeFilter.UNSPECIFIED],
    ]);
    expect(rows[0]?.createTime.toISOString()).toBe("2024-09-10T07:05:03.000Z");
    expect(rows[0]?.updateTime.toISOString()).toBe("2024-09-12T19:03:40.000Z");
    expect(rows[3]?.createTime.toISOString()).toBe("2023-12-31T22:00:00.000Z");

    const events = await db.db.select().from(advisoryEvents).where(eq(advisoryEvents.advisoryUid, "zlib:CGA-1111-2222-3333")).orderBy(asc(advisoryEvents.ordinal));
    // The unknown third event is not stored; the others keep their positions.
    expect(events.map((e) => [e.uid, e.type, e.reviewState, e.author, e.data])).toEqual([
      ["zlib:CGA-1111-2222-3333/0", EventTypeFilter.DETECTION, ReviewState.APPROVED, "", { type: "manual" }],
      ["zlib:CGA-1111-2222-3333/1", EventTypeFilter.PENDING_UPSTREAM_FIX, ReviewState.APPROVED, "", { note: "waiting" }],
    ]);
    const docs = await db.db.select().from(advisoryDocuments).orderBy(asc(advisoryDocuments.package));
    expect(docs.map((d) => [d.package, d.schemaVersion])).toEqual([
      ["curl", "2.0.2"],
      ["openssl", "2.0.1"],
      ["zlib", "2"],
    ]);
  });

  it("changes nothing on a second run", async () => {
    const before = await db.db.select().from(advisoryEvents).orderBy(asc(advisoryEvents.uid));
    const beforeAdvisories = await db.db.select().from(advisories).orderBy(asc(advisories.uid));
    const s = await importAdvisories(db.db, [dir()]);
    expect(s.files).toEqual({ added: 0, changed: 0, unchanged: 3, skipped: 5 });
    expect(s.advisories).toEqual({ added: 0, changed: 0, unchanged: 5, removed: 0 });
    expect(s.events).toEqual({ added: 0, changed: 0, unchanged: 7, removed: 0 });
    expect(await db.db.select().from(advisoryEvents).orderBy(asc(advisoryEvents.uid))).toEqual(before);
    expect(await db.db.select().from(advisories).orderBy(asc(advisories.uid))).toEqual(beforeAdvisories);
  });

  it("rewrites only the rows of a changed file, deleting an advisory removed from it", async () => {
    const beforeEvents = new Map((await db.db.select().from(advisoryEvents)).map((r) => [r.uid, r]));
    const beforeAdvisories = new Map((await db.db.select().from(advisories)).map((r) => [r.uid, r]));
    // curl: the fixed version changes, the second advisory is removed.
    const changed = curl("8.9.1-r1");
    write(join(dir(), "curl.advisories.yaml"), changed.slice(0, changed.indexOf("  - id: CGA-dddd-eeee-ffff")));
    const s = await importAdvisories(db.db, [dir()]);
    expect(s.files).toEqual({ added: 0, changed: 1, unchanged: 2, skipped: 5 });
    expect(s.advisories).toEqual({ added: 0, changed: 0, unchanged: 4, removed: 1 });
    expect(s.events).toEqual({ added: 0, changed: 1, unchanged: 4, removed: 2 });

    const afterAdvisories = await db.db.select().from(advisories);
    expect(afterAdvisories.map((r) => r.uid).sort()).toEqual(["curl:CGA-aaaa-bbbb-cccc", "openssl:CGA-7777-8888-9999", "zlib:CGA-1111-2222-3333", "zlib:CGA-4444-5555-6666"]);
    for (const r of afterAdvisories) expect(r).toEqual(beforeAdvisories.get(r.uid));
    const afterEvents = await db.db.select().from(advisoryEvents);
    expect(afterEvents).toHaveLength(5);
    for (const r of afterEvents) {
      if (r.uid === "curl:CGA-aaaa-bbbb-cccc/1") expect(r.data).toEqual({ "fixed-version": "8.9.1-r1" });
      else expect(r).toEqual(beforeEvents.get(r.uid));
    }
  });

  it("counts a path that cannot be read among the skipped files, beside its reason", async () => {
    const missing = join(root, "no-such-directory");
    const s = await importAdvisories(db.db, [missing]);
    expect(s.skipped).toEqual([{ path: missing, reason: expect.stringMatching(/ENOENT/) }]);
    expect(s.files).toEqual({ added: 0, changed: 0, unchanged: 0, skipped: 1 });
  });

  it("imports a fixed file that was skipped, and keeps a package's rows when its file turns invalid", async () => {
    write(join(dir(), "nameless.advisories.yaml"), "schema-version: 2\npackage:\n  name: named\nadvisories:\n  - id: CGA-n\n");
    write(join(dir(), "openssl.advisories.yaml"), openssl.replace("2024-02-01T00:00:00Z", "last tuesday"));
    const s = await importAdvisories(db.db, [dir()]);
    expect(s.files).toEqual({ added: 1, changed: 0, unchanged: 2, skipped: 5 });
    expect(reasonsOf(s)["openssl.advisories.yaml"]).toMatch(/^advisories\[0\]\.events\[0\]\.timestamp: not an RFC 3339 time/);
    expect((await db.db.select().from(advisories).where(eq(advisories.package, "openssl"))).map((r) => r.uid)).toEqual(["openssl:CGA-7777-8888-9999"]);
    expect((await db.db.select().from(advisories).where(eq(advisories.package, "named"))).map((r) => r.uid)).toEqual(["named:CGA-n"]);
    write(join(dir(), "openssl.advisories.yaml"), openssl);
  });
});

describe("import-advisories, a document larger than one statement's rows", () => {
  it("writes, and then removes, more advisories and events than one statement holds", async () => {
    const files = mkdtempSync(join(tmpdir(), "advisories-big-"));
    try {
      const n = 1201;
      const advisory = (i: number) =>
        `  - id: CGA-big-${i}\n    events:\n      - {timestamp: 2024-01-01T00:00:00Z, type: fixed, data: {fixed-version: "1.${i}"}}\n      - {timestamp: 2024-01-02T00:00:00Z, type: fix-not-planned, data: {note: "n${i}"}}\n`;
      const doc = (count: number) => `schema-version: 2\npackage:\n  name: big\nadvisories:\n${Array.from({ length: count }, (_, i) => advisory(i)).join("")}`;
      write(join(files, "big.advisories.yaml"), doc(n));
      const first = await importAdvisories(db.db, [files]);
      expect(first.advisories).toEqual({ added: n, changed: 0, unchanged: 0, removed: 0 });
      expect(first.events).toEqual({ added: 2 * n, changed: 0, unchanged: 0, removed: 0 });
      expect(await db.db.$count(advisoryEvents, eq(advisoryEvents.data, { "fixed-version": `1.${n - 1}` }))).toBe(1);
      write(join(files, "big.advisories.yaml"), doc(1).replace("fix-not-planned, data: {note: \"n0\"}", "fix-not-planned, data: {note: changed}"));
      const second = await importAdvisories(db.db, [files]);
      expect(second.advisories).toEqual({ added: 0, changed: 0, unchanged: 1, removed: n - 1 });
      expect(second.events).toEqual({ added: 0, changed: 1, unchanged: 1, removed: 2 * (n - 1) });
      expect(await db.db.$count(advisories, eq(advisories.package, "big"))).toBe(1);
      expect((await db.db.select().from(advisoryEvents).where(eq(advisoryEvents.uid, "big:CGA-big-0/1")))[0]?.data).toEqual({ note: "changed" });
    } finally {
      rmSync(files, { recursive: true, force: true });
    }
  });
});

// The command, end to end on an embedded database in a temporary directory: a usage error exits 2; a run with
// a skipped file exits 1 with the summary on stdout and the skipped files on stderr; a second run adds nothing.
describe("npm run import-advisories", () => {
  const run = (args: string[], env: Record<string, string>) => runCli("import-advisories.ts", args, env);

  it("imports, reports, says so in its exit status, and is idempotent", { timeout: 120_000 }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "advisories-cli-data-"));
    const files = mkdtempSync(join(tmpdir(), "advisories-cli-files-"));
    try {
      write(join(files, "openssl.advisories.yaml"), openssl);
      write(join(files, "zlib.advisories.yaml"), zlib);
      const env = { DATA_DIR: dataDir };
      expect((await run([], env)).code).toBe(2);
      const first = await run([files], env);
      expect(first.code, first.stderr).toBe(0);
      const summary = JSON.parse(first.stdout) as { files: Record<string, number>; advisories: Record<string, number>; unknown: { eventTypes: { count: number } } };
      expect(summary.files).toEqual({ added: 2, changed: 0, unchanged: 0, skipped: 0 });
      expect(summary.advisories.added).toBe(3);
      expect(summary.unknown.eventTypes.count).toBe(1);
      write(join(files, "broken.advisories.yaml"), "package: [");
      const second = await run([files], env);
      expect(second.code).toBe(1);
      expect(second.stderr).toMatch(/skipped .*broken\.advisories\.yaml: not valid YAML/);
      const again = JSON.parse(second.stdout) as { files: Record<string, number>; advisories: Record<string, number> };
      expect(again.files).toEqual({ added: 0, changed: 0, unchanged: 2, skipped: 1 });
      expect(again.advisories).toEqual({ added: 0, changed: 0, unchanged: 3, removed: 0 });
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(files, { recursive: true, force: true });
    }
  });
});
