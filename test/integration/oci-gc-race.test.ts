// Garbage collection running in the middle of a push (src/registry/oci/gc.ts, routes.ts): a blob or manifest
// that was already stored is what a push links without storing it again, so a collection that removes it
// between the route's seeing it and its link committing would leave a link to nothing. Here a real collection
// (grace period 0, references from the database) runs at exactly that moment, on every storage backend: the
// store is wrapped so that the first time the route learns the trapped digest is stored (a stat that finds it,
// or a commit or a put that keeps the blob already there), the collection runs before the route goes on. Whatever the
// route then answers, what it says is there must be there.
import { createHash } from "node:crypto";
import { and, eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { outboxEvents, repoBlobs, repos } from "../../src/db/schema/index.js";
import type { BlobStore } from "../../src/registry/oci/contracts.js";
import { createDbBlobReferences } from "../../src/registry/oci/blob-references.js";
import { collectGarbage } from "../../src/registry/oci/gc.js";
import { PUSH_EVENT } from "../../src/registry/oci/store.js";
import { blobStoreSubjects, stopS3Subject } from "../support/blob-stores.js";
import { imageOf, OCI_MANIFEST } from "../support/oci-layout.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

const sha256 = (b: Buffer | string) => `sha256:${createHash("sha256").update(b).digest("hex")}`;

/** The store, with a trap: `run` once, right after the route first learns that `digest` is stored. */
function trapped(store: BlobStore) {
  let trap: { digest: string; run: () => Promise<void> } | undefined;
  let sprung = 0;
  const spring = async (digest: string) => {
    if (trap?.digest !== digest) return;
    const t = trap;
    trap = undefined;
    sprung++;
    await t.run();
  };
  const wrapped = new Proxy(store, {
    get(target, prop, receiver) {
      if (prop === "stat") {
        return async (digest: string) => {
          const found = await target.stat(digest);
          if (found) await spring(digest);
          return found;
        };
      }
      if (prop === "put" && target.put) {
        // Storing bytes held in memory (a manifest) in one step: false when it kept the blob already there.
        const put = target.put.bind(target);
        return async (digest: string, bytes: Buffer) => {
          const stored = await put(digest, bytes);
          if (!stored) await spring(digest);
          return stored;
        };
      }
      if (prop === "commit") {
        return async (id: string, digest: string) => {
          const existed = trap?.digest === digest && (await target.stat(digest)) !== undefined;
          await target.commit(id, digest);
          if (existed) await spring(digest);
        };
      }
      const value: unknown = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
  return {
    store: wrapped,
    set(digest: string, run: () => Promise<void>) {
      trap = { digest, run };
    },
    get sprung() {
      return sprung;
    },
  };
}

afterAll(async () => {
  await stopS3Subject();
});

describe.each(blobStoreSubjects)("a collection between a push's seeing a blob and linking it, on the $name blob store", (subject) => {
  let server: TestServer;
  let world: World;
  let raw: BlobStore;
  let trap: ReturnType<typeof trapped>;
  let dispose: () => Promise<void>;

  beforeAll(async () => {
    const opened = await subject.open();
    raw = opened.store;
    dispose = opened.dispose;
    trap = trapped(raw);
    server = await startTestServer({ blobs: trap.store });
    world = await seedWorld(server);
  }, 120_000);

  afterAll(async () => {
    await server?.close();
    await dispose?.();
  });

  /** A real collection: every unreferenced blob goes (the clock a minute ahead, no grace period). */
  const collect = async () => {
    const report = await collectGarbage(raw, createDbBlobReferences(server.database.db), { graceMs: 0, uploadTtlMs: 3_600_000, now: () => new Date(Date.now() + 60_000) });
    expect(report.blobs.removed).toBeGreaterThan(0);
  };

  async function http(method: string, path: string, body?: Buffer | string, headers: Record<string, string> = {}) {
    const res = await fetch(server.baseUrl + path, { method, body, headers: { authorization: `Bearer ${world.token.owner}`, ...headers } });
    const bytes = Buffer.from(await res.arrayBuffer());
    return { status: res.status, headers: res.headers, bytes, text: bytes.toString("utf8") };
  }
  const octets = { "content-type": "application/octet-stream" };
  /** The push events recorded about `digest` in a repo. */
  const pushEvents = (repo: string, digest: string) =>
    server.database.db
      .select()
      .from(outboxEvents)
      .where(and(eq(outboxEvents.type, PUSH_EVENT), eq(outboxEvents.subject, repo), sql`${outboxEvents.body}->>'digest' = ${digest}`));
  /** The uid of the repo a /v2/ name ("<organization>/<repo>") designates. */
  const repoUid = async (name: string) =>
    (await server.database.db.select({ uid: repos.uid }).from(repos).where(and(eq(repos.groupUid, world.org), eq(repos.name, name.slice(name.indexOf("/") + 1)))))[0]!.uid;

  it.each(["monolithic", "POST then PUT"])("a %s push of a blob stored before but referenced nowhere stores it again", async (how) => {
    const name = `${world.org}/again-${how === "monolithic" ? "mono" : "put"}`;
    const bytes = Buffer.from(`stored before ${how} ${Math.random()}`);
    const digest = sha256(bytes);
    expect((await http("POST", `/v2/${name}/blobs/uploads/?digest=${digest}`, bytes, octets)).status).toBe(201);
    // Unlinked: the blob stays in storage, referenced nowhere, a candidate for the next collection.
    expect((await http("DELETE", `/v2/${name}/blobs/${digest}`)).status).toBe(202);

    trap.set(digest, collect);
    const before = trap.sprung;
    let pushed;
    if (how === "monolithic") {
      pushed = await http("POST", `/v2/${name}/blobs/uploads/?digest=${digest}`, bytes, octets);
    } else {
      const location = (await http("POST", `/v2/${name}/blobs/uploads/`)).headers.get("location")!;
      pushed = await http("PUT", `${location}?digest=${digest}`, bytes, octets);
    }
    expect(trap.sprung).toBe(before + 1);
    expect(pushed.status, pushed.text).toBe(201);
    expect(await raw.stat(digest)).toEqual({ size: bytes.length });
    const pulled = await http("GET", `/v2/${name}/blobs/${digest}`);
    expect(pulled.status).toBe(200);
    expect(pulled.bytes.equals(bytes)).toBe(true);
  });

  it("a mount of a blob collected meanwhile is not made: an upload starts instead, and completes", async () => {
    const source = `${world.org}/mount-source`;
    const target = `${world.org}/mount-target`;
    const bytes = Buffer.from(`mounted ${Math.random()}`);
    const digest = sha256(bytes);
    expect((await http("POST", `/v2/${source}/blobs/uploads/?digest=${digest}`, bytes, octets)).status).toBe(201);
    expect((await http("POST", `/v2/${target}/blobs/uploads/?digest=${sha256("target exists")}`, "target exists", octets)).status).toBe(201);
    const sourceUid = await repoUid(source);

    // Between the mount's finding the blob in the source and its link: the source lets it go, a collection runs.
    trap.set(digest, async () => {
      await server.database.db.delete(repoBlobs).where(and(eq(repoBlobs.repoUid, sourceUid), eq(repoBlobs.digest, digest)));
      await collect();
    });
    const mounted = await http("POST", `/v2/${target}/blobs/uploads/?mount=${digest}&from=${source}`);
    expect(mounted.status, mounted.text).toBe(202);
    const targetUid = await repoUid(target);
    const links = await server.database.db.select().from(repoBlobs).where(and(eq(repoBlobs.repoUid, targetUid), eq(repoBlobs.digest, digest)));
    expect(links).toEqual([]);
    expect(await pushEvents(targetUid, digest)).toEqual([]);
    expect((await http("HEAD", `/v2/${target}/blobs/${digest}`)).status).toBe(404);

    const done = await http("PUT", `${mounted.headers.get("location")!}?digest=${digest}`, bytes, octets);
    expect(done.status, done.text).toBe(201);
    expect((await http("GET", `/v2/${target}/blobs/${digest}`)).bytes.equals(bytes)).toBe(true);
    expect(await pushEvents(targetUid, digest)).toHaveLength(1);
  });

  it("a mount whose blob a collection asked about before the mount's link and deletes after it is not made", async () => {
    const source = `${world.org}/mount-late-source`;
    const target = `${world.org}/mount-late-target`;
    const bytes = Buffer.from(`mounted late ${Math.random()}`);
    const digest = sha256(bytes);
    expect((await http("POST", `/v2/${source}/blobs/uploads/?digest=${digest}`, bytes, octets)).status).toBe(201);
    expect((await http("POST", `/v2/${target}/blobs/uploads/?digest=${sha256("late target exists")}`, "late target exists", octets)).status).toBe(201);
    const sourceUid = await repoUid(source);

    // Between the mount's finding the blob and its link: the source lets the blob go, and a collection asks
    // about it twice (unreferenced both times) and is held just before deleting it, until the mount has
    // answered. Whatever the mount answers must hold once the collection has deleted the blob.
    let reachDelete!: () => void;
    const reachedDelete = new Promise<void>((resolve) => (reachDelete = resolve));
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    const held: BlobStore = new Proxy(raw, {
      get(target, prop, receiver) {
        if (prop === "delete") {
          return async (d: string) => {
            if (d === digest) {
              reachDelete();
              await gate;
            }
            await target.delete(d);
          };
        }
        const value: unknown = Reflect.get(target, prop, receiver);
        return typeof value === "function" ? (value as (...a: unknown[]) => unknown).bind(target) : value;
      },
    });
    let collection: Promise<unknown> | undefined;
    trap.set(digest, async () => {
      await server.database.db.delete(repoBlobs).where(and(eq(repoBlobs.repoUid, sourceUid), eq(repoBlobs.digest, digest)));
      collection = collectGarbage(held, createDbBlobReferences(server.database.db), { graceMs: 0, uploadTtlMs: 3_600_000, now: () => new Date(Date.now() + 60_000) });
      await reachedDelete;
    });
    const mounted = await http("POST", `/v2/${target}/blobs/uploads/?mount=${digest}&from=${source}`);
    openGate();
    await collection;
    expect(await raw.stat(digest)).toBeUndefined();

    const targetUid = await repoUid(target);
    expect(mounted.status, mounted.text).toBe(202);
    expect(await server.database.db.select().from(repoBlobs).where(and(eq(repoBlobs.repoUid, targetUid), eq(repoBlobs.digest, digest)))).toEqual([]);
    expect(await pushEvents(targetUid, digest)).toEqual([]);
    const done = await http("PUT", `${mounted.headers.get("location")!}?digest=${digest}`, bytes, octets);
    expect(done.status, done.text).toBe(201);
    expect((await http("GET", `/v2/${target}/blobs/${digest}`)).bytes.equals(bytes)).toBe(true);
  });

  it("a manifest pushed again after its deletion, collected before its row commits, is stored again", async () => {
    const name = `${world.org}/manifest-again`;
    const layer = Buffer.from(`layer ${Math.random()}`);
    const { config, manifest, digest } = imageOf([layer]);
    for (const b of [config, layer]) expect((await http("POST", `/v2/${name}/blobs/uploads/?digest=${sha256(b)}`, b, octets)).status).toBe(201);
    const put = () => http("PUT", `/v2/${name}/manifests/v1`, manifest, { "content-type": OCI_MANIFEST });
    expect((await put()).status).toBe(201);
    expect((await http("DELETE", `/v2/${name}/manifests/${digest}`)).status).toBe(202);

    trap.set(digest, collect);
    const again = await put();
    expect(again.status, again.text).toBe(201);
    const pulled = await http("GET", `/v2/${name}/manifests/v1`, undefined, { accept: OCI_MANIFEST });
    expect(pulled.status, pulled.text).toBe(200);
    expect(pulled.bytes.equals(manifest)).toBe(true);
  });
});
