// Reading zip archives (OSV exports, Python wheels) with yauzl, bounded so a hostile archive cannot exhaust
// memory or disk time: the central directory is read first (entry names and declared sizes, no data), the
// archive is refused when it has too many entries or declares more uncompressed bytes in total than the
// limit, and each entry is read only when its declared size is within the per-entry limit. yauzl enforces the
// declared sizes while inflating (validateEntrySizes), so an entry that lies about its size fails instead of
// growing without end: together this bounds classic and overlapping-entry zip bombs. Reads are streamed one
// entry at a time, never the whole archive's contents at once.
import type { Readable } from "node:stream";
import { fromBufferPromise, openPromise, type Entry, type ZipFile } from "yauzl";

export interface ZipLimits {
  /** The largest uncompressed entry that is read (bytes). */
  maxEntryBytes: number;
  /** The most uncompressed bytes the archive may declare over the entries `select` keeps. */
  maxTotalBytes: number;
  /** The most entries the archive may have. */
  maxEntries: number;
}

export const DEFAULT_ZIP_LIMITS: ZipLimits = { maxEntryBytes: 16 * 1024 * 1024, maxTotalBytes: 8 * 1024 * 1024 * 1024, maxEntries: 2_000_000 };

/** An archive that cannot be read at all (not a zip, corrupt, over the limits): the message says why. */
class ZipArchiveError extends Error {}

interface ZipEntry {
  /** The entry's path inside the archive, `/`-separated. */
  name: string;
  /** Declared uncompressed size. */
  size: number;
  /** Why this entry will not be read (too large, encrypted, unsupported compression), or undefined. */
  refused: string | undefined;
}

interface ZipArchive {
  /** The file entries (directories left out) `select` kept, in central directory order. */
  readonly entries: readonly ZipEntry[];
  /** The names of the file entries `select` left out. */
  readonly others: readonly string[];
  /** The entry's bytes; throws when it was refused, or when its data does not match its declared size. */
  read(entry: ZipEntry): Promise<Buffer>;
  close(): void;
}

function mib(n: number): string {
  return n >= 1024 * 1024 ? `${(n / (1024 * 1024)).toFixed(1)} MiB` : `${n} bytes`;
}

async function readAll(stream: Readable, limit: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream as AsyncIterable<Buffer>) {
    size += chunk.length;
    // yauzl already fails an entry larger than it declared; this holds even if that check were off.
    if (size > limit) {
      stream.destroy();
      throw new Error(`uncompressed data exceeds ${mib(limit)}`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * Opens a zip (a path or the bytes) and reads its central directory. `select` chooses the entries of
 * interest (by name); only those count toward maxTotalBytes. Throws ZipArchiveError for a file that is not a
 * zip or is over the limits.
 */
export async function openZip(source: string | Buffer, limits: ZipLimits = DEFAULT_ZIP_LIMITS, select: (name: string) => boolean = () => true): Promise<ZipArchive> {
  let zip: ZipFile;
  try {
    const options = { lazyEntries: true, autoClose: false, validateEntrySizes: true, strictFileNames: false };
    zip = typeof source === "string" ? await openPromise(source, options) : await fromBufferPromise(source, options);
  } catch (err) {
    throw new ZipArchiveError(`not a zip file (${(err as Error).message})`);
  }
  const entries: ZipEntry[] = [];
  const others: string[] = [];
  const raw = new Map<ZipEntry, Entry>();
  try {
    if (zip.entryCount > limits.maxEntries) throw new ZipArchiveError(`the archive has ${zip.entryCount} entries, more than the limit of ${limits.maxEntries}`);
    let total = 0;
    for await (const e of zip.eachEntry()) {
      if (e.fileName.endsWith("/")) continue;
      if (!select(e.fileName)) {
        others.push(e.fileName);
        continue;
      }
      let refused: string | undefined;
      if (e.uncompressedSize > limits.maxEntryBytes) refused = `uncompressed size ${mib(e.uncompressedSize)} exceeds the limit of ${mib(limits.maxEntryBytes)} per entry`;
      else if (e.isEncrypted()) refused = "the entry is encrypted";
      else if (!e.canDecodeFileData()) refused = `unsupported compression method ${e.compressionMethod}`;
      else total += e.uncompressedSize;
      if (total > limits.maxTotalBytes) {
        throw new ZipArchiveError(`the archive declares more than ${mib(limits.maxTotalBytes)} of uncompressed data, over the limit (a zip bomb, or an archive to split)`);
      }
      const entry = { name: e.fileName, size: e.uncompressedSize, refused };
      entries.push(entry);
      raw.set(entry, e);
    }
  } catch (err) {
    zip.close();
    if (err instanceof ZipArchiveError) throw err;
    throw new ZipArchiveError(`corrupt zip archive (${(err as Error).message})`);
  }
  return {
    entries,
    others,
    async read(entry) {
      const e = raw.get(entry);
      if (!e) throw new Error(`${entry.name}: not an entry of this archive`);
      if (entry.refused) throw new Error(entry.refused);
      try {
        return await readAll(await zip.openReadStreamPromise(e), limits.maxEntryBytes);
      } catch (err) {
        // yauzl: "too many bytes in the stream" (data over its declared size), zlib's errors for corrupt data.
        throw new Error(`unreadable entry: ${(err as Error).message}`);
      }
    },
    close: () => zip.close(),
  };
}
