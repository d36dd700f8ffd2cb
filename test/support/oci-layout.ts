// Container images built on disk, deterministically, for the registry's interoperability test and its
// benchmark: the same seed gives the same bytes, so the same digests, on every run. Two formats:
//   - an OCI image layout (oci-layout, index.json, blobs/sha256/<hex>): images and multi-platform indexes,
//     each tagged in index.json (`org.opencontainers.image.ref.name`), as `skopeo copy oci:<dir>:<tag>` reads it;
//   - skopeo's `dir` format (manifest.json, version, a file per blob named by its hex digest), one directory
//     per image, as `skopeo sync --src dir` reads a tree of them.
// A layer is a gzipped tar holding one file of pseudo-random bytes (AES-256-CTR over zeros, keyed by the seed),
// streamed to disk, so a layer of 500 MB costs no more memory than one of 5 KB. The config names the os and
// architecture and the layers' diff_ids (the sha256 of each uncompressed tar), as a real image's does.
import { createCipheriv, createHash } from "node:crypto";
import { createWriteStream, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { Readable, Transform } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGzip } from "node:zlib";

export const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
export const OCI_INDEX = "application/vnd.oci.image.index.v1+json";
export const OCI_CONFIG = "application/vnd.oci.image.config.v1+json";
export const OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip";

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
  platform?: { os: string; architecture: string; variant?: string };
}

export interface ImageSpec {
  os?: string;
  architecture: string;
  variant?: string;
  /** The size in bytes of the one file each layer's tar holds, a layer per entry. */
  layers: readonly number[];
}

export interface BuiltImage {
  manifest: Descriptor;
  config: Descriptor;
  layers: Descriptor[];
}

export interface BuiltIndex {
  index: Descriptor;
  images: BuiltImage[];
}

/** A stream of `size` pseudo-random bytes determined by `seed`. */
export function seededStream(seed: string, size: number): Readable {
  const key = createHash("sha256").update(seed).digest();
  const cipher = createCipheriv("aes-256-ctr", key, Buffer.alloc(16));
  const zeros = Buffer.alloc(1 << 20);
  let left = size;
  return new Readable({
    read() {
      if (left === 0) return void this.push(null);
      const n = Math.min(left, zeros.length);
      left -= n;
      this.push(cipher.update(n === zeros.length ? zeros : zeros.subarray(0, n)));
    },
  });
}

/** `size` pseudo-random bytes determined by `seed`, in memory. */
export function seededBytes(seed: string, size: number): Buffer {
  const key = createHash("sha256").update(seed).digest();
  return createCipheriv("aes-256-ctr", key, Buffer.alloc(16)).update(Buffer.alloc(size));
}

/** A ustar header of one regular file (mode 0644, owner 0, time 0). */
function tarHeader(name: string, size: number): Buffer {
  const h = Buffer.alloc(512);
  const put = (text: string, offset: number, length: number) => h.write(text, offset, length, "ascii");
  const octal = (n: number, length: number) => n.toString(8).padStart(length - 1, "0");
  put(name, 0, 100);
  put(octal(0o644, 8), 100, 8);
  put(octal(0, 8), 108, 8);
  put(octal(0, 8), 116, 8);
  put(octal(size, 12), 124, 12);
  put(octal(0, 12), 136, 12);
  put("        ", 148, 8); // the checksum field counts as spaces while summing
  put("0", 156, 1);
  put("ustar\u000000", 257, 8);
  let sum = 0;
  for (const b of h) sum += b;
  put(`${octal(sum, 7)}\u0000 `, 148, 8);
  return h;
}

/** A tar of one file `name` holding `size` seeded bytes. */
function tarStream(name: string, seed: string, size: number): Readable {
  const pad = (512 - (size % 512)) % 512;
  return Readable.from(
    (async function* () {
      yield tarHeader(name, size);
      for await (const chunk of seededStream(seed, size)) yield chunk as Buffer;
      yield Buffer.alloc(pad + 1024); // the file's padding, then the archive's two zero blocks
    })(),
  );
}

function sha256Tap(hash: ReturnType<typeof createHash>): Transform {
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      hash.update(chunk);
      done(null, chunk);
    },
  });
}

/**
 * Where blobs go: an OCI layout's blobs/sha256/<hex>, or a dir-format image's <hex>. A blob is written to a
 * temporary name and renamed to its digest once known.
 */
class BlobWriter {
  private seq = 0;
  constructor(private readonly dir: string) {}

  path(hex: string): string {
    return join(this.dir, hex);
  }

  bytes(content: Buffer | string, mediaType: string): Descriptor {
    const bytes = typeof content === "string" ? Buffer.from(content) : content;
    const hex = createHash("sha256").update(bytes).digest("hex");
    writeFileSync(this.path(hex), bytes);
    return { mediaType, digest: `sha256:${hex}`, size: bytes.length };
  }

  /** A gzipped tar layer of `size` seeded bytes; with its diff_id (the uncompressed tar's digest). */
  async layer(seed: string, size: number, gzipLevel: number): Promise<{ layer: Descriptor; diffId: string }> {
    const tmp = join(this.dir, `.tmp-${process.pid}-${++this.seq}`);
    const tarHash = createHash("sha256");
    const blobHash = createHash("sha256");
    let written = 0;
    const count = new Transform({
      transform(chunk: Buffer, _enc, done) {
        written += chunk.length;
        blobHash.update(chunk);
        done(null, chunk);
      },
    });
    await pipeline(tarStream("data.bin", seed, size), sha256Tap(tarHash), createGzip({ level: gzipLevel }), count, createWriteStream(tmp));
    const hex = blobHash.digest("hex");
    renameSync(tmp, this.path(hex));
    return { layer: { mediaType: OCI_LAYER, digest: `sha256:${hex}`, size: written }, diffId: `sha256:${tarHash.digest("hex")}` };
  }

  /** An image: its layers, its config, its manifest (all written). */
  async image(seed: string, spec: ImageSpec, gzipLevel: number): Promise<BuiltImage> {
    const layers: Descriptor[] = [];
    const diffIds: string[] = [];
    for (const [i, size] of spec.layers.entries()) {
      const { layer, diffId } = await this.layer(`${seed}/layer/${i}`, size, gzipLevel);
      layers.push(layer);
      diffIds.push(diffId);
    }
    const os = spec.os ?? "linux";
    const config = this.bytes(
      JSON.stringify({
        created: "2026-01-01T00:00:00Z",
        architecture: spec.architecture,
        os,
        ...(spec.variant ? { variant: spec.variant } : {}),
        config: { Env: ["PATH=/usr/bin"], Labels: { seed } },
        rootfs: { type: "layers", diff_ids: diffIds },
      }),
      OCI_CONFIG,
    );
    const manifest = this.bytes(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        config: { mediaType: config.mediaType, digest: config.digest, size: config.size },
        layers: layers.map(({ mediaType, digest, size }) => ({ mediaType, digest, size })),
      }),
      OCI_MANIFEST,
    );
    return { manifest: { ...manifest, platform: { os, architecture: spec.architecture, ...(spec.variant ? { variant: spec.variant } : {}) } }, config, layers };
  }
}

export interface OciLayout {
  dir: string;
  /** The descriptor each tag names in index.json. */
  tags: Map<string, Descriptor>;
  /** The path of a blob of the layout. */
  blobPath(digest: string): string;
  /** Adds an image tagged `tag`. */
  addImage(tag: string, spec: ImageSpec): Promise<BuiltImage>;
  /** Adds an image index over one image per spec (each with its platform), tagged `tag`. */
  addIndex(tag: string, specs: readonly ImageSpec[]): Promise<BuiltIndex>;
}

/**
 * An OCI image layout in `dir` (created if needed); index.json is rewritten as images are added. `seed` makes
 * the bytes: two layouts with the same seed and the same additions are identical. gzipLevel 0 stores layers
 * uncompressed inside gzip framing (fast for large layers: random bytes do not compress anyway).
 */
export function ociLayout(dir: string, seed: string, opts: { gzipLevel?: number } = {}): OciLayout {
  const blobsDir = join(dir, "blobs", "sha256");
  mkdirSync(blobsDir, { recursive: true });
  writeFileSync(join(dir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  const writer = new BlobWriter(blobsDir);
  const gzipLevel = opts.gzipLevel ?? 1;
  const tags = new Map<string, Descriptor>();
  const writeIndex = () =>
    writeFileSync(
      join(dir, "index.json"),
      JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_INDEX,
        manifests: [...tags].map(([tag, d]) => ({ mediaType: d.mediaType, digest: d.digest, size: d.size, annotations: { "org.opencontainers.image.ref.name": tag } })),
      }),
    );
  writeIndex();
  return {
    dir,
    tags,
    blobPath: (digest) => join(blobsDir, digest.replace(/^sha256:/, "")),
    async addImage(tag, spec) {
      const image = await writer.image(`${seed}/${tag}`, spec, gzipLevel);
      const { platform: _platform, ...manifest } = image.manifest;
      tags.set(tag, manifest);
      writeIndex();
      return image;
    },
    async addIndex(tag, specs) {
      const images: BuiltImage[] = [];
      for (const [i, spec] of specs.entries()) images.push(await writer.image(`${seed}/${tag}/${i}`, spec, gzipLevel));
      const index = writer.bytes(
        JSON.stringify({ schemaVersion: 2, mediaType: OCI_INDEX, manifests: images.map((im) => im.manifest) }),
        OCI_INDEX,
      );
      tags.set(tag, index);
      writeIndex();
      return { index, images };
    },
  };
}

/**
 * One image in skopeo's `dir` format in `dir` (created): manifest.json, a file per blob named by its hex
 * digest, and the version file. `skopeo sync --src dir` pushes every such directory under a tree.
 */
export async function dirImage(dir: string, seed: string, spec: ImageSpec, opts: { gzipLevel?: number } = {}): Promise<BuiltImage> {
  mkdirSync(dir, { recursive: true });
  const writer = new BlobWriter(dir);
  const image = await writer.image(seed, spec, opts.gzipLevel ?? 1);
  // The manifest is both a blob (as built) and manifest.json; the dir format keeps only the latter.
  const hex = image.manifest.digest.replace(/^sha256:/, "");
  renameSync(writer.path(hex), join(dir, "manifest.json"));
  writeFileSync(join(dir, "version"), "Directory Transport Version: 1.1\n");
  return image;
}

/**
 * A small image held in memory, for tests that push over /v2/: a config naming `platform`, the layers given,
 * and the OCI manifest over them, with the manifest's digest and the image's size (config + layers).
 */
export function imageOf(layers: Buffer[], platform = { os: "linux", architecture: "amd64" }) {
  const sha256 = (b: Buffer) => `sha256:${createHash("sha256").update(b).digest("hex")}`;
  const config = Buffer.from(JSON.stringify({ ...platform, rootfs: { type: "layers", diff_ids: [] } }));
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_MANIFEST,
      config: { mediaType: OCI_CONFIG, digest: sha256(config), size: config.length },
      layers: layers.map((l) => ({ mediaType: OCI_LAYER, digest: sha256(l), size: l.length })),
    }),
  );
  return { config, layers, manifest, digest: sha256(manifest), size: config.length + layers.reduce((s, l) => s + l.length, 0) };
}
