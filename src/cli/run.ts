// How every command under src/cli ends: run `main` when the file is the program being run (not when a test
// imports it), exit with its status, and turn a failure into one line on stderr and status 1.
import { pathToFileURL } from "node:url";
import { ConfigError } from "../config.js";
import { DataDirLockedError } from "../db/data-dir-lock.js";

/** The one line a failure is reported as: an error written for the user by its message, any other with its name. */
function failureLine(what: string, err: unknown): string {
  if (err instanceof ConfigError) return `configuration error: ${err.message}`;
  if (err instanceof DataDirLockedError) return `${what} failed: ${err.message}`;
  return `${what} failed: ${String(err)}`;
}

export function runWhenMain(moduleUrl: string, what: string, main: (argv: string[]) => Promise<number>): void {
  if (!process.argv[1] || moduleUrl !== pathToFileURL(process.argv[1]).href) return;
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`${failureLine(what, err)}\n`);
      process.exit(1);
    },
  );
}
