// The BlobStore backends every storage test runs against: one entry per backend, each opening a fresh, empty
// store and removing what it made. A test suite written once (test/integration/blob-store.test.ts,
// registry-gc.test.ts) runs on each entry.
import { createHash, randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import type { BlobStore } from "../../src/registry/oci/contracts.js";
import { createFsBlobStore } from "../../src/registry/oci/fs-store.js";
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

/** The filesystem store on a fresh temporary directory (removed on dispose); its replica a second instance on it. */
export const fsSubject: BlobStoreSubject = {
  name: "filesystem",
  streams: true,
  async open() {
    const dir = await mkdtemp(join(tmpdir(), "blob-store-"));
    return {
      store: createFsBlobStore(dir),
      replica: () => createFsBlobStore(dir),
      dispose: () => rm(dir, { recursive: true, force: true }),
    };
  },
};

/** Every backend the shared storage tests run against. */
export const blobStoreSubjects: readonly BlobStoreSubject[] = [s3Subject, fsSubject];

/** The digest of `data` ("sha256:<hex>" by default). */
export function digestOf(data: Buffer, alg: "sha256" | "sha512" = "sha256"): string {
  return `${alg}:${createHash(alg).update(data).digest("hex")}`;
}

/** Stores `data` as a blob the way a push does (an upload of one chunk, committed); its digest. */
export async function putBlob(store: BlobStore, data: Buffer | string, alg: "sha256" | "sha512" = "sha256"): Promise<string> {
  const bytes = typeof data === "string" ? Buffer.from(data) : data;
  const id = randomUUID();
  const digest = digestOf(bytes, alg);
  await store.startUpload(id);
  await store.append(id, 0, Readable.from([bytes]));
  await store.commit(id, digest);
  return digest;
}
