// What garbage collection asks the database (createDbBlobReferences): a digest is referenced while a repo
// links it or stores it as a manifest, in any repo; deleting the repo ends both. On both databases.
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { groups, manifests, repos } from "../../src/db/schema/index.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { createDbBlobReferences } from "../../src/registry/oci/blob-references.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";

const d = (c: string) => `sha256:${c.repeat(64)}`;
let database: TestDatabase;
const org = newRootUid();
const repoA = newChildUid(org);
const repoB = newChildUid(org);

beforeAll(async () => {
  database = await openTestDatabase();
  const db = database.db;
  await db.insert(groups).values({ uid: org, name: "acme" });
  await db.insert(repos).values([
    { uid: repoA, groupUid: org, name: "a" },
    { uid: repoB, groupUid: org, name: "b" },
  ]);
  // The repos' blob links (the table comes with the registry's data plane; made here when not there yet).
  await db.execute(sql`INSERT INTO repo_blobs (repo_uid, digest, size) VALUES (${repoA}, ${d("1")}, 1), (${repoB}, ${d("1")}, 1), (${repoB}, ${d("2")}, 1)`);
  await db.insert(manifests).values({ repoUid: repoA, digest: d("3"), mediaType: "application/vnd.oci.image.manifest.v1+json", isIndex: false });
}, 120_000);
afterAll(async () => database?.dispose());

describe("createDbBlobReferences", () => {
  it("answers which digests a repo links or stores as a manifest", async () => {
    const refs = createDbBlobReferences(database.db);
    expect(await refs.referenced([d("1"), d("2"), d("3"), d("4"), `sha512:${"5".repeat(128)}`])).toEqual(new Set([d("1"), d("2"), d("3")]));
    expect(await refs.referenced([])).toEqual(new Set());
    expect(await refs.referenced([d("4")])).toEqual(new Set());
  });

  it("takes a large batch in one query", async () => {
    const many = Array.from({ length: 2000 }, (_, i) => `sha256:${i.toString(16).padStart(64, "0")}`);
    expect(await createDbBlobReferences(database.db).referenced([...many, d("2")])).toEqual(new Set([d("2")]));
  });

  it("a deleted repo's links and manifests no longer count", async () => {
    await database.db.delete(repos).where(sql`uid = ${repoA}`);
    expect(await createDbBlobReferences(database.db).referenced([d("1"), d("2"), d("3")])).toEqual(new Set([d("1"), d("2")]));
    await database.db.delete(repos).where(sql`uid = ${repoB}`);
    expect(await createDbBlobReferences(database.db).referenced([d("1"), d("2"), d("3")])).toEqual(new Set());
  });
});
