// How every command under src/cli ends: run `main` when the file is the program being run (not when a test
// imports it), exit with its status, and turn a failure into one line on stderr and status 1.
import { pathToFileURL } from "node:url";
import { ConfigError } from "../config.js";

export function runWhenMain(moduleUrl: string, what: string, main: (argv: string[]) => Promise<number>): void {
  if (!process.argv[1] || moduleUrl !== pathToFileURL(process.argv[1]).href) return;
  main(process.argv.slice(2)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(err instanceof ConfigError ? `configuration error: ${err.message}\n` : `${what} failed: ${String(err)}\n`);
      process.exit(1);
    },
  );
}
