// The BlobStore backends every storage test runs against: one entry per backend, each opening a fresh, empty
// store and removing what it made. A test suite written once (test/integration/blob-store.test.ts,
// registry-gc.test.ts) runs on each entry.
import { Readable } from "node:stream";
import type { BlobStore } from "../../src/registry/oci/contracts.js";
import { UploadOffsetError } from "../../src/registry/oci/contracts.js";
import { createS3BlobStore } from "../../src/registry/oci/s3-store.js";
import { startS3Server, type TestS3Server } from "./s3-server.js";

export interface BlobStoreSubject {
  name: string;
  /** Whether the backend streams (memory stays flat in the blob's size); the in-memory reference does not. */
  streams: boolean;
  /**
   * A fresh, empty store, and `replica` when the backend can be shared: another instance on the same storage,
   * as a second server process has (the requests of one upload may reach either).
   */
  open(): Promise<{ store: BlobStore; replica?: () => BlobStore; dispose(): Promise<void> }>;
}

let s3: Promise<TestS3Server> | undefined;
let s3Stores = 0;

/** S3 on the test S3 server (one per test file, each store under a prefix of its own). */
export const s3Subject: BlobStoreSubject = {
  name: "s3",
  streams: true,
  async open() {
    s3 ??= startS3Server();
    const server = await s3;
    const options = server.storeOptions(`t${++s3Stores}-${process.pid}/`);
    const store = createS3BlobStore(options);
    const replicas: BlobStore[] = [];
    return {
      store,
      replica: () => {
        const r = createS3BlobStore(options);
        replicas.push(r);
        return r;
      },
      dispose: async () => {
        for (const s of [store, ...replicas]) await s.close?.();
      },
    };
  },
};

/** Stops the test S3 server, if one was started (afterAll of a file using s3Subject). */
export async function stopS3Subject(): Promise<void> {
  const server = await s3;
  s3 = undefined;
  await server?.stop();
}

/**
 * A reference BlobStore held in memory: the contract written as plainly as possible, a second subject for the
 * shared cases until the filesystem store is on the list. Not for use outside tests: it keeps whole blobs.
 */
function createMemoryBlobStore(): BlobStore {
  const digestOk = (d: string) => {
    if (!/^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$/.test(d)) throw new TypeError(`not a digest: ${d}`);
    return d;
  };
  const idOk = (id: string) => {
    if (!/^[A-Za-z0-9_-]{1,128}$/.test(id)) throw new TypeError(`not an upload id: ${id}`);
    return id;
  };
  const blobs = new Map<string, { data: Buffer; modified: Date }>();
  const uploads = new Map<string, { chunks: Buffer[]; size: number; modified: Date }>();
  const drain = async (data: Readable) => {
    const parts: Buffer[] = [];
    for await (const b of data) parts.push(b as Buffer);
    return Buffer.concat(parts);
  };
  return {
    kind: "filesystem",
    async stat(digest) {
      const b = blobs.get(digestOk(digest));
      return b && { size: b.data.length };
    },
    async read(digest, range) {
      const b = blobs.get(digestOk(digest));
      if (!b) throw new Error(`blob ${digest} not found`);
      return Readable.from([range ? b.data.subarray(range.start, range.end + 1) : b.data]);
    },
    async delete(digest) {
      blobs.delete(digestOk(digest));
    },
    async *list() {
      for (const [digest, b] of blobs) yield { digest, modified: b.modified };
    },
    async startUpload(id) {
      uploads.set(idOk(id), { chunks: [], size: 0, modified: new Date() });
    },
    async append(id, offset, data) {
      const u = uploads.get(idOk(id));
      if (!u) throw new Error(`upload ${id} not found`);
      if (offset !== u.size) throw new UploadOffsetError(u.size);
      const chunk = await drain(data);
      u.chunks.push(chunk);
      u.size += chunk.length;
      u.modified = new Date();
      return u.size;
    },
    async uploadSize(id) {
      return uploads.get(id)?.size;
    },
    async readUpload(id) {
      const u = uploads.get(id);
      if (!u) throw new Error(`upload ${id} not found`);
      return Readable.from([Buffer.concat(u.chunks)]);
    },
    async commit(id, digest) {
      digestOk(digest);
      const u = uploads.get(idOk(id));
      if (!u) {
        if (blobs.has(digest)) return;
        throw new Error(`upload ${id} not found`);
      }
      if (!blobs.has(digest)) blobs.set(digest, { data: Buffer.concat(u.chunks), modified: new Date() });
      uploads.delete(id);
    },
    async abort(id) {
      uploads.delete(id);
    },
    async *listUploads() {
      for (const [id, u] of uploads) yield { id, modified: u.modified };
    },
  };
}

export const memorySubject: BlobStoreSubject = {
  name: "memory (reference)",
  streams: false,
  async open() {
    return { store: createMemoryBlobStore(), dispose: async () => undefined };
  },
};

/**
 * Every backend the shared storage tests run against. The filesystem store joins this list: an entry opening
 * it on a fresh temporary directory (removed on dispose), its replica a second instance on that directory.
 */
export const blobStoreSubjects: readonly BlobStoreSubject[] = [s3Subject, memorySubject];
