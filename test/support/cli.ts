// Runs one of the commands in src/cli as a user does (through tsx, in a process of its own) on an embedded
// database unless `env` names one, and answers its exit status and output instead of throwing on a failure.
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";

const root = new URL("../..", import.meta.url).pathname;

export interface CliExit {
  code: number;
  stdout: string;
  stderr: string;
}

/** `tsx src/cli/<file> ...args`, with LOG_LEVEL warn and no DATABASE_URL unless `env` says otherwise. */
export function runCli(file: string, args: string[], env: Record<string, string>): Promise<CliExit> {
  return promisify(execFile)(join(root, "node_modules", ".bin", "tsx"), [join(root, "src/cli", file), ...args], {
    env: { ...process.env, DATABASE_URL: "", LOG_LEVEL: "warn", ...env },
  }).then(
    ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
    (e: CliExit) => ({ code: e.code, stdout: e.stdout, stderr: e.stderr }),
  );
}
