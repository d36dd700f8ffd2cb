// Importing an OCI image layout: the test writes a layout itself (two single-platform image manifests, an
// image index over both, index.json tagging the index), imports it into a repo, and reads the result back
// through the database and through ImagesService on a real server. A corrupted blob is refused before
// anything is written; importing the same layout again changes nothing.
import { createHash, randomBytes } from "node:crypto";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ImagesService } from "../../gen/chainguard/platform/registry/v2/images_pb.js";
import { TagsService } from "../../gen/chainguard/platform/registry/v2/tags_pb.js";
import { openPglite } from "../../src/db/client.js";
import { groups, manifests, repos, tagCounts, tags } from "../../src/db/schema/index.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { importOciLayout, OciImportError, tagOfRefName, type ImportProgress } from "../../src/registry/oci-import.js";
import { call } from "../contract/harness.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { runCli } from "../support/cli.js";

// --- building a layout ----------------------------------------------------------------------------------
interface Blob {
  digest: string;
  size: number;
}

function writeBlob(dir: string, content: Buffer | string): Blob {
  const bytes = typeof content === "string" ? Buffer.from(content) : content;
  const hex = createHash("sha256").update(bytes).digest("hex");
  writeFileSync(join(dir, "blobs", "sha256", hex), bytes);
  return { digest: `sha256:${hex}`, size: bytes.length };
}

const OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json";
const OCI_INDEX = "application/vnd.oci.image.index.v1+json";
const OCI_CONFIG = "application/vnd.oci.image.config.v1+json";
const OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip";

interface Layout {
  dir: string;
  amd64: { manifest: Blob; config: Blob; layers: Blob[]; size: number };
  arm64: { manifest: Blob; config: Blob; layers: Blob[]; size: number };
  index: Blob;
}

function buildLayout(): Layout {
  const dir = mkdtempSync(join(tmpdir(), "oci-layout-"));
  mkdirSync(join(dir, "blobs", "sha256"), { recursive: true });
  const image = (architecture: string, layerSizes: number[]) => {
    const layers = layerSizes.map((n) => writeBlob(dir, randomBytes(n)));
    const config = writeBlob(
      dir,
      JSON.stringify({
        architecture,
        os: "linux",
        config: { Env: ["PATH=/usr/bin"] },
        rootfs: { type: "layers", diff_ids: layers.map(() => `sha256:${randomBytes(32).toString("hex")}`) },
      }),
    );
    const manifest = writeBlob(
      dir,
      JSON.stringify({
        schemaVersion: 2,
        mediaType: OCI_MANIFEST,
        config: { mediaType: OCI_CONFIG, digest: config.digest, size: config.size },
        layers: layers.map((l) => ({ mediaType: OCI_LAYER, digest: l.digest, size: l.size })),
      }),
    );
    return { manifest, config, layers, size: config.size + layers.reduce((s, l) => s + l.size, 0) };
  };
  const amd64 = image("amd64", [3000, 70_000]);
  const arm64 = image("arm64", [2500, 65_000, 123]);
  const index = writeBlob(
    dir,
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_INDEX,
      manifests: [
        { mediaType: OCI_MANIFEST, digest: amd64.manifest.digest, size: amd64.manifest.size, platform: { os: "linux", architecture: "amd64" } },
        // No platform on this descriptor: the importer reads it from the child's config.
        { mediaType: OCI_MANIFEST, digest: arm64.manifest.digest, size: arm64.manifest.size },
      ],
    }),
  );
  writeFileSync(join(dir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  writeFileSync(
    join(dir, "index.json"),
    JSON.stringify({
      schemaVersion: 2,
      mediaType: OCI_INDEX,
      manifests: [
        { mediaType: OCI_INDEX, digest: index.digest, size: index.size, annotations: { "org.opencontainers.image.ref.name": "1.0" } },
        { mediaType: OCI_INDEX, digest: index.digest, size: index.size, annotations: { "org.opencontainers.image.ref.name": "registry.example.com/app:latest" } },
      ],
    }),
  );
  return { dir, amd64, arm64, index };
}

/** A copy of the layout with one byte of a blob flipped (same size). */
function corruptCopy(layout: Layout, digest: string): string {
  const dir = mkdtempSync(join(tmpdir(), "oci-layout-bad-"));
  cpSync(layout.dir, dir, { recursive: true });
  const path = join(dir, "blobs", "sha256", digest.slice(7));
  const bytes = readFileSync(path);
  const at = bytes.length >> 1;
  bytes[at] = bytes[at]! ^ 0xff;
  writeFileSync(path, bytes);
  return dir;
}

// --- the tests ------------------------------------------------------------------------------------------
let server: TestServer;
let world: World;
let layout: Layout;
const cleanup: string[] = [];

async function newRepo(name: string): Promise<string> {
  const uid = newChildUid(world.org);
  await server.database.db.insert(repos).values({ uid, groupUid: world.org, name });
  return uid;
}

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server);
  layout = buildLayout();
  cleanup.push(layout.dir);
});
afterAll(async () => {
  for (const d of cleanup) rmSync(d, { recursive: true, force: true });
  await server?.close();
});

describe("importOciLayout", () => {
  let repoUid: string;

  it("records every manifest with its platform and size, and tags the index", async () => {
    repoUid = await newRepo("app");
    const seen: ImportProgress["phase"][] = [];
    const result = await importOciLayout(server.database.db, { repoUid, dir: layout.dir, onProgress: (p) => seen.push(p.phase) });

    expect(result.manifests).toEqual({ total: 3, images: 2, indexes: 1, inserted: 3, updated: 0, unchanged: 0 });
    expect(result.tags).toMatchObject({ total: 2, created: 2, updated: 0, unchanged: 0 });
    expect(result.tags.names.sort()).toEqual(["1.0", "latest"]);
    // 3 manifests + 2 configs + 5 layers, each hashed once.
    expect(result.blobs.verified).toBe(10);
    expect(result.skipped).toEqual([]);
    expect(new Set(seen)).toEqual(new Set(["scan", "verify", "write", "tags", "done"]));

    const db = server.database.db;
    const rows = await db.select().from(manifests).where(eq(manifests.repoUid, repoUid));
    const byDigest = new Map(rows.map((r) => [r.digest, r]));
    expect(byDigest.get(layout.amd64.manifest.digest)).toMatchObject({
      mediaType: OCI_MANIFEST,
      isIndex: false,
      platform: "linux/amd64",
      size: BigInt(layout.amd64.size),
      manifestSize: BigInt(layout.amd64.manifest.size),
      children: null,
    });
    expect(byDigest.get(layout.arm64.manifest.digest)).toMatchObject({ isIndex: false, platform: "linux/arm64", size: BigInt(layout.arm64.size) });
    expect(byDigest.get(layout.index.digest)).toMatchObject({
      mediaType: OCI_INDEX,
      isIndex: true,
      platform: null,
      size: null,
      manifestSize: BigInt(layout.index.size),
      children: [
        { digest: layout.amd64.manifest.digest, platform: "linux/amd64", mediaType: OCI_MANIFEST, size: layout.amd64.manifest.size },
        { digest: layout.arm64.manifest.digest, platform: "linux/arm64", mediaType: OCI_MANIFEST, size: layout.arm64.manifest.size },
      ],
    });

    const tagRows = await db.select().from(tags).where(eq(tags.repoUid, repoUid));
    expect(tagRows.map((t) => [t.name, t.digest, t.kind]).sort()).toEqual([
      ["1.0", layout.index.digest, 0],
      ["latest", layout.index.digest, 0],
    ]);
    expect(tagRows.every((t) => t.uid.startsWith(`${repoUid}/`))).toBe(true);
  });

  it("is idempotent: importing the same layout again changes nothing", async () => {
    const db = server.database.db;
    const before = await db.select().from(tags).where(eq(tags.repoUid, repoUid));
    const result = await importOciLayout(server.database.db, { repoUid, dir: layout.dir });
    expect(result.manifests).toEqual({ total: 3, images: 2, indexes: 1, inserted: 0, updated: 0, unchanged: 3 });
    expect(result.tags).toMatchObject({ total: 2, created: 0, updated: 0, unchanged: 2 });
    expect(await db.select().from(manifests).where(eq(manifests.repoUid, repoUid))).toHaveLength(3);
    const after = await db.select().from(tags).where(eq(tags.repoUid, repoUid));
    expect(after.sort((a, b) => a.name.localeCompare(b.name))).toEqual(before.sort((a, b) => a.name.localeCompare(b.name)));
    const [count] = await db.select().from(tagCounts).where(and(eq(tagCounts.repoUid, repoUid), eq(tagCounts.kind, 0)));
    expect(count?.count).toBe(2n);
  });

  it("keeps a tag's deprecated flag and bundles when a re-import moves nothing", async () => {
    const db = server.database.db;
    await db.update(tags).set({ deprecated: true, bundles: ["b1"] }).where(and(eq(tags.repoUid, repoUid), eq(tags.name, "1.0")));
    await importOciLayout(db, { repoUid, dir: layout.dir });
    const [t] = await db.select().from(tags).where(and(eq(tags.repoUid, repoUid), eq(tags.name, "1.0")));
    expect(t).toMatchObject({ deprecated: true, bundles: ["b1"], digest: layout.index.digest });
  });

  it.each([
    ["a layer", () => layout.arm64.layers[1]!.digest],
    ["a config", () => layout.amd64.config.digest],
    ["a manifest", () => layout.arm64.manifest.digest],
  ])("refuses a layout with a corrupted blob (%s), naming it, and writes nothing", async (_what, digestOf) => {
    const digest = digestOf();
    const dir = corruptCopy(layout, digest);
    cleanup.push(dir);
    const fresh = await newRepo(`corrupt-${digest.slice(7, 15)}`);
    const err = await importOciLayout(server.database.db, { repoUid: fresh, dir }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OciImportError);
    expect((err as Error).message).toContain(`blob ${digest} is corrupted`);
    expect(await server.database.db.select().from(manifests).where(eq(manifests.repoUid, fresh))).toEqual([]);
    expect(await server.database.db.select().from(tags).where(eq(tags.repoUid, fresh))).toEqual([]);
  });

  it("refuses a missing blob, a missing or unsupported oci-layout, and an unknown repo", async () => {
    const db = server.database.db;
    const fresh = await newRepo("broken");
    const missing = mkdtempSync(join(tmpdir(), "oci-layout-missing-"));
    cleanup.push(missing);
    cpSync(layout.dir, missing, { recursive: true });
    rmSync(join(missing, "blobs", "sha256", layout.amd64.layers[0]!.digest.slice(7)));
    await expect(importOciLayout(db, { repoUid: fresh, dir: missing })).rejects.toThrow(`layer blob ${layout.amd64.layers[0]!.digest} is missing`);

    writeFileSync(join(missing, "oci-layout"), JSON.stringify({ imageLayoutVersion: "2.0.0" }));
    await expect(importOciLayout(db, { repoUid: fresh, dir: missing })).rejects.toThrow(/unsupported imageLayoutVersion "2.0.0"/);
    rmSync(join(missing, "oci-layout"));
    await expect(importOciLayout(db, { repoUid: fresh, dir: missing })).rejects.toThrow(/no oci-layout file/);

    await expect(importOciLayout(db, { repoUid: `${world.org}/0000000000000000`, dir: layout.dir })).rejects.toThrow(/does not exist/);
    expect(await db.select().from(manifests).where(eq(manifests.repoUid, fresh))).toEqual([]);
  });

  it("reads tags from ref names", () => {
    expect(tagOfRefName("1.0")).toBe("1.0");
    expect(tagOfRefName("registry.example.com:5000/app:latest")).toBe("latest");
    expect(tagOfRefName("app:v1@sha256:" + "0".repeat(64))).toBe("v1");
    expect(tagOfRefName("registry.example.com/app")).toBeUndefined();
    expect(tagOfRefName("-bad")).toBeUndefined();
  });

  it("TagsService lists the imported tags", async () => {
    const listed = await call("rest", server.baseUrl, TagsService.method.listTags, { uidp: { childrenOf: repoUid } }, world.auth("viewer"));
    expect(listed.error).toBeUndefined();
    expect(listed.message!.tags.map((t) => [t.name, t.digest])).toEqual([
      ["1.0", layout.index.digest],
      ["latest", layout.index.digest],
    ]);
    expect(listed.message!.totalCount).toBe(2n);
  });

  // ImagesService reads what the import recorded.
  it("ImagesService answers the architectures and sizes of the imported image", async () => {
    const auth = world.auth("viewer");
    const archs = await call("grpc", server.baseUrl, ImagesService.method.getArchitectures, { repoUid, digest: layout.index.digest }, auth);
    expect(archs.error).toBeUndefined();
    // Stored as the image config says ("linux/amd64"), answered as the SDK names architectures.
    expect([...archs.message!.architectures].sort()).toEqual(["amd64", "arm64"]);

    const single = await call("rest", server.baseUrl, ImagesService.method.getArchitectures, { repoUid, digest: layout.amd64.manifest.digest }, auth);
    expect(single.message?.architectures).toEqual(["amd64"]);

    const size = await call("grpc", server.baseUrl, ImagesService.method.getSize, { repoUid, digest: layout.amd64.manifest.digest }, auth);
    expect(size.error).toBeUndefined();
    expect(size.message!.size).toBe(BigInt(layout.amd64.size));

    const armSize = await call("rest", server.baseUrl, ImagesService.method.getSize, { repoUid, digest: layout.index.digest, architecture: "linux/arm64" }, auth);
    expect(armSize.error).toBeUndefined();
    expect(armSize.message!.size).toBe(BigInt(layout.arm64.size));
    const byName = await call("grpc", server.baseUrl, ImagesService.method.getSize, { repoUid, digest: layout.index.digest, architecture: "arm64" }, auth);
    expect(byName.message).toMatchObject({ size: BigInt(layout.arm64.size), architecture: "arm64" });
    const byDefault = await call("grpc", server.baseUrl, ImagesService.method.getSize, { repoUid, digest: layout.index.digest }, auth);
    expect(byDefault.message).toMatchObject({ size: BigInt(layout.amd64.size), architecture: "amd64" });
  });
});

// The command, end to end on an embedded database in a temporary directory (the code path is the same on
// PostgreSQL): usage errors exit 2, failures 1, an import 0 with a JSON summary on stdout.
describe("npm run import-oci", () => {
  const run = (args: string[], env: Record<string, string>) => runCli("import-oci.ts", args, env);

  it("imports a layout into an existing repo, and refuses bad input", { timeout: 120_000 }, async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "oci-cli-data-"));
    cleanup.push(dataDir);
    const org = newRootUid();
    const repoUid = newChildUid(org);
    const database = await openPglite(dataDir);
    await database.db.insert(groups).values({ uid: org, name: "cli" });
    await database.db.insert(repos).values({ uid: repoUid, groupUid: org, name: "app" });
    await database.close();
    const env = { DATA_DIR: dataDir };

    expect((await run([layout.dir], env)).code).toBe(2);
    expect((await run(["--repo", "not a uid", layout.dir], env)).code).toBe(2);

    const ok = await run(["--repo", repoUid, layout.dir], env);
    expect(ok.stderr).toMatch(/done: 3 manifests, 2 tags/);
    expect(ok.code).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ repoUid, manifests: { total: 3, inserted: 3 }, tags: { created: 2 } });

    const bad = corruptCopy(layout, layout.amd64.layers[1]!.digest);
    cleanup.push(bad);
    const refused = await run(["--repo", repoUid, bad], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`blob ${layout.amd64.layers[1]!.digest} is corrupted`);
    expect(refused.stdout).toBe("");

    const unknown = await run(["--repo", `${org}/0000000000000000`, layout.dir], env);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(/does not exist/);
  });
});
