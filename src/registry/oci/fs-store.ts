// The filesystem BlobStore (contracts.ts): blobs under <root>/blobs/<algorithm>/<first two hex>/<hex>, uploads
// in progress under <root>/uploads/<id>. A blob appears only by rename(2) of a complete upload, which is
// atomic within one filesystem (both live under the same root), so a partial upload is never readable as a
// blob. Bytes stream in and out through file streams: memory stays flat whatever the blob's size.
//
// Appends to one upload are serialized in this process; the offset check makes a second writer (another
// replica, a retried request) fail with UploadOffsetError instead of interleaving bytes.
import { createWriteStream } from "node:fs";
import { mkdir, open, readdir, rename, rm, stat, truncate } from "node:fs/promises";
import { join } from "node:path";
import { pipeline } from "node:stream/promises";
import { UploadOffsetError, type BlobStore } from "./contracts.js";

const DIGEST = /^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$/;
/** Upload ids are chosen by the caller: only what is safe as a file name. */
const UPLOAD_ID = /^[0-9A-Za-z-]{1,64}$/;

function checkDigest(digest: string): void {
  if (!DIGEST.test(digest)) throw new Error(`not a blob digest: ${JSON.stringify(digest)}`);
}

function checkId(id: string): void {
  if (!UPLOAD_ID.test(id)) throw new Error(`not an upload id: ${JSON.stringify(id)}`);
}

const isMissing = (err: unknown) => (err as NodeJS.ErrnoException).code === "ENOENT";

export function createFsBlobStore(root: string): BlobStore {
  const blobsDir = join(root, "blobs");
  const uploadsDir = join(root, "uploads");
  const blobPath = (digest: string) => {
    checkDigest(digest);
    const [alg, hex] = digest.split(":") as [string, string];
    return join(blobsDir, alg, hex.slice(0, 2), hex);
  };
  const uploadPath = (id: string) => {
    checkId(id);
    return join(uploadsDir, id);
  };
  // One append (or commit) at a time per upload, in this process.
  const busy = new Map<string, Promise<unknown>>();
  const serialized = <T>(id: string, work: () => Promise<T>): Promise<T> => {
    const before = busy.get(id) ?? Promise.resolve();
    const run = before.then(work, work);
    const tail = run.catch(() => {});
    busy.set(id, tail);
    void tail.then(() => {
      if (busy.get(id) === tail) busy.delete(id);
    });
    return run;
  };
  let made: Promise<void> | undefined;
  const ensureDirs = () => (made ??= Promise.all([mkdir(blobsDir, { recursive: true }), mkdir(uploadsDir, { recursive: true })]).then(() => undefined));

  async function* walk(dir: string): AsyncGenerator<string> {
    let entries;
    try {
      entries = await readdir(dir, { withFileTypes: true });
    } catch (err) {
      if (isMissing(err)) return;
      throw err;
    }
    for (const e of entries) {
      if (e.isDirectory()) yield* walk(join(dir, e.name));
      else if (e.isFile()) yield join(dir, e.name);
    }
  }

  return {
    kind: "filesystem",

    async stat(digest) {
      try {
        const s = await stat(blobPath(digest));
        return { size: s.size };
      } catch (err) {
        if (isMissing(err)) return undefined;
        throw err;
      }
    },

    async read(digest, range) {
      // Opened first, so an absent blob rejects here rather than as a stream error later.
      const handle = await open(blobPath(digest), "r");
      // Reads as large as the blob, up to 1 MiB: a 1 MiB buffer for every small blob (most of a pull's
      // requests) was most of a small pull's garbage-collection time.
      const size = range ? range.end - range.start + 1 : (await handle.stat()).size;
      const highWaterMark = Math.max(1, Math.min(size, 1 << 20));
      return handle.createReadStream(range ? { start: range.start, end: range.end, highWaterMark } : { highWaterMark });
    },

    async delete(digest) {
      await rm(blobPath(digest), { force: true });
    },

    async *list() {
      for (const alg of ["sha256", "sha512"]) {
        for await (const file of walk(join(blobsDir, alg))) {
          const hex = file.slice(file.lastIndexOf("/") + 1);
          const digest = `${alg}:${hex}`;
          if (!DIGEST.test(digest)) continue;
          try {
            yield { digest, modified: (await stat(file)).mtime };
          } catch (err) {
            if (!isMissing(err)) throw err; // removed meanwhile
          }
        }
      }
    },

    async startUpload(id) {
      await ensureDirs();
      const handle = await open(uploadPath(id), "wx");
      await handle.close();
    },

    async append(id, offset, data) {
      const path = uploadPath(id);
      return serialized(id, async () => {
        let size: number;
        try {
          size = (await stat(path)).size;
        } catch (err) {
          if (isMissing(err)) throw new Error(`no upload ${id}`);
          throw err;
        }
        if (size !== offset) {
          data.resume(); // the chunk is not staged: let its bytes go
          throw new UploadOffsetError(size);
        }
        try {
          await pipeline(data, createWriteStream(path, { flags: "a" }));
        } catch (err) {
          // A chunk cut short stages nothing: the upload goes back to where it was.
          await truncate(path, offset).catch(() => {});
          throw err;
        }
        return (await stat(path)).size;
      });
    },

    async uploadSize(id) {
      try {
        return (await stat(uploadPath(id))).size;
      } catch (err) {
        if (isMissing(err)) return undefined;
        throw err;
      }
    },

    async readUpload(id) {
      const handle = await open(uploadPath(id), "r");
      return handle.createReadStream({ highWaterMark: 1 << 20 });
    },

    async commit(id, digest) {
      const from = uploadPath(id);
      const to = blobPath(digest);
      return serialized(id, async () => {
        let stored = true;
        try {
          await stat(to);
        } catch (err) {
          if (!isMissing(err)) throw err;
          stored = false;
        }
        if (stored) {
          // Already stored: the existing blob is kept, the upload (if still there: a repeated commit) discarded.
          await rm(from, { force: true });
          return;
        }
        await mkdir(join(to, ".."), { recursive: true });
        await rename(from, to);
      });
    },

    async abort(id) {
      await rm(uploadPath(id), { force: true });
    },

    async *listUploads() {
      let names: string[];
      try {
        names = await readdir(uploadsDir);
      } catch (err) {
        if (isMissing(err)) return;
        throw err;
      }
      for (const id of names) {
        if (!UPLOAD_ID.test(id)) continue;
        try {
          yield { id, modified: (await stat(join(uploadsDir, id))).mtime };
        } catch (err) {
          if (!isMissing(err)) throw err;
        }
      }
    },
  };
}
