// npm run import-osv -- <directory, .zip or .json>...
//
// Imports OSV records (ossf/osv-schema JSON, one record per file) into the configured database
// (DATABASE_URL, or the embedded one under DATA_DIR) from directories (every *.json and *.zip beneath them)
// and zip archives (read with bounded sizes: kernel/zip.ts). Idempotent and incremental (content_hash per
// record); invalid files are skipped with the file and the offending field. Progress goes to stderr, the
// summary (records added, changed, unchanged; skipped files with reasons; ignored zip entries) as JSON on
// stdout. Exit codes: 0 imported, 1 some file was rejected (the rest is imported) or the import failed,
// 2 bad arguments.
import { importOsv } from "../advisory/osv-import.js";
import { runImport } from "./import-run.js";
import { countOf } from "./progress.js";
import { defineCommand, runWhenMain } from "./run.js";

const main = defineCommand(
  {
    invocation: "npm run import-osv --",
    summary: [
      "Imports OSV records (one JSON record per file) into the configured database (DATABASE_URL, or the embedded",
      "one under DATA_DIR) from directories (every *.json and *.zip beneath them), zip archives and .json files.",
      "Idempotent and incremental; an invalid file is skipped with the field that is wrong. Progress goes to",
      "stderr, the summary as JSON to stdout.",
    ].join("\n"),
    options: {},
    positionals: { name: "<directory, .zip archive or .json file of OSV records>", min: 1, max: Infinity },
    exitCodes: "0 imported, 1 some file was rejected (the rest is imported) or the import failed, 2 bad arguments",
  },
  ({ positionals }, env) =>
    runImport(env, {
      start: `importing ${positionals.join(", ")}`,
      run: (database, progress) => importOsv(database.db, positionals, { onProgress: (done) => progress.update((s) => `read ${countOf(done, "file")} (${s.toFixed(0)} s)`) }),
      done: (summary) => {
        const { added, changed, unchanged } = summary.records;
        return [`done: ${countOf(added + changed + unchanged + summary.skipped.length, "file")}, ${added} added, ${changed} changed, ${unchanged} unchanged, ${summary.skipped.length} skipped`];
      },
      exitCode: (summary) => (summary.skipped.length > 0 ? 1 : 0),
    }),
);

runWhenMain(import.meta.url, "import", main);
