// The package advisory importer: `<package>.advisories.yaml` files (document.ts) into advisory_documents,
// advisories and advisory_events.
//
// Decisions:
// - Each path is a file or a directory searched recursively (dot-directories such as .git skipped) for
//   `*.advisories.yaml`. A package read from two files in one run: the second is skipped with the reason.
// - A file whose bytes hash (sha256) to the stored content_hash of a document is unchanged and not parsed.
//   Any other file is parsed and validated whole; an invalid one is skipped with the field and the reason,
//   and what was stored for its package before stays as it was.
// - A changed file is written in one transaction, compared with what is stored for its package: advisories
//   and events are counted added / changed / unchanged / removed, only the added and changed are written
//   (multi-row INSERT ... ON CONFLICT DO UPDATE), and advisories or events no longer in the file are deleted.
//   Packages whose file is absent from this run are left alone (several directories may feed one database).
// - An advisory's create_time / update_time are its first / last event's time; one with no events keeps the
//   times it has (the import time when new), so a re-import does not change it.
// - Files are read, parsed and written `concurrency` at a time (the database pool's connections; 1 on PGlite,
//   which runs one transaction at a time anyway).
import { createHash } from "node:crypto";
import { readdir, readFile, stat } from "node:fs/promises";
import { basename, join } from "node:path";
import { count, eq, inArray, sql } from "drizzle-orm";
import { advisories, advisoryDocuments, advisoryEvents } from "../db/schema/index.js";
import { canonicalJson } from "../kernel/list/index.js";
import { proposedValues, type Executor } from "../kernel/store.js";
import { ReviewState } from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { AdvisoryDocumentError, parseAdvisoryDocument, type ParsedAdvisory, type ParsedDocument, type Unknown } from "./document.js";

const ADVISORY_FILE_SUFFIX = ".advisories.yaml";

interface Counts {
  added: number;
  changed: number;
  unchanged: number;
  removed: number;
}

interface AdvisoryImportSummary {
  /** Files: added (a new package), changed, unchanged (same bytes as stored), skipped (see `skipped`). */
  files: { added: number; changed: number; unchanged: number; skipped: number };
  advisories: Counts;
  events: Counts;
  skipped: { path: string; reason: string }[];
  /** What the importer does not know, kept out of the rows: how many, and a few examples (`file: path`). */
  unknown: { eventTypes: { count: number; examples: string[] }; keys: { count: number; examples: string[] } };
}

interface AdvisoryImportOptions {
  /** Files written at a time. Default 1 (PGlite runs one transaction at a time); the pool size on PostgreSQL. */
  concurrency?: number;
  onProgress?: (done: number, total: number) => void;
}

const EXAMPLES = 10;
/** Rows per INSERT statement (PostgreSQL takes at most 65,535 parameters in one). */
const CHUNK = 1000;

function emptyCounts(): Counts {
  return { added: 0, changed: 0, unchanged: 0, removed: 0 };
}

/** The `*.advisories.yaml` files under the paths, sorted; unreadable paths are reported. */
async function findAdvisoryFiles(paths: readonly string[], skip: (path: string, reason: string) => void): Promise<string[]> {
  const out: string[] = [];
  const walk = async (path: string, depth: number): Promise<void> => {
    const info = await stat(path).catch((err: Error) => {
      skip(path, err.message);
      return null;
    });
    if (!info) return;
    if (info.isFile()) {
      if (depth === 0 || path.endsWith(ADVISORY_FILE_SUFFIX)) out.push(path);
      return;
    }
    if (!info.isDirectory() || depth > 20) return;
    for (const e of await readdir(path, { withFileTypes: true })) {
      if (e.name.startsWith(".")) continue;
      // Symbolic links are followed (stat); the depth bound stops a loop of them.
      if (e.isDirectory() || e.isSymbolicLink() || (e.isFile() && e.name.endsWith(ADVISORY_FILE_SUFFIX))) await walk(join(path, e.name), depth + 1);
    }
  };
  for (const p of paths) await walk(p, 0);
  return [...new Set(out)].sort();
}

interface StoredDocument {
  contentHash: string;
  advisories: number;
  events: number;
}

async function storedDocuments(db: Executor): Promise<Map<string, StoredDocument>> {
  const docs = await db.select({ package: advisoryDocuments.package, contentHash: advisoryDocuments.contentHash }).from(advisoryDocuments);
  const perAdvisory = await db.select({ package: advisories.package, n: count() }).from(advisories).groupBy(advisories.package);
  const perEvent = await db
    .select({ package: advisories.package, n: count() })
    .from(advisoryEvents)
    .innerJoin(advisories, eq(advisories.uid, advisoryEvents.advisoryUid))
    .groupBy(advisories.package);
  const a = new Map(perAdvisory.map((r) => [r.package, r.n]));
  const e = new Map(perEvent.map((r) => [r.package, r.n]));
  return new Map(docs.map((d) => [d.package, { contentHash: d.contentHash, advisories: a.get(d.package) ?? 0, events: e.get(d.package) ?? 0 }]));
}

type AdvisoryInsert = typeof advisories.$inferInsert;
type EventInsert = typeof advisoryEvents.$inferInsert;

/** What a re-imported advisory's row takes from the file (its uid, package and id are its key). */
const ADVISORY_UPSERT = proposedValues({
  aliases: advisories.aliases,
  componentName: advisories.componentName,
  componentType: advisories.componentType,
  componentLocation: advisories.componentLocation,
  latestEventType: advisories.latestEventType,
  createTime: advisories.createTime,
  updateTime: advisories.updateTime,
  search: advisories.search,
});

/** What a re-imported event's row takes (author, reviewer and review state as the caller decided). */
const EVENT_UPSERT = proposedValues({
  time: advisoryEvents.time,
  type: advisoryEvents.type,
  data: advisoryEvents.data,
  author: advisoryEvents.author,
  reviewer: advisoryEvents.reviewer,
  reviewState: advisoryEvents.reviewState,
});

/** Writes `items` a CHUNK at a time, one statement each. */
async function inChunks<T>(items: readonly T[], write: (chunk: T[]) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < items.length; i += CHUNK) await write(items.slice(i, i + CHUNK));
}

function sameAliases(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Writes one parsed document in one transaction; adds its outcome to the summary. */
async function writeDocument(db: Executor, doc: ParsedDocument, source: string, contentHash: string, s: AdvisoryImportSummary): Promise<void> {
  const a = emptyCounts();
  const e = emptyCounts();
  let outcome: "added" | "changed" | "unchanged" = "added";
  await db.transaction(async (tx) => {
    const now = new Date();
    const [existing] = await tx.select().from(advisoryDocuments).where(eq(advisoryDocuments.package, doc.package)).for("update");
    if (existing?.contentHash === contentHash) {
      outcome = "unchanged";
      return;
    }
    const storedAdvisories = existing ? await tx.select().from(advisories).where(eq(advisories.package, doc.package)) : [];
    const storedEvents = existing
      ? await tx
          .select({ event: advisoryEvents })
          .from(advisoryEvents)
          .innerJoin(advisories, eq(advisories.uid, advisoryEvents.advisoryUid))
          .where(eq(advisories.package, doc.package))
      : [];
    if (existing) {
      outcome = "changed";
      await tx.update(advisoryDocuments).set({ schemaVersion: doc.schemaVersion, source, contentHash, updateTime: now }).where(eq(advisoryDocuments.package, doc.package));
    } else {
      await tx.insert(advisoryDocuments).values({ package: doc.package, schemaVersion: doc.schemaVersion, source, contentHash, createTime: now, updateTime: now });
    }

    const oldAdvisories = new Map(storedAdvisories.map((r) => [r.uid, r]));
    const oldEvents = new Map(storedEvents.map((r) => [r.event.uid, r.event]));
    const advisoryRows: AdvisoryInsert[] = [];
    const eventRows: EventInsert[] = [];
    const keepEvents = new Set<string>();
    for (const adv of doc.advisories) {
      const old = oldAdvisories.get(adv.uid);
      oldAdvisories.delete(adv.uid);
      const row = advisoryRow(doc.package, adv, old, now);
      if (!old) a.added++;
      else if (advisoryChanged(old, row)) a.changed++;
      else {
        a.unchanged++;
      }
      if (!old || advisoryChanged(old, row)) advisoryRows.push(row);
      for (const ev of adv.events) {
        const uid = `${adv.uid}/${ev.ordinal}`;
        keepEvents.add(uid);
        const next: EventInsert = { uid, advisoryUid: adv.uid, ordinal: ev.ordinal, time: ev.time, type: ev.type, author: "", reviewer: "", reviewState: ReviewState.APPROVED, data: ev.data };
        const prev = oldEvents.get(uid);
        if (!prev) {
          e.added++;
          eventRows.push(next);
        } else if (prev.time.getTime() !== ev.time.getTime() || prev.type !== ev.type || canonicalJson(prev.data) !== canonicalJson(ev.data)) {
          // Author, reviewer and review state are not in the format: a changed event keeps the stored ones.
          e.changed++;
          eventRows.push({ ...next, author: prev.author, reviewer: prev.reviewer, reviewState: prev.reviewState });
        } else e.unchanged++;
      }
    }
    const removedAdvisories = [...oldAdvisories.keys()];
    const removedEvents = [...oldEvents.keys()].filter((uid) => !keepEvents.has(uid));
    a.removed = removedAdvisories.length;
    e.removed = removedEvents.length;
    // Events of removed advisories go with them (ON DELETE CASCADE); the others one by one uid.
    await inChunks(removedAdvisories, (uids) => tx.delete(advisories).where(inArray(advisories.uid, uids)));
    await inChunks(removedEvents, (uids) => tx.delete(advisoryEvents).where(inArray(advisoryEvents.uid, uids)));
    await inChunks(advisoryRows, (rows) => tx.insert(advisories).values(rows).onConflictDoUpdate({ target: advisories.uid, set: ADVISORY_UPSERT }));
    await inChunks(eventRows, (rows) => tx.insert(advisoryEvents).values(rows).onConflictDoUpdate({ target: advisoryEvents.uid, set: EVENT_UPSERT }));
  });
  s.files[outcome]++;
  for (const k of ["added", "changed", "unchanged", "removed"] as const) {
    s.advisories[k] += a[k];
    s.events[k] += e[k];
  }
}

function advisoryRow(pkg: string, adv: ParsedAdvisory, old: typeof advisories.$inferSelect | undefined, now: Date): AdvisoryInsert {
  const first = adv.events[0];
  const last = adv.events[adv.events.length - 1];
  return {
    uid: adv.uid,
    package: pkg,
    advisoryId: adv.id,
    aliases: adv.aliases,
    componentName: adv.componentName,
    componentType: adv.componentType,
    componentLocation: adv.componentLocation,
    latestEventType: adv.latestEventType,
    createTime: first?.time ?? old?.createTime ?? now,
    updateTime: last?.time ?? old?.updateTime ?? now,
    search: adv.search,
  };
}

function advisoryChanged(old: typeof advisories.$inferSelect, row: AdvisoryInsert): boolean {
  return (
    !sameAliases(old.aliases, row.aliases ?? []) ||
    old.componentName !== row.componentName ||
    old.componentType !== row.componentType ||
    old.componentLocation !== row.componentLocation ||
    old.latestEventType !== row.latestEventType ||
    old.createTime.getTime() !== row.createTime?.getTime() ||
    old.updateTime.getTime() !== row.updateTime?.getTime() ||
    old.search !== row.search
  );
}

function noteUnknown(s: AdvisoryImportSummary, file: string, list: readonly Unknown[]): void {
  for (const u of list) {
    const bucket = u.kind === "event type" ? s.unknown.eventTypes : s.unknown.keys;
    bucket.count++;
    if (bucket.examples.length < EXAMPLES) bucket.examples.push(`${basename(file)}: ${u.path}${u.value === undefined ? "" : ` = ${JSON.stringify(u.value)}`}`);
  }
}

/** Imports every advisory document under the paths. Never throws for one bad file: it is in `skipped`. */
export async function importAdvisories(db: Executor, paths: readonly string[], options: AdvisoryImportOptions = {}): Promise<AdvisoryImportSummary> {
  const summary: AdvisoryImportSummary = {
    files: { added: 0, changed: 0, unchanged: 0, skipped: 0 },
    advisories: emptyCounts(),
    events: emptyCounts(),
    skipped: [],
    unknown: { eventTypes: { count: 0, examples: [] }, keys: { count: 0, examples: [] } },
  };
  const skip = (path: string, reason: string) => {
    summary.skipped.push({ path, reason });
    summary.files.skipped++;
  };
  const files = await findAdvisoryFiles(paths, skip);
  const stored = await storedDocuments(db);
  const byHash = new Map([...stored.entries()].map(([pkg, d]) => [d.contentHash, { pkg, ...d }]));
  const packages = new Map<string, string>();

  const one = async (file: string): Promise<void> => {
    const bytes = await readFile(file);
    const contentHash = createHash("sha256").update(bytes).digest("hex");
    const same = byHash.get(contentHash);
    if (same) {
      const earlier = packages.get(same.pkg);
      if (earlier !== undefined) return skip(file, `package ${JSON.stringify(same.pkg)} was already read from ${earlier}`);
      packages.set(same.pkg, file);
      summary.files.unchanged++;
      summary.advisories.unchanged += same.advisories;
      summary.events.unchanged += same.events;
      return;
    }
    let doc: ParsedDocument;
    try {
      doc = parseAdvisoryDocument(bytes.toString("utf8"));
    } catch (err) {
      if (err instanceof AdvisoryDocumentError) return skip(file, err.message);
      throw err;
    }
    const earlier = packages.get(doc.package);
    if (earlier !== undefined) return skip(file, `package ${JSON.stringify(doc.package)} was already read from ${earlier}`);
    packages.set(doc.package, file);
    noteUnknown(summary, file, doc.unknown);
    await writeDocument(db, doc, file, contentHash, summary);
  };

  let next = 0;
  let done = 0;
  const worker = async () => {
    while (next < files.length) {
      const file = files[next++]!;
      try {
        await one(file);
      } catch (err) {
        skip(file, `not written: ${(err as Error).message}`);
      }
      options.onProgress?.(++done, files.length);
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, options.concurrency ?? 1) }, worker));
  // Fresh statistics for the planner once the rows changed: right after a first import, stale ones make
  // PostgreSQL scan every event for a page's events (measured: a sequential scan of 50,000 events instead of
  // an index lookup of 83) until autovacuum gets to it.
  const { advisories: a, events: e } = summary;
  if (a.added + a.changed + a.removed + e.added + e.changed + e.removed > 0) {
    await db.execute(sql`analyze advisory_documents, advisories, advisory_events`);
  }
  return summary;
}
