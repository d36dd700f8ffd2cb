// Descriptor helpers shared by the query, path and body readers: field lookup by proto or JSON name, dropping
// keys that name no field (ignored on every protocol, as Connect JSON and grpc-gateway ignore them), and
// locating the field a JSON value fails on (protobuf-es reports the message type, not the path from the
// request root, so the path is found by trying the keys one at a time).
import { fromJson, type DescField, type DescMessage, type JsonObject, type JsonReadOptions, type JsonValue } from "@bufbuild/protobuf";
import type { FieldViolation } from "../kernel/errors/index.js";
import { isRecord } from "../kernel/records.js";

const fieldsByName = new WeakMap<DescMessage, Map<string, DescField>>();

/** The field of a message named by its proto name (`page_size`) or its JSON name (`pageSize`). */
export function fieldByName(desc: DescMessage, name: string): DescField | undefined {
  let names = fieldsByName.get(desc);
  if (!names) {
    names = new Map();
    for (const f of desc.fields) names.set(f.name, f).set(f.jsonName, f);
    fieldsByName.set(desc, names);
  }
  return names.get(name);
}

/** google.protobuf.* messages: they have their own JSON form and are leaves for paths and masks. */
export function isWellKnown(desc: DescMessage): boolean {
  return desc.typeName.startsWith("google.protobuf.");
}

/** A JSON object (kernel/records.ts's check, typed for JSON values). */
export const isPlainObject = isRecord as (value: unknown) => value is JsonObject;

/** Joins a dotted field path: ("", "repo") -> "repo"; ("repo", "name") -> "repo.name". */
export function joinPath(prefix: string, name: string): string {
  return prefix === "" ? name : `${prefix}.${name}`;
}

const decodePrefix = /^cannot decode .*? from JSON:? ?/;
const bareValue = /^(?:"|-?\d|Array\(|object$|string$|null$|true$|false$)/;
const maxDescription = 200;

/** A short description of a protobuf-es JSON error, without the type name prefix. */
export function describeJsonError(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  let text = message.replace(decodePrefix, "");
  if (bareValue.test(text)) text = `invalid value ${text}`;
  return text.length > maxDescription ? text.slice(0, maxDescription) + "..." : text;
}

/**
 * json without the keys that name no field of desc, at any depth (messages, and lists and maps of messages);
 * json itself when it has none. Only keys are dropped: an enum value name desc does not know still fails to
 * parse, as it does in a query parameter.
 */
export function withoutUnknownFields(desc: DescMessage, json: JsonValue): JsonValue {
  if (!isPlainObject(json) || isWellKnown(desc)) return json;
  let out: JsonObject | undefined;
  for (const [key, value] of Object.entries(json)) {
    const field = fieldByName(desc, key);
    if (!field && key.startsWith("[")) continue; // extension keys: left to the parser
    const kept = field ? withoutUnknownInField(field, value) : undefined;
    if (kept === value) continue;
    out ??= { ...json };
    if (kept === undefined) delete out[key];
    else out[key] = kept;
  }
  return out ?? json;
}

function withoutUnknownInField(field: DescField, value: JsonValue): JsonValue {
  if (field.fieldKind === "message") return withoutUnknownFields(field.message, value);
  if (field.fieldKind === "list" && field.listKind === "message" && Array.isArray(value)) {
    const items = value.map((v) => withoutUnknownFields(field.message, v));
    return items.some((v, i) => v !== value[i]) ? items : value;
  }
  if (field.fieldKind === "map" && field.mapKind === "message" && isPlainObject(value)) {
    const entries = Object.entries(value).map(([k, v]) => [k, withoutUnknownFields(field.message, v)] as const);
    return entries.some(([k, v]) => v !== value[k]) ? Object.fromEntries(entries) : value;
  }
  return value;
}

/** Parses json as desc, returning the error instead of throwing. */
function tryParse(desc: DescMessage, json: JsonValue, options: Partial<JsonReadOptions>): unknown {
  try {
    fromJson(desc, json, options);
    return undefined;
  } catch (err) {
    return err;
  }
}

/**
 * Finds why json does not parse as desc with these read options, as a field violation with the path from
 * the request root (prefix) in proto field names. `whole` names the value itself when no field can be
 * blamed (for example "body"). Keys naming no field are passed over. Call only after a parse failed.
 */
export function locateJsonError(desc: DescMessage, json: JsonValue, prefix: string, options: Partial<JsonReadOptions>, whole = "body"): FieldViolation {
  const here = prefix === "" ? whole : prefix;
  if (!isPlainObject(json) || isWellKnown(desc)) {
    return { field: here, description: describeJsonError(tryParse(desc, json, options) ?? "invalid value") };
  }
  for (const [key, value] of Object.entries(json)) {
    const field = fieldByName(desc, key);
    if (!field) continue;
    const err = tryParse(desc, { [key]: value }, options);
    if (err === undefined) continue;
    return locateInField(field, value, joinPath(prefix, field.name), err, options);
  }
  // Each key parses alone: the combination fails (a oneof set twice, a field set by both its names).
  return { field: here, description: describeJsonError(tryParse(desc, json, options) ?? "invalid value") };
}

/** Descends into a message or a list of messages to name the innermost failing field. */
function locateInField(field: DescField, value: JsonValue, path: string, err: unknown, options: Partial<JsonReadOptions>): FieldViolation {
  if (field.fieldKind === "message" && !isWellKnown(field.message) && isPlainObject(value)) {
    return locateJsonError(field.message, value, path, options);
  }
  if (field.fieldKind === "list" && field.listKind === "message" && !isWellKnown(field.message) && Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const item = value[i]!;
      if (isPlainObject(item) && tryParse(field.message, item, options) !== undefined) {
        return locateJsonError(field.message, item, `${path}[${i}]`, options);
      }
    }
  }
  return { field: path, description: describeJsonError(err) };
}
