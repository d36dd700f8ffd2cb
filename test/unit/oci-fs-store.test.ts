// The filesystem BlobStore: staged uploads invisible until committed, offsets checked, a chunk cut short
// staging nothing, commit by rename (an existing blob kept), ranges, listing; and the name grammar and
// path parsing of the /v2/ routes.
import { createHash } from "node:crypto";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable, Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { UploadOffsetError, type BlobStore } from "../../src/registry/oci/contracts.js";
import { createFsBlobStore, sendBuffers } from "../../src/registry/oci/fs-store.js";
import { loadConfig } from "../../src/config.js";
import { isValidName, parseV2Path } from "../../src/registry/oci/names.js";

let dir: string;
let store: BlobStore;
const digestOf = (b: Buffer | string) => `sha256:${createHash("sha256").update(b).digest("hex")}`;
const text = async (r: Readable) => {
  let s = "";
  for await (const c of r) s += String(c);
  return s;
};

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "apiserver-blobs-unit-"));
  store = createFsBlobStore(dir);
});
afterAll(() => rm(dir, { recursive: true, force: true }));

/** Bytes that differ from one MiB to the next (a reused buffer sent twice would show). */
const patterned = (bytes: number, seed: number) => {
  const b = Buffer.alloc(bytes);
  for (let i = 0; i + 4 <= bytes; i += 4) b.writeUInt32LE((i * 2654435761 + seed) >>> 0, i);
  return b;
};

/** A Writable that holds each chunk for a while before it is written, keeping only copies taken then. */
function slowSink(delayMs: number) {
  const got: Buffer[] = [];
  const sink = new Writable({
    highWaterMark: 1024,
    write(chunk: Buffer, _enc, done) {
      setTimeout(() => {
        got.push(Buffer.from(chunk)); // copied when written: a buffer reused before that would show here
        done();
      }, delayMs);
    },
  });
  return { sink, bytes: () => Buffer.concat(got) };
}

async function commitBlob(bytes: Buffer, id: string): Promise<string> {
  await store.startUpload(id);
  // Uneven chunks, as a request body arrives.
  const chunks: Buffer[] = [];
  for (let at = 0, n = 1; at < bytes.length; at += n, n = (n * 7 + 13) % 70_001) chunks.push(bytes.subarray(at, at + n));
  expect(await store.append(id, 0, Readable.from(chunks))).toBe(bytes.length);
  const digest = digestOf(bytes);
  await store.commit(id, digest);
  return digest;
}

describe("filesystem blob store: sending through reused buffers", () => {
  it("sends whole blobs and ranges to slow consumers, several at once, each byte as stored", async () => {
    const a = patterned(3.5 * 1024 * 1024, 1);
    const b = patterned(2 * 1024 * 1024 + 5, 2);
    const small = patterned(1000, 3);
    const [da, db, ds] = [await commitBlob(a, "send-a"), await commitBlob(b, "send-b"), await commitBlob(small, "send-s")];
    const sends = [
      { digest: da, range: undefined, want: a },
      { digest: db, range: undefined, want: b },
      { digest: da, range: { start: 1_000_000, end: 3_200_000 }, want: a.subarray(1_000_000, 3_200_001) },
      { digest: ds, range: undefined, want: small },
      { digest: ds, range: { start: 10, end: 10 }, want: small.subarray(10, 11) },
    ];
    const runs = sends.map(async ({ digest, range, want }, i) => {
      const { sink, bytes } = slowSink(i % 2 ? 3 : 1);
      let counted = 0;
      await (await store.openSend!(digest, range)).pipeTo(sink, (n) => (counted += n));
      expect(counted).toBe(want.length);
      expect(bytes().equals(want)).toBe(true);
    });
    await Promise.all(runs);
  });

  it("pulls of six large blobs at once, repeated, send through the same buffers: no more allocated than one pull holds", async () => {
    // A client pulls up to six layers at once (skopeo, docker), each send holding up to three buffers: buffers
    // dropped and allocated again on every pull were a garbage-collection cost of each pull.
    const blobs = await Promise.all([0, 1, 2, 3, 4, 5].map(async (i) => {
      const bytes = patterned(4 * 1024 * 1024 + i, 10 + i);
      return { bytes, digest: await commitBlob(bytes, `send-six-${i}`) };
    }));
    const pull = () =>
      Promise.all(blobs.map(async ({ bytes, digest }, i) => {
        const { sink, bytes: got } = slowSink(1 + (i % 3));
        await (await store.openSend!(digest)).pipeTo(sink, () => {});
        expect(got().equals(bytes)).toBe(true);
      }));
    // At most 18 buffers are in use at once (six sends of three): pulls that reuse them allocate no more than
    // that in all; pulls that dropped them allocated again each time.
    const before = sendBuffers().allocated;
    for (let i = 0; i < 4; i++) await pull();
    expect(sendBuffers().allocated - before).toBeLessThanOrEqual(18);
    expect(sendBuffers().spare).toBeGreaterThanOrEqual(sendBuffers().allocated - before);
  });

  it("rejects an absent blob when opened, and a consumer that closes early when sent", async () => {
    await expect(store.openSend!(digestOf("never stored"))).rejects.toThrow();
    const digest = await commitBlob(patterned(3 * 1024 * 1024, 4), "send-closed");
    const sink = new Writable({
      highWaterMark: 1,
      write(_chunk, _enc, done) {
        setTimeout(done, 5);
      },
    });
    setTimeout(() => sink.destroy(), 2);
    await expect((await store.openSend!(digest)).pipeTo(sink, () => {})).rejects.toThrow();
  });
});

describe("filesystem blob store", () => {
  it("stages chunks at their offset, keeps them invisible, and commits them as the blob", async () => {
    await store.startUpload("u1");
    expect(await store.uploadSize("u1")).toBe(0);
    expect(await store.append("u1", 0, Readable.from([Buffer.from("hello ")]))).toBe(6);
    await expect(store.append("u1", 3, Readable.from([Buffer.from("x")]))).rejects.toBeInstanceOf(UploadOffsetError);
    expect(await store.append("u1", 6, Readable.from([Buffer.from("world")]))).toBe(11);
    const digest = digestOf("hello world");
    expect(await store.stat(digest)).toBeUndefined();
    expect(await text(await store.readUpload("u1"))).toBe("hello world");
    await store.commit("u1", digest);
    expect(await store.stat(digest)).toEqual({ size: 11 });
    expect(await store.uploadSize("u1")).toBeUndefined();
    expect(await text(await store.read(digest, { start: 6, end: 10 }))).toBe("world");
    const listed = [];
    for await (const b of store.list()) listed.push(b.digest);
    expect(listed).toContain(digest);
  });

  it("a chunk cut short stages nothing of it", async () => {
    await store.startUpload("u2");
    await store.append("u2", 0, Readable.from([Buffer.from("abc")]));
    const failing = new Readable({
      read() {
        this.push(Buffer.from("partial"));
        this.destroy(new Error("client went away"));
      },
    });
    await expect(store.append("u2", 3, failing)).rejects.toThrow();
    expect(await store.uploadSize("u2")).toBe(3);
  });

  it("committing a blob that exists keeps it and drops the upload; abort and unknown uploads", async () => {
    const digest = digestOf("same");
    for (const id of ["u3", "u4"]) {
      await store.startUpload(id);
      await store.append(id, 0, Readable.from([Buffer.from("same")]));
      await store.commit(id, digest);
    }
    expect(await store.stat(digest)).toEqual({ size: 4 });
    expect(await readdir(join(dir, "uploads"))).not.toContain("u4");
    await store.startUpload("u5");
    await store.abort("u5");
    await store.abort("u5");
    expect(await store.uploadSize("u5")).toBeUndefined();
    await expect(store.read(digestOf("absent"))).rejects.toThrow();
  });

  it("refuses ids and digests that could name another file", async () => {
    await expect(store.startUpload("../escape")).rejects.toThrow(/upload id/);
    await expect(store.stat("sha256:../../etc")).rejects.toThrow(/digest/);
  });

  it("lives under REGISTRY_STORAGE_DIR, else the data directory's registry folder, with or without DATABASE_URL", () => {
    expect(loadConfig({ REGISTRY_STORAGE_DIR: "/srv/blobs", DATA_DIR: "/data" }).registryStorageDir).toBe("/srv/blobs");
    expect(loadConfig({ DATA_DIR: "/data" }).registryStorageDir).toBe("/data/registry");
    expect(loadConfig({ DATABASE_URL: "postgres://db/x" }).registryStorageDir).toBe(join(process.cwd(), ".data", "registry"));
  });
});

describe("names and paths", () => {
  it.each([
    ["acme/app", true],
    ["acme/tools/git", true],
    ["0123456789abcdef0123456789abcdef01234567/a.b_c__d--e", true],
    ["acme", false],
    ["Acme/app", false],
    ["acme/../x", false],
    ["acme/a..b", false],
    ["acme/-a", false],
    ["acme/a_", false],
    ["acme//a", false],
    [`acme/${"a".repeat(260)}`, false],
  ])("%s valid: %s", (name, valid) => {
    expect(isValidName(name)).toBe(valid);
  });

  it("splits a path at its last endpoint", () => {
    expect(parseV2Path("/v2/")).toEqual({ kind: "base" });
    expect(parseV2Path("/v2/a/manifests/b/manifests/latest")).toEqual({ kind: "manifest", name: "a/manifests/b", reference: "latest" });
    expect(parseV2Path("/v2/a/b/blobs/uploads/")).toEqual({ kind: "uploads", name: "a/b" });
    expect(parseV2Path("/v2/a/b/blobs/uploads/123")).toEqual({ kind: "upload", name: "a/b", id: "123" });
    expect(parseV2Path("/v2/a/b/blobs/sha256:00")).toEqual({ kind: "blob", name: "a/b", digest: "sha256:00" });
    expect(parseV2Path("/v2/a/b/tags/list")).toEqual({ kind: "tags", name: "a/b" });
    expect(parseV2Path("/v2/a/b/referrers/sha256:00")).toEqual({ kind: "referrers", name: "a/b", digest: "sha256:00" });
    expect(parseV2Path("/v2/a/b/other")).toBeUndefined();
  });
});
