// What every import-* command does around its importer: the configured database opened, progress on
// stderr, each skipped file listed there, the summary as JSON on stdout, the database closed whatever
// happens. The command says what it starts with, runs its importer, and chooses its exit code.
import { loadConfig } from "../config.js";
import { openDatabase, type Database } from "../db/client.js";
import { setLogLevel } from "../kernel/log.js";
import { createProgress, type Progress } from "./progress.js";

interface ImportRun<S extends { skipped: readonly { path: string; reason: string }[] }> {
  /** The first progress line ("importing ..."). */
  start: string;
  run(database: Database, progress: Progress, pool: { max: number }): Promise<S>;
  /** The last progress lines before the summary is printed (after the skipped files). */
  done?(summary: S): string[];
  exitCode(summary: S): number;
}

export async function runImport<S extends { skipped: readonly { path: string; reason: string }[] }>(env: NodeJS.ProcessEnv, spec: ImportRun<S>): Promise<number> {
  const config = loadConfig(env);
  setLogLevel("warn");
  const database = await openDatabase({ ...config, share: "join" });
  const progress = createProgress(process.stderr);
  try {
    progress.line(spec.start);
    const summary = await spec.run(database, progress, config.databasePool);
    progress.end();
    for (const s of summary.skipped) progress.line(`skipped ${s.path}: ${s.reason}`);
    for (const line of spec.done?.(summary) ?? []) progress.line(line);
    process.stdout.write(JSON.stringify(summary, null, 2) + "\n");
    return spec.exitCode(summary);
  } finally {
    progress.end();
    await database.close();
  }
}
