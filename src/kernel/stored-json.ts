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
