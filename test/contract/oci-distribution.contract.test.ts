// The OCI Distribution Specification under /v2/, through a small fetch client: the conformance workflows
// (pull, push: monolithic, POST then PUT, chunked, resumable, mount; content discovery: tags list pages and
// referrers; content management: deletes), the spec's error codes, the name grammar, the token flow (Basic
// _token, bearer, another audience, a pull token used to push, anonymous and public), blobs per repository
// across organizations, and what the API and the outbox show of a push. Every case runs on both storage
// backends (the filesystem, and S3 on a test S3 server in this process) and, as every contract test, on the
// database DATABASE_URL names (PGlite without it).
import { createHash } from "node:crypto";
import { request as httpRequest } from "node:http";
import http2 from "node:http2";
import { and, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { RelationshipType } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { groups, identities, outboxEvents, repoBlobs, repos, roleBindings, roles } from "../../src/db/schema/index.js";
import { mintToken } from "../../src/kernel/auth/index.js";
import { addLogTap } from "../../src/kernel/log.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { fsSubject, s3Subject, stopS3Subject, type BlobStoreSubject } from "../support/blob-stores.js";
import { imageOf, OCI_INDEX, OCI_MANIFEST } from "../support/oci-layout.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

const DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json";

let server: TestServer;
let world: World;
let other: World;

const sha256 = (b: Buffer | string) => `sha256:${createHash("sha256").update(b).digest("hex")}`;
const sha512 = (b: Buffer | string) => `sha512:${createHash("sha512").update(b).digest("hex")}`;

interface Call {
  token?: string | undefined;
  basic?: string | undefined;
  headers?: Record<string, string>;
  body?: Buffer | string | undefined;
}

async function http(method: string, path: string, c: Call = {}) {
  const headers: Record<string, string> = { ...c.headers };
  if (c.token) headers.authorization = `Bearer ${c.token}`;
  if (c.basic) headers.authorization = `Basic ${Buffer.from(`_token:${c.basic}`).toString("base64")}`;
  const res = await fetch(server.baseUrl + path, { method, headers, body: c.body, redirect: "manual" });
  const bytes = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, bytes, text: bytes.toString("utf8") };
}

/** The spec's error body's first code. */
const codeOf = (r: { text: string }) => (JSON.parse(r.text) as { errors: Array<{ code: string }> }).errors[0]!.code;

async function pushBlob(name: string, bytes: Buffer | string, token: string): Promise<string> {
  const digest = sha256(bytes);
  const r = await http("POST", `/v2/${name}/blobs/uploads/?digest=${digest}`, { token, body: bytes, headers: { "content-type": "application/octet-stream" } });
  expect(r.status, r.text).toBe(201);
  return digest;
}

async function pushImage(name: string, ref: string, token: string, layers = [Buffer.from(`layer ${Math.random()}`)], platform?: { os: string; architecture: string }) {
  const image = imageOf(layers, platform);
  await pushBlob(name, image.config, token);
  for (const l of layers) await pushBlob(name, l, token);
  const r = await http("PUT", `/v2/${name}/manifests/${ref}`, { token, body: image.manifest, headers: { "content-type": OCI_MANIFEST } });
  expect(r.status, r.text).toBe(201);
  expect(r.headers.get("docker-content-digest")).toBe(image.digest);
  return image;
}

/** A GET with the path sent as written (node:http does not resolve dot segments, as fetch's URL parser does). */
function rawGet(path: string, token: string) {
  return new Promise<{ status: number; text: string }>((resolve, reject) => {
    const req = httpRequest(server.baseUrl + "/", { method: "GET", path, headers: { authorization: `Bearer ${token}` } }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") }));
      res.on("error", reject);
    });
    req.on("error", reject);
    req.end();
  });
}

/** One request over HTTP/2 cleartext (as clients do over TLS with ALPN h2). */
function h2(method: string, path: string, token: string, body?: Buffer, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; headers: http2.IncomingHttpHeaders; bytes: Buffer }>((resolve, reject) => {
    const session = http2.connect(server.baseUrl);
    session.on("error", reject);
    const stream = session.request({ ":method": method, ":path": path, authorization: `Bearer ${token}`, ...headers });
    const chunks: Buffer[] = [];
    let head: http2.IncomingHttpHeaders = {};
    stream.on("response", (h) => (head = h));
    stream.on("data", (c: Buffer) => chunks.push(c));
    stream.on("end", () => {
      session.close();
      resolve({ status: Number(head[":status"]), headers: head, bytes: Buffer.concat(chunks) });
    });
    stream.on("error", reject);
    stream.end(body);
  });
}

const backends: readonly BlobStoreSubject[] = [fsSubject, s3Subject];

afterAll(async () => {
  await stopS3Subject();
});

// The same workflows on each storage backend: a server of its own per backend, on its own database.
describe.each(backends)("on the $name blob store", (backend) => {
  let disposeBlobs: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    const opened = await backend.open();
    disposeBlobs = opened.dispose;
    server = await startTestServer({ blobs: opened.store });
    world = await seedWorld(server);
    other = await seedWorld(server, "other-org");
  }, 120_000);

  afterAll(async () => {
    await server?.close();
    await disposeBlobs?.();
  });

  describe("version check and the token flow", () => {
    it("GET /v2/ without credentials is 401 with a Bearer challenge naming the token endpoint and service", async () => {
      const r = await http("GET", "/v2/");
      expect(r.status).toBe(401);
      expect(codeOf(r)).toBe("UNAUTHORIZED");
      const host = new URL(server.baseUrl).host;
      expect(r.headers.get("www-authenticate")).toBe(`Bearer realm="${server.baseUrl}/token",service="${host}"`);
    });

    it("GET /v2/ with a platform token, a Basic _token login, or a registry token is 200", async () => {
      expect((await http("GET", "/v2/", { token: world.token.viewer })).status).toBe(200);
      const basic = await http("GET", "/v2/", { basic: world.token.viewer });
      expect(basic.status).toBe(200);
      expect(basic.headers.get("docker-distribution-api-version")).toBe("registry/2.0");
      const t = await http("GET", `/token?service=${new URL(server.baseUrl).host}`, { basic: world.token.viewer });
      expect(t.status).toBe(200);
      expect((await http("GET", "/v2/", { token: (JSON.parse(t.text) as { token: string }).token })).status).toBe(200);
    });

    it("a repository request without credentials names its scope in the challenge", async () => {
      const r = await http("GET", `/v2/${world.org}/nothing/tags/list`);
      expect(r.status).toBe(401);
      expect(r.headers.get("www-authenticate")).toContain(`scope="repository:${world.org}/nothing:pull"`);
      const push = await http("POST", `/v2/${world.org}/nothing/blobs/uploads/`);
      expect(push.headers.get("www-authenticate")).toContain(`scope="repository:${world.org}/nothing:pull,push"`);
    });

    it("the token endpoint answers a short-lived token with the actions granted, and the token works for them only", async () => {
      const name = `${world.org}/token-flow`;
      const scope = encodeURIComponent(`repository:${name}:pull,push`);
      const owner = await http("GET", `/token?scope=${scope}`, { basic: world.token.owner });
      expect(owner.status, owner.text).toBe(200);
      const body = JSON.parse(owner.text) as { token: string; access_token: string; expires_in: number; issued_at: string };
      expect(body.access_token).toBe(body.token);
      expect(body.expires_in).toBeGreaterThan(60);
      expect(Number.isNaN(Date.parse(body.issued_at))).toBe(false);
      const claims = JSON.parse(Buffer.from(body.token.split(".")[1]!, "base64url").toString()) as { aud: string; access: unknown };
      expect(claims.aud).toBe(new URL(server.baseUrl).host);
      expect(claims.access).toEqual([{ type: "repository", name, actions: ["pull", "push"] }]);
      await pushImage(name, "v1", body.token);

      // A viewer asking for push gets pull only; that token cannot push (401 insufficient_scope: ask again).
      const viewer = await http("GET", `/token?scope=${scope}`, { token: world.token.viewer });
      const viewerToken = (JSON.parse(viewer.text) as { token: string }).token;
      expect((JSON.parse(Buffer.from(viewerToken.split(".")[1]!, "base64url").toString()) as { access: unknown }).access).toEqual([{ type: "repository", name, actions: ["pull"] }]);
      expect((await http("GET", `/v2/${name}/manifests/v1`, { token: viewerToken })).status).toBe(200);
      const pushed = await http("POST", `/v2/${name}/blobs/uploads/`, { token: viewerToken });
      expect(pushed.status).toBe(401);
      expect(pushed.headers.get("www-authenticate")).toContain('error="insufficient_scope"');

      // The owner's pull token cannot push either, nor reach another repo.
      const pullOnly = JSON.parse((await http("GET", `/token?scope=${encodeURIComponent(`repository:${name}:pull`)}`, { basic: world.token.owner })).text) as { token: string };
      expect((await http("POST", `/v2/${name}/blobs/uploads/`, { token: pullOnly.token })).status).toBe(401);
      // Nor push a manifest or delete one (UNAUTHORIZED with the scope to ask for), nor through Basic _token.
      const again = imageOf([Buffer.from("never pushed")]);
      for (const c of [{ token: pullOnly.token }, { basic: pullOnly.token }]) {
        const put = await http("PUT", `/v2/${name}/manifests/v2`, { ...c, body: again.manifest, headers: { "content-type": OCI_MANIFEST } });
        expect(put.status).toBe(401);
        expect(codeOf(put)).toBe("UNAUTHORIZED");
        expect(put.headers.get("www-authenticate")).toContain(`scope="repository:${name}:pull,push"`);
        const del = await http("DELETE", `/v2/${name}/manifests/v1`, c);
        expect(del.status).toBe(401);
        expect(codeOf(del)).toBe("UNAUTHORIZED");
      }
      expect((await http("GET", `/v2/${name}/manifests/v1`, { token: pullOnly.token })).status).toBe(200);
      expect((await http("GET", `/v2/${world.org}/elsewhere/tags/list`, { token: pullOnly.token })).status).toBe(401);
      // A registry token is not a platform token.
      const api = await fetch(`${server.baseUrl}/registry/v2/repos?uidp.childrenOf=${world.org}`, { headers: { authorization: `Bearer ${pullOnly.token}` } });
      expect(api.status).toBe(401);
    });

    it("a token for another audience is refused, on /v2/ and by the token endpoint", async () => {
      const { token } = await mintToken(server.keys, { issuer: server.baseUrl, subject: world.identity.owner, audience: "https://elsewhere.example", ttlSeconds: 300 });
      expect((await http("GET", "/v2/", { token })).status).toBe(401);
      expect((await http("GET", `/v2/${world.org}/x/tags/list`, { token })).status).toBe(401);
      expect((await http("GET", "/token?scope=repository:a/b:pull", { basic: token })).status).toBe(401);
      expect((await http("GET", "/token", { basic: "not-a-token" })).status).toBe(401);
    });

    it("anonymous callers pull only repos their owner made public (Repo.public)", async () => {
      const name = `${world.org}/public-later`;
      const image = await pushImage(name, "latest", world.token.owner);
      expect((await http("GET", `/v2/${name}/manifests/latest`)).status).toBe(401);
      const anonymous = JSON.parse((await http("GET", `/token?scope=${encodeURIComponent(`repository:${name}:pull`)}`)).text) as { token: string };
      expect((await http("GET", `/v2/${name}/manifests/latest`, { token: anonymous.token })).status).toBe(401);

      const [repo] = await server.database.db.select({ uid: repos.uid }).from(repos).where(and(eq(repos.groupUid, world.org), eq(repos.name, "public-later")));
      const patch = await fetch(`${server.baseUrl}/registry/v2/repos/${repo!.uid}?updateMask=public`, {
        method: "PATCH",
        headers: { authorization: `Bearer ${world.token.owner}`, "content-type": "application/json" },
        body: JSON.stringify({ public: true }),
      });
      expect(patch.status, await patch.text()).toBe(200);
      expect((await http("GET", `/v2/${name}/manifests/latest`)).status).toBe(200);
      const again = JSON.parse((await http("GET", `/token?scope=${encodeURIComponent(`repository:${name}:pull,push`)}`)).text) as { token: string };
      const pulled = await http("GET", `/v2/${name}/blobs/${sha256(image.config)}`, { token: again.token });
      expect(pulled.status).toBe(200);
      expect(pulled.bytes.equals(image.config)).toBe(true);
      // Public is for pulls: pushing still needs credentials.
      expect((await http("POST", `/v2/${name}/blobs/uploads/`, { token: again.token })).status).toBe(401);
    });
  });

  describe("pull", () => {
    it("manifests by tag and by digest, GET and HEAD, with exact headers; blobs with Range", async () => {
      const name = `${world.org}/pull`;
      const layer = Buffer.from("0123456789abcdef".repeat(64));
      const image = await pushImage(name, "1.0", world.token.owner, [layer]);
      for (const ref of ["1.0", image.digest]) {
        const get = await http("GET", `/v2/${name}/manifests/${ref}`, { token: world.token.viewer, headers: { accept: OCI_MANIFEST } });
        expect(get.status).toBe(200);
        expect(get.bytes.equals(image.manifest)).toBe(true);
        expect(get.headers.get("content-type")).toBe(OCI_MANIFEST);
        expect(get.headers.get("content-length")).toBe(String(image.manifest.length));
        expect(get.headers.get("docker-content-digest")).toBe(image.digest);
        const head = await http("HEAD", `/v2/${name}/manifests/${ref}`, { token: world.token.viewer });
        expect(head.status).toBe(200);
        expect(head.headers.get("content-length")).toBe(String(image.manifest.length));
      }
      // Accept negotiation: a client accepting only Docker's schema 2 does not get an OCI manifest.
      const docker = await http("GET", `/v2/${name}/manifests/1.0`, { token: world.token.viewer, headers: { accept: DOCKER_MANIFEST } });
      expect(docker.status).toBe(404);
      expect(codeOf(docker)).toBe("MANIFEST_UNKNOWN");

      const blob = await http("GET", `/v2/${name}/blobs/${sha256(layer)}`, { token: world.token.viewer });
      expect(blob.status).toBe(200);
      expect(blob.bytes.equals(layer)).toBe(true);
      expect(blob.headers.get("docker-content-digest")).toBe(sha256(layer));
      const part = await http("GET", `/v2/${name}/blobs/${sha256(layer)}`, { token: world.token.viewer, headers: { range: "bytes=10-19" } });
      expect(part.status).toBe(206);
      expect(part.text).toBe(layer.subarray(10, 20).toString());
      expect(part.headers.get("content-range")).toBe(`bytes 10-19/${layer.length}`);
      expect((await http("GET", `/v2/${name}/blobs/${sha256(layer)}`, { token: world.token.viewer, headers: { range: `bytes=${layer.length}-` } })).status).toBe(416);
      const head = await http("HEAD", `/v2/${name}/blobs/${sha256(layer)}`, { token: world.token.viewer });
      expect(head.headers.get("content-length")).toBe(String(layer.length));

      const missing = await http("GET", `/v2/${name}/manifests/nope`, { token: world.token.viewer });
      expect(missing.status).toBe(404);
      expect(codeOf(missing)).toBe("MANIFEST_UNKNOWN");
      const noBlob = await http("GET", `/v2/${name}/blobs/${sha256("absent")}`, { token: world.token.viewer });
      expect(codeOf(noBlob)).toBe("BLOB_UNKNOWN");
      const noRepo = await http("GET", `/v2/${world.org}/no-such-repo/manifests/latest`, { token: world.token.viewer });
      expect(noRepo.status).toBe(404);
      expect(codeOf(noRepo)).toBe("NAME_UNKNOWN");
    });
  });


  describe("over HTTP/2", () => {
    it("pushes a blob in chunks and a manifest, and pulls them back", async () => {
      const name = `${world.org}/over-h2`;
      const layer = Buffer.alloc(300_000, 7);
      const start = await h2("POST", `/v2/${name}/blobs/uploads/`, world.token.owner);
      expect(start.status).toBe(202);
      const location = String(start.headers.location);
      expect((await h2("PATCH", location, world.token.owner, layer.subarray(0, 100_000), { "content-type": "application/octet-stream" })).headers.range).toBe("0-99999");
      const done = await h2("PUT", `${location}?digest=${sha256(layer)}`, world.token.owner, layer.subarray(100_000), { "content-type": "application/octet-stream" });
      expect(done.status).toBe(201);
      const image = imageOf([layer]);
      expect((await h2("POST", `/v2/${name}/blobs/uploads/?digest=${sha256(image.config)}`, world.token.owner, image.config)).status).toBe(201);
      const put = await h2("PUT", `/v2/${name}/manifests/v1`, world.token.owner, image.manifest, { "content-type": OCI_MANIFEST });
      expect(put.status).toBe(201);
      const tooLarge = await h2("PUT", `/v2/${name}/manifests/v2`, world.token.owner, Buffer.alloc(4 * 1024 * 1024 + 1, 0x20), { "content-type": OCI_MANIFEST });
      expect(tooLarge.status).toBe(413);
      const manifest = await h2("GET", `/v2/${name}/manifests/v1`, world.token.viewer);
      expect(manifest.bytes.equals(image.manifest)).toBe(true);
      const blob = await h2("GET", `/v2/${name}/blobs/${sha256(layer)}`, world.token.viewer);
      expect(blob.status).toBe(200);
      expect(blob.bytes.equals(layer)).toBe(true);
    });
  });

  describe("push", () => {
    it("POST then PUT with the body, and a sha512 digest", async () => {
      const name = `${world.org}/post-put`;
      const start = await http("POST", `/v2/${name}/blobs/uploads/`, { token: world.token.owner });
      expect(start.status).toBe(202);
      const location = start.headers.get("location")!;
      expect(location).toMatch(new RegExp(`^/v2/${name}/blobs/uploads/[0-9a-f-]{36}$`));
      const bytes = Buffer.from("a sha512 blob");
      const done = await http("PUT", `${location}?digest=${sha512(bytes)}`, { token: world.token.owner, body: bytes, headers: { "content-type": "application/octet-stream" } });
      expect(done.status, done.text).toBe(201);
      expect(done.headers.get("location")).toBe(`/v2/${name}/blobs/${sha512(bytes)}`);
      const got = await http("GET", `/v2/${name}/blobs/${sha512(bytes)}`, { token: world.token.owner });
      expect(got.bytes.equals(bytes)).toBe(true);
    });

    it("chunked PATCH with Content-Range, resumable status, an out-of-order chunk refused, then PUT", async () => {
      const name = `${world.org}/chunked`;
      const bytes = Buffer.from("x".repeat(3000) + "y".repeat(3000));
      const start = await http("POST", `/v2/${name}/blobs/uploads/`, { token: world.token.owner });
      const location = start.headers.get("location")!;
      const first = await http("PATCH", location, { token: world.token.owner, body: bytes.subarray(0, 2500), headers: { "content-type": "application/octet-stream", "content-range": "0-2499" } });
      expect(first.status).toBe(202);
      expect(first.headers.get("range")).toBe("0-2499");
      const status = await http("GET", location, { token: world.token.owner });
      expect(status.status).toBe(204);
      expect(status.headers.get("range")).toBe("0-2499");
      const wrong = await http("PATCH", location, { token: world.token.owner, body: bytes.subarray(3000, 4000), headers: { "content-type": "application/octet-stream", "content-range": "3000-3999" } });
      expect(wrong.status).toBe(416);
      expect(wrong.headers.get("range")).toBe("0-2499");
      const second = await http("PATCH", location, { token: world.token.owner, body: bytes.subarray(2500), headers: { "content-type": "application/octet-stream", "content-range": `2500-${bytes.length - 1}` } });
      expect(second.headers.get("range")).toBe(`0-${bytes.length - 1}`);
      const wrongDigest = await http("PUT", `${location}?digest=${sha256("something else")}`, { token: world.token.owner });
      expect(wrongDigest.status).toBe(400);
      expect(codeOf(wrongDigest)).toBe("DIGEST_INVALID");
      // A refused digest ends the upload; a new one finishes.
      const again = (await http("POST", `/v2/${name}/blobs/uploads/`, { token: world.token.owner })).headers.get("location")!;
      await http("PATCH", again, { token: world.token.owner, body: bytes, headers: { "content-type": "application/octet-stream" } });
      const done = await http("PUT", `${again}?digest=${sha256(bytes)}`, { token: world.token.owner });
      expect(done.status).toBe(201);
      expect((await http("GET", `/v2/${name}/blobs/${sha256(bytes)}`, { token: world.token.owner })).bytes.equals(bytes)).toBe(true);
    });

    it("a cancelled upload is gone; an unknown upload is BLOB_UPLOAD_UNKNOWN", async () => {
      const name = `${world.org}/cancel`;
      const location = (await http("POST", `/v2/${name}/blobs/uploads/`, { token: world.token.owner })).headers.get("location")!;
      expect((await http("DELETE", location, { token: world.token.owner })).status).toBe(204);
      const gone = await http("GET", location, { token: world.token.owner });
      expect(gone.status).toBe(404);
      expect(codeOf(gone)).toBe("BLOB_UPLOAD_UNKNOWN");
    });

    it("a monolithic push whose content does not match its digest stores nothing", async () => {
      const name = `${world.org}/mono`;
      await pushBlob(name, "first", world.token.owner);
      const r = await http("POST", `/v2/${name}/blobs/uploads/?digest=${sha256("claimed")}`, { token: world.token.owner, body: "actual", headers: { "content-type": "application/octet-stream" } });
      expect(r.status).toBe(400);
      expect(codeOf(r)).toBe("DIGEST_INVALID");
      expect((await http("HEAD", `/v2/${name}/blobs/${sha256("claimed")}`, { token: world.token.owner })).status).toBe(404);
    });

    it("manifests: blobs must be in the repo, child manifests too, size and digest checked; PUT by digest", async () => {
      const name = `${world.org}/manifests`;
      const image = imageOf([Buffer.from("unpushed layer")]);
      await pushBlob(name, image.config, world.token.owner);
      const missing = await http("PUT", `/v2/${name}/manifests/v1`, { token: world.token.owner, body: image.manifest, headers: { "content-type": OCI_MANIFEST } });
      expect(missing.status).toBe(400);
      expect(codeOf(missing)).toBe("MANIFEST_BLOB_UNKNOWN");
      const huge = Buffer.alloc(4 * 1024 * 1024 + 1, 0x20);
      const tooLarge = await http("PUT", `/v2/${name}/manifests/v1`, { token: world.token.owner, body: huge, headers: { "content-type": OCI_MANIFEST } });
      expect(tooLarge.status).toBe(413);
      expect(codeOf(tooLarge)).toBe("SIZE_INVALID");
      const invalid = await http("PUT", `/v2/${name}/manifests/v1`, { token: world.token.owner, body: "{not json", headers: { "content-type": OCI_MANIFEST } });
      expect(codeOf(invalid)).toBe("MANIFEST_INVALID");

      const a = await pushImage(name, "amd64", world.token.owner);
      const b = await pushImage(name, "arm64", world.token.owner, undefined, { os: "linux", architecture: "arm64" });
      const index = Buffer.from(
        JSON.stringify({
          schemaVersion: 2,
          mediaType: OCI_INDEX,
          manifests: [
            { mediaType: OCI_MANIFEST, digest: a.digest, size: a.manifest.length, platform: { os: "linux", architecture: "amd64" } },
            { mediaType: OCI_MANIFEST, digest: b.digest, size: b.manifest.length, platform: { os: "linux", architecture: "arm64" } },
          ],
        }),
      );
      const wrongDigest = await http("PUT", `/v2/${name}/manifests/${sha256("other")}`, { token: world.token.owner, body: index, headers: { "content-type": OCI_INDEX } });
      expect(codeOf(wrongDigest)).toBe("DIGEST_INVALID");
      const put = await http("PUT", `/v2/${name}/manifests/${sha256(index)}`, { token: world.token.owner, body: index, headers: { "content-type": OCI_INDEX } });
      expect(put.status, put.text).toBe(201);
      expect(put.headers.get("location")).toBe(`/v2/${name}/manifests/${sha256(index)}`);

      // An index naming a manifest of another repo is refused.
      const elsewhere = await pushImage(`${world.org}/manifests-other`, "x", world.token.owner);
      const foreign = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: OCI_INDEX, manifests: [{ mediaType: OCI_MANIFEST, digest: elsewhere.digest, size: elsewhere.manifest.length }] }));
      const refused = await http("PUT", `/v2/${name}/manifests/multi`, { token: world.token.owner, body: foreign, headers: { "content-type": OCI_INDEX } });
      expect(codeOf(refused)).toBe("MANIFEST_BLOB_UNKNOWN");
    });

    it("cross-repository mount: from a repo the caller may pull it links the blob; otherwise it starts an upload", async () => {
      const source = `${world.org}/mount-source`;
      const digest = await pushBlob(source, "mounted content", world.token.owner);
      const mounted = await http("POST", `/v2/${world.org}/mount-target/blobs/uploads/?mount=${digest}&from=${source}`, { token: world.token.owner });
      expect(mounted.status).toBe(201);
      expect(mounted.headers.get("location")).toBe(`/v2/${world.org}/mount-target/blobs/${digest}`);
      expect((await http("GET", `/v2/${world.org}/mount-target/blobs/${digest}`, { token: world.token.owner })).text).toBe("mounted content");

      // A mount naming no source (the spec lets a registry refuse to guess one): an upload starts.
      const noFrom = await http("POST", `/v2/${world.org}/mount-nofrom/blobs/uploads/?mount=${digest}`, { token: world.token.owner });
      expect(noFrom.status).toBe(202);
      expect(noFrom.headers.get("location")).toMatch(/\/blobs\/uploads\//);

      // Another organization's owner knows the digest and the source's name: no mount, an upload starts.
      const refused = await http("POST", `/v2/${other.org}/mount-target/blobs/uploads/?mount=${digest}&from=${source}`, { token: other.token.owner });
      expect(refused.status).toBe(202);
      expect(refused.headers.get("location")).toMatch(/\/blobs\/uploads\//);
      expect(codeOf(await http("GET", `/v2/${other.org}/mount-target/blobs/${digest}`, { token: other.token.owner }))).toBe("BLOB_UNKNOWN");
    });
  });

  describe("blobs are per repository", () => {
    it("a digest pushed to another organization is BLOB_UNKNOWN, even to a caller who may pull here", async () => {
      const secret = Buffer.from(`secret layer ${Math.random()}`);
      const digest = await pushBlob(`${world.org}/private`, secret, world.token.owner);
      await pushBlob(`${other.org}/mine`, "something", other.token.owner);
      const r = await http("GET", `/v2/${other.org}/mine/blobs/${digest}`, { token: other.token.owner });
      expect(r.status).toBe(404);
      expect(codeOf(r)).toBe("BLOB_UNKNOWN");
      // And the other organization cannot read the first one's repo at all.
      const denied = await http("GET", `/v2/${world.org}/private/blobs/${digest}`, { token: other.token.owner });
      expect(denied.status).toBe(403);
      expect(codeOf(denied)).toBe("DENIED");
      // A manifest there naming the digest is refused: the blob is not in that repo.
      const image = imageOf([secret]);
      await pushBlob(`${other.org}/mine`, image.config, other.token.owner);
      const put = await http("PUT", `/v2/${other.org}/mine/manifests/steal`, { token: other.token.owner, body: image.manifest, headers: { "content-type": OCI_MANIFEST } });
      expect(codeOf(put)).toBe("MANIFEST_BLOB_UNKNOWN");
    });

    it("deleting a repo unlinks its blobs", async () => {
      const digest = await pushBlob(`${world.org}/doomed`, `doomed ${Math.random()}`, world.token.owner);
      const [repo] = await server.database.db.select({ uid: repos.uid }).from(repos).where(and(eq(repos.groupUid, world.org), eq(repos.name, "doomed")));
      const res = await fetch(`${server.baseUrl}/registry/v2/repos/${repo!.uid}`, { method: "DELETE", headers: { authorization: `Bearer ${world.token.owner}` } });
      expect(res.status).toBe(200);
      expect(await server.database.db.select().from(repoBlobs).where(eq(repoBlobs.digest, digest))).toEqual([]);
    });
  });

  describe("names and authorization", () => {
    it("names outside the grammar are NAME_INVALID", async () => {
      for (const name of [`${world.org}/UPPER`, `${world.org}/../x`, `${world.org}/a..b`, "single", `${world.org}/-lead`, `${world.org}/a%20b`]) {
        const r = await http("GET", `/v2/${name}/tags/list`, { token: world.token.owner });
        expect(r.status, name).toBe(400);
        expect(codeOf(r), name).toBe("NAME_INVALID");
      }
    });

    it("a literal .. segment (which fetch would resolve away) and an empty segment are NAME_INVALID", async () => {
      for (const path of [`/v2/${world.org}/../${world.org}/x/tags/list`, `/v2/${world.org}/a/../b/tags/list`, `/v2/${world.org}//b/tags/list`, `/v2/${world.org}/./b/tags/list`]) {
        const r = await rawGet(path, world.token.owner);
        expect(r.status, path).toBe(400);
        expect(codeOf(r), path).toBe("NAME_INVALID");
      }
    });

    it("an organization is named by its uid or, where unique, its name", async () => {
      const orgName = `named-${newRootUid().slice(0, 8)}`;
      const named = await seedWorld(server, orgName);
      await pushImage(`${orgName}/by-name`, "v1", named.token.owner);
      expect((await http("GET", `/v2/${named.org}/by-name/manifests/v1`, { token: named.token.viewer })).status).toBe(200);
      // A second organization of the same name: the name no longer designates one.
      await server.database.db.insert(groups).values({ uid: newRootUid(), parentUid: null, name: orgName });
      expect((await http("GET", `/v2/${orgName}/by-name/manifests/v1`, { token: named.token.viewer })).status).toBe(403);
    });

    it("pushing needs the push capabilities; a missing repo is created only for callers who may create repos", async () => {
      const denied = await http("POST", `/v2/${world.org}/viewer-push/blobs/uploads/`, { token: world.token.viewer });
      expect(denied.status).toBe(403);
      expect(codeOf(denied)).toBe("DENIED");
      const stranger = await http("GET", `/v2/${world.org}/pull/tags/list`, { token: world.token.stranger });
      expect(codeOf(stranger)).toBe("DENIED");
      // An identity confined to a subgroup does not reach its organization's repos (whatever its role there).
      const confined = await http("GET", `/v2/${world.org}/pull/tags/list`, { token: world.token.confined });
      expect(codeOf(confined)).toBe("DENIED");

      // A role that may push manifests and tags but not create repos: existing repos only.
      const { db } = server.database;
      const role = newChildUid(world.org);
      await db.insert(roles).values({
        uid: role,
        parentUid: world.org,
        name: "pusher",
        capabilities: [Capability.CAP_REPO_BLOBS_GET, Capability.CAP_MANIFEST_CREATE, Capability.CAP_TAG_CREATE],
      });
      const pusher = newRootUid();
      await db.insert(identities).values({ uid: pusher, parentUid: null, name: "pusher", relationship: { claimMatch: { issuer: "https://issuer.test", subject: pusher } }, relationshipType: RelationshipType.CLAIM_MATCH, issuer: "https://issuer.test", subject: pusher });
      await db.insert(roleBindings).values({ uid: newChildUid(world.org), groupUid: world.org, identityUid: pusher, roleUid: role });
      const token = await server.token(pusher);
      const missing = await http("POST", `/v2/${world.org}/not-created/blobs/uploads/`, { token });
      expect(missing.status).toBe(404);
      expect(codeOf(missing)).toBe("NAME_UNKNOWN");
      const [none] = await db.select({ uid: repos.uid }).from(repos).where(and(eq(repos.groupUid, world.org), eq(repos.name, "not-created")));
      expect(none).toBeUndefined();
      await pushImage(`${world.org}/pusher-target`, "by-owner", world.token.owner);
      await pushImage(`${world.org}/pusher-target`, "by-pusher", token);
    });
  });

  describe("content discovery", () => {
    it("tags list with n, last and the Link header", async () => {
      const name = `${world.org}/tags`;
      const image = await pushImage(name, "a", world.token.owner);
      for (const t of ["b", "c", "d", "e"]) {
        expect((await http("PUT", `/v2/${name}/manifests/${t}`, { token: world.token.owner, body: image.manifest, headers: { "content-type": OCI_MANIFEST } })).status).toBe(201);
      }
      const all = await http("GET", `/v2/${name}/tags/list`, { token: world.token.viewer });
      expect(JSON.parse(all.text)).toEqual({ name, tags: ["a", "b", "c", "d", "e"] });
      const first = await http("GET", `/v2/${name}/tags/list?n=2`, { token: world.token.viewer });
      expect((JSON.parse(first.text) as { tags: string[] }).tags).toEqual(["a", "b"]);
      expect(first.headers.get("link")).toBe(`</v2/${name}/tags/list?n=2&last=b>; rel="next"`);
      const next = await http("GET", `/v2/${name}/tags/list?n=2&last=b`, { token: world.token.viewer });
      expect((JSON.parse(next.text) as { tags: string[] }).tags).toEqual(["c", "d"]);
      const last = await http("GET", `/v2/${name}/tags/list?n=2&last=d`, { token: world.token.viewer });
      expect((JSON.parse(last.text) as { tags: string[] }).tags).toEqual(["e"]);
      expect(last.headers.get("link")).toBeNull();
    });

    it("referrers: a manifest with a subject answers OCI-Subject and is listed, filtered by artifactType", async () => {
      const name = `${world.org}/referrers`;
      const image = await pushImage(name, "v1", world.token.owner);
      const empty = Buffer.from("{}");
      await pushBlob(name, empty, world.token.owner);
      const refer = (artifactType: string) =>
        Buffer.from(
          JSON.stringify({
            schemaVersion: 2,
            mediaType: OCI_MANIFEST,
            artifactType,
            config: { mediaType: "application/vnd.oci.empty.v1+json", digest: sha256(empty), size: 2 },
            layers: [{ mediaType: "application/vnd.oci.empty.v1+json", digest: sha256(empty), size: 2 }],
            subject: { mediaType: OCI_MANIFEST, digest: image.digest, size: image.manifest.length },
            annotations: { "org.example.kind": artifactType },
          }),
        );
      const sig = refer("application/vnd.example.signature");
      const sbom = refer("application/vnd.example.sbom");
      for (const m of [sig, sbom]) {
        const r = await http("PUT", `/v2/${name}/manifests/${sha256(m)}`, { token: world.token.owner, body: m, headers: { "content-type": OCI_MANIFEST } });
        expect(r.status).toBe(201);
        expect(r.headers.get("oci-subject")).toBe(image.digest);
      }
      const all = await http("GET", `/v2/${name}/referrers/${image.digest}`, { token: world.token.viewer });
      expect(all.status).toBe(200);
      expect(all.headers.get("content-type")).toBe(OCI_INDEX);
      const index = JSON.parse(all.text) as { manifests: Array<{ digest: string; artifactType: string; size: number; annotations: Record<string, string> }> };
      expect(index.manifests.map((m) => m.digest).sort()).toEqual([sha256(sig), sha256(sbom)].sort());
      expect(index.manifests.find((m) => m.digest === sha256(sig))).toMatchObject({ artifactType: "application/vnd.example.signature", size: sig.length, annotations: { "org.example.kind": "application/vnd.example.signature" } });
      const filtered = await http("GET", `/v2/${name}/referrers/${image.digest}?artifactType=application/vnd.example.sbom`, { token: world.token.viewer });
      expect(filtered.headers.get("oci-filters-applied")).toBe("artifactType");
      expect((JSON.parse(filtered.text) as { manifests: Array<{ digest: string }> }).manifests.map((m) => m.digest)).toEqual([sha256(sbom)]);
      const none = await http("GET", `/v2/${name}/referrers/${sha256("nothing")}`, { token: world.token.viewer });
      expect((JSON.parse(none.text) as { manifests: unknown[] }).manifests).toEqual([]);
      expect(codeOf(await http("GET", `/v2/${name}/referrers/not-a-digest`, { token: world.token.viewer }))).toBe("DIGEST_INVALID");
    });
  });

  describe("content management", () => {
    it("deletes a tag, a manifest by digest and a blob; a viewer may not", async () => {
      const name = `${world.org}/manage`;
      const image = await pushImage(name, "keep", world.token.owner);
      await http("PUT", `/v2/${name}/manifests/drop`, { token: world.token.owner, body: image.manifest, headers: { "content-type": OCI_MANIFEST } });
      expect((await http("DELETE", `/v2/${name}/manifests/drop`, { token: world.token.viewer })).status).toBe(403);
      expect((await http("DELETE", `/v2/${name}/manifests/drop`, { token: world.token.owner })).status).toBe(202);
      expect((await http("GET", `/v2/${name}/manifests/drop`, { token: world.token.owner })).status).toBe(404);
      expect((await http("GET", `/v2/${name}/manifests/keep`, { token: world.token.owner })).status).toBe(200);
      expect((await http("DELETE", `/v2/${name}/manifests/${image.digest}`, { token: world.token.owner })).status).toBe(202);
      expect((await http("GET", `/v2/${name}/manifests/${image.digest}`, { token: world.token.owner })).status).toBe(404);
      expect((await http("GET", `/v2/${name}/manifests/keep`, { token: world.token.owner })).status).toBe(404);
      const layer = sha256(image.layers[0]!);
      expect((await http("DELETE", `/v2/${name}/blobs/${layer}`, { token: world.token.owner })).status).toBe(202);
      expect(codeOf(await http("GET", `/v2/${name}/blobs/${layer}`, { token: world.token.owner }))).toBe("BLOB_UNKNOWN");
      expect(codeOf(await http("DELETE", `/v2/${name}/blobs/${layer}`, { token: world.token.owner }))).toBe("BLOB_UNKNOWN");
      // Deleting what is not there: the tag, the manifest.
      for (const ref of ["drop", image.digest]) {
        const gone = await http("DELETE", `/v2/${name}/manifests/${ref}`, { token: world.token.owner });
        expect(gone.status, ref).toBe(404);
        expect(codeOf(gone), ref).toBe("MANIFEST_UNKNOWN");
      }
      // The repo's other content stays: its config blob is still pulled.
      expect((await http("GET", `/v2/${name}/blobs/${sha256(image.config)}`, { token: world.token.owner })).bytes.equals(image.config)).toBe(true);
    });
  });

  describe("the API and the events show a push", () => {
    it("ListRepos, ListTags, GetSize and GetArchitectures show it; the outbox holds the repo's creation, the push and the pulls", async () => {
      const name = `${world.org}/shown`;
      const image = await pushImage(name, "v1", world.token.owner, [Buffer.from("layer one"), Buffer.from("layer two!")], { os: "linux", architecture: "arm64" });
      const auth = { authorization: `Bearer ${world.token.viewer}` };
      const listed = (await (await fetch(`${server.baseUrl}/registry/v2/repos?uidp.childrenOf=${world.org}&name=shown`, { headers: auth })).json()) as { repos: Array<{ uid: string }> };
      expect(listed.repos).toHaveLength(1);
      const repoUid = listed.repos[0]!.uid;
      const tags = (await (await fetch(`${server.baseUrl}/registry/v2/tags?uidp.childrenOf=${repoUid}`, { headers: auth })).json()) as { tags: Array<{ name: string; digest: string }> };
      expect(tags.tags.map((t) => [t.name, t.digest])).toEqual([["v1", image.digest]]);
      const size = (await (await fetch(`${server.baseUrl}/registry/v2/repos/${repoUid}/digests/${image.digest}/size`, { headers: auth })).json()) as { size: string };
      expect(Number(size.size)).toBe(image.size);
      const arch = (await (await fetch(`${server.baseUrl}/registry/v2/repos/${repoUid}/digests/${image.digest}/architectures`, { headers: auth })).json()) as unknown;
      expect(JSON.stringify(arch)).toContain("arm64");

      // Move the tag: the event names the previous digest.
      const moved = await pushImage(name, "v1", world.token.owner);
      await http("GET", `/v2/${name}/manifests/v1`, { token: world.token.viewer, headers: { "user-agent": "oci-test/1.0" } });
      const events = await server.database.db.select().from(outboxEvents).where(eq(outboxEvents.subject, repoUid));
      const pushes = events.filter((e) => e.type === "dev.chainguard.registry.push.v1" && (e.body as { type: string }).type === "manifest").map((e) => e.body as Record<string, unknown>);
      expect(pushes).toHaveLength(2);
      // Told apart by digest: the outbox keeps no order among rows read without one.
      const first = pushes.find((p) => p.digest === image.digest);
      const second = pushes.find((p) => p.digest === moved.digest);
      expect(first).toMatchObject({ repository: name, repo_id: repoUid, display_name: "shown", tag: "v1", digest: image.digest, type: "manifest", location: "", remote_address: expect.any(String) });
      expect(first!.when).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?$/);
      expect(second).toMatchObject({ tag: "v1", digest: moved.digest, tag_previous_digest: image.digest });
      const blobPushes = events.filter((e) => e.type === "dev.chainguard.registry.push.v1" && (e.body as { type: string }).type === "blob");
      expect(blobPushes.map((e) => (e.body as { digest: string }).digest)).toContain(sha256(image.config));
      const pull = events.find((e) => e.type === "dev.chainguard.registry.pull.v1" && (e.body as { type: string }).type === "manifest");
      expect(pull?.body).toMatchObject({ repository: name, digest: moved.digest, tag: "v1", method: "GET", user_agent: "oci-test/1.0" });
      expect(pull?.actor).toBe(world.identity.viewer);
      // Only the fields of the SDK's events/registry PushEvent and PullEvent (the receivers decode them strictly).
      const pushFields = ["repository", "repo_id", "subdomain", "display_name", "tag", "tag_previous_digest", "digest", "type", "when", "location", "remote_address", "user_agent", "error"];
      const pullFields = ["repository", "repo_id", "subdomain", "tag", "digest", "method", "type", "when", "location", "remote_address", "user_agent", "error", "policy_results"];
      for (const e of events) {
        const fields = e.type === "dev.chainguard.registry.push.v1" ? pushFields : e.type === "dev.chainguard.registry.pull.v1" ? pullFields : undefined;
        if (fields) expect(Object.keys(e.body as object).filter((k) => !fields.includes(k)), e.type).toEqual([]);
      }
      expect(pull?.groupUid).toBe(world.org);
      const created = await server.database.db.select().from(outboxEvents).where(and(eq(outboxEvents.subject, repoUid), eq(outboxEvents.type, "dev.chainguard.api.platform.registry.repo.created.v1")));
      expect(created).toHaveLength(1);

      // One access line per request, with the caller and the outcome.
      const lines: Array<Record<string, unknown>> = [];
      const untap = addLogTap((l) => lines.push(JSON.parse(l) as Record<string, unknown>));
      try {
        await http("DELETE", `/v2/${name}/manifests/v1`, { token: world.token.owner });
        await http("GET", `/v2/${name}/manifests/v1`, { token: world.token.owner });
      } finally {
        untap();
      }
      const access = lines.filter((l) => l.msg === "request" && String(l.path).startsWith(`/v2/${name}/`));
      expect(access.map((l) => [l.httpMethod, l.status, l.code, l.uid])).toEqual([
        ["DELETE", 202, "OK", world.identity.owner],
        ["GET", 404, "NOT_FOUND", world.identity.owner],
      ]);

      const metrics = await server.metrics.render();
      expect(metrics.body).toMatch(/registry_pushes_total\{type="manifest"\} [1-9]/);
      expect(metrics.body).toMatch(/registry_received_bytes_total [1-9]/);
    });
  });
});
