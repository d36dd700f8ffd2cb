// The one check for "an object of named values" in data read from JSON, YAML or jsonb columns.

/** Whether a parsed value is an object with named members: not null, not an array. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
