// The advisory store's bounds on a real database: ListDocuments answers at most `limit` advisories (more is
// "too broad", not a part), matching by alias or advisory id; severities leave withdrawn OSV records out.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSecurityAdvisoryStore } from "../../src/advisory/security-advisory.store.js";
import { osvRecords } from "../../src/db/schema/index.js";
import { EventType, writeAdvisoryDocument } from "../support/advisory-fixtures.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";

let db: TestDatabase;

beforeAll(async () => {
  db = await openTestDatabase();
  for (const pkg of ["a", "b", "c"]) {
    await writeAdvisoryDocument(db.db, pkg, [
      { id: `CGA-${pkg}`, aliases: ["CVE-SHARED"], events: [{ time: "2024-01-01T00:00:00Z", type: EventType.FIXED, data: { "fixed-version": "1" } }] },
      { id: `CGA-${pkg}-2`, aliases: [] },
    ]);
  }
  const record = (id: string, withdrawn: boolean) => ({
    id,
    severities: [{ type: "CVSS_V3", score: `CVSS:3.1/${id}` }],
    source: `${id}.json`,
    contentHash: "x",
    withdrawnTime: withdrawn ? new Date("2024-01-01T00:00:00Z") : null,
  });
  await db.db.insert(osvRecords).values([record("CVE-SHARED", false), record("CVE-GONE", true)]);
});

afterAll(async () => {
  await db?.dispose();
});

describe("security advisory store", () => {
  it("answers up to the limit, and undefined beyond it", async () => {
    const store = createSecurityAdvisoryStore(db.db);
    const three = await store.documents({ packageName: undefined, cves: ["CVE-SHARED"] }, 3);
    expect(three?.map((r) => [r.package, r.advisoryId, r.events.length])).toEqual([
      ["a", "CGA-a", 1],
      ["b", "CGA-b", 1],
      ["c", "CGA-c", 1],
    ]);
    expect(await store.documents({ packageName: undefined, cves: ["CVE-SHARED"] }, 2)).toBeUndefined();
  });

  it("matches an advisory id as a cve, and an advisory without events", async () => {
    const store = createSecurityAdvisoryStore(db.db);
    const rows = await store.documents({ packageName: undefined, cves: ["CGA-b-2"] }, 10);
    expect(rows).toEqual([{ uid: "b:CGA-b-2", package: "b", advisoryId: "CGA-b-2", aliases: [], events: [] }]);
  });

  it("leaves withdrawn records out of severities", async () => {
    const store = createSecurityAdvisoryStore(db.db);
    const got = await store.severities(["CVE-SHARED", "CVE-GONE", "CVE-NONE"]);
    expect([...got.keys()]).toEqual(["CVE-SHARED"]);
  });
});
