// npm run import-advisories -- <directory or file>...
//
// Imports package advisory documents (`<package>.advisories.yaml`, schema 2.x) into the configured database
// (DATABASE_URL, or the embedded one under DATA_DIR), from every such file beneath the paths. Idempotent and
// incremental (an unchanged file is not even parsed; a changed one rewrites only its package's rows); each
// file is written in one transaction; an invalid file is skipped with the field and the reason. Progress goes
// to stderr, the summary (files, advisories and events added, changed, unchanged, removed; skipped files with
// reasons; unknown event types and keys with examples) as JSON on stdout.
// Exit codes: 0 imported, 1 some file was skipped as invalid (the summary is still printed) or the import
// failed, 2 bad arguments.
import { importAdvisories } from "../vulnerabilities/import.js";
import { runImport } from "./import-run.js";
import { defineCommand, runWhenMain } from "./run.js";

const main = defineCommand(
  {
    invocation: "npm run import-advisories --",
    summary: [
      "Imports package advisory documents (<package>.advisories.yaml, schema 2.x) found beneath the paths into the",
      "configured database (DATABASE_URL, or the embedded one under DATA_DIR). Idempotent and incremental; each",
      "file in one transaction; an invalid file is skipped with the field that is wrong. Progress goes to stderr,",
      "the summary as JSON to stdout.",
    ].join("\n"),
    options: {},
    positionals: { name: "<directory of <package>.advisories.yaml files>", min: 1, max: Infinity },
    exitCodes: "0 imported, 1 some file was skipped as invalid (the summary is still printed) or the import failed, 2 bad arguments",
  },
  ({ positionals }, env) => {
    const started = performance.now();
    return runImport(env, {
      start: `importing advisory documents from ${positionals.join(", ")}`,
      run: (database, progress, pool) =>
        importAdvisories(database.db, positionals, {
          // One transaction at a time on PGlite; on PostgreSQL, files in parallel over the pool.
          concurrency: database.kind === "postgres" ? Math.min(8, pool.max) : 1,
          onProgress: (done, total) => progress.update((s) => `files: ${done}/${total} (${s.toFixed(0)} s)`, done === total),
        }),
      done: () => [`done in ${((performance.now() - started) / 1000).toFixed(1)}s`],
      exitCode: (summary) => (summary.skipped.length > 0 ? 1 : 0),
    });
  },
);

runWhenMain(import.meta.url, "import", main);
