// npm run import-libraries -- <path>...
//
// Imports library artifacts into the configured database (DATABASE_URL, or the embedded one under DATA_DIR)
// from Maven repository layouts (with or without maven-metadata.xml) and Python distributions (*.dist-info
// directories, .whl files), found anywhere beneath the paths. Idempotent and incremental; each artifact is
// written in one transaction; unreadable files are skipped with the reason. Progress goes to stderr, the
// summary (rows added, changed, unchanged per table; skipped files with reasons) as JSON on stdout.
// Exit codes: 0 imported (possibly with skips), 1 failed (database error), 2 usage.
import { importLibraries } from "../libraries/import.js";
import { runImport } from "./import-run.js";
import { defineCommand, runWhenMain } from "./run.js";

const main = defineCommand(
  {
    invocation: "npm run import-libraries --",
    summary: [
      "Imports library artifacts into the configured database (DATABASE_URL, or the embedded one under DATA_DIR)",
      "from Maven repository layouts and Python distributions (*.dist-info directories, .whl files) found anywhere",
      "beneath the paths. Idempotent and incremental. Progress goes to stderr, the summary as JSON to stdout.",
    ].join("\n"),
    options: {},
    positionals: { name: "<maven repository or python distributions path>", min: 1, max: Infinity },
    exitCodes: "0 imported (possibly with skips), 1 failed (database error), 2 bad arguments",
  },
  ({ positionals }, env) =>
    runImport(env, {
      start: `scanning ${positionals.join(", ")}`,
      run: (database, progress) =>
        importLibraries(database.db, positionals, (done, total) => {
          progress.update((s) => `writing: ${done}/${total} artifacts (${s.toFixed(0)} s)`, done === total);
        }),
      // Skips are reported, not failures: a Debian repository holds files that are not artifacts.
      exitCode: () => 0,
    }),
);

runWhenMain(import.meta.url, "import", main);
