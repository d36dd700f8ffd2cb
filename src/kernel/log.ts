// A small structured logger: one JSON object per line on stderr. Level from LOG_LEVEL (debug, info, warn,
// error, silent).
type Level = "debug" | "info" | "warn" | "error";
const order: Record<Level | "silent", number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

let threshold = order[(process.env.LOG_LEVEL as Level | "silent" | undefined) ?? "info"] ?? order.info;

export function setLogLevel(level: Level | "silent"): void {
  threshold = order[level];
}

/**
 * The fields of an error a reader needs, with its causes: Drizzle wraps a driver's error ("Failed query: ..."
 * and the parameters) and the database's own word (SQLSTATE, detail, constraint) is on the cause. Database
 * error fields are taken under both drivers' names (postgres.js: `constraint_name`; PGlite: `constraint`).
 */
const ERROR_FIELDS = ["code", "severity", "detail", "hint", "where", "schema_name", "schema", "table_name", "table", "column_name", "column", "constraint_name", "constraint", "routine"] as const;
export function errorFields(err: unknown, depth = 0): unknown {
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

function emit(level: Level, msg: string, fields?: Record<string, unknown>): void {
  if (order[level] < threshold) return;
  const line: Record<string, unknown> = { time: new Date().toISOString(), level, msg, ...fields };
  if (line.err !== undefined) line.err = errorFields(line.err);
  process.stderr.write(JSON.stringify(line) + "\n");
}

export const log = {
  debug: (msg: string, fields?: Record<string, unknown>) => emit("debug", msg, fields),
  info: (msg: string, fields?: Record<string, unknown>) => emit("info", msg, fields),
  warn: (msg: string, fields?: Record<string, unknown>) => emit("warn", msg, fields),
  error: (msg: string, fields?: Record<string, unknown>) => emit("error", msg, fields),
};
