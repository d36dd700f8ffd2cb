// A BlobStore on S3-compatible object storage (AWS S3, MinIO, Ceph RGW, ...), through the AWS SDK v3, so that
// replicas of the server share blobs and uploads in progress.
//
// Keys, under the configured prefix:
//   blobs/<alg>/<hex>                    a committed blob
//   uploads/<id>/started                 an empty marker written by startUpload (an empty upload exists too)
//   uploads/<id>/chunk-<offset, 16 digits>   each appended chunk, as its own object
//
// Every piece of an upload's state is an object in the bucket: the PATCH requests of one upload may reach
// different replicas, and none of them keeps anything in memory between requests. A chunk object appears whole
// or not at all (a single PUT, or a multipart upload completed only after the last byte), so a chunk whose
// request broke off stages nothing. Commit composes the chunks into blobs/<alg>/<hex> with one server-side copy
// (a single chunk) or one multipart upload (several): parts copied server-side (UploadPartCopy) where a chunk
// is large enough to stand as a part, streamed through this process (GET piped into UploadPart, never held
// whole) where small chunks must be joined to reach S3's 5 MiB minimum part size. The blob's key appears only
// when CopyObject or CompleteMultipartUpload returns, so a partial blob is never visible.
//
// Bytes stream in and out: an append holds at most the SDK uploader's queue (APPEND_QUEUE parts of
// APPEND_PART_BYTES) in memory, a read hands over the response stream, a commit at most one part in flight.
import { PassThrough, Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CopyObjectCommand,
  CreateMultipartUploadCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  UploadPartCommand,
  UploadPartCopyCommand,
  type _Object,
  type CompletedPart,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { type BlobStore, UploadOffsetError } from "./contracts.js";

export interface S3StoreOptions {
  bucket: string;
  /** The service's URL for S3-compatible servers (MinIO, ...); unset: AWS S3 of `region`. */
  endpoint?: string;
  region: string;
  /** Key prefix of everything this store writes ("" or ending in "/"). */
  prefix: string;
  /** Address the bucket in the path (http://host/bucket/key) rather than the host name; most S3-compatible servers need it. */
  forcePathStyle: boolean;
  /** Explicit credentials (tests); unset: the SDK's default chain (AWS_ACCESS_KEY_ID..., profiles, instance roles). */
  credentials?: { accessKeyId: string; secretAccessKey: string };
}

/** S3's smallest part of a multipart upload, except the last. */
export const MIN_PART_BYTES = 5 * 1024 * 1024;
/** S3's largest part, and the largest object one CopyObject may copy. */
export const MAX_PART_BYTES = 5 * 1024 * 1024 * 1024;
/** S3's most parts in one multipart upload. */
const MAX_PARTS = 10_000;
/** How an append of unknown length is cut into parts, and how many of them may be in flight at once. */
const APPEND_PART_BYTES = MIN_PART_BYTES;
const APPEND_QUEUE = 2;

const DIGEST = /^(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$/;
const UPLOAD_ID = /^[A-Za-z0-9_-]{1,128}$/;
const CHUNK = /^chunk-(\d{16})$/;

/** A chunk of an upload as listed: its key, where it starts in the upload, and its size. */
export interface StagedChunk {
  key: string;
  offset: number;
  size: number;
}

/** A slice [start, end] (inclusive) of one chunk object. */
export interface ChunkRange {
  key: string;
  start: number;
  end: number;
}

/** A part of the multipart upload that composes a blob: one range copied server-side, or ranges streamed in order. */
export type PartPlan = { copy: ChunkRange } | { stream: ChunkRange[]; size: number };

/**
 * Cuts the chunks of an upload (in order, contiguous) into the parts of a multipart upload: every part but the
 * last at least MIN_PART_BYTES and at most MAX_PART_BYTES, at most MAX_PARTS parts. A stretch of at least
 * MIN_PART_BYTES inside one chunk is copied server-side; smaller chunks are joined (and a large chunk's head
 * borrowed when needed) into parts streamed through this process, of about `streamTarget` bytes.
 */
export function planParts(chunks: readonly StagedChunk[], streamTarget = MIN_PART_BYTES): PartPlan[] {
  const total = chunks.reduce((n, c) => n + c.size, 0);
  const target = Math.max(streamTarget, MIN_PART_BYTES, Math.ceil(total / (MAX_PARTS - 1)));
  const parts: PartPlan[] = [];
  let pending: ChunkRange[] = [];
  let pendingSize = 0;
  const flush = () => {
    if (pendingSize > 0) parts.push({ stream: pending, size: pendingSize });
    pending = [];
    pendingSize = 0;
  };
  for (const chunk of chunks) {
    let pos = 0;
    while (pos < chunk.size) {
      const left = chunk.size - pos;
      if (pendingSize === 0 && left >= MIN_PART_BYTES) {
        // Copy server-side, in even pieces of at most MAX_PART_BYTES (each then well above the minimum).
        const pieces = Math.ceil(left / MAX_PART_BYTES);
        const piece = Math.ceil(left / pieces);
        for (let i = 0; i < pieces; i++) {
          const start = pos + i * piece;
          const end = Math.min(chunk.size, start + piece) - 1;
          parts.push({ copy: { key: chunk.key, start, end } });
        }
        pos = chunk.size;
        continue;
      }
      // Join into the streamed part: take what it lacks to reach the target, or the rest of the chunk.
      const take = Math.min(left, target - pendingSize);
      pending.push({ key: chunk.key, start: pos, end: pos + take - 1 });
      pendingSize += take;
      pos += take;
      if (pendingSize >= target) flush();
    }
  }
  flush();
  return parts;
}

function checkDigest(digest: string): { alg: string; hex: string } {
  if (!DIGEST.test(digest)) throw new TypeError(`not a sha256 or sha512 digest: ${JSON.stringify(digest)}`);
  const [alg, hex] = digest.split(":") as [string, string];
  return { alg, hex };
}

function checkUploadId(id: string): string {
  if (!UPLOAD_ID.test(id)) throw new TypeError(`not an upload id: ${JSON.stringify(id)}`);
  return id;
}

function isNotFound(err: unknown): boolean {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e?.name === "NotFound" || e?.name === "NoSuchKey" || e?.$metadata?.httpStatusCode === 404;
}

/** Counts the bytes passing through. */
function counter(): Transform & { bytes: number } {
  const t = new Transform({
    transform(chunk: Buffer, _enc, done) {
      t.bytes += chunk.length;
      done(null, chunk);
    },
  }) as Transform & { bytes: number };
  t.bytes = 0;
  return t;
}

/** Passes on only the bytes [start, end] (inclusive) of what flows through. */
function slice(start: number, end: number): Transform {
  let pos = 0;
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      const from = Math.max(0, start - pos);
      const to = Math.min(chunk.length, end + 1 - pos);
      pos += chunk.length;
      done(null, from < to ? chunk.subarray(from, to) : undefined);
    },
  });
}

export function createS3BlobStore(options: S3StoreOptions): BlobStore & { readonly client: S3Client } {
  // The SDK warns on stderr, in several raw lines, that its releases after January 2027 will need Node 22: the
  // version here is pinned and runs on Node 20, so the notice is only noise in the server's JSON log.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= "true";
  const client = new S3Client({
    region: options.region,
    ...(options.endpoint ? { endpoint: options.endpoint } : {}),
    forcePathStyle: options.forcePathStyle,
    ...(options.credentials ? { credentials: options.credentials } : {}),
    // The SDK's default of adding CRC checksums to every request is refused by some S3-compatible servers;
    // integrity is the registry's own concern (every blob is verified against its digest).
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
  const Bucket = options.bucket;
  const prefix = options.prefix;
  const blobKey = (digest: string) => {
    const { alg, hex } = checkDigest(digest);
    return `${prefix}blobs/${alg}/${hex}`;
  };
  const uploadPrefix = (id: string) => `${prefix}uploads/${checkUploadId(id)}/`;

  async function* listObjects(Prefix: string): AsyncGenerator<_Object> {
    let ContinuationToken: string | undefined;
    do {
      const page = await client.send(new ListObjectsV2Command({ Bucket, Prefix, ContinuationToken }));
      for (const o of page.Contents ?? []) yield o;
      ContinuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (ContinuationToken);
  }

  /** The upload's objects: whether it exists, its chunks in order (checked contiguous) and its size. */
  async function staged(id: string): Promise<{ chunks: StagedChunk[]; size: number } | undefined> {
    const base = uploadPrefix(id);
    const chunks: StagedChunk[] = [];
    let exists = false;
    for await (const o of listObjects(base)) {
      exists = true;
      const m = CHUNK.exec(o.Key!.slice(base.length));
      if (m) chunks.push({ key: o.Key!, offset: Number(m[1]), size: o.Size ?? 0 });
    }
    if (!exists) return undefined;
    chunks.sort((a, b) => a.offset - b.offset);
    let size = 0;
    for (const c of chunks) {
      if (c.offset !== size) throw new Error(`upload ${id}: staged chunks are not contiguous at byte ${size}`);
      size += c.size;
    }
    return { chunks, size };
  }

  async function getRange(r: ChunkRange): Promise<Readable> {
    const res = await client.send(new GetObjectCommand({ Bucket, Key: r.key, Range: `bytes=${r.start}-${r.end}` }));
    return res.Body as Readable;
  }

  /** The ranges, one after the other, as one stream (each GET opened when the previous one ends). */
  function concat(ranges: readonly ChunkRange[]): Readable {
    return Readable.from(
      (async function* () {
        for (const r of ranges) {
          if (r.end < r.start) continue;
          for await (const b of await getRange(r)) yield b as Buffer;
        }
      })(),
      { objectMode: false },
    );
  }

  async function removeKeys(keys: string[]): Promise<void> {
    for (let i = 0; i < keys.length; i += 1000) {
      const Objects = keys.slice(i, i + 1000).map((Key) => ({ Key }));
      await client.send(new DeleteObjectsCommand({ Bucket, Delete: { Objects, Quiet: true } }));
    }
  }

  async function compose(chunks: StagedChunk[], size: number, Key: string): Promise<void> {
    if (size === 0) {
      await client.send(new PutObjectCommand({ Bucket, Key, Body: "", ContentLength: 0 }));
      return;
    }
    const nonEmpty = chunks.filter((c) => c.size > 0);
    if (nonEmpty.length === 1 && size <= MAX_PART_BYTES) {
      await client.send(new CopyObjectCommand({ Bucket, Key, CopySource: copySource(nonEmpty[0]!.key) }));
      return;
    }
    const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket, Key }));
    try {
      const done: CompletedPart[] = [];
      for (const [i, part] of planParts(nonEmpty).entries()) {
        const PartNumber = i + 1;
        if ("copy" in part) {
          const { CopyPartResult } = await client.send(
            new UploadPartCopyCommand({ Bucket, Key, UploadId, PartNumber, CopySource: copySource(part.copy.key), CopySourceRange: `bytes=${part.copy.start}-${part.copy.end}` }),
          );
          done.push({ PartNumber, ETag: CopyPartResult?.ETag });
        } else {
          const { ETag } = await client.send(new UploadPartCommand({ Bucket, Key, UploadId, PartNumber, Body: concat(part.stream), ContentLength: part.size }));
          done.push({ PartNumber, ETag });
        }
      }
      await client.send(new CompleteMultipartUploadCommand({ Bucket, Key, UploadId, MultipartUpload: { Parts: done } }));
    } catch (err) {
      await client.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId })).catch(() => undefined);
      throw err;
    }
  }

  const copySource = (key: string) => `${Bucket}/${key.split("/").map(encodeURIComponent).join("/")}`;

  return {
    kind: "s3",
    client,

    async stat(digest) {
      return headSize(blobKey(digest));
    },

    async read(digest, range) {
      try {
        const res = await client.send(new GetObjectCommand({ Bucket, Key: blobKey(digest), ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}) }));
        const body = res.Body as Readable;
        if (!range) return body;
        // Never more than the range asked: a server that ignored the Range answers the whole object without
        // Content-Range (cut the range out of it), and some S3-compatible ones send more than they announce
        // for bytes=0-0 (stop at the range's length).
        const kept = res.ContentRange ? slice(0, range.end - range.start) : slice(range.start, range.end);
        body.on("error", (err) => kept.destroy(err));
        return body.pipe(kept);
      } catch (err) {
        if (isNotFound(err)) throw new Error(`blob ${digest} not found`, { cause: err });
        throw err;
      }
    },

    async delete(digest) {
      await client.send(new DeleteObjectCommand({ Bucket, Key: blobKey(digest) }));
    },

    async *list() {
      const base = `${prefix}blobs/`;
      for await (const o of listObjects(base)) {
        const [alg, hex, ...rest] = o.Key!.slice(base.length).split("/");
        const digest = `${alg}:${hex}`;
        if (rest.length === 0 && DIGEST.test(digest)) yield { digest, modified: o.LastModified ?? new Date(0) };
      }
    },

    async startUpload(id) {
      await client.send(new PutObjectCommand({ Bucket, Key: `${uploadPrefix(id)}started`, Body: "", ContentLength: 0 }));
    },

    async append(id, offset, data) {
      const state = await staged(id);
      if (!state) throw new Error(`upload ${id} not found`);
      if (offset !== state.size) throw new UploadOffsetError(state.size);
      const count = counter();
      const body = new PassThrough();
      const Key = `${uploadPrefix(id)}chunk-${String(offset).padStart(16, "0")}`;
      const upload = new Upload({ client, params: { Bucket, Key, Body: body }, partSize: APPEND_PART_BYTES, queueSize: APPEND_QUEUE, leavePartsOnError: false });
      // The source's failure fails the pipeline, which destroys `body`: the uploader then aborts its multipart
      // upload (or never sends its single PUT), so a broken chunk stages nothing.
      const piped = pipeline(data, count, body);
      const [p, u] = await Promise.allSettled([piped, upload.done()]);
      if (p.status === "rejected") {
        await upload.abort().catch(() => undefined);
        // A small chunk may have been sent whole before the source failed: remove it.
        await client.send(new DeleteObjectCommand({ Bucket, Key })).catch(() => undefined);
        throw p.reason;
      }
      if (u.status === "rejected") throw u.reason;
      return offset + count.bytes;
    },

    async uploadSize(id) {
      return (await staged(id))?.size;
    },

    async readUpload(id) {
      const state = await staged(id);
      if (!state) throw new Error(`upload ${id} not found`);
      return concat(state.chunks.map((c) => ({ key: c.key, start: 0, end: c.size - 1 })));
    },

    async commit(id, digest) {
      const Key = blobKey(digest);
      const state = await staged(id);
      const exists = await headSize(Key);
      if (!state) {
        if (exists) return;
        throw new Error(`upload ${id} not found`);
      }
      if (!exists) await compose(state.chunks, state.size, Key);
      await removeKeys(await keysUnder(uploadPrefix(id)));
    },

    async abort(id) {
      await removeKeys(await keysUnder(uploadPrefix(id)));
    },

    async *listUploads() {
      const base = `${prefix}uploads/`;
      // Objects come in key order, so one upload's objects are consecutive.
      let current: { id: string; modified: Date } | undefined;
      for await (const o of listObjects(base)) {
        const id = o.Key!.slice(base.length).split("/", 1)[0]!;
        const modified = o.LastModified ?? new Date(0);
        if (current && current.id !== id) {
          yield current;
          current = undefined;
        }
        if (!current) current = { id, modified };
        else if (modified > current.modified) current.modified = modified;
      }
      if (current) yield current;
    },

    async close() {
      client.destroy();
    },
  };

  async function headSize(Key: string): Promise<{ size: number } | undefined> {
    try {
      const head = await client.send(new HeadObjectCommand({ Bucket, Key }));
      return { size: head.ContentLength ?? 0 };
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async function keysUnder(base: string): Promise<string[]> {
    const keys: string[] = [];
    for await (const o of listObjects(base)) keys.push(o.Key!);
    return keys;
  }
}
