// Proto messages kept in jsonb columns (a repo's sync_config, an account association's provider blocks), as
// their proto3 JSON: null when unset, so presence survives the round trip.
import { fromJson, toJson, type DescMessage, type JsonValue, type MessageShape } from "@bufbuild/protobuf";

/** The stored message, or undefined when unset. Unreadable stored JSON reads as unset rather than failing every read of its row. */
export function fromStored<D extends DescMessage>(schema: D, json: Record<string, unknown> | null | undefined): MessageShape<D> | undefined {
  if (json === null || json === undefined) return undefined;
  try {
    return fromJson(schema, json as JsonValue, { ignoreUnknownFields: true });
  } catch {
    return undefined;
  }
}

/** What to store for a message: its proto3 JSON, or null when unset. */
export function toStored<D extends DescMessage>(schema: D, message: MessageShape<D> | undefined): Record<string, unknown> | null {
  return message ? (toJson(schema, message) as Record<string, unknown>) : null;
}

/** The deepest nesting of a JSON document a client may have stored (protobuf's usual recursion limit). */
const MAX_STORED_JSON_DEPTH = 100;

/** A NUL (which PostgreSQL stores in no text nor jsonb value) or a lone surrogate (not UTF-8 at all). */
// eslint-disable-next-line no-control-regex
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** What keeps a string out of the database (a NUL character or a lone surrogate), or undefined when it fits. */
export function unstorableText(text: string): string | undefined {
  const found = UNSTORABLE.exec(text);
  if (!found) return undefined;
  return found[0] === "\u0000" ? "a NUL character (U+0000)" : "a lone surrogate (not a Unicode character)";
}

/**
 * What keeps a parsed JSON value out of the database, or undefined when it fits: a key or string holding a
 * NUL or a lone surrogate, or nesting deeper than `maxDepth` (a driver serialising it would overflow the
 * stack). Walked without recursion.
 */
export function unstorableJson(value: unknown, maxDepth = MAX_STORED_JSON_DEPTH): string | undefined {
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v === "string") {
      const why = unstorableText(v);
      if (why) return `a string holds ${why}`;
      continue;
    }
    if (typeof v !== "object" || v === null) continue;
    if (depth > maxDepth) return `it is nested more than ${maxDepth} levels deep`;
    if (Array.isArray(v)) {
      for (const child of v) stack.push([child, depth + 1]);
      continue;
    }
    for (const [key, child] of Object.entries(v)) {
      const why = unstorableText(key);
      if (why) return `a member name holds ${why}`;
      stack.push([child, depth + 1]);
    }
  }
  return undefined;
}
