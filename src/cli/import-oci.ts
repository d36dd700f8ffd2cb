// npm run import-oci -- --repo <repo uid> <layout dir>
//
// Imports an OCI image layout directory (oci-layout, index.json, blobs/sha256/...) into an existing repo of
// the configured database (DATABASE_URL, or the embedded one under DATA_DIR): records every manifest and
// creates a tag for each org.opencontainers.image.ref.name annotation of index.json. Every blob is checked
// against its digest first; a corrupted layout writes nothing. Progress goes to stderr (one updating line on
// a terminal, a plain line every few seconds otherwise); the summary is printed as JSON on stdout.
// Exit codes: 0 imported, 1 failed (invalid or corrupted layout, unknown repo, database error), 2 usage.
import { loadConfig } from "../config.js";
import { createProgress } from "./progress.js";
import { defineCommand, runWhenMain, UsageError } from "./run.js";
import { openDatabase } from "../db/client.js";
import { setLogLevel } from "../kernel/log.js";
import { isValidUid } from "../kernel/uidp.js";
import { importOciLayout, OciImportError, type ImportProgress } from "../registry/oci-import.js";

function bytes(n: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v.toFixed(u === 0 ? 0 : 1)} ${units[u]}`;
}

/** One line describing where the import is. */
function progressLine(p: Readonly<ImportProgress>, elapsedSeconds: number): string {
  const rate = elapsedSeconds > 0 ? p.bytesVerified / elapsedSeconds : 0;
  const verified = `${p.blobsVerified} blobs, ${bytes(p.bytesVerified)}${p.bytesTotal ? ` of ${bytes(p.bytesTotal)}` : ""} verified (${bytes(rate)}/s)`;
  switch (p.phase) {
    case "scan":
      return `scanning: ${p.manifestsScanned} manifests, ${verified}`;
    case "verify": {
      const pct = p.bytesTotal ? ` ${((100 * p.bytesVerified) / p.bytesTotal).toFixed(1)}%` : "";
      return `verifying:${pct} ${verified}`;
    }
    case "write":
      return `writing: ${p.manifestsWritten}/${p.manifestsTotal} manifests`;
    case "tags":
      return `tagging: ${p.tagsWritten}/${p.tagsTotal} tags`;
    case "done":
      return `done: ${p.manifestsTotal} manifests, ${p.tagsTotal} tags, ${verified} in ${elapsedSeconds.toFixed(1)}s`;
  }
}

const main = defineCommand(
  {
    invocation: "npm run import-oci --",
    summary: [
      "Imports an OCI image layout directory (oci-layout, index.json, blobs/sha256/...) into an existing repo of the",
      "configured database (DATABASE_URL, or the embedded one under DATA_DIR): records every manifest and creates a",
      "tag for each org.opencontainers.image.ref.name annotation. Every blob is checked against its digest first; a",
      "corrupted layout writes nothing. Progress goes to stderr, the summary as JSON to stdout.",
    ].join("\n"),
    options: { repo: { type: "string", value: "<repo uid>", help: "the repo to import into (<group uid>/<id>)", required: true } },
    positionals: { name: "<OCI layout directory>", min: 1, max: 1 },
    exitCodes: "0 imported, 1 failed (invalid or corrupted layout, unknown repo, database error), 2 bad arguments",
  },
  async ({ values, positionals }, env) => {
    const repoUid = values.repo!;
    if (!isValidUid(repoUid) || !repoUid.includes("/")) {
      throw new UsageError(`--repo must be a repo uid (<group uid>/<id>), got ${JSON.stringify(repoUid)}`);
    }
    const config = loadConfig(env);
    setLogLevel("warn");
    const database = await openDatabase({ ...config, share: "join" });
    const progress = createProgress(process.stderr);
    let phase = "";
    try {
      const result = await importOciLayout(database.db, {
        repoUid,
        dir: positionals[0]!,
        onProgress: (p) => {
          progress.update((s) => progressLine(p, s), p.phase !== phase || p.phase === "done");
          phase = p.phase;
        },
      });
      progress.end();
      for (const w of result.warnings) progress.line(`warning: ${w}`);
      for (const s of result.skipped) progress.line(`skipped ${s.digest}: ${s.reason}`);
      process.stdout.write(JSON.stringify(result, null, 2) + "\n");
      return 0;
    } catch (err) {
      progress.end();
      if (err instanceof OciImportError) {
        process.stderr.write(`import failed: ${err.message}\n`);
        return 1;
      }
      throw err;
    } finally {
      progress.end();
      await database.close();
    }
  },
);

runWhenMain(import.meta.url, "import", main);
