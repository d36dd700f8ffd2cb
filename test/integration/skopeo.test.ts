// Interoperability with a real registry client: Debian's `skopeo` against the server's OCI Distribution
// routes (/v2/ on the API port), logged in as `_token` with an access token of the server, as the README's
// quick start does. It copies a multi-layer image and a two-platform image index from an OCI layout built
// here (test/support/oci-layout.ts) into the server and back into a new layout: every blob comes back
// byte-identical. Then `skopeo inspect`, `list-tags` and `delete`; the API shows what was pushed (ListRepos,
// ListTags, GetSize, GetArchitectures over gRPC) and a subscription of the organization receives the push
// events (and the pulls'). Skipped, saying why, only where skopeo is not installed (.ci/run installs it).
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ImagesService } from "../../gen/chainguard/platform/registry/v2/images_pb.js";
import { ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { TagsService } from "../../gen/chainguard/platform/registry/v2/tags_pb.js";
import { subscriptions } from "../../src/db/schema/index.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { call } from "../contract/harness.js";
import { ociLayout, type BuiltImage, type BuiltIndex } from "../support/oci-layout.js";
import { startSink, type Received, type TestSink } from "../support/sink.js";
import { skopeo, skopeoInstalled, SkopeoError, type Skopeo } from "../support/skopeo.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

const PUSH_EVENT = "dev.chainguard.registry.push.v1";
const PULL_EVENT = "dev.chainguard.registry.pull.v1";
const SLOW = { timeout: 180_000 };

const sizeOf = (image: BuiltImage) => image.config.size + image.layers.reduce((s, l) => s + l.size, 0);

/** Every file under `dir`'s blobs/sha256, by name, with its bytes. */
function blobsOf(dir: string): Map<string, Buffer> {
  const blobs = join(dir, "blobs", "sha256");
  return new Map(readdirSync(blobs).map((name) => [name, readFileSync(join(blobs, name))]));
}

if (!skopeoInstalled()) {
  describe("skopeo against the registry", () => {
    it.skip("skipped: /usr/bin/skopeo is not installed (Debian's skopeo package; .ci/run installs it)", () => {});
  });
} else {
  describe("skopeo against the registry", () => {
    let server: TestServer;
    let world: World;
    let sink: TestSink;
    let client: Skopeo;
    let work: string;
    let host: string;
    let repoName: string;
    let image: BuiltImage;
    let index: BuiltIndex;
    let layoutDir: string;
    let repoUid = "";

    beforeAll(async () => {
      server = await startTestServer({ delivery: { retryBaseMs: 50, retryMaxMs: 200, pollMs: 50, timeoutMs: 2_000 } });
      world = await seedWorld(server, "skopeo");
      sink = await startSink();
      await server.database.db.insert(subscriptions).values({ uid: newChildUid(world.org), groupUid: world.org, sink: sink.url });
      host = `127.0.0.1:${server.port}`;
      // The organization by its uid (a root group's uid is 40 lowercase hex characters: a valid path component).
      repoName = `${world.org}/skopeo-app`;
      work = mkdtempSync(join(tmpdir(), "skopeo-interop-"));
      layoutDir = join(work, "source");
      const layout = ociLayout(layoutDir, "skopeo-interop");
      image = await layout.addImage("1.0", { architecture: "amd64", layers: [1_000, 300_000, 2_500_000, 64] });
      index = await layout.addIndex("multiarch", [
        { architecture: "amd64", layers: [40_000, 7_000] },
        { architecture: "arm64", variant: "v8", layers: [50_000] },
      ]);
      client = skopeo();
    }, SLOW.timeout);

    afterAll(async () => {
      client?.close();
      await sink?.close();
      await server?.close();
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it("logs in with _token and an access token of the server; a wrong token is refused", SLOW, async () => {
      await expect(client.login(host, "_token", "not-a-token")).rejects.toThrow(SkopeoError);
      await client.login(host, "_token", world.token.owner);
      const auth = JSON.parse(readFileSync(client.authfile, "utf8")) as { auths: Record<string, unknown> };
      expect(Object.keys(auth.auths)).toContain(host);
    });

    it("pushes a multi-layer image and a two-platform index from an OCI layout", SLOW, async () => {
      await client.copy(`oci:${layoutDir}:1.0`, `docker://${host}/${repoName}:1.0`);
      await client.copy(`oci:${layoutDir}:multiarch`, `docker://${host}/${repoName}:multiarch`, ["--all"]);
    });

    it("pulls both back into a new layout, every blob byte-identical", SLOW, async () => {
      const pulled = join(work, "pulled");
      await client.copy(`docker://${host}/${repoName}:1.0`, `oci:${pulled}:1.0`);
      await client.copy(`docker://${host}/${repoName}:multiarch`, `oci:${pulled}:multiarch`, ["--all"]);
      const source = blobsOf(layoutDir);
      const back = blobsOf(pulled);
      expect([...back.keys()].sort()).toEqual([...source.keys()].sort());
      for (const [name, bytes] of source) expect(back.get(name)!.equals(bytes), `blob ${name}`).toBe(true);
      // The tags name the same manifests.
      const refs = (JSON.parse(readFileSync(join(pulled, "index.json"), "utf8")) as { manifests: { digest: string; annotations: Record<string, string> }[] }).manifests;
      expect(Object.fromEntries(refs.map((m) => [m.annotations["org.opencontainers.image.ref.name"], m.digest]))).toEqual({
        "1.0": image.manifest.digest,
        multiarch: index.index.digest,
      });
    });

    it("skopeo inspect reads the image, its config and the index", SLOW, async () => {
      const inspected = (await client.inspect(`docker://${host}/${repoName}:1.0`)) as { Digest: string; Architecture: string; Os: string; Layers: string[]; RepoTags: string[] };
      expect(inspected).toMatchObject({ Digest: image.manifest.digest, Architecture: "amd64", Os: "linux", Layers: image.layers.map((l) => l.digest) });
      expect([...inspected.RepoTags].sort()).toEqual(["1.0", "multiarch"]);
      const raw = (await client.inspect(`docker://${host}/${repoName}:multiarch`, { raw: true })) as { mediaType: string; manifests: { digest: string; platform: { architecture: string } }[] };
      expect(raw.mediaType).toBe("application/vnd.oci.image.index.v1+json");
      expect(raw.manifests.map((m) => [m.digest, m.platform.architecture])).toEqual(index.images.map((im) => [im.manifest.digest, im.manifest.platform!.architecture]));
      // By digest too.
      const byDigest = (await client.inspect(`docker://${host}/${repoName}@${index.images[1]!.manifest.digest}`)) as { Architecture: string; Variant?: string };
      expect(byDigest.Architecture).toBe("arm64");
    });

    it("skopeo list-tags lists both tags", SLOW, async () => {
      expect((await client.listTags(`docker://${host}/${repoName}`)).sort()).toEqual(["1.0", "multiarch"]);
    });

    it("the API shows the pushed repo, its tags, sizes and architectures", SLOW, async () => {
      const auth = world.auth("viewer");
      const repos = await call("grpc", server.baseUrl, ReposService.method.listRepos, { uidp: { childrenOf: world.org } }, auth);
      expect(repos.error).toBeUndefined();
      const repo = repos.message!.repos.find((r) => r.name === "skopeo-app");
      expect(repo, `repos: ${repos.message!.repos.map((r) => r.name).join(", ")}`).toBeDefined();
      repoUid = repo!.uid;

      const listed = await call("grpc", server.baseUrl, TagsService.method.listTags, { uidp: { childrenOf: repoUid } }, auth);
      expect(listed.error).toBeUndefined();
      expect(listed.message!.tags.map((t) => [t.name, t.digest]).sort()).toEqual([
        ["1.0", image.manifest.digest],
        ["multiarch", index.index.digest],
      ]);

      const size = await call("grpc", server.baseUrl, ImagesService.method.getSize, { repoUid, digest: image.manifest.digest }, auth);
      expect(size.error).toBeUndefined();
      expect(size.message!.size).toBe(BigInt(sizeOf(image)));
      const armSize = await call("grpc", server.baseUrl, ImagesService.method.getSize, { repoUid, digest: index.index.digest, architecture: "arm64" }, auth);
      expect(armSize.message).toMatchObject({ size: BigInt(sizeOf(index.images[1]!)), architecture: "arm64" });
      const archs = await call("grpc", server.baseUrl, ImagesService.method.getArchitectures, { repoUid, digest: index.index.digest }, auth);
      expect(archs.error).toBeUndefined();
      expect([...archs.message!.architectures].sort()).toEqual(["amd64", "arm64"]);
    });

    it("the organization's subscription receives a push event for each tag, and pull events", SLOW, async () => {
      // A delivery's data is the event's envelope: the actor and the body (the SDK's events/registry fields).
      const bodyOf = (r: Received) => (JSON.parse(r.body.toString("utf8")) as { body: Record<string, unknown> }).body;
      const event = (type: string, tag: string, digest: string) => (r: Received) => {
        if (r.headers["ce-type"] !== type) return false;
        const body = bodyOf(r);
        return body.tag === tag && body.digest === digest;
      };
      const expected = [
        [PUSH_EVENT, "1.0", image.manifest.digest],
        [PUSH_EVENT, "multiarch", index.index.digest],
        [PULL_EVENT, "1.0", image.manifest.digest],
      ] as const;
      for (const [type, tag, digest] of expected) {
        const got = await sink.waitForMatch(event(type, tag, digest), `${type} for ${tag}`).catch((err: Error) => {
          throw new Error(`${err.message}; received: ${sink.received.map((r) => `${String(r.headers["ce-type"])} ${r.body.toString("utf8").slice(0, 200)}`).join("\n")}`);
        });
        expect(bodyOf(got)).toMatchObject({ repository: repoName, repo_id: repoUid, type: "manifest" });
        expect(String(bodyOf(got).user_agent)).toMatch(/skopeo|containers/i);
      }
    });

    it("skopeo delete removes the image; list-tags and ListTags no longer show its tag", SLOW, async () => {
      await client.delete(`docker://${host}/${repoName}:1.0`);
      expect(await client.listTags(`docker://${host}/${repoName}`)).toEqual(["multiarch"]);
      await expect(client.inspect(`docker://${host}/${repoName}:1.0`)).rejects.toThrow(/manifest unknown|not found/i);
      const listed = await call("grpc", server.baseUrl, TagsService.method.listTags, { uidp: { childrenOf: repoUid } }, world.auth("viewer"));
      expect(listed.message!.tags.map((t) => t.name)).toEqual(["multiarch"]);
    });
  });
}
