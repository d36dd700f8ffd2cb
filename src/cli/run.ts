// What every command under src/cli shares: its arguments parsed once, the same way (node:util parseArgs),
// with `--help`/`-h` answering the usage and exit 0, and bad arguments answering one line and the usage line
// on stderr and exit 2; and how it ends: run `main` when the file is the program being run (not when a test
// imports it), exit with its status, and turn a failure into one line on stderr and status 1.
//
// A command is declared once, and its help is made from the declaration:
//
//   export const main = defineCommand(
//     { invocation: "npm run import-x --", summary: "Imports x.", options: { repo: { type: "string", value: "<uid>", help: "...", required: true } },
//       positionals: { name: "<dir>", min: 1, max: 1 } },
//     async ({ values, positionals }, env) => { ...; return 0; },
//   );
//   runWhenMain(import.meta.url, "import", main);
import { isAbsolute, relative } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { parseArgs, type ParseArgsConfig } from "node:util";
import { ConfigError } from "../config.js";
import { DataDirLockedError } from "../db/data-dir-lock.js";
import { DatabaseOpenError } from "../db/open-errors.js";

/** One option: parseArgs' own settings, with what the help says of it. */
interface OptionSpec {
  type: "string" | "boolean";
  short?: string;
  multiple?: boolean;
  default?: string | boolean | string[] | boolean[];
  /** The value's placeholder in the usage and help, e.g. "<repo uid>" (string options). */
  value?: string;
  /** One line of help. */
  help: string;
  /** Whether the command refuses to run without it (exit 2). */
  required?: boolean;
}

type OptionSpecs = Readonly<Record<string, OptionSpec>>;

interface CommandSpec<O extends OptionSpecs = OptionSpecs> {
  /** How a user runs it, first in the usage line: "npm run import-oci --". */
  invocation: string;
  /** What it does: the help's paragraph (may hold several lines). */
  summary: string;
  options: O;
  /** The arguments after the options (none when left out). `max` may be Infinity. */
  positionals?: { name: string; min: number; max: number };
  /**
   * Words the npm script passes before the user's arguments (`tsx src/cli/keys.ts rotate`): required, and
   * not shown in the usage, since the script name stands for them.
   */
  leading?: readonly string[];
  /** What the exit statuses mean; default "0 done, 1 failed, 2 bad arguments". */
  exitCodes?: string;
}

/** A refusal of the command line: `<message>` then the usage line on stderr, exit 2. */
export class UsageError extends Error {
  override name = "UsageError";
}

type ParseConfig<O extends OptionSpecs> = { args: string[]; options: O; allowPositionals: true; strict: true };
/** The values parseArgs gives for these options (typed as node:util types them). */
type OptionValues<O extends OptionSpecs> = ReturnType<typeof parseArgs<ParseConfig<O>>>["values"];

interface ParsedCommand<O extends OptionSpecs> {
  values: OptionValues<O>;
  positionals: string[];
}

const HELP_FLAGS = new Set(["--help", "-h"]);

function optionUsage(name: string, o: OptionSpec): string {
  const flag = o.type === "string" ? `--${name} ${o.value ?? "<value>"}` : `--${name}`;
  return o.required ? flag : `[${flag}]`;
}

/** The usage line: "usage: npm run import-oci -- --repo <repo uid> <OCI layout directory>". */
function usageLine(spec: CommandSpec): string {
  const parts = [spec.invocation, ...Object.entries(spec.options).map(([name, o]) => optionUsage(name, o))];
  const p = spec.positionals;
  if (p) {
    const repeated = p.max > 1 ? `${p.name}...` : p.name;
    parts.push(p.min > 0 ? repeated : `[${repeated}]`);
  }
  return `usage: ${parts.join(" ")}`;
}

/** The whole help: usage, summary, options, exit statuses. */
function helpText(spec: CommandSpec): string {
  const rows = Object.entries(spec.options).map(([name, o]) => {
    const flag = `${o.short ? `-${o.short}, ` : ""}--${name}${o.type === "string" ? ` ${o.value ?? "<value>"}` : ""}`;
    const notes = [o.required ? "required" : undefined, o.default !== undefined && o.default !== false ? `default ${typeof o.default === "string" ? JSON.stringify(o.default) : String(o.default)}` : undefined].filter(Boolean);
    return [flag, notes.length ? `${o.help} (${notes.join("; ")})` : o.help];
  });
  rows.push(["-h, --help", "show this help"]);
  const width = Math.max(...rows.map(([flag]) => flag!.length));
  return [
    usageLine(spec),
    "",
    spec.summary,
    "",
    "options:",
    ...rows.map(([flag, help]) => `  ${flag!.padEnd(width)}  ${help}`),
    "",
    `exit status: ${spec.exitCodes ?? "0 done, 1 failed, 2 bad arguments"}`,
    "",
  ].join("\n");
}

/**
 * Parses a command line against the spec: "help" when it asks for help (anywhere before a `--`), the values
 * and positionals otherwise. Throws UsageError for an unknown option, a missing value, a missing required
 * option, too few or too many positionals.
 */
function parseCommand<O extends OptionSpecs>(spec: CommandSpec<O>, argv: readonly string[]): ParsedCommand<O> | "help" {
  const end = argv.indexOf("--");
  if ((end < 0 ? argv : argv.slice(0, end)).some((a) => HELP_FLAGS.has(a))) return "help";
  const args = [...argv];
  for (const word of spec.leading ?? []) {
    if (args[0] !== word) throw new UsageError(args[0] === undefined ? `missing '${word}'` : `unknown command '${args[0]}', expected '${word}'`);
    args.shift();
  }
  const options: NonNullable<ParseArgsConfig["options"]> = {};
  for (const [name, { type, short, multiple, default: fallback }] of Object.entries(spec.options)) {
    options[name] = { type, ...(short ? { short } : {}), ...(multiple ? { multiple } : {}), ...(fallback !== undefined ? { default: fallback } : {}) };
  }
  let parsed;
  try {
    parsed = parseArgs({ args, options, allowPositionals: true, strict: true });
  } catch (err) {
    // parseArgs' message for an unknown option goes on with advice on positionals starting with "-": cut it.
    const { code, message } = err as Error & { code?: string };
    const option = /'([^']+)'/.exec(message)?.[1];
    throw new UsageError(code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" && option ? `unknown option '${option}'` : message.split("\n", 1)[0]!);
  }
  for (const [name, o] of Object.entries(spec.options)) {
    if (o.required && (parsed.values[name] === undefined || parsed.values[name] === "")) throw new UsageError(`--${name} is required`);
  }
  const p = spec.positionals ?? { name: "", min: 0, max: 0 };
  if (parsed.positionals.length > p.max) {
    throw new UsageError(`unexpected argument '${parsed.positionals[p.max]}'`);
  }
  if (parsed.positionals.length < p.min) throw new UsageError(`missing ${p.name}`);
  return { values: parsed.values as OptionValues<O>, positionals: parsed.positionals };
}

/**
 * How the running command was started, for its usage and help: undefined when run from the sources (the npm
 * script, which `invocation` names), else `node <file>` (a compiled dist/cli/<name>.js, as the user typed it
 * from the working directory).
 */
function compiledInvocation(moduleUrl: string, cwd = process.cwd()): string | undefined {
  const file = fileURLToPath(moduleUrl);
  if (file.endsWith(".ts")) return undefined;
  const shown = relative(cwd, file);
  return `node ${shown === "" || shown.startsWith("..") || isAbsolute(shown) ? file : shown}`;
}

/** `compiled` is compiledInvocation's answer, for the usage and help. */
type CommandMain = (argv: readonly string[], env?: NodeJS.ProcessEnv, compiled?: string) => Promise<number>;

/**
 * A command's main: parses, answers --help (stdout, 0) and bad arguments (stderr, 2), and otherwise runs
 * `run`, which may throw UsageError too (an argument of the right shape but a wrong value).
 */
export function defineCommand<const O extends OptionSpecs>(
  spec: CommandSpec<O>,
  run: (args: ParsedCommand<O>, env: NodeJS.ProcessEnv) => Promise<number>,
): CommandMain & { spec: CommandSpec<O> } {
  const main = async (argv: readonly string[], env: NodeJS.ProcessEnv = process.env, compiled?: string): Promise<number> => {
    // Compiled, the file is run directly: its leading words are the user's to type, not a script's.
    const shown: CommandSpec<O> = compiled === undefined ? spec : { ...spec, invocation: [compiled, ...(spec.leading ?? [])].join(" ") };
    try {
      const parsed = parseCommand(spec, argv);
      if (parsed === "help") {
        process.stdout.write(helpText(shown));
        return 0;
      }
      return await run(parsed, env);
    } catch (err) {
      if (!(err instanceof UsageError)) throw err;
      process.stderr.write(`${err.message}\n${usageLine(shown)}\n`);
      return 2;
    }
  };
  return Object.assign(main, { spec });
}

/** The one line a failure is reported as: an error written for the user by its message, any other with its name. */
function failureLine(what: string, err: unknown): string {
  if (err instanceof ConfigError) return `configuration error: ${err.message}`;
  if (err instanceof DataDirLockedError || err instanceof DatabaseOpenError) return `${what} failed: ${err.message}`;
  return `${what} failed: ${String(err)}`;
}

export function runWhenMain(moduleUrl: string, what: string, main: CommandMain): void {
  if (!process.argv[1] || moduleUrl !== pathToFileURL(process.argv[1]).href) return;
  main(process.argv.slice(2), process.env, compiledInvocation(moduleUrl)).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`${failureLine(what, err)}\n`);
      process.exit(1);
    },
  );
}
