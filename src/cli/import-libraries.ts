// npm run import-libraries -- <path>...
//
// Imports library artifacts into the configured database (DATABASE_URL, or the embedded one under DATA_DIR)
// from Maven repository layouts (with or without maven-metadata.xml) and Python distributions (*.dist-info
// directories, .whl files), found anywhere beneath the paths. Idempotent and incremental; each artifact is
// written in one transaction; unreadable files are skipped with the reason. Progress goes to stderr, the
// summary (rows added, changed, unchanged per table; skipped files with reasons) as JSON on stdout.
// Exit codes: 0 imported (possibly with skips), 1 failed (database error), 2 usage.
import { parseArgs } from "node:util";
import { loadConfig } from "../config.js";
import { openDatabase } from "../db/client.js";
import { setLogLevel } from "../kernel/log.js";
import { importLibraries } from "../libraries/import.js";
import { runWhenMain } from "./run.js";

const USAGE = "usage: npm run import-libraries -- <maven repository or python distributions path>...";

export async function main(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<number> {
  let positionals;
  try {
    ({ positionals } = parseArgs({ args: [...argv], allowPositionals: true, options: {} }));
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n${USAGE}\n`);
    return 2;
  }
  if (positionals.length === 0) {
    process.stderr.write(`${USAGE}\n`);
    return 2;
  }
  const config = loadConfig(env);
  setLogLevel("warn");
  const database = await openDatabase(config);
  let last = 0;
  try {
    process.stderr.write(`scanning ${positionals.join(", ")}\n`);
    const summary = await importLibraries(database.db, positionals, (done, total) => {
      const now = performance.now();
      if (done === total || now - last > 5000) {
        last = now;
        process.stderr.write(`writing: ${done}/${total} artifacts\n`);
      }
    });
    for (const s of summary.skipped) process.stderr.write(`skipped ${s.path}: ${s.reason}\n`);
    process.stdout.write(JSON.stringify(summary, null, 2) + "\n");
    return 0;
  } finally {
    await database.close();
  }
}

runWhenMain(import.meta.url, "import", main);
