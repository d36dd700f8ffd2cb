// Garbage collection of the registry's storage (src/registry/oci/gc.ts) on every BlobStore backend: abandoned
// uploads and unreferenced blobs go, what is referenced, young or linked while the collection runs stays.
import { randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import { afterAll, afterEach, beforeEach, describe, expect, it } from "vitest";
import type { BlobStore } from "../../src/registry/oci/contracts.js";
import { loadConfig } from "../../src/config.js";
import { collectGarbage, startConfiguredGcWorker, startGcWorker, type BlobReferences, type GcReport } from "../../src/registry/oci/gc.js";
import { blobStoreSubjects, putBlob, stopS3Subject } from "../support/blob-stores.js";
import { until } from "../support/poll.js";

async function modifiedOf<T extends { modified: Date }>(items: AsyncIterable<T>, pick: (x: T) => boolean): Promise<number> {
  for await (const x of items) if (pick(x)) return x.modified.getTime();
  throw new Error("not listed");
}

async function digests(store: BlobStore): Promise<string[]> {
  const out: string[] = [];
  for await (const b of store.list()) out.push(b.digest);
  return out.sort();
}

async function uploadIds(store: BlobStore): Promise<string[]> {
  const out: string[] = [];
  for await (const u of store.listUploads()) out.push(u.id);
  return out.sort();
}

/** The links of the repositories, as a set; `onAsked` runs after each answer (a push landing meanwhile). */
function links(linked: Iterable<string>, onAsked?: (asked: readonly string[], call: number) => void): BlobReferences & { linked: Set<string> } {
  const set = new Set(linked);
  let calls = 0;
  return {
    linked: set,
    async referenced(asked) {
      const answer = new Set(asked.filter((d) => set.has(d)));
      onAsked?.(asked, ++calls);
      return answer;
    },
  };
}

/** Object stores keep times to the second: wait until a write is listed later than the ones before. */
const tick = () => new Promise((r) => setTimeout(r, 1100));

afterAll(stopS3Subject);

describe.each(blobStoreSubjects)("registry gc: $name", (subject) => {
  let store: BlobStore;
  let dispose: () => Promise<void>;
  beforeEach(async () => {
    ({ store, dispose } = await subject.open());
  });
  afterEach(async () => dispose());

  it("removes an old unreferenced blob; keeps a referenced one and a young unreferenced one", async () => {
    const unreferenced = await putBlob(store, "layer of a deleted repo");
    const referenced = await putBlob(store, "layer of a tagged image");
    await tick();
    const young = await putBlob(store, "layer just pushed, not linked yet");
    const oldTime = Math.max(await modifiedOf(store.list(), (b) => b.digest === unreferenced), await modifiedOf(store.list(), (b) => b.digest === referenced));
    const youngTime = await modifiedOf(store.list(), (b) => b.digest === young);
    expect(youngTime).toBeGreaterThan(oldTime);
    // The grace period falls between the two: the first two blobs are older than it, the last one is not.
    const graceMs = Math.floor((youngTime - oldTime) / 2);

    const report = await collectGarbage(store, links([referenced]), { uploadTtlMs: 3_600_000, graceMs, now: () => new Date(youngTime) });
    expect(await digests(store)).toEqual([referenced, young].sort());
    expect(report.blobs).toEqual({ seen: 3, young: 1, referenced: 1, relinked: 0, removed: 1, removedBytes: "layer of a deleted repo".length });
  });

  it("keeps a blob linked between the mark and the sweep", async () => {
    const reused = await putBlob(store, "an old layer pushed again by digest");
    const gone = await putBlob(store, "an old layer nobody pushes");
    const later = new Date(Date.now() + 7_200_000);
    // The mark asks first; right after its answer a push links `reused` (a mount, or a commit of that digest).
    const refs = links([], (asked, call) => {
      if (call === 1) {
        expect([...asked].sort()).toEqual([reused, gone].sort());
        refs.linked.add(reused);
      }
    });
    const report = await collectGarbage(store, refs, { uploadTtlMs: 3_600_000, graceMs: 3_600_000, now: () => later });
    expect(await digests(store)).toEqual([reused]);
    expect(report.blobs).toMatchObject({ seen: 2, referenced: 0, relinked: 1, removed: 1 });
  });

  it("removes an upload abandoned longer than the TTL and keeps a recent one", async () => {
    const abandoned = randomUUID();
    await store.startUpload(abandoned);
    await store.append(abandoned, 0, Readable.from([Buffer.from("half a layer")]));
    await tick();
    const active = randomUUID();
    await store.startUpload(active);
    const oldTime = await modifiedOf(store.listUploads(), (u) => u.id === abandoned);
    const newTime = await modifiedOf(store.listUploads(), (u) => u.id === active);
    expect(newTime).toBeGreaterThan(oldTime);
    const uploadTtlMs = Math.floor((newTime - oldTime) / 2);

    const report = await collectGarbage(store, links([]), { uploadTtlMs, graceMs: 3_600_000, now: () => new Date(newTime) });
    expect(await uploadIds(store)).toEqual([active]);
    expect(report.uploads).toEqual({ seen: 2, removed: 1 });
    expect(await store.uploadSize(abandoned)).toBeUndefined();
    expect(await store.uploadSize(active)).toBe(0);
  });

  it("a dry run reports what it would remove and removes nothing", async () => {
    const blob = await putBlob(store, "unreferenced");
    const upload = randomUUID();
    await store.startUpload(upload);
    const later = new Date(Date.now() + 48 * 3_600_000);
    const report = await collectGarbage(store, links([]), { uploadTtlMs: 3_600_000, graceMs: 3_600_000, now: () => later, dryRun: true });
    expect(report).toMatchObject({ dryRun: true, uploads: { seen: 1, removed: 1 }, blobs: { seen: 1, removed: 1 } });
    expect(await digests(store)).toEqual([blob]);
    expect(await uploadIds(store)).toEqual([upload]);
  });

  it("asks about blobs in batches and removes across several", async () => {
    const all = await Promise.all(Array.from({ length: 7 }, (_, i) => putBlob(store, `blob ${i}`)));
    const keep = new Set(all.slice(0, 2));
    const sizes: number[] = [];
    const refs = links(keep, (asked) => sizes.push(asked.length));
    const later = new Date(Date.now() + 7_200_000);
    const report = await collectGarbage(store, refs, { uploadTtlMs: 3_600_000, graceMs: 3_600_000, now: () => later, batchSize: 3 });
    expect(Math.max(...sizes)).toBeLessThanOrEqual(3);
    expect(await digests(store)).toEqual([...keep].sort());
    expect(report.blobs).toMatchObject({ seen: 7, referenced: 2, removed: 5 });
  });
});

describe("the gc worker", () => {
  it("runs in the server only when REGISTRY_GC_INTERVAL_MINUTES is set", async () => {
    const { store, dispose } = await blobStoreSubjects[0]!.open();
    try {
      expect(startConfiguredGcWorker(store, links([]), loadConfig({}).registry)).toBeUndefined();
      const worker = startConfiguredGcWorker(store, links([]), loadConfig({ REGISTRY_GC_INTERVAL_MINUTES: "5" }).registry);
      expect(worker).toBeDefined();
      await worker!.stop();
    } finally {
      await dispose();
    }
  });

  it("collects on its interval, reports each run, and stops", async () => {
    const { store, dispose } = await blobStoreSubjects[0]!.open();
    try {
      const blob = await putBlob(store, "collected by the worker");
      const reports: GcReport[] = [];
      const worker = startGcWorker(store, links([]), {
        uploadTtlMs: 3_600_000,
        graceMs: 3_600_000,
        now: () => new Date(Date.now() + 7_200_000),
        intervalMs: 20,
        onReport: (r) => reports.push(r),
      });
      await until("worker runs", async () => reports.length, (n) => n >= 2, 30_000);
      await worker.stop();
      const after = reports.length;
      expect(reports[0]!.blobs.removed).toBe(1);
      expect(reports[1]!.blobs.seen).toBe(0);
      expect(await store.stat(blob)).toBeUndefined();
      await new Promise((r) => setTimeout(r, 100));
      expect(reports.length).toBe(after);
    } finally {
      await dispose();
    }
  });

  it("a failed run is reported and the next one still happens", async () => {
    const { store, dispose } = await blobStoreSubjects[0]!.open();
    try {
      await putBlob(store, "blob");
      const errors: unknown[] = [];
      const reports: GcReport[] = [];
      let fail = true;
      const refs: BlobReferences = {
        async referenced(asked) {
          if (fail) {
            fail = false;
            throw new Error("database unavailable");
          }
          return new Set(asked);
        },
      };
      const worker = startGcWorker(store, refs, {
        uploadTtlMs: 3_600_000,
        graceMs: 3_600_000,
        now: () => new Date(Date.now() + 7_200_000),
        intervalMs: 20,
        onReport: (r) => reports.push(r),
        onError: (e) => errors.push(e),
      });
      await until("a run after the failure", async () => reports.length, (n) => n >= 1, 30_000);
      await worker.stop();
      expect(String(errors[0])).toMatch(/database unavailable/);
      expect(reports[0]!.blobs).toMatchObject({ seen: 1, referenced: 1, removed: 0 });
    } finally {
      await dispose();
    }
  });
});
