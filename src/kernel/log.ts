// A small structured logger: one JSON object per line on stderr. Level from LOG_LEVEL (debug, info, warn,
// error, silent).
type Level = "debug" | "info" | "warn" | "error";
const order: Record<Level | "silent", number> = { debug: 10, info: 20, warn: 30, error: 40, silent: 100 };

let threshold = order[(process.env.LOG_LEVEL as Level | "silent" | undefined) ?? "info"] ?? order.info;

export function setLogLevel(level: Level | "silent"): void {
  threshold = order[level];
}

/** An error as JSON, with its cause chain (drivers and Drizzle wrap the error that says what happened). */
function serializeError(e: Error, depth: number): Record<string, unknown> {
  const out: Record<string, unknown> = { name: e.name, message: e.message, stack: e.stack, code: (e as { code?: unknown }).code };
  if (e.cause instanceof Error && depth < 5) out.cause = serializeError(e.cause, depth + 1);
  return out;
}

function emit(level: Level, msg: string, fields?: Record<string, unknown>): void {
  if (order[level] < threshold) return;
  const line: Record<string, unknown> = { time: new Date().toISOString(), level, msg, ...fields };
  if (line.err instanceof Error) line.err = serializeError(line.err, 0);
  process.stderr.write(JSON.stringify(line) + "\n");
}

export const log = {
  debug: (msg: string, fields?: Record<string, unknown>) => emit("debug", msg, fields),
  info: (msg: string, fields?: Record<string, unknown>) => emit("info", msg, fields),
  warn: (msg: string, fields?: Record<string, unknown>) => emit("warn", msg, fields),
  error: (msg: string, fields?: Record<string, unknown>) => emit("error", msg, fields),
};
