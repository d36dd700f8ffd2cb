// The filesystem BlobStore (contracts.ts): blobs under <root>/blobs/<algorithm>/<first two hex>/<hex>, uploads
// in progress under <root>/uploads/<id>. A blob appears only by rename(2) of a complete upload (or of a
// manifest written whole there, `put`), which is atomic within one filesystem (both live under the same root),
// so a partial upload is never readable as a blob. Bytes stream in and out through file streams: memory stays
// flat whatever the blob's size.
//
// Appends to one upload are serialized in this process; the offset check makes a second writer (another
// replica, a retried request) fail with UploadOffsetError instead of interleaving bytes.
import { randomUUID } from "node:crypto";
import { constants } from "node:fs";
import { mkdir, open, readdir, rename, rm, stat, truncate, writeFile, type FileHandle } from "node:fs/promises";
import { join } from "node:path";
import { Writable } from "node:stream";
import { finished, pipeline } from "node:stream/promises";
import { UploadOffsetError, type BlobSend, type BlobStore } from "./contracts.js";

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

/**
 * An append writes the request body's chunks (32 to 64 KiB each, as the socket delivers them) in batches of
 * this many bytes, one writev(2) each: a file write stream wrote nearly every chunk on its own (the write of
 * the last one done before the next arrived), and each write's round trip through the thread pool and the
 * stream's callbacks cost the main thread more than the bytes' hash.
 */
const APPEND_BATCH = 1 << 20;

/**
 * A Writable that appends to a file opened for appending, in batches of APPEND_BATCH bytes. It takes up to
 * four batches more while one is written, so the body keeps flowing (with one, the socket was paused during
 * each batch's write and a 1,000 MB push ran at 0.73 to 0.84x Distribution's MB/s).
 */
class BatchedAppend extends Writable {
  #chunks: Buffer[] = [];
  #held = 0;
  /** Bytes written to the file so far. */
  written = 0;
  constructor(private readonly handle: FileHandle) {
    super({ highWaterMark: 4 * APPEND_BATCH });
  }
  override _write(chunk: Buffer, _encoding: BufferEncoding, done: (err?: Error | null) => void): void {
    this.#hold(chunk);
    if (this.#held < APPEND_BATCH) return done();
    this.#flush().then(() => done(), done);
  }
  override _writev(chunks: { chunk: Buffer }[], done: (err?: Error | null) => void): void {
    for (const { chunk } of chunks) this.#hold(chunk);
    if (this.#held < APPEND_BATCH) return done();
    this.#flush().then(() => done(), done);
  }
  override _final(done: (err?: Error | null) => void): void {
    this.#flush().then(() => done(), done);
  }
  override _destroy(err: Error | null, done: (err?: Error | null) => void): void {
    this.handle.close().then(() => done(err), () => done(err));
  }
  #hold(chunk: Buffer) {
    // The socket's chunks are not reused by Node after they are read: holding them is safe.
    this.#chunks.push(chunk);
    this.#held += chunk.length;
  }
  async #flush() {
    let chunks = this.#chunks;
    let left = this.#held;
    this.#chunks = [];
    this.#held = 0;
    while (left > 0) {
      const { bytesWritten } = await this.handle.writev(chunks);
      this.written += bytesWritten;
      left -= bytesWritten;
      if (left === 0) break;
      // A short write: what is left of the chunks, from the first byte not written.
      let skip = bytesWritten;
      const rest: Buffer[] = [];
      for (const c of chunks) {
        if (skip >= c.length) skip -= c.length;
        else {
          rest.push(skip ? c.subarray(skip) : c);
          skip = 0;
        }
      }
      chunks = rest;
    }
  }
}

/** A blob is sent in reads of this size, into buffers reused from one read (and one blob) to the next. */
const SEND_CHUNK = 1 << 20;
/** Blobs up to this size are read into a buffer of their own size (most of a pull's blobs are small). */
const SEND_SMALL = 64 << 10;
/** Chunks a send leaves queued on the response before it waits for the response to drain. */
const SEND_QUEUED = 2;
/**
 * Spare send buffers kept between sends, process-wide (at most 32 MiB). A send holds up to SEND_QUEUED + 1
 * buffers and a client pulls up to six blobs at once (skopeo, docker): a pull's 18 buffers come back as spares
 * for the next. With 8 kept, every pull dropped and allocated ten 1 MiB buffers, and their external memory
 * set off V8's major collections during pulls (bench/LOG.md, 2026-12-07, "the large pull").
 */
const SEND_SPARE = 32;
const spare: Buffer[] = [];
let allocated = 0;
const takeBuffer = () => spare.pop() ?? (allocated++, Buffer.allocUnsafeSlow(SEND_CHUNK));
/** The send buffers allocated since the process started, and the spares kept now. */
export const sendBuffers = (): { allocated: number; spare: number } => ({ allocated, spare: spare.length });
const giveBack = (b: Buffer) => {
  if (b.length === SEND_CHUNK && spare.length < SEND_SPARE) spare.push(b);
};

/** Resolves when `out` drains; rejects when it closes or fails first. */
function drained(out: Writable): Promise<void> {
  return new Promise((resolve, reject) => {
    const cleanup = () => {
      out.off("drain", onDrain);
      out.off("close", onClose);
      out.off("error", onError);
    };
    const onDrain = () => (cleanup(), resolve());
    const onClose = () => (cleanup(), reject(new Error("the response closed before the blob was sent")));
    const onError = (err: Error) => (cleanup(), reject(err));
    out.on("drain", onDrain);
    out.on("close", onClose);
    out.on("error", onError);
  });
}

/**
 * Sends bytes [start, end) of an open file to `out`: each read goes into a buffer that returns to the spares only
 * once `out` has written it (its write callback: the socket no longer holds it), and the next read runs while
 * the previous chunk is written.
 */
function fileSend(handle: FileHandle, start: number, end: number): BlobSend {
  let closed: Promise<void> | undefined;
  const close = () => (closed ??= handle.close());
  return {
    close,
    async pipeTo(out, sent) {
      const small = end - start <= SEND_SMALL;
      const readAt = async (pos: number) => {
        const buf = small ? Buffer.allocUnsafe(end - start) : takeBuffer();
        try {
          const { bytesRead } = await handle.read(buf, 0, Math.min(buf.length, end - pos), pos);
          if (bytesRead === 0) throw new Error(`the blob ends at ${pos}, before its size ${end}`);
          return { buf, bytes: bytesRead };
        } catch (err) {
          giveBack(buf);
          throw err;
        }
      };
      let next: ReturnType<typeof readAt> | undefined;
      let queued = 0;
      try {
        let pos = start;
        next = pos < end ? readAt(pos) : undefined;
        while (next) {
          const { buf, bytes } = await next;
          pos += bytes;
          next = pos < end ? readAt(pos) : undefined;
          if (out.destroyed) throw new Error("the response closed before the blob was sent");
          sent(bytes);
          queued++;
          const more = out.write(bytes === buf.length ? buf : buf.subarray(0, bytes), (err) => {
            queued--;
            if (!err) giveBack(buf);
          });
          if (!more && queued >= SEND_QUEUED) await drained(out);
        }
        out.end();
        await finished(out);
      } finally {
        next?.catch(() => {});
        await close();
      }
    },
  };
}

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
  /** rename(2) into the blob's directory, made first only when missing (the 256 per algorithm exist early on). */
  const renameInto = async (from: string, to: string) => {
    try {
      await rename(from, to);
    } catch (err) {
      if (!isMissing(err)) throw err;
      await mkdir(join(to, ".."), { recursive: true });
      await rename(from, to);
    }
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

    async openSend(digest, range) {
      const handle = await open(blobPath(digest), "r");
      try {
        return range ? fileSend(handle, range.start, range.end + 1) : fileSend(handle, 0, (await handle.stat()).size);
      } catch (err) {
        await handle.close();
        throw err;
      }
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
        let handle: FileHandle;
        try {
          // Appending, never creating: an upload that is not there stays not there.
          handle = await open(path, constants.O_WRONLY | constants.O_APPEND);
        } catch (err) {
          if (isMissing(err)) throw new Error(`no upload ${id}`);
          throw err;
        }
        let size: number;
        try {
          size = (await handle.stat()).size;
        } catch (err) {
          await handle.close();
          throw err;
        }
        if (size !== offset) {
          await handle.close();
          data.resume(); // the chunk is not staged: let its bytes go
          throw new UploadOffsetError(size);
        }
        // The new size is the offset and the bytes written (appends to an upload are serialized here, and the
        // size was checked above): no stat after.
        const appending = new BatchedAppend(handle);
        try {
          await pipeline(data, appending);
        } catch (err) {
          // A chunk cut short stages nothing: the upload goes back to where it was.
          await truncate(path, offset).catch(() => {});
          throw err;
        }
        return offset + appending.written;
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
        await renameInto(from, to);
      });
    },

    async put(digest, bytes) {
      const to = blobPath(digest);
      try {
        await stat(to);
        return false; // stored already: kept as it is
      } catch (err) {
        if (!isMissing(err)) throw err;
      }
      await ensureDirs();
      // Written whole under a name of its own, then renamed into place: never readable in part.
      const staged = join(uploadsDir, randomUUID());
      await writeFile(staged, bytes, { flag: "wx" });
      try {
        await renameInto(staged, to);
      } catch (err) {
        await rm(staged, { force: true });
        throw err;
      }
      return true;
    },

    async readSmall(digest, limit) {
      const handle = await open(blobPath(digest), "r");
      try {
        const { size } = await handle.stat();
        if (size > limit) return undefined;
        const buf = Buffer.allocUnsafe(size);
        let at = 0;
        while (at < size) {
          const { bytesRead } = await handle.read(buf, at, size - at, at);
          if (bytesRead === 0) throw new Error(`the blob ${digest} ends at ${at}, before its size ${size}`);
          at += bytesRead;
        }
        return buf;
      } finally {
        await handle.close();
      }
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
