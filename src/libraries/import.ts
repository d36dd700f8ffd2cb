// The library importer: reads Maven repository layouts and Python distributions (docs/data-formats.md, "Library artifacts")
// into library_artifacts / library_artifact_versions.
//
// Decisions:
// - One walk over each path finds both forms: a directory with maven-metadata.xml (its versions), or one whose
//   subdirectories hold a .pom (versions are those directories; Debian's `debian` pseudo-version is skipped);
//   `*.dist-info` directories (METADATA) and `.whl` files (METADATA inside the zip, read with yauzl: kernel/zip.ts).
// - Records are grouped by artifact; each artifact is written in its own transaction, comparing with what is
//   stored, so a second run writes nothing and a changed file rewrites only its rows. A file that cannot be
//   read or parsed is reported as skipped with the reason and contributes nothing.
// - Versions are never deleted by an import (several paths may feed one artifact).
import { readFile, readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { and, eq } from "drizzle-orm";
import { XMLParser, XMLValidator } from "fast-xml-parser";
import { Ecosystem } from "../../gen/chainguard/platform/libraries/v2/artifacts_pb.js";
import { libraryArtifacts, libraryArtifactVersions } from "../db/schema/index.js";
import type { Executor } from "../kernel/store.js";
import { DEFAULT_ZIP_LIMITS, openZip } from "../kernel/zip.js";
import { compareVersions, ecosystemPrefix, normalizePythonName } from "./ecosystems.js";

interface VersionRecord {
  version: string;
  name: string;
  description: string;
  sizeBytes: number;
  source: string;
}

interface ArtifactRecord {
  uid: string;
  ecosystem: Ecosystem;
  name: string;
  versions: Map<string, VersionRecord>;
}

interface Skipped {
  path: string;
  reason: string;
}

interface ImportSummary {
  artifacts: { added: number; changed: number; unchanged: number };
  versions: { added: number; changed: number; unchanged: number };
  skipped: Skipped[];
}

const xml = new XMLParser({ ignoreAttributes: true, parseTagValue: false, trimValues: true, isArray: (name: string) => name === "version" });

function text(v: unknown): string {
  if (typeof v === "string") return v.replace(/\s+/g, " ").trim();
  if (typeof v === "number") return String(v);
  return "";
}

function parseXml(content: string, path: string): Record<string, unknown> {
  const valid = XMLValidator.validate(content);
  if (valid !== true) throw new Error(`${path}: malformed XML at line ${valid.err.line}: ${valid.err.msg}`);
  return xml.parse(content) as Record<string, unknown>;
}

function first(v: unknown): unknown {
  return Array.isArray(v) ? v[0] : v;
}

interface Pom {
  groupId: string;
  artifactId: string;
  version: string;
  name: string;
  description: string;
}

function parsePom(content: string, path: string): Pom {
  const project = parseXml(content, path).project as Record<string, unknown> | undefined;
  if (!project || typeof project !== "object") throw new Error(`${path}: no <project> element`);
  const parent = (project.parent ?? {}) as Record<string, unknown>;
  const pom = {
    groupId: text(project.groupId) || text(parent.groupId),
    artifactId: text(project.artifactId),
    version: text(first(project.version)) || text(first(parent.version)),
    name: text(project.name),
    description: text(project.description),
  };
  if (!pom.groupId) throw new Error(`${path}: groupId is missing (no <groupId> nor <parent><groupId>)`);
  if (!pom.artifactId) throw new Error(`${path}: artifactId is missing`);
  return pom;
}

/** RFC 822 style headers (core metadata): the first value of each header, continuation lines joined. */
function parseCoreMetadata(content: string): Map<string, string> {
  const headers = new Map<string, string>();
  let last = "";
  for (const line of content.split(/\r?\n/)) {
    if (line === "") break;
    if (/^[ \t]/.test(line) && last) {
      headers.set(last, `${headers.get(last)} ${line.trim()}`);
      continue;
    }
    const colon = line.indexOf(":");
    if (colon <= 0) continue;
    last = line.slice(0, colon).trim().toLowerCase();
    if (!headers.has(last)) headers.set(last, line.slice(colon + 1).trim());
    else last = "";
  }
  return headers;
}

/**
 * The METADATA file of a wheel (a zip: its path, or its bytes), read with yauzl within the kernel's zip
 * limits; only the central directory and that one entry are read, never the whole wheel.
 */
async function wheelMetadata(zip: string | Buffer, path: string): Promise<string> {
  let archive;
  try {
    archive = await openZip(zip, DEFAULT_ZIP_LIMITS, (name) => /^[^/]+\.dist-info\/METADATA$/.test(name));
  } catch (err) {
    throw new Error(`${path}: ${(err as Error).message}`);
  }
  try {
    const entry = archive.entries[0];
    if (!entry) throw new Error(`${path}: no *.dist-info/METADATA in the wheel`);
    try {
      return (await archive.read(entry)).toString("utf8");
    } catch (err) {
      throw new Error(`${path}: ${entry.name}: ${(err as Error).message}`);
    }
  } finally {
    archive.close();
  }
}

class Collector {
  readonly artifacts = new Map<string, ArtifactRecord>();
  readonly skipped: Skipped[] = [];

  add(ecosystem: Ecosystem, key: string, name: string, v: VersionRecord): void {
    const uid = `${ecosystemPrefix(ecosystem)}/${key}`;
    let a = this.artifacts.get(uid);
    if (!a) this.artifacts.set(uid, (a = { uid, ecosystem, name, versions: new Map() }));
    if (!a.versions.has(v.version)) a.versions.set(v.version, v);
  }

  python(content: string, source: string, sizeBytes: number): void {
    const h = parseCoreMetadata(content);
    const name = h.get("name");
    const version = h.get("version");
    if (!name) throw new Error(`${source}: METADATA has no Name`);
    if (!version) throw new Error(`${source}: METADATA has no Version`);
    this.add(Ecosystem.PYTHON, normalizePythonName(name), name, { version, name, description: h.get("summary") ?? "", sizeBytes, source });
  }
}

async function isDir(path: string): Promise<boolean> {
  return (await stat(path).catch(() => null))?.isDirectory() ?? false;
}

async function sizeOf(path: string): Promise<number> {
  return (await stat(path).catch(() => null))?.size ?? 0;
}

async function mavenVersion(c: Collector, dir: string, version: string, expect?: { groupId: string; artifactId: string }): Promise<void> {
  const files = await readdir(join(dir, version)).catch(() => [] as string[]);
  const pomFile = expect ? `${expect.artifactId}-${version}.pom` : files.find((f) => f.endsWith(".pom"));
  const pomPath = pomFile ? join(dir, version, pomFile) : "";
  let pom: Pom | null = null;
  if (pomFile && files.includes(pomFile)) pom = parsePom(await readFile(pomPath, "utf8"), pomPath);
  const groupId = expect?.groupId ?? pom!.groupId;
  const artifactId = expect?.artifactId ?? pom!.artifactId;
  const jar = join(dir, version, `${artifactId}-${version}.jar`);
  const name = `${groupId}:${artifactId}`;
  c.add(Ecosystem.JAVA, name, name, {
    version,
    name: pom?.name || name,
    description: pom?.description || pom?.name || "",
    sizeBytes: await sizeOf(jar),
    source: pomPath || join(dir, "maven-metadata.xml"),
  });
}

async function walk(c: Collector, path: string, depth: number): Promise<void> {
  if (depth > 40) return;
  const info = await stat(path).catch((err: Error) => {
    c.skipped.push({ path, reason: err.message });
    return null;
  });
  if (!info) return;
  const guard = async (p: string, f: () => Promise<void>) => {
    try {
      await f();
    } catch (err) {
      c.skipped.push({ path: p, reason: (err as Error).message });
    }
  };
  if (info.isFile()) {
    if (path.endsWith(".whl")) await guard(path, async () => c.python(await wheelMetadata(path, path), path, info.size));
    return;
  }
  if (!info.isDirectory()) return;
  if (path.endsWith(".dist-info")) {
    const meta = join(path, "METADATA");
    await guard(path, async () => c.python(await readFile(meta, "utf8"), meta, 0));
    return;
  }
  const entries = await readdir(path, { withFileTypes: true });
  const names = new Set(entries.map((e) => e.name));
  if (names.has("maven-metadata.xml")) {
    const metaPath = join(path, "maven-metadata.xml");
    await guard(metaPath, async () => {
      const meta = parseXml(await readFile(metaPath, "utf8"), metaPath).metadata as Record<string, unknown> | undefined;
      const groupId = text(meta?.groupId);
      const artifactId = text(meta?.artifactId);
      if (!groupId || !artifactId) throw new Error(`${metaPath}: groupId and artifactId are required`);
      const versioning = (meta?.versioning ?? {}) as Record<string, unknown>;
      const versions = ((versioning.versions ?? {}) as Record<string, unknown>).version;
      const list = (Array.isArray(versions) ? versions : []).map(text).filter(Boolean);
      if (list.length === 0) throw new Error(`${metaPath}: versioning.versions lists no version`);
      for (const v of list) await guard(join(path, v), () => mavenVersion(c, path, v, { groupId, artifactId }));
    });
    return;
  }
  // Version directories: subdirectories (symlinks included) holding a .pom.
  const versionDirs: string[] = [];
  for (const e of entries) {
    if (!(e.isDirectory() || e.isSymbolicLink()) || !(await isDir(join(path, e.name)))) continue;
    const inner = await readdir(join(path, e.name)).catch(() => [] as string[]);
    if (inner.some((f) => f.endsWith(".pom"))) versionDirs.push(e.name);
  }
  if (versionDirs.length > 0) {
    for (const v of versionDirs.sort()) {
      if (v === "debian") {
        c.skipped.push({ path: join(path, v), reason: "Debian pseudo-version (a copy of a real version), not a version" });
        continue;
      }
      await guard(join(path, v), () => mavenVersion(c, path, v));
    }
    return;
  }
  for (const e of entries.sort((a, b) => (a.name < b.name ? -1 : 1))) {
    // Real directories only: symlinked ones would revisit (or loop).
    if (e.isDirectory() || (e.isFile() && e.name.endsWith(".whl"))) await walk(c, join(path, e.name), depth + 1);
  }
}

/** Reads every path into artifact records; unreadable files are in skipped. */
async function collectLibraries(paths: readonly string[]): Promise<{ artifacts: ArtifactRecord[]; skipped: Skipped[] }> {
  const c = new Collector();
  for (const p of paths) await walk(c, p, 0);
  return { artifacts: [...c.artifacts.values()].sort((a, b) => (a.uid < b.uid ? -1 : 1)), skipped: c.skipped };
}

type Db = Executor;

/** Writes one artifact in one transaction; returns what changed. */
async function writeArtifact(db: Db, a: ArtifactRecord, s: ImportSummary): Promise<void> {
  const counts = { added: 0, changed: 0, unchanged: 0 };
  let artifactOutcome: "added" | "changed" | "unchanged" = "unchanged";
  await db.transaction(async (tx) => {
    const [existing] = await tx.select().from(libraryArtifacts).where(eq(libraryArtifacts.uid, a.uid)).for("update");
    const now = new Date();
    if (!existing) {
      await tx.insert(libraryArtifacts).values({ uid: a.uid, ecosystem: a.ecosystem, name: a.name, createTime: now, updateTime: now });
    }
    const stored = await tx.select().from(libraryArtifactVersions).where(eq(libraryArtifactVersions.artifactUid, a.uid));
    const byVersion = new Map(stored.map((r) => [r.version, r]));
    for (const v of a.versions.values()) {
      const row = byVersion.get(v.version);
      const fields = { name: v.name, description: v.description, sizeBytes: v.sizeBytes, source: v.source };
      if (!row) {
        await tx.insert(libraryArtifactVersions).values({ uid: `${a.uid}@${v.version}`, artifactUid: a.uid, version: v.version, ...fields, createTime: now, updateTime: now });
        counts.added++;
      } else if (row.name !== v.name || row.description !== v.description || row.sizeBytes !== v.sizeBytes || row.source !== v.source) {
        await tx.update(libraryArtifactVersions).set({ ...fields, updateTime: now }).where(eq(libraryArtifactVersions.uid, row.uid));
        counts.changed++;
      } else counts.unchanged++;
    }
    // Ranks, latest version and count over every stored version (old and new), in the ecosystem's order.
    const all = [...new Set([...byVersion.keys(), ...a.versions.keys()])].sort((x, y) => compareVersions(a.ecosystem, x, y));
    for (const [i, version] of all.entries()) {
      if (byVersion.get(version)?.ordinal === i) continue;
      await tx.update(libraryArtifactVersions).set({ ordinal: i }).where(and(eq(libraryArtifactVersions.artifactUid, a.uid), eq(libraryArtifactVersions.version, version)));
    }
    const latest = all[all.length - 1] ?? "";
    const latestRecord = a.versions.get(latest);
    const description = latestRecord ? latestRecord.description : (existing?.description ?? "");
    const name = latestRecord && a.ecosystem === Ecosystem.PYTHON ? latestRecord.name : a.name;
    const next = { name, description, latestVersion: latest, versionCount: all.length };
    if (!existing) {
      await tx.update(libraryArtifacts).set(next).where(eq(libraryArtifacts.uid, a.uid));
      artifactOutcome = "added";
    } else if (
      counts.added + counts.changed > 0 ||
      existing.name !== next.name ||
      existing.description !== next.description ||
      existing.latestVersion !== next.latestVersion ||
      existing.versionCount !== next.versionCount
    ) {
      await tx.update(libraryArtifacts).set({ ...next, updateTime: now }).where(eq(libraryArtifacts.uid, a.uid));
      artifactOutcome = "changed";
    }
  });
  s.artifacts[artifactOutcome]++;
  s.versions.added += counts.added;
  s.versions.changed += counts.changed;
  s.versions.unchanged += counts.unchanged;
}

export async function importLibraries(db: Db, paths: readonly string[], onProgress?: (done: number, total: number) => void): Promise<ImportSummary> {
  const { artifacts, skipped } = await collectLibraries(paths);
  const summary: ImportSummary = { artifacts: { added: 0, changed: 0, unchanged: 0 }, versions: { added: 0, changed: 0, unchanged: 0 }, skipped };
  for (const [i, a] of artifacts.entries()) {
    try {
      await writeArtifact(db, a, summary);
    } catch (err) {
      skipped.push({ path: a.uid, reason: `not written: ${(err as Error).message}` });
    }
    onProgress?.(i + 1, artifacts.length);
  }
  return summary;
}

