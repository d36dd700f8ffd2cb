// A push's event commits with what the push wrote, or neither commits (src/registry/oci/routes.ts, store.ts):
// a blob upload's with the blob's link, a manifest push's with its rows, and a cross-repository mount's with
// its link. The outbox is made to refuse the events about one digest (a trigger), and the push about that
// digest must then fail and leave nothing it would have written. Runs on the embedded database, and on
// PostgreSQL when DATABASE_URL is set.
import { createHash } from "node:crypto";
import { and, eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { manifests, outboxEvents, repoBlobs, repos, tags } from "../../src/db/schema/index.js";
import { createOciStore, PUSH_EVENT, registryEvent } from "../../src/registry/oci/store.js";
import { imageOf, OCI_MANIFEST } from "../support/oci-layout.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

const sha256 = (b: Buffer | string) => `sha256:${createHash("sha256").update(b).digest("hex")}`;
const octets = { "content-type": "application/octet-stream" };

let server: TestServer;
let world: World;

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server);
  const { db } = server.database;
  // A switch that makes the outbox refuse the events whose body names one of these digests.
  await db.execute(sql`create table test_refused_digest (digest text primary key)`);
  await db.execute(
    sql.raw(`
    create function test_refused_digest() returns trigger language plpgsql as $$
    begin
      if exists (select 1 from test_refused_digest where digest = new.body->>'digest') then
        raise exception 'test: the outbox refuses events about %', new.body->>'digest';
      end if;
      return new;
    end $$`),
  );
  await db.execute(sql`create trigger test_refused_digest before insert on outbox_events for each row execute function test_refused_digest()`);
});
afterAll(async () => {
  await server?.close();
});

async function http(method: string, path: string, body?: Buffer | string, headers: Record<string, string> = {}) {
  const res = await fetch(server.baseUrl + path, { method, body, headers: { authorization: `Bearer ${world.token.owner}`, ...headers } });
  const bytes = Buffer.from(await res.arrayBuffer());
  return { status: res.status, headers: res.headers, bytes, text: bytes.toString("utf8") };
}

/** The uid of the repo a /v2/ name designates (undefined when there is none). */
async function repoUid(name: string): Promise<string | undefined> {
  const [row] = await server.database.db
    .select({ uid: repos.uid })
    .from(repos)
    .where(and(eq(repos.groupUid, world.org), eq(repos.name, name.slice(name.indexOf("/") + 1))));
  return row?.uid;
}

async function links(name: string, digest: string) {
  const uid = await repoUid(name);
  if (!uid) return [];
  return server.database.db.select().from(repoBlobs).where(and(eq(repoBlobs.repoUid, uid), eq(repoBlobs.digest, digest)));
}

/** The push events recorded about `digest`. */
const pushEvents = (digest: string) =>
  server.database.db
    .select()
    .from(outboxEvents)
    .where(and(eq(outboxEvents.type, PUSH_EVENT), sql`${outboxEvents.body}->>'digest' = ${digest}`));

async function refusing<T>(digest: string, run: () => Promise<T>): Promise<T> {
  const { db } = server.database;
  await db.execute(sql`insert into test_refused_digest values (${digest})`);
  try {
    return await run();
  } finally {
    await db.execute(sql`delete from test_refused_digest`);
  }
}

describe("a cross-repository mount", () => {
  it("records its push event, about the repo mounted into, with its link", async () => {
    const source = `${world.org}/mount-events-source`;
    const target = `${world.org}/mount-events-target`;
    const bytes = Buffer.from(`mounted with its event ${Math.random()}`);
    const digest = sha256(bytes);
    expect((await http("POST", `/v2/${source}/blobs/uploads/?digest=${digest}`, bytes, octets)).status).toBe(201);

    const mounted = await http("POST", `/v2/${target}/blobs/uploads/?mount=${digest}&from=${source}`, undefined, { "user-agent": "mount-test/1.0" });
    expect(mounted.status, mounted.text).toBe(201);
    const targetUid = (await repoUid(target))!;
    expect(await links(target, digest)).toHaveLength(1);
    const events = (await pushEvents(digest)).filter((e) => e.subject === targetUid);
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ groupUid: world.org, actor: world.identity.owner, method: "/v2/push" });
    expect(events[0]!.body).toMatchObject({ repository: target, repo_id: targetUid, display_name: "mount-events-target", digest, type: "blob", user_agent: "mount-test/1.0" });

    // Mounted again (linked already): the push happened, its event is recorded; the link stays one.
    expect((await http("POST", `/v2/${target}/blobs/uploads/?mount=${digest}&from=${source}`)).status).toBe(201);
    expect(await links(target, digest)).toHaveLength(1);
    expect((await pushEvents(digest)).filter((e) => e.subject === targetUid)).toHaveLength(2);
  });

  it("whose event cannot be recorded fails and links nothing; once the outbox takes it, it succeeds", async () => {
    const source = `${world.org}/mount-refused-source`;
    const target = `${world.org}/mount-refused-target`;
    const bytes = Buffer.from(`mounted, event refused ${Math.random()}`);
    const digest = sha256(bytes);
    expect((await http("POST", `/v2/${source}/blobs/uploads/?digest=${digest}`, bytes, octets)).status).toBe(201);
    const sourceEvents = (await pushEvents(digest)).length;

    const refused = await refusing(digest, () => http("POST", `/v2/${target}/blobs/uploads/?mount=${digest}&from=${source}`));
    expect(refused.status, refused.text).toBe(500);
    expect(await links(target, digest)).toEqual([]);
    expect(await pushEvents(digest)).toHaveLength(sourceEvents);
    expect((await http("HEAD", `/v2/${target}/blobs/${digest}`)).status).toBe(404);

    const again = await http("POST", `/v2/${target}/blobs/uploads/?mount=${digest}&from=${source}`);
    expect(again.status, again.text).toBe(201);
    expect(await links(target, digest)).toHaveLength(1);
    expect(await pushEvents(digest)).toHaveLength(sourceEvents + 1);
  });
});

// Two connections at once: PostgreSQL only (the embedded database runs one transaction at a time).
describe.skipIf(!process.env.DATABASE_URL)("a mount's statement (PostgreSQL)", () => {
  it("holds the source's link until it commits: a deletion of it cannot go first", async () => {
    const source = `${world.org}/mount-lock-source`;
    const target = `${world.org}/mount-lock-target`;
    const bytes = Buffer.from(`mount lock ${Math.random()}`);
    const digest = sha256(bytes);
    expect((await http("POST", `/v2/${source}/blobs/uploads/?digest=${digest}`, bytes, octets)).status).toBe(201);
    expect((await http("POST", `/v2/${target}/blobs/uploads/?digest=${sha256("lock target")}`, "lock target", octets)).status).toBe(201);
    const [sourceUid, targetUid] = [(await repoUid(source))!, (await repoUid(target))!];
    const { db } = server.database;
    const event = registryEvent(PUSH_EVENT, { uid: targetUid, groupUid: world.org }, world.identity.owner, {
      repository: target, repo_id: targetUid, digest, type: "blob", when: "", location: "", remote_address: "", user_agent: "",
    });
    const rolledBack = new Error("rolled back");
    await expect(
      db.transaction(async (tx) => {
        // The mount's statement, in a transaction kept open after it: its lock lasts until the transaction ends.
        expect(await createOciStore(tx).mountPushed(sourceUid, targetUid, digest, event)).toBe(true);
        // Another connection: the lock a deletion of the source's link takes is not to be had.
        await expect(
          db.execute(sql`select 1 from repo_blobs where repo_uid = ${sourceUid} and digest = ${digest} for update nowait`),
        ).rejects.toMatchObject({ cause: { code: "55P03" } });
        throw rolledBack;
      }),
    ).rejects.toBe(rolledBack);
    // Rolled back with its transaction: neither the link nor the event.
    expect(await links(target, digest)).toEqual([]);
    expect((await pushEvents(digest)).filter((e) => e.subject === targetUid)).toEqual([]);
  });
});

describe("a push whose event cannot be recorded fails and leaves nothing it wrote", () => {
  it("a blob upload: no link", async () => {
    const name = `${world.org}/upload-refused`;
    const bytes = Buffer.from(`upload, event refused ${Math.random()}`);
    const digest = sha256(bytes);
    const refused = await refusing(digest, () => http("POST", `/v2/${name}/blobs/uploads/?digest=${digest}`, bytes, octets));
    expect(refused.status, refused.text).toBe(500);
    expect(await links(name, digest)).toEqual([]);
    expect(await pushEvents(digest)).toEqual([]);
  });

  it("a manifest push by tag: no manifest, no tag", async () => {
    const name = `${world.org}/manifest-refused`;
    const layer = Buffer.from(`layer ${Math.random()}`);
    const image = imageOf([layer]);
    for (const b of [image.config, layer]) expect((await http("POST", `/v2/${name}/blobs/uploads/?digest=${sha256(b)}`, b, octets)).status).toBe(201);
    const refused = await refusing(image.digest, () => http("PUT", `/v2/${name}/manifests/v1`, image.manifest, { "content-type": OCI_MANIFEST }));
    expect(refused.status, refused.text).toBe(500);
    const uid = (await repoUid(name))!;
    expect(await server.database.db.select().from(manifests).where(eq(manifests.repoUid, uid))).toEqual([]);
    expect(await server.database.db.select().from(tags).where(eq(tags.repoUid, uid))).toEqual([]);
    expect(await pushEvents(image.digest)).toEqual([]);
  });
});
