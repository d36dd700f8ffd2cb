// `npm run registry-gc` as an operator runs it: on S3 storage (the test S3 server) and the embedded database,
// it removes the old unreferenced blob and the abandoned upload, and keeps what a repo links, what a repo
// stores as a manifest, and what was written within the grace period; --dry-run removes nothing.
import { randomUUID } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPglite } from "../../src/db/client.js";
import { groups, manifests, repos } from "../../src/db/schema/index.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import type { BlobStore } from "../../src/registry/oci/contracts.js";
import { createS3BlobStore } from "../../src/registry/oci/s3-store.js";
import { putBlob } from "../support/blob-stores.js";
import { runCli } from "../support/cli.js";
import { startS3Server, type TestS3Server } from "../support/s3-server.js";

const DAY = 86_400_000;
let s3: TestS3Server;
let store: BlobStore;
let dataDir = "";
let env: Record<string, string>;

async function listed(): Promise<{ blobs: string[]; uploads: string[] }> {
  const blobs: string[] = [];
  const uploads: string[] = [];
  for await (const b of store.list()) blobs.push(b.digest);
  for await (const u of store.listUploads()) uploads.push(u.id);
  return { blobs: blobs.sort(), uploads: uploads.sort() };
}

const names: Record<string, string> = {};

beforeAll(async () => {
  s3 = await startS3Server();
  store = createS3BlobStore(s3.storeOptions("registry/"));
  dataDir = mkdtempSync(join(tmpdir(), "registry-gc-cli-"));
  env = {
    DATA_DIR: dataDir,
    REGISTRY_STORAGE: "s3",
    REGISTRY_S3_BUCKET: s3.bucket,
    REGISTRY_S3_ENDPOINT: s3.endpoint,
    REGISTRY_S3_PREFIX: "registry",
    AWS_ACCESS_KEY_ID: "S3RVER",
    AWS_SECRET_ACCESS_KEY: "S3RVER",
    REGISTRY_GC_GRACE_MINUTES: "60",
    REGISTRY_UPLOAD_TTL_HOURS: "24",
  };
  names.linked = await putBlob(store, "a layer a repo links");
  names.manifest = await putBlob(store, '{"schemaVersion":2}');
  names.orphan = await putBlob(store, "a layer of a deleted repo");
  names.abandoned = randomUUID();
  await store.startUpload(names.abandoned);
  await store.append(names.abandoned, 0, Readable.from([Buffer.from("half")]));
  await s3.age(2 * DAY);
  names.young = await putBlob(store, "a layer pushed a moment ago");
  names.active = randomUUID();
  await store.startUpload(names.active);

  const org = newRootUid();
  const repo = newChildUid(org);
  const database = await openPglite(dataDir);
  try {
    await database.db.insert(groups).values({ uid: org, name: "acme" });
    await database.db.insert(repos).values({ uid: repo, groupUid: org, name: "app" });
    await database.db.insert(manifests).values({ repoUid: repo, digest: names.manifest, mediaType: "application/vnd.oci.image.manifest.v1+json", isIndex: false });
    // The repo's blob links (the table comes with the registry's data plane; made here when not there yet).
    await database.db.execute(sql`INSERT INTO repo_blobs (repo_uid, digest, size) VALUES (${repo}, ${names.linked}, 20)`);
  } finally {
    await database.close();
  }
}, 120_000);

afterAll(async () => {
  await store?.close?.();
  await s3?.stop();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe("npm run registry-gc", () => {
  it("--dry-run reports what it would remove and removes nothing", { timeout: 120_000 }, async () => {
    const before = await listed();
    const { code, stdout, stderr } = await runCli("registry-gc.ts", ["--dry-run"], env);
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({
      dryRun: true,
      uploads: { seen: 2, removed: 1 },
      blobs: { seen: 4, young: 1, referenced: 2, removed: 1 },
    });
    expect(await listed()).toEqual(before);
  });

  it("removes the old unreferenced blob and the abandoned upload, keeps the rest", { timeout: 120_000 }, async () => {
    const { code, stdout, stderr } = await runCli("registry-gc.ts", [], env);
    expect(code, stderr).toBe(0);
    expect(JSON.parse(stdout)).toMatchObject({
      dryRun: false,
      uploads: { seen: 2, removed: 1 },
      blobs: { seen: 4, young: 1, referenced: 2, relinked: 0, removed: 1, removedBytes: "a layer of a deleted repo".length },
    });
    expect(await listed()).toEqual({ blobs: [names.linked!, names.manifest!, names.young!].sort(), uploads: [names.active!] });
  });

  it("a storage setting out of range stops it with one line, before any work", { timeout: 120_000 }, async () => {
    const { code, stderr } = await runCli("registry-gc.ts", [], { ...env, REGISTRY_S3_BUCKET: "" });
    expect(code).toBe(1);
    expect(stderr.trim()).toBe("configuration error: REGISTRY_S3_BUCKET must name the bucket when REGISTRY_STORAGE=s3");
  });
});
