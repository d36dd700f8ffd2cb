// The service's logger: pino, one JSON object per line on stderr ({"level":"info","time":"<ISO 8601>",
// "pid":..,"hostname":..,"msg":..,...fields}). Level from LOG_LEVEL (debug, info, warn, error, silent).
// The `log` API (log.info(msg, fields)) is the one every module calls; an `err` field is serialised with its
// cause chain and the database's own fields (errorFields).
//
// Lines go through process.stderr.write (not a file descriptor of pino's own), so anything that watches
// stderr in this process sees them. Tests may also tap every line at debug level (addLogTap) whatever the
// level of stderr: the contract suite checks that no secret reaches a log line (test/support/log-capture.ts).
import { pino, multistream, stdTimeFunctions, type DestinationStream, type Logger } from "pino";

type Level = "debug" | "info" | "warn" | "error";
export type LogLevel = Level | "silent";

/**
 * The fields of an error a reader needs, with its causes: Drizzle wraps a driver's error ("Failed query: ..."
 * and the parameters) and the database's own word (SQLSTATE, detail, constraint) is on the cause. Database
 * error fields are taken under both drivers' names (postgres.js: `constraint_name`; PGlite: `constraint`).
 */
const ERROR_FIELDS = ["code", "severity", "detail", "hint", "where", "schema_name", "schema", "table_name", "table", "column_name", "column", "constraint_name", "constraint", "routine"] as const;
function errorFields(err: unknown, depth = 0): unknown {
  if (!(err instanceof Error)) return err;
  const out: Record<string, unknown> = { name: err.name, message: err.message };
  const record = err as unknown as Record<string, unknown>;
  for (const key of ERROR_FIELDS) {
    const value = record[key];
    if (value !== undefined && value !== null && value !== "") out[key] = value;
  }
  out.stack = err.stack;
  if (err.cause !== undefined) out.cause = depth < 5 ? errorFields(err.cause, depth + 1) : String(err.cause);
  return out;
}

/**
 * Field names whose value is a credential: never written, whatever a caller passes (and the headers of a
 * request, should one be logged). Defence in depth: no code logs a credential on purpose, and the test
 * suite checks every log line (test/support/log-capture.ts). Named paths only: pino's wildcard paths
 * (`*.token`) cost about 15 µs on every line, the access line included; these cost nothing measurable.
 */
const REDACTED_KEYS = ["authorization", "token", "accessToken", "refreshToken", "idToken", "clientSecret", "client_secret", "secret", "password", "inviteCode"];
const redact = {
  paths: [...REDACTED_KEYS, "headers.authorization", "headers.cookie"],
  // Only text is a credential: a flag such as `refreshToken: true` (one was issued) is kept.
  censor: (value: unknown) => (typeof value === "string" ? "[redacted]" : value),
};

const stderr: DestinationStream = { write: (line: string) => void process.stderr.write(line) };
const taps = new Set<(line: string) => void>();
const tapStream: DestinationStream = {
  write(line: string) {
    for (const tap of taps) tap(line);
  },
};

function valid(level: string | undefined): LogLevel | undefined {
  return level === "debug" || level === "info" || level === "warn" || level === "error" || level === "silent" ? level : undefined;
}

let stderrLevel: LogLevel = valid(process.env.LOG_LEVEL) ?? "info";
let logger: Logger<never> = build();

function build(): Logger<never> {
  const options = {
    timestamp: stdTimeFunctions.isoTime,
    formatters: { level: (label: string) => ({ level: label }) },
    serializers: { err: errorFields },
    redact,
  };
  if (taps.size === 0) return pino({ ...options, level: stderrLevel }, stderr);
  const streams = [{ level: "debug" as const, stream: tapStream }];
  if (stderrLevel !== "silent") streams.push({ level: stderrLevel as "debug", stream: stderr });
  return pino({ ...options, level: "debug" }, multistream(streams));
}

export function setLogLevel(level: LogLevel): void {
  if (level === stderrLevel) return;
  stderrLevel = level;
  logger = build();
}

/** Whether a line of this level is written anywhere (to skip building fields nobody reads). */
export function logs(level: Level): boolean {
  return logger.isLevelEnabled(level);
}

/**
 * Calls `tap` with every line (a JSON text ending in a newline) from debug level up, whatever LOG_LEVEL says
 * for stderr. Returns the function that removes it. For tests.
 */
export function addLogTap(tap: (line: string) => void): () => void {
  taps.add(tap);
  logger = build();
  return () => {
    taps.delete(tap);
    logger = build();
  };
}

export const log = {
  debug: (msg: string, fields?: Record<string, unknown>) => logger.debug(fields, msg),
  info: (msg: string, fields?: Record<string, unknown>) => logger.info(fields, msg),
  warn: (msg: string, fields?: Record<string, unknown>) => logger.warn(fields, msg),
  error: (msg: string, fields?: Record<string, unknown>) => logger.error(fields, msg),
};
