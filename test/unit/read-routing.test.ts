// The pure parts of read routing (db/read-routing.ts): positions, snapshots, and which transaction a
// replica's snapshot shows as ended.
import { describe, expect, it } from "vitest";
import { endedIn, parseLsn, parseSnapshot, positionTtlMs, recordEndOf, positionLookups } from "../../src/db/read-routing.js";
import { servedServices } from "../../src/kernel/descriptors.js";
import { WRITING_SERVICES } from "../../src/server/app.js";

describe("read routing", () => {
  it.each([
    ["0/0", 0n],
    ["0/3000060", 0x3000060n],
    ["16/B374D848", (0x16n << 32n) | 0xb374d848n],
  ])("reads the position %s", (text, bytes) => {
    expect(parseLsn(text)).toBe(bytes);
  });

  it.each([
    // Past a page header (24 bytes) or a segment's long header (40 bytes): the end of the record before.
    [0x3000000n + 8192n + 24n, 0x3000000n + 8192n],
    [0x3000000n + 40n, 0x3000000n],
    [0x3000060n, 0x3000060n],
    [8192n + 25n, 8192n + 25n],
  ])("takes the insert position %d as the record end %d", (insert, end) => {
    expect(recordEndOf(insert)).toBe(end);
  });

  it.each([
    // xmin:xmax:in progress, as a standby prints it. Ended: below xmin only (a standby's in-progress
    // transactions are not printed: see endedIn).
    ["100:105:100,103", 99n, true],
    ["100:105:100,103", 100n, false],
    ["100:105:100,103", 101n, false],
    ["100:105:100,103", 103n, false],
    ["100:105:100,103", 105n, false],
    ["100:105:", 101n, false],
    ["100:105:", 200n, false],
    ["750:750:", 749n, true],
    ["750:750:", 750n, false],
  ])("in the snapshot %s, transaction %d has ended: %s", (text, xid, ended) => {
    expect(endedIn(parseSnapshot(text), xid)).toBe(ended);
  });

  it("remembers a write's position for longer than any replica in rotation can be behind", () => {
    for (const maxLagMs of [10, 2_000, 300_000]) expect(positionTtlMs(maxLagMs)).toBeGreaterThan(maxLagMs + 2_000);
  });

  it("names served services as the ones that write outside units of work", () => {
    const served = new Set(servedServices.map((s) => s.typeName));
    for (const name of WRITING_SERVICES) expect(served.has(name)).toBe(true);
  });
});

describe("read position lookups", () => {
  /** A query whose answers the test releases one at a time; it records what each query was asked. */
  function controlledQuery() {
    const asked: string[][] = [];
    const pending: (() => void)[] = [];
    const query = (identities: string[]) =>
      new Promise<Map<string, bigint>>((resolve) => {
        asked.push(identities);
        pending.push(() => resolve(new Map(identities.filter((i) => i !== "nobody").map((i, n) => [i, BigInt(n + 1)]))));
      });
    return { asked, query, release: () => pending.shift()!() };
  }
  const tick = () => new Promise((resolve) => setImmediate(resolve));

  it("asks once for the calls of one turn, each identity once", async () => {
    const q = controlledQuery();
    const loads = positionLookups(q.query);
    const answers = Promise.all(["a", "b", "a", "nobody"].map((i) => loads.load(i)));
    await tick();
    expect(q.asked).toEqual([["a", "b", "nobody"]]);
    q.release();
    expect(await answers).toEqual([1n, 2n, 1n, undefined]);
  });

  it("never joins a query already running: the calls that arrive meanwhile go together in the next, started after it ends", async () => {
    const q = controlledQuery();
    const loads = positionLookups(q.query);
    const first = loads.load("a");
    await tick();
    expect(q.asked).toEqual([["a"]]);
    // Arrive while the first query runs: a write answered just before could be missing from its snapshot.
    const later = [loads.load("a"), loads.load("b")];
    await tick();
    const third = loads.load("c");
    await tick();
    expect(q.asked).toEqual([["a"]]);
    q.release();
    expect(await first).toBe(1n);
    await tick();
    expect(q.asked).toEqual([["a"], ["a", "b", "c"]]);
    q.release();
    expect(await Promise.all([...later, third])).toEqual([1n, 2n, 3n]);
  });

  it("fails every call of a batch whose query fails, and the next batch runs", async () => {
    let fail = true;
    const loads = positionLookups(async (ids) => {
      if (fail) throw new Error("primary gone");
      return new Map(ids.map((i) => [i, 7n]));
    });
    await expect(Promise.all([loads.load("a"), loads.load("b")])).rejects.toThrow("primary gone");
    fail = false;
    expect(await loads.load("a")).toBe(7n);
  });
});
