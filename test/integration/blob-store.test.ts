// The BlobStore contract (src/registry/oci/contracts.ts), one set of cases run against every backend
// (test/support/blob-stores.ts): what a blob store must do for the registry's routes to be right on any of them.
import { createHash, randomBytes, randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, beforeEach, afterEach, describe, expect, it } from "vitest";
import { type BlobStore, UploadOffsetError } from "../../src/registry/oci/contracts.js";
import { blobStoreSubjects, digestOf, putBlob, stopS3Subject } from "../support/blob-stores.js";

const MiB = 1024 * 1024;

async function text(stream: Readable | Promise<Readable>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const b of await stream) parts.push(b as Buffer);
  return Buffer.concat(parts);
}

async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of it) out.push(x);
  return out;
}

/** Puts a blob the way a monolithic push does: start, one append, commit. */
/** A stream that fails after sending `bytes`: a request body broken off. */
function brokenStream(bytes: Buffer): Readable {
  return Readable.from(
    (async function* () {
      yield bytes;
      throw new Error("connection reset");
    })(),
  );
}

afterAll(stopS3Subject);

describe.each(blobStoreSubjects)("BlobStore: $name", (subject) => {
  let store: BlobStore;
  let dispose: () => Promise<void>;
  let replica: (() => BlobStore) | undefined;
  beforeEach(async () => {
    ({ store, replica, dispose } = await subject.open());
  });
  afterEach(async () => dispose());

  it("stores a blob under its digest: stat, read whole and by range, list, delete", async () => {
    const data = Buffer.from("hello, registry\n");
    const digest = await putBlob(store, data);
    expect(await store.stat(digest)).toEqual({ size: data.length });
    expect(await text(store.read(digest))).toEqual(data);
    expect(await text(store.read(digest, { start: 7, end: 14 }))).toEqual(data.subarray(7, 15));
    expect(await text(store.read(digest, { start: 0, end: 0 }))).toEqual(data.subarray(0, 1));
    const listed = await collect(store.list());
    expect(listed.map((b) => b.digest)).toEqual([digest]);
    expect(listed[0]!.modified).toBeInstanceOf(Date);
    expect(Math.abs(listed[0]!.modified.getTime() - Date.now())).toBeLessThan(10 * 60_000);
    await store.delete(digest);
    expect(await store.stat(digest)).toBeUndefined();
    expect(await collect(store.list())).toEqual([]);
    await expect(store.read(digest)).rejects.toThrow();
    await store.delete(digest); // absent: not an error
  });

  it("keeps sha512 blobs and empty blobs", async () => {
    const big = await putBlob(store, Buffer.from("sha512 content"), "sha512");
    const empty = await putBlob(store, Buffer.alloc(0));
    expect(await store.stat(big)).toEqual({ size: 14 });
    expect(await store.stat(empty)).toEqual({ size: 0 });
    expect(await text(store.read(empty))).toEqual(Buffer.alloc(0));
    expect((await collect(store.list())).map((b) => b.digest).sort()).toEqual([big, empty].sort());
  });

  it("refuses a malformed digest or upload id before touching storage (no path or key escapes)", async () => {
    for (const bad of ["sha256:../../etc/passwd", "sha256:ABC", `md5:${"a".repeat(32)}`, `sha256:${"a".repeat(63)}`, ""]) {
      await expect(store.stat(bad), bad).rejects.toThrow();
      await expect(store.read(bad), bad).rejects.toThrow();
      await expect(store.delete(bad), bad).rejects.toThrow();
    }
    for (const bad of ["../escape", "a/b", "", "x".repeat(200)]) {
      await expect(store.startUpload(bad), bad).rejects.toThrow();
      await expect(store.append(bad, 0, Readable.from([Buffer.from("x")])), bad).rejects.toThrow();
    }
    const id = randomUUID();
    await store.startUpload(id);
    await expect(store.commit(id, "sha256:../../x")).rejects.toThrow();
    expect(await store.uploadSize(id)).toBe(0);
    expect(await collect(store.list())).toEqual([]);
  });

  it("an absent blob has no stat, and reading it rejects", async () => {
    const digest = digestOf(Buffer.from("never pushed"));
    expect(await store.stat(digest)).toBeUndefined();
    await expect(store.read(digest)).rejects.toThrow();
  });

  it("stages chunks in order: sizes, the staged bytes, and nothing visible as a blob until commit", async () => {
    const id = randomUUID();
    const parts = [Buffer.from("first "), Buffer.from(""), Buffer.from("second "), Buffer.from("third")];
    const whole = Buffer.concat(parts);
    const digest = digestOf(whole);
    await store.startUpload(id);
    expect(await store.uploadSize(id)).toBe(0);
    let offset = 0;
    for (const p of parts) {
      offset = await store.append(id, offset, Readable.from([p]));
      expect(await store.uploadSize(id)).toBe(offset);
    }
    expect(offset).toBe(whole.length);
    expect(await text(store.readUpload(id))).toEqual(whole);
    expect(await store.stat(digest)).toBeUndefined();
    expect(await collect(store.list())).toEqual([]);
    expect((await collect(store.listUploads())).map((u) => u.id)).toEqual([id]);

    await store.commit(id, digest);
    expect(await text(store.read(digest))).toEqual(whole);
    expect(await store.uploadSize(id)).toBeUndefined();
    expect(await collect(store.listUploads())).toEqual([]);
  });

  it("refuses a chunk at the wrong offset with UploadOffsetError naming the expected one, staging nothing", async () => {
    const id = randomUUID();
    await store.startUpload(id);
    await store.append(id, 0, Readable.from([Buffer.from("abc")]));
    for (const wrong of [0, 2, 4, 100]) {
      const err = await store.append(id, wrong, Readable.from([Buffer.from("zzz")])).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UploadOffsetError);
      expect((err as UploadOffsetError).expected).toBe(3);
    }
    expect(await store.uploadSize(id)).toBe(3);
    expect(await text(store.readUpload(id))).toEqual(Buffer.from("abc"));
    expect(await store.append(id, 3, Readable.from([Buffer.from("de")]))).toBe(5);
    expect(await text(store.readUpload(id))).toEqual(Buffer.from("abcde"));
  });

  it.skipIf(!subject.streams)("a chunk whose stream breaks off stages nothing", async () => {
    const id = randomUUID();
    await store.startUpload(id);
    await store.append(id, 0, Readable.from([Buffer.from("abc")]));
    await expect(store.append(id, 3, brokenStream(Buffer.alloc(64 * 1024, 1)))).rejects.toThrow(/connection reset/);
    expect(await store.uploadSize(id)).toBe(3);
    // A broken chunk larger than one part of the uploader (a multipart upload begun) stages nothing either.
    await expect(store.append(id, 3, brokenStream(randomBytes(11 * MiB)))).rejects.toThrow(/connection reset/);
    expect(await store.uploadSize(id)).toBe(3);
    expect(await store.append(id, 3, Readable.from([Buffer.from("d")]))).toBe(4);
  });

  it("an upload's chunks may reach different server processes: each sees what the others staged", async (ctx) => {
    if (!replica) return ctx.skip();
    const [a, b] = [replica(), replica()];
    const id = randomUUID();
    const parts = ["one ", "two ", "three"].map((t) => Buffer.from(t));
    const digest = digestOf(Buffer.concat(parts));
    await store.startUpload(id);
    expect(await a.append(id, 0, Readable.from([parts[0]!]))).toBe(4);
    expect(await b.uploadSize(id)).toBe(4);
    await expect(b.append(id, 0, Readable.from([parts[1]!]))).rejects.toBeInstanceOf(UploadOffsetError);
    expect(await b.append(id, 4, Readable.from([parts[1]!]))).toBe(8);
    expect(await store.append(id, 8, Readable.from([parts[2]!]))).toBe(13);
    await a.commit(id, digest);
    expect(await text(b.read(digest))).toEqual(Buffer.concat(parts));
    expect(await store.uploadSize(id)).toBeUndefined();
  });

  it("an upload is per id: appends to another or to an unknown id do not mix", async () => {
    const a = randomUUID();
    const b = randomUUID();
    await store.startUpload(a);
    await store.startUpload(b);
    await store.append(a, 0, Readable.from([Buffer.from("aaaa")]));
    await store.append(b, 0, Readable.from([Buffer.from("bb")]));
    expect(await store.uploadSize(a)).toBe(4);
    expect(await store.uploadSize(b)).toBe(2);
    expect(await store.uploadSize(randomUUID())).toBeUndefined();
    await expect(store.append(randomUUID(), 0, Readable.from([Buffer.from("x")]))).rejects.toThrow();
  });

  it("commit of a digest already stored keeps the one blob and discards the upload; a repeated commit is a no-op", async () => {
    const data = Buffer.from("the same layer, pushed twice");
    const digest = await putBlob(store, data);
    const id = randomUUID();
    await store.startUpload(id);
    await store.append(id, 0, Readable.from([data]));
    await store.commit(id, digest);
    await store.commit(id, digest);
    expect((await collect(store.list())).map((b) => b.digest)).toEqual([digest]);
    expect(await text(store.read(digest))).toEqual(data);
    expect(await store.uploadSize(id)).toBeUndefined();
    expect(await collect(store.listUploads())).toEqual([]);
  });

  it("commit of an unknown upload, the blob absent, rejects and makes nothing", async () => {
    const digest = digestOf(Buffer.from("nothing staged"));
    await expect(store.commit(randomUUID(), digest)).rejects.toThrow();
    expect(await store.stat(digest)).toBeUndefined();
  });

  it("abort discards the staged bytes; aborting an absent upload is not an error", async () => {
    const id = randomUUID();
    await store.startUpload(id);
    await store.append(id, 0, Readable.from([Buffer.from("abandoned")]));
    await store.abort(id);
    expect(await store.uploadSize(id)).toBeUndefined();
    expect(await collect(store.listUploads())).toEqual([]);
    expect(await collect(store.list())).toEqual([]);
    await store.abort(id);
    await store.abort(randomUUID());
  });

  it("lists uploads in progress with the time each last grew", async () => {
    const a = randomUUID();
    const b = randomUUID();
    const before = Date.now();
    await store.startUpload(a);
    await store.startUpload(b);
    await store.append(b, 0, Readable.from([Buffer.from("x")]));
    const listed = await collect(store.listUploads());
    expect(listed.map((u) => u.id).sort()).toEqual([a, b].sort());
    for (const u of listed) {
      expect(u.modified).toBeInstanceOf(Date);
      // Object stores keep times to the second.
      expect(u.modified.getTime()).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 - 1000);
      expect(u.modified.getTime()).toBeLessThanOrEqual(Date.now() + 1000);
    }
  });

  it.skipIf(!subject.streams)(
    "streams a 64 MiB blob pushed in uneven chunks in and out, the heap staying bounded",
    { timeout: 300_000 },
    async () => {
      // Live memory, sampled after a full collection so that garbage not yet collected does not count.
      setFlagsFromString("--expose-gc");
      const gc = runInNewContext("gc") as () => void;
      const live = () => {
        gc();
        const m = process.memoryUsage();
        return m.heapUsed + m.arrayBuffers;
      };
      const baseline = live();
      let peak = 0;
      const sample = () => (peak = Math.max(peak, live() - baseline));
      const sampler = setInterval(sample, 200);

      const sizes = [1, 20, 3, 3, 37].map((n) => n * MiB);
      const hash = createHash("sha256");
      /** A chunk of `size` generated 256 KiB at a time (never held whole), hashed on the way. */
      const generated = (size: number) =>
        Readable.from(
          (function* () {
            for (let sent = 0; sent < size; sent += 256 * 1024) {
              const b = randomBytes(Math.min(256 * 1024, size - sent));
              hash.update(b);
              yield b;
            }
          })(),
        );
      try {
        const id = randomUUID();
        await store.startUpload(id);
        let offset = 0;
        for (const size of sizes) offset = await store.append(id, offset, generated(size));
        const total = 64 * MiB;
        expect(offset).toBe(total);
        const digest = `sha256:${hash.digest("hex")}`;
        const staged = createHash("sha256");
        for await (const b of await store.readUpload(id)) staged.update(b as Buffer);
        expect(`sha256:${staged.digest("hex")}`).toBe(digest);
        await store.commit(id, digest);
        expect(await store.stat(digest)).toEqual({ size: total });
        const read = createHash("sha256");
        for await (const b of await store.read(digest)) read.update(b as Buffer);
        expect(`sha256:${read.digest("hex")}`).toBe(digest);
        const tail = await text(store.read(digest, { start: total - 10, end: total - 1 }));
        expect(tail.length).toBe(10);
        sample();
        console.log(`${subject.name}: 64 MiB through the store, peak live heap + buffers above the baseline ${(peak / MiB).toFixed(1)} MiB`);
      } finally {
        clearInterval(sampler);
      }
      // Holding the blob whole anywhere would take 64 MiB at once (the in-memory reference store peaks near 190
      // MiB here); the S3 store holds a few parts of 5 MiB, the test S3 server in this process its own buffers
      // (about 35 MiB in all).
      expect(peak).toBeLessThan(56 * MiB);
    },
  );
});
