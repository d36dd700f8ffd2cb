// Importing an OCI image layout directory (`oci-layout` + `index.json` + `blobs/sha256/<hex>`) into a repo:
// every manifest reachable from index.json is recorded in `manifests` (image manifests with their platform
// and size, image indexes with their children), and every `org.opencontainers.image.ref.name` annotation on
// index.json's descriptors becomes a tag.
//
// Three phases, so a corrupted layout writes nothing:
//   1. scan    read index.json and walk every manifest and config blob (small; hashed as they are read)
//   2. verify  hash every layer blob (the bulk of the bytes), streamed, each distinct blob once
//   3. write   upsert manifests on (repo_uid, digest) and tags on (repo_uid, name), in transactions of
//              WRITE_BATCH rows; re-importing the same layout changes nothing
// Every blob's size and sha256 are checked against its descriptor; a mismatch (or a missing blob) aborts the
// import with an OciImportError naming the blob.
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Db } from "../db/client.js";
import { isValidDigest, TAG_NAME_PATTERN } from "./tag-kind.js";
import { createManifestStore } from "./images.store.js";
import { createRepoStore } from "./repos.store.js";
import { createTagStore } from "./tags.store.js";
import { isRecord } from "../kernel/records.js";
import { IMAGE_CONFIG_TYPES, IMAGE_MANIFEST_TYPES, INDEX_TYPES, MEDIA_TYPES, platformText } from "./oci-media.js";

const REF_NAME_ANNOTATION = "org.opencontainers.image.ref.name";
/** Rows per write transaction. */
const WRITE_BATCH = 500;
/** Layer blobs hashed at once. */
const VERIFY_CONCURRENCY = 2;
/** Manifests and configs are read whole; anything larger is refused rather than read into memory. */
const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

/** The layout is invalid, a blob is missing or corrupted, or the repo does not exist. */
export class OciImportError extends Error {
  override name = "OciImportError";
}

type ImportPhase = "scan" | "verify" | "write" | "tags" | "done";

export interface ImportProgress {
  phase: ImportPhase;
  /** Manifests (image manifests and indexes) read and verified so far. */
  manifestsScanned: number;
  /** Distinct blobs (manifests, configs, layers) whose sha256 has been checked. */
  blobsVerified: number;
  /** Bytes hashed so far, and the total to hash once the scan has found every layer (0 before). */
  bytesVerified: number;
  bytesTotal: number;
  /** Manifest rows and tags written so far, and how many there are to write. */
  manifestsWritten: number;
  manifestsTotal: number;
  tagsWritten: number;
  tagsTotal: number;
}

interface ImportOptions {
  repoUid: string;
  /** The OCI image layout directory. */
  dir: string;
  /** Called as work advances (often: per blob chunk); throttle in the caller. */
  onProgress?: (p: Readonly<ImportProgress>) => void;
}

interface ImportResult {
  repoUid: string;
  manifests: { total: number; images: number; indexes: number; inserted: number; updated: number; unchanged: number };
  tags: { total: number; created: number; updated: number; unchanged: number; names: string[] };
  blobs: { verified: number; bytes: number };
  /** Descriptors not recorded (unsupported media types), and ref names that are not valid tags. */
  skipped: { digest: string; mediaType: string; reason: string }[];
  warnings: string[];
}

interface Descriptor {
  mediaType?: string;
  digest: string;
  size: number;
  platform?: { os?: string; architecture?: string; variant?: string };
  annotations?: Record<string, string>;
  urls?: string[];
}

type ChildEntry = { digest: string; platform?: string; mediaType?: string; size?: number };

interface ManifestRecord {
  digest: string;
  mediaType: string;
  isIndex: boolean;
  platform: string | null;
  size: bigint | null;
  children: ChildEntry[] | null;
  manifestSize: bigint;
}

// ---------------------------------------------------------------------------------------------------------
// Reading and checking the layout

function blobPath(dir: string, digest: string): string {
  return join(dir, "blobs", "sha256", digest.slice("sha256:".length));
}

function parseJson(text: Buffer, what: string): unknown {
  try {
    return JSON.parse(text.toString("utf8"));
  } catch (err) {
    throw new OciImportError(`${what} is not valid JSON: ${(err as Error).message}`);
  }
}

/** Checks a descriptor's shape; `where` names it in errors. */
function descriptorOf(v: unknown, where: string): Descriptor {
  if (!isRecord(v)) throw new OciImportError(`${where}: a descriptor must be an object`);
  const { digest, size, mediaType } = v;
  if (typeof digest !== "string") throw new OciImportError(`${where}: descriptor has no digest`);
  if (!isValidDigest(digest)) {
    throw new OciImportError(
      digest.startsWith("sha256:")
        ? `${where}: malformed digest ${JSON.stringify(digest)} (expected sha256:<64 lowercase hex>)`
        : `${where}: unsupported digest ${JSON.stringify(digest)}: only sha256 digests can be imported`,
    );
  }
  if (typeof size !== "number" || !Number.isSafeInteger(size) || size < 0) throw new OciImportError(`${where}: descriptor ${digest} has an invalid size`);
  if (mediaType !== undefined && typeof mediaType !== "string") throw new OciImportError(`${where}: descriptor ${digest} has an invalid mediaType`);
  const d: Descriptor = { digest, size };
  if (typeof mediaType === "string") d.mediaType = mediaType;
  if (isRecord(v.platform)) d.platform = v.platform as Descriptor["platform"];
  if (isRecord(v.annotations)) d.annotations = v.annotations as Record<string, string>;
  if (Array.isArray(v.urls)) d.urls = v.urls as string[];
  return d;
}

/** The tag a ref.name annotation names: a bare tag ("1.2"), or the tag of a full reference ("host/repo:1.2"). */
export function tagOfRefName(ref: string): string | undefined {
  let tag = ref;
  const at = tag.indexOf("@");
  if (at >= 0) tag = tag.slice(0, at); // name@digest: the digest part is not a tag
  const slash = tag.lastIndexOf("/");
  const colon = tag.lastIndexOf(":");
  if (colon > slash) tag = tag.slice(colon + 1);
  else if (slash >= 0) return undefined; // a repository name without a tag
  return TAG_NAME_PATTERN.test(tag) ? tag : undefined;
}

function corrupted(dir: string, digest: string, actual: string): OciImportError {
  return new OciImportError(
    `blob ${digest} is corrupted: its content hashes to ${actual} (${blobPath(dir, digest)}); refusing to import this layout`,
  );
}

async function sizeOf(dir: string, d: Descriptor, role: string): Promise<number> {
  let size: number;
  try {
    size = (await stat(blobPath(dir, d.digest))).size;
  } catch {
    throw new OciImportError(`${role} blob ${d.digest} is missing from the layout (expected ${blobPath(dir, d.digest)})`);
  }
  if (size !== d.size) {
    throw new OciImportError(`blob ${d.digest} is corrupted: it is ${size} bytes, its descriptor says ${d.size} (${blobPath(dir, d.digest)})`);
  }
  return size;
}

/** Reads a small blob whole and checks its size and digest. */
async function readVerified(dir: string, d: Descriptor, role: string): Promise<Buffer> {
  await sizeOf(dir, d, role);
  if (d.size > MAX_DOCUMENT_BYTES) throw new OciImportError(`${role} blob ${d.digest} is ${d.size} bytes: too large for a ${role}`);
  const bytes = await readFile(blobPath(dir, d.digest));
  const actual = `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
  if (actual !== d.digest) throw corrupted(dir, d.digest, actual);
  return bytes;
}

/** Streams a blob through sha256, reporting bytes as they go. */
async function hashFile(dir: string, d: Descriptor, onBytes: (n: number) => void): Promise<string> {
  const hash = createHash("sha256");
  const stream = createReadStream(blobPath(dir, d.digest), { highWaterMark: 1 << 20 });
  for await (const chunk of stream) {
    hash.update(chunk as Buffer);
    onBytes((chunk as Buffer).length);
  }
  return `sha256:${hash.digest("hex")}`;
}

// ---------------------------------------------------------------------------------------------------------
// The import

export async function importOciLayout(db: Db, opts: ImportOptions): Promise<ImportResult> {
  const { repoUid, dir } = opts;
  const progress: ImportProgress = {
    phase: "scan",
    manifestsScanned: 0,
    blobsVerified: 0,
    bytesVerified: 0,
    bytesTotal: 0,
    manifestsWritten: 0,
    manifestsTotal: 0,
    tagsWritten: 0,
    tagsTotal: 0,
  };
  const report = () => opts.onProgress?.(progress);
  const skipped: ImportResult["skipped"] = [];
  const warnings: string[] = [];

  if (!(await createRepoStore(db).find(repoUid))) throw new OciImportError(`repo ${repoUid} does not exist`);

  // oci-layout
  let layoutText: Buffer;
  try {
    layoutText = await readFile(join(dir, "oci-layout"));
  } catch {
    throw new OciImportError(`${dir} is not an OCI image layout: it has no oci-layout file`);
  }
  const layout = parseJson(layoutText, "oci-layout");
  const version = isRecord(layout) ? layout.imageLayoutVersion : undefined;
  if (typeof version !== "string") throw new OciImportError("oci-layout has no imageLayoutVersion");
  if (!/^1\.\d+\.\d+$/.test(version)) throw new OciImportError(`unsupported imageLayoutVersion ${JSON.stringify(version)} (supported: 1.x)`);

  // index.json
  let indexText: Buffer;
  try {
    indexText = await readFile(join(dir, "index.json"));
  } catch {
    throw new OciImportError(`${dir} is not an OCI image layout: it has no index.json`);
  }
  const index = parseJson(indexText, "index.json");
  if (!isRecord(index) || index.schemaVersion !== 2 || !Array.isArray(index.manifests)) {
    throw new OciImportError("index.json must be an image index (schemaVersion 2 with a manifests array)");
  }
  const top = index.manifests.map((m, i) => descriptorOf(m, `index.json manifests[${i}]`));

  // 1. scan
  const rows = new Map<string, ManifestRecord>();
  const layers = new Map<string, Descriptor>();
  const verified = new Set<string>();
  const inProgress = new Set<string>();
  let images = 0;
  let indexes = 0;

  const noteVerified = (d: Descriptor) => {
    if (verified.has(d.digest)) return;
    verified.add(d.digest);
    progress.blobsVerified++;
    progress.bytesVerified += d.size;
  };

  /** Records the manifest a descriptor points at (recursing into indexes); returns its platform when known. */
  const visit = async (d: Descriptor, where: string): Promise<string | undefined> => {
    const seen = rows.get(d.digest);
    if (seen) return seen.platform ?? undefined;
    if (inProgress.has(d.digest)) throw new OciImportError(`${where}: manifest ${d.digest} refers to itself (a cycle)`);
    inProgress.add(d.digest);
    const doc = parseJson(await readVerified(dir, d, "manifest"), `manifest ${d.digest}`);
    noteVerified(d);
    if (!isRecord(doc)) throw new OciImportError(`manifest ${d.digest} is not a JSON object`);
    const mediaType = d.mediaType ?? (typeof doc.mediaType === "string" ? doc.mediaType : undefined);
    if (d.mediaType && typeof doc.mediaType === "string" && doc.mediaType !== d.mediaType) {
      throw new OciImportError(`manifest ${d.digest}: its mediaType ${doc.mediaType} differs from its descriptor's ${d.mediaType}`);
    }
    const isIndex = mediaType ? INDEX_TYPES.has(mediaType) : Array.isArray(doc.manifests);
    const isImage = mediaType ? IMAGE_MANIFEST_TYPES.has(mediaType) : isRecord(doc.config) && Array.isArray(doc.layers);
    let platform: string | undefined;
    if (isIndex) {
      if (!Array.isArray(doc.manifests)) throw new OciImportError(`image index ${d.digest} has no manifests array`);
      const children: ChildEntry[] = [];
      for (const [i, m] of doc.manifests.entries()) {
        const child = descriptorOf(m, `image index ${d.digest} manifests[${i}]`);
        const childPlatform = await visit(child, `image index ${d.digest}`);
        const entry: ChildEntry = { digest: child.digest, size: child.size };
        const p = platformText(child.platform) ?? childPlatform;
        if (p) entry.platform = p;
        if (child.mediaType) entry.mediaType = child.mediaType;
        children.push(entry);
      }
      rows.set(d.digest, {
        digest: d.digest,
        mediaType: mediaType ?? MEDIA_TYPES.ociIndex,
        isIndex: true,
        platform: null,
        size: null,
        children,
        manifestSize: BigInt(d.size),
      });
      indexes++;
    } else if (isImage) {
      const config = descriptorOf(doc.config, `image manifest ${d.digest} config`);
      if (!Array.isArray(doc.layers)) throw new OciImportError(`image manifest ${d.digest} has no layers array`);
      const layerDescs = doc.layers.map((l, i) => descriptorOf(l, `image manifest ${d.digest} layers[${i}]`));
      const configMediaType = config.mediaType ?? MEDIA_TYPES.ociConfig;
      if (IMAGE_CONFIG_TYPES.has(configMediaType)) {
        const cfg = parseJson(await readVerified(dir, config, "config"), `config ${config.digest}`);
        noteVerified(config);
        platform = isRecord(cfg) ? platformText(cfg) : undefined;
      } else {
        // An artifact (signature, attestation, SBOM): its config is a blob like any other, with no platform.
        layers.set(config.digest, config);
      }
      for (const l of layerDescs) {
        const foreign = /nondistributable|foreign/.test(l.mediaType ?? "") && (l.urls?.length ?? 0) > 0;
        if (foreign) {
          // Non-distributable layers live elsewhere (their urls); verify them only when the layout has them.
          try {
            await stat(blobPath(dir, l.digest));
          } catch {
            warnings.push(`non-distributable layer ${l.digest} of ${d.digest} is not in the layout; not verified`);
            continue;
          }
        }
        layers.set(l.digest, l);
      }
      const size = BigInt(config.size) + layerDescs.reduce((sum, l) => sum + BigInt(l.size), 0n);
      rows.set(d.digest, {
        digest: d.digest,
        mediaType: mediaType ?? MEDIA_TYPES.ociManifest,
        isIndex: false,
        platform: platform ?? null,
        size,
        children: null,
        manifestSize: BigInt(d.size),
      });
      images++;
    } else {
      skipped.push({ digest: d.digest, mediaType: mediaType ?? "", reason: "unsupported manifest media type" });
    }
    inProgress.delete(d.digest);
    progress.manifestsScanned = rows.size;
    report();
    return platform;
  };

  for (const [i, d] of top.entries()) await visit(d, `index.json manifests[${i}]`);

  // 2. verify the layers (and artifact configs) not verified yet
  progress.phase = "verify";
  const pending = [...layers.values()].filter((l) => !verified.has(l.digest));
  progress.bytesTotal = progress.bytesVerified + pending.reduce((s, l) => s + l.size, 0);
  for (const l of pending) await sizeOf(dir, l, "layer"); // every missing or truncated blob fails before hashing
  report();
  let next = 0;
  const worker = async () => {
    while (next < pending.length) {
      const l = pending[next++]!;
      const actual = await hashFile(dir, l, (n) => {
        progress.bytesVerified += n;
        report();
      });
      if (actual !== l.digest) throw corrupted(dir, l.digest, actual);
      verified.add(l.digest);
      progress.blobsVerified++;
      report();
    }
  };
  await Promise.all(Array.from({ length: Math.min(VERIFY_CONCURRENCY, pending.length) }, worker));

  // Tags from the ref names of index.json's descriptors (the last one wins when a name repeats).
  const tagWrites = new Map<string, string>();
  for (const d of top) {
    const ref = d.annotations?.[REF_NAME_ANNOTATION];
    if (ref === undefined) continue;
    const tag = typeof ref === "string" ? tagOfRefName(ref) : undefined;
    if (!tag) {
      skipped.push({ digest: d.digest, mediaType: d.mediaType ?? "", reason: `ref name ${JSON.stringify(ref)} is not a valid tag` });
      continue;
    }
    if (!rows.has(d.digest)) {
      skipped.push({ digest: d.digest, mediaType: d.mediaType ?? "", reason: `tag ${tag} points at a manifest that was not imported` });
      continue;
    }
    const previous = tagWrites.get(tag);
    if (previous !== undefined && previous !== d.digest) warnings.push(`ref name ${tag} appears more than once in index.json; the last (${d.digest}) wins`);
    tagWrites.set(tag, d.digest);
  }

  // 3. write
  progress.phase = "write";
  const all = [...rows.values()];
  progress.manifestsTotal = all.length;
  progress.tagsTotal = tagWrites.size;
  report();
  let inserted = 0;
  let updated = 0;
  for (let i = 0; i < all.length; i += WRITE_BATCH) {
    const batch = all.slice(i, i + WRITE_BATCH);
    const changed = await db.transaction((tx) => createManifestStore(tx).upsertMany(repoUid, batch));
    inserted += changed.inserted;
    updated += changed.updated;
    progress.manifestsWritten += batch.length;
    report();
  }

  progress.phase = "tags";
  report();
  const tagList = [...tagWrites.entries()];
  let created = 0;
  let tagsUpdated = 0;
  for (let i = 0; i < tagList.length; i += WRITE_BATCH) {
    const batch = tagList.slice(i, i + WRITE_BATCH);
    await db.transaction(async (tx) => {
      const store = createTagStore(tx);
      const before = new Map((await store.byNames(repoUid, batch.map(([name]) => name))).map((e) => [e.name, e]));
      for (const [name, digest] of batch) {
        const was = before.get(name);
        // An existing tag keeps its deprecated flag and bundles: the import moves only the digest.
        await store.upsert({ repoUid, name, digest, ...(was ? { deprecated: was.deprecated, bundles: was.bundles } : {}) });
        if (was === undefined) created++;
        else if (was.digest !== digest) tagsUpdated++;
      }
    });
    progress.tagsWritten += batch.length;
    report();
  }

  progress.phase = "done";
  report();
  return {
    repoUid,
    manifests: { total: all.length, images, indexes, inserted, updated, unchanged: all.length - inserted - updated },
    tags: { total: tagList.length, created, updated: tagsUpdated, unchanged: tagList.length - created - tagsUpdated, names: tagList.map(([n]) => n) },
    blobs: { verified: progress.blobsVerified, bytes: progress.bytesVerified },
    skipped,
    warnings,
  };
}
