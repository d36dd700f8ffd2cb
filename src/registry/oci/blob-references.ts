// What garbage collection asks the database (gc.ts BlobReferences): a blob is referenced while some repo links
// it (repo_blobs: an upload committed into the repo, or a cross-repository mount) or stores it as a manifest
// (manifests). Deleting a repo deletes both (ON DELETE CASCADE), which is how a repo's content becomes garbage.
import { sql } from "drizzle-orm";
import { executedRows, type Executor } from "../../kernel/store.js";
import type { BlobReferences } from "./gc.js";


export function createDbBlobReferences(db: Executor): BlobReferences {
  return {
    async referenced(digests) {
      if (digests.length === 0) return new Set();
      // One JSON parameter read back as a set of text: the same on both drivers, whatever the batch's size.
      const asked = sql`(SELECT jsonb_array_elements_text(${JSON.stringify(digests)}::jsonb))`;
      const result = await db.execute(sql`
        SELECT digest FROM repo_blobs WHERE digest IN ${asked}
        UNION
        SELECT digest FROM manifests WHERE digest IN ${asked}`);
      return new Set(executedRows(result).map((r) => String(r.digest)));
    },
  };
}
