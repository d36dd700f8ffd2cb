// An S3-compatible server for tests (@20minutes/s3rver, in this process): on a random loopback port, its
// objects in a temporary directory removed on stop, with one bucket made. It speaks the S3 REST API the SDK
// uses (multipart uploads, UploadPartCopy, ranged GETs, ListObjectsV2), with its fixed credentials S3RVER /
// S3RVER. Its own signature check disagrees with the SDK's canonical query string on list requests (the SDK's
// signature is what AWS S3 accepts), so mismatched signatures are let through.
import { mkdtemp, readdir, rm, utimes } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import S3rver from "@20minutes/s3rver";
import type { S3StoreOptions } from "../../src/registry/oci/s3-store.js";

export interface TestS3Server {
  endpoint: string;
  bucket: string;
  /** Options for createS3BlobStore on this server's bucket, under `prefix`. */
  storeOptions(prefix?: string): S3StoreOptions;
  /** Makes every object stored so far `ms` older (their LastModified), as if written that long ago. */
  age(ms: number): Promise<void>;
  stop(): Promise<void>;
}

export async function startS3Server(bucket = "registry"): Promise<TestS3Server> {
  const directory = await mkdtemp(join(tmpdir(), "s3rver-"));
  const server = new S3rver({ address: "127.0.0.1", port: 0, directory, silent: true, allowMismatchedSignatures: true, configureBuckets: [{ name: bucket }] });
  const { port } = await server.run();
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    storeOptions: (prefix = "") => ({
      bucket,
      endpoint,
      region: "us-east-1",
      prefix,
      forcePathStyle: true,
      credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" },
    }),
    async age(ms) {
      // The server takes an object's LastModified from its file's mtime.
      const when = new Date(Date.now() - ms);
      for (const entry of await readdir(directory, { recursive: true, withFileTypes: true })) {
        if (entry.isFile()) await utimes(join(entry.parentPath, entry.name), when, when);
      }
    },
    async stop() {
      await server.close();
      await rm(directory, { recursive: true, force: true });
    },
  };
}
