// The image builder of the skopeo test and the oci benchmark (test/support/oci-layout.ts): the same seed gives
// the same blobs, another seed other ones; every blob is named by the sha256 of its bytes; a layer is a gzipped
// tar whose one file holds the asked number of bytes, and the config's diff_ids are the digests of the tars.
import { createHash } from "node:crypto";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { afterAll, describe, expect, it } from "vitest";
import { dirImage, ociLayout, OCI_INDEX } from "../support/oci-layout.js";

const dirs: string[] = [];
const temp = () => {
  const d = mkdtempSync(join(tmpdir(), "oci-layout-test-"));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const sha256 = (b: Buffer) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

async function build(seed: string) {
  const layout = ociLayout(temp(), seed);
  const image = await layout.addImage("1.0", { architecture: "amd64", layers: [0, 700, 70_000] });
  const index = await layout.addIndex("multi", [
    { architecture: "amd64", layers: [100] },
    { architecture: "arm64", variant: "v8", layers: [200] },
  ]);
  return { layout, image, index };
}

describe("ociLayout", () => {
  it("is deterministic in its seed", async () => {
    const [a, b, c] = await Promise.all([build("one"), build("one"), build("two")]);
    const names = (dir: string) => readdirSync(join(dir, "blobs", "sha256")).sort();
    expect(names(a.layout.dir)).toEqual(names(b.layout.dir));
    expect(readFileSync(join(a.layout.dir, "index.json"))).toEqual(readFileSync(join(b.layout.dir, "index.json")));
    // Another seed shares only the empty layer (a tar of an empty file).
    expect(names(c.layout.dir).filter((n) => names(a.layout.dir).includes(n))).toEqual([a.image.layers[0]!.digest.slice("sha256:".length)]);
  });

  it("names blobs by their digest, layers are gzipped tars of the sizes asked, diff_ids match", async () => {
    const { layout, image, index } = await build("check");
    for (const name of readdirSync(join(layout.dir, "blobs", "sha256"))) {
      expect(sha256(readFileSync(join(layout.dir, "blobs", "sha256", name)))).toBe(`sha256:${name}`);
    }
    const config = JSON.parse(readFileSync(layout.blobPath(image.config.digest), "utf8")) as { os: string; architecture: string; rootfs: { diff_ids: string[] } };
    expect(config).toMatchObject({ os: "linux", architecture: "amd64" });
    for (const [i, layer] of image.layers.entries()) {
      const blob = readFileSync(layout.blobPath(layer.digest));
      expect(blob.length).toBe(layer.size);
      const tar = gunzipSync(blob);
      expect(sha256(tar)).toBe(config.rootfs.diff_ids[i]);
      // ustar: the name, the size in octal, the magic; the archive ends in two zero blocks.
      expect(tar.subarray(0, 8).toString("ascii")).toBe("data.bin");
      expect(parseInt(tar.subarray(124, 135).toString("ascii"), 8)).toBe([0, 700, 70_000][i]);
      expect(tar.subarray(257, 262).toString("ascii")).toBe("ustar");
      expect(tar.length % 512).toBe(0);
    }
    const top = JSON.parse(readFileSync(join(layout.dir, "index.json"), "utf8")) as { manifests: { digest: string; annotations: Record<string, string> }[] };
    expect(top.manifests.map((m) => [m.annotations["org.opencontainers.image.ref.name"], m.digest])).toEqual([
      ["1.0", image.manifest.digest],
      ["multi", index.index.digest],
    ]);
    const idx = JSON.parse(readFileSync(layout.blobPath(index.index.digest), "utf8")) as { mediaType: string; manifests: { platform: object }[] };
    expect(idx.mediaType).toBe(OCI_INDEX);
    expect(idx.manifests.map((m) => m.platform)).toEqual([
      { os: "linux", architecture: "amd64" },
      { os: "linux", architecture: "arm64", variant: "v8" },
    ]);
  });

  it("writes skopeo's dir format: manifest.json, the version file, blobs by hex digest", async () => {
    const dir = join(temp(), "img:1");
    const image = await dirImage(dir, "dir", { architecture: "amd64", layers: [4096] });
    expect(sha256(readFileSync(join(dir, "manifest.json")))).toBe(image.manifest.digest);
    expect(readFileSync(join(dir, "version"), "utf8")).toBe("Directory Transport Version: 1.1\n");
    expect(readdirSync(dir).sort()).toEqual([image.config.digest, image.layers[0]!.digest].map((d) => d.slice("sha256:".length)).concat(["manifest.json", "version"]).sort());
  });
});
