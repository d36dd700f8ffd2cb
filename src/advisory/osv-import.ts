// The OSV importer: OSV JSON records (docs/data-formats.md, "OSV records") from directories (every *.json beneath them,
// and zips found there) and zip archives, into osv_records.
//
// Decisions:
// - One record per file (or zip entry), as OSV publishes them. Each is parsed and validated before anything
//   is written; an invalid one is skipped with its path and the offending field
//   (`GHSA-x.json: references[2].type: unknown type "FOO"`), and the run's exit status says so.
// - content_hash is the sha256 of the file's bytes: an unchanged file writes nothing, a changed one rewrites
//   its row only. A record whose source (path) moved but whose bytes did not is updated too, so `source` stays
//   true.
// - Valid records are written in batches of up to BATCH_SIZE, one transaction each (a batch holds only records
//   that already passed validation, so a bad file never half-writes). A batch the database refuses is retried
//   one record per transaction, so one bad row cannot take good ones with it.
// - The same id in two files of one run: the first is imported, the later ones are skipped naming the first
//   (otherwise every run would flip the row between them and never be idempotent).
// - Withdrawn records (`withdrawn` set) are stored like any other, with withdrawn_time: the readers leave them
//   out (security-advisory.store.ts), and a later un-withdrawn version replaces them.
// - Zip archives are read with yauzl within limits (kernel/zip.ts): entries over the per-entry size are
//   skipped with the reason; an archive declaring more than the total is refused whole before any entry is
//   read. Entries that are not *.json are listed under `ignored` (not an error).
import { createHash } from "node:crypto";
import { readFile, readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { inArray } from "drizzle-orm";
import { osvRecords } from "../db/schema/index.js";
import { proposedValues, type Executor } from "../kernel/store.js";
import { DEFAULT_ZIP_LIMITS, openZip, type ZipLimits } from "../kernel/zip.js";
import { validateOsvRecord, type OsvRecord } from "./osv-record.js";

const BATCH_SIZE = 500;

interface OsvImportOptions {
  /** Limits for zip archives; maxEntryBytes also caps a plain file. */
  zipLimits?: ZipLimits;
  /** Called after each file (or entry) with the count so far. */
  onProgress?: (done: number) => void;
}

interface Skipped {
  path: string;
  reason: string;
}

interface OsvImportSummary {
  records: { added: number; changed: number; unchanged: number };
  /** Files that were rejected (unreadable, malformed, invalid, duplicate id, not written): exit status 1. */
  skipped: Skipped[];
  /** Zip entries that are not OSV JSON files (not an error). */
  ignored: Skipped[];
}

interface Pending {
  record: OsvRecord;
  source: string;
  hash: string;
}

class Importer {
  readonly summary: OsvImportSummary = { records: { added: 0, changed: 0, unchanged: 0 }, skipped: [], ignored: [] };
  private batch: Pending[] = [];
  private readonly seen = new Map<string, string>();
  private done = 0;

  constructor(
    private readonly db: Executor,
    private readonly limits: ZipLimits,
    private readonly onProgress: ((done: number) => void) | undefined,
  ) {}

  skip(path: string, reason: string): void {
    this.summary.skipped.push({ path, reason });
  }

  private tick(): void {
    this.onProgress?.(++this.done);
  }

  /** Parses and validates one file's bytes; queues the record, or skips the file with the reason. */
  async file(source: string, bytes: Buffer): Promise<void> {
    this.tick();
    let parsed: unknown;
    try {
      parsed = JSON.parse(bytes.toString("utf8"));
    } catch (err) {
      return this.skip(source, `malformed JSON: ${(err as Error).message}`);
    }
    let record: OsvRecord;
    try {
      record = validateOsvRecord(parsed);
    } catch (err) {
      return this.skip(source, (err as Error).message);
    }
    const first = this.seen.get(record.id);
    if (first !== undefined) return this.skip(source, `duplicate id ${JSON.stringify(record.id)}: already imported from ${first}`);
    this.seen.set(record.id, source);
    this.batch.push({ record, source, hash: createHash("sha256").update(bytes).digest("hex") });
    if (this.batch.length >= BATCH_SIZE) await this.flush();
  }

  async flush(): Promise<void> {
    const batch = this.batch;
    this.batch = [];
    if (batch.length === 0) return;
    try {
      const counts = await this.write(batch);
      this.count(counts);
    } catch {
      // Find the record the database refused: each on its own.
      for (const p of batch) {
        try {
          this.count(await this.write([p]));
        } catch (err) {
          this.skip(p.source, `not written: ${(err as Error).message}`);
        }
      }
    }
  }

  private count(c: OsvImportSummary["records"]): void {
    this.summary.records.added += c.added;
    this.summary.records.changed += c.changed;
    this.summary.records.unchanged += c.unchanged;
  }

  /** Writes a batch in one transaction: new rows inserted, changed rows updated, unchanged ones untouched. */
  private async write(batch: readonly Pending[]): Promise<OsvImportSummary["records"]> {
    return this.db.transaction(async (tx) => {
      const ids = batch.map((p) => p.record.id);
      const stored = await tx
        .select({ id: osvRecords.id, contentHash: osvRecords.contentHash, source: osvRecords.source })
        .from(osvRecords)
        .where(inArray(osvRecords.id, ids))
        .for("update");
      const byId = new Map(stored.map((r) => [r.id, r]));
      const counts = { added: 0, changed: 0, unchanged: 0 };
      const now = new Date();
      const rows = [];
      for (const p of batch) {
        const old = byId.get(p.record.id);
        if (old && old.contentHash === p.hash && old.source === p.source) {
          counts.unchanged++;
          continue;
        }
        if (old) counts.changed++;
        else counts.added++;
        rows.push({ ...p.record, source: p.source, contentHash: p.hash, createTime: now, updateTime: now });
      }
      if (rows.length > 0) {
        await tx
          .insert(osvRecords)
          .values(rows)
          .onConflictDoUpdate({
            target: osvRecords.id,
            set: proposedValues({
              summary: osvRecords.summary,
              details: osvRecords.details,
              aliases: osvRecords.aliases,
              references: osvRecords.references,
              severities: osvRecords.severities,
              modifiedTime: osvRecords.modifiedTime,
              publishedTime: osvRecords.publishedTime,
              withdrawnTime: osvRecords.withdrawnTime,
              source: osvRecords.source,
              contentHash: osvRecords.contentHash,
              updateTime: osvRecords.updateTime,
            }),
          });
      }
      return counts;
    });
  }

  async zip(path: string): Promise<void> {
    let archive;
    try {
      archive = await openZip(path, this.limits, (name) => name.endsWith(".json"));
    } catch (err) {
      return this.skip(path, (err as Error).message);
    }
    try {
      for (const name of archive.others) this.summary.ignored.push({ path: `${path}!/${name}`, reason: "not a .json file" });
      for (const entry of archive.entries) {
        const source = `${path}!/${entry.name}`;
        let bytes: Buffer;
        try {
          bytes = await archive.read(entry);
        } catch (err) {
          this.tick();
          this.skip(source, (err as Error).message);
          continue;
        }
        await this.file(source, bytes);
      }
    } finally {
      archive.close();
    }
  }

  async walk(path: string, depth: number): Promise<void> {
    const info = await stat(path).catch((err: Error) => {
      this.skip(path, err.message);
      return null;
    });
    if (!info) return;
    if (info.isFile()) {
      if (path.endsWith(".zip")) return this.zip(path);
      if (!path.endsWith(".json")) {
        if (depth === 0) this.skip(path, "not a directory, a .zip archive or a .json file");
        return;
      }
      if (info.size > this.limits.maxEntryBytes) {
        this.tick();
        return this.skip(path, `file size ${info.size} bytes exceeds the limit of ${this.limits.maxEntryBytes} bytes per record`);
      }
      const bytes = await readFile(path).catch((err: Error) => {
        this.skip(path, err.message);
        return null;
      });
      if (bytes) await this.file(path, bytes);
      return;
    }
    if (!info.isDirectory() || depth > 40) return;
    const entries = await readdir(path, { withFileTypes: true }).catch((err: Error) => {
      this.skip(path, err.message);
      return null;
    });
    if (!entries) return;
    for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))) {
      // Real directories and files only: a symlinked directory could revisit (or loop).
      if (e.isDirectory() || e.isFile()) await this.walk(join(path, e.name), depth + 1);
    }
  }
}

/** Imports every OSV record under the paths (directories, zip archives, JSON files). */
export async function importOsv(db: Executor, paths: readonly string[], options: OsvImportOptions = {}): Promise<OsvImportSummary> {
  const importer = new Importer(db, options.zipLimits ?? DEFAULT_ZIP_LIMITS, options.onProgress);
  for (const p of paths) await importer.walk(p, 0);
  await importer.flush();
  return importer.summary;
}
