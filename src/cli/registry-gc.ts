// npm run registry-gc -- [--dry-run]
//
// Garbage collection of the registry's storage (registry/oci/gc.ts) on the configured blob store
// (REGISTRY_STORAGE) and database (DATABASE_URL, or the embedded one under DATA_DIR): removes uploads that
// have not grown for REGISTRY_UPLOAD_TTL_HOURS, and blobs older than REGISTRY_GC_GRACE_MINUTES that no repo
// links or stores as a manifest. Safe while servers push (the grace period, and a second look at the links
// right before each delete). Prints what it removed as JSON on stdout.
// Exit codes: 0 done, 1 failed (storage or database unreachable), 2 usage.
import { loadConfig, type Config } from "../config.js";
import { defineCommand, runWhenMain } from "./run.js";
import { openDatabase } from "../db/client.js";
import { setLogLevel } from "../kernel/log.js";
import { createDbBlobReferences } from "../registry/oci/blob-references.js";
import type { BlobStore } from "../registry/oci/contracts.js";
import { collectGarbage } from "../registry/oci/gc.js";
import { openBlobStore } from "../registry/oci/storage.js";
import { createFsBlobStore } from "../registry/oci/fs-store.js";

/** The filesystem blob store of this configuration (REGISTRY_STORAGE_DIR). */
function filesystemStore(config: Config): () => BlobStore {
  return () => createFsBlobStore(config.registryStorageDir);
}

const main = defineCommand(
  {
    invocation: "npm run registry-gc --",
    summary: [
      "Removes what the registry's storage (REGISTRY_STORAGE) no longer needs: uploads that have not grown for",
      "REGISTRY_UPLOAD_TTL_HOURS, and blobs older than REGISTRY_GC_GRACE_MINUTES that no repo of the configured",
      "database (DATABASE_URL, or the embedded one under DATA_DIR) links or stores as a manifest. Safe while servers",
      "take pushes. Prints what it removed (or, with --dry-run, would remove) as JSON on stdout.",
    ].join("\n"),
    options: { "dry-run": { type: "boolean", help: "report what would be removed, remove nothing" } },
    exitCodes: "0 done, 1 failed (storage or database unreachable), 2 bad arguments",
  },
  async ({ values }, env) => {
    const config = loadConfig(env);
    setLogLevel("warn");
    const store = openBlobStore(config.registry.storage, filesystemStore(config));
    try {
      const database = await openDatabase({ ...config, share: "join" });
      try {
        const report = await collectGarbage(store, createDbBlobReferences(database.db), {
          uploadTtlMs: config.registry.uploadTtlMs,
          graceMs: config.registry.gcGraceMs,
          dryRun: values["dry-run"] === true,
        });
        process.stdout.write(JSON.stringify(report, null, 2) + "\n");
        return 0;
      } finally {
        await database.close();
      }
    } finally {
      await store.close?.();
    }
  },
);

runWhenMain(import.meta.url, "registry gc", main);
