// Garbage collection of the registry's storage: uploads abandoned for longer than the upload TTL, and blobs
// that nothing references any more. Run by `npm run registry-gc` and, when REGISTRY_GC_INTERVAL_MINUTES is set,
// by a worker in the server.
//
// Safe against pushes running at the same time, without stopping them (docs/registry-storage.md):
//
// - Grace period. A blob written less than `graceMs` ago is never a candidate, referenced or not. A push writes
//   its blobs first (commit) and links them afterwards (the upload's repo link, then the manifest), so a blob
//   being pushed is young until it is linked: the grace period must be longer than a push takes from a blob's
//   commit to its link (one request when the link is made at commit or mount, as the routes do).
// - Mark, then sweep. The mark phase lists every blob older than the grace period and asks which of them are
//   referenced; the others are candidates. The sweep phase asks again, batch by batch, right before deleting:
//   a candidate linked since the mark (a push that reused an old, unreferenced blob by digest: commit keeps the
//   existing blob with its old time) is referenced at the second asking and kept.
// - What remains is a link made after the second asking and before the delete of the same digest. The routes
//   check from their side: after linking a blob that already existed they check it is still there
//   (BlobStore.stat); if not, they store the bytes they received again. A link made after a batch's second
//   asking whose re-check also ran before that digest's delete (the deletes of the candidates before it in the
//   batch) is still lost: a blob unreferenced for the whole grace period, reused in those seconds
//   (docs/registry-storage.md).
// - A mount has no bytes to store again, and needs no re-check: it links only a blob its source repo links, and
//   holds the source's link (a row lock) until its own link commits (store.ts mountPushed), so the blob is
//   referenced at every instant in between and never a candidate at a second asking.
//
// Uploads need no such care: an upload that has not grown for the TTL is abandoned by definition, and a client
// resuming it after its removal is told BLOB_UPLOAD_UNKNOWN and starts over.
import type { RegistrySettings } from "../../config.js";
import { log } from "../../kernel/log.js";
import type { RunningWorker } from "../../kernel/module.js";
import type { BlobStore } from "./contracts.js";

/** What tells garbage collection that a blob is still needed. */
export interface BlobReferences {
  /**
   * Of `digests`, those still referenced: linked to a repository (by an upload committed into it or a mount)
   * or named by a manifest stored in any repository (its config, layers, child manifests, subject), or a
   * manifest itself.
   */
  referenced(digests: readonly string[]): Promise<ReadonlySet<string>>;
}

export interface GcOptions {
  /** Uploads that have not grown for this long are removed. */
  uploadTtlMs: number;
  /** Blobs written more recently than this are kept, referenced or not. */
  graceMs: number;
  /** The clock (tests). */
  now?: () => Date;
  /** Report what would be removed, remove nothing. */
  dryRun?: boolean;
  /** Digests asked about per BlobReferences call, and deleted per sweep step (default 500). */
  batchSize?: number;
}

export interface GcReport {
  dryRun: boolean;
  uploads: { seen: number; removed: number };
  blobs: {
    seen: number;
    /** Written within the grace period. */
    young: number;
    /** Referenced when marked. */
    referenced: number;
    /** Unreferenced when marked, referenced again when swept. */
    relinked: number;
    removed: number;
    /** Bytes of the removed blobs (as stat saw them before the delete). */
    removedBytes: number;
  };
}

/** Removes abandoned uploads, then unreferenced blobs (mark, then sweep). */
export async function collectGarbage(store: BlobStore, references: BlobReferences, options: GcOptions): Promise<GcReport> {
  const now = (options.now ?? (() => new Date()))().getTime();
  const dryRun = options.dryRun ?? false;
  const batchSize = options.batchSize ?? 500;
  const report: GcReport = {
    dryRun,
    uploads: { seen: 0, removed: 0 },
    blobs: { seen: 0, young: 0, referenced: 0, relinked: 0, removed: 0, removedBytes: 0 },
  };

  // Uploads: collected first (listing while removing could skip entries on some stores), then removed.
  const abandoned: string[] = [];
  for await (const u of store.listUploads()) {
    report.uploads.seen++;
    if (u.modified.getTime() < now - options.uploadTtlMs) abandoned.push(u.id);
  }
  for (const id of abandoned) {
    if (!dryRun) await store.abort(id);
    report.uploads.removed++;
  }

  // Mark: every blob older than the grace period that nothing references.
  const candidates: string[] = [];
  let batch: string[] = [];
  const mark = async () => {
    if (batch.length === 0) return;
    const linked = await references.referenced(batch);
    for (const d of batch) {
      if (linked.has(d)) report.blobs.referenced++;
      else candidates.push(d);
    }
    batch = [];
  };
  for await (const b of store.list()) {
    report.blobs.seen++;
    if (b.modified.getTime() >= now - options.graceMs) {
      report.blobs.young++;
      continue;
    }
    batch.push(b.digest);
    if (batch.length >= batchSize) await mark();
  }
  await mark();

  // Sweep: ask again right before deleting; what was linked since the mark stays.
  for (let i = 0; i < candidates.length; i += batchSize) {
    const step = candidates.slice(i, i + batchSize);
    const linked = await references.referenced(step);
    for (const digest of step) {
      if (linked.has(digest)) {
        report.blobs.relinked++;
        continue;
      }
      const size = (await store.stat(digest))?.size ?? 0;
      if (!dryRun) await store.delete(digest);
      report.blobs.removed++;
      report.blobs.removedBytes += size;
    }
  }
  return report;
}

export interface GcWorker extends RunningWorker {
  /** Stops the schedule and waits for a run under way to end (a run is not cut short). */
  stop(): Promise<void>;
}

/**
 * Collects garbage every `intervalMs` (the first run one interval after start), one run at a time. A failed
 * run is reported through `onError` and the next one happens on schedule. Replicas may each run one: every
 * removal is idempotent, so two collectors at once only repeat work (enable it on one replica to avoid that).
 */
export function startGcWorker(
  store: BlobStore,
  references: BlobReferences,
  options: GcOptions & { intervalMs: number; onReport?: (report: GcReport) => void; onError?: (err: unknown) => void },
): GcWorker {
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;
  let stopped = false;
  const schedule = () => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = collectGarbage(store, references, options).then(
        (report) => options.onReport?.(report),
        (err: unknown) => options.onError?.(err),
      );
      void running.finally(() => {
        running = undefined;
        schedule();
      });
    }, options.intervalMs);
    timer.unref();
  };
  schedule();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}

/**
 * The server's collector, as REGISTRY_GC_INTERVAL_MINUTES sets it (undefined when 0: off), logging each run
 * that removed something (info) and each failure (warn).
 */
export function startConfiguredGcWorker(store: BlobStore, references: BlobReferences, settings: RegistrySettings): GcWorker | undefined {
  if (settings.gcIntervalMs <= 0) return undefined;
  return startGcWorker(store, references, {
    uploadTtlMs: settings.uploadTtlMs,
    graceMs: settings.gcGraceMs,
    intervalMs: settings.gcIntervalMs,
    onReport: (report) => {
      if (report.uploads.removed > 0 || report.blobs.removed > 0) log.info("registry garbage collected", { uploads: report.uploads, blobs: report.blobs });
    },
    onError: (err) => log.warn("registry garbage collection failed", { err: String(err) }),
  });
}
