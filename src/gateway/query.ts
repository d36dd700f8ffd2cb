// Query parameters -> request fields. Each key is a dotted field path (proto or JSON names per segment:
// `uidp.descendants_of`, `uidp.descendantsOf`, `pageSize`); a repeated field takes every value of its key.
// A key naming a field the request does not have is ignored, as an unknown JSON field is (and as grpc-gateway
// does), so clients built for a newer API keep working.
// Values are turned into their proto3 JSON form and parsed by protobuf-es in one pass, so every type reads
// the way it reads in a JSON body (int64, bytes as base64 or base64url, Timestamp as RFC 3339, Duration
// "1.5s", wrappers); what JSON cannot say in a query string is adapted here (bool "true", enum numbers,
// FieldMask paths in snake_case).
import { fromJson, mergeFromJson, ScalarType, type DescField, type DescMessage, type JsonObject, type JsonValue, type Message, type Registry } from "@bufbuild/protobuf";
import { invalidArgument, type FieldViolation } from "../kernel/errors/index.js";
import { describeJsonError, fieldByName, isWellKnown } from "./fields.js";

/** Fields bound elsewhere in the request: a query parameter on, inside or above one is rejected. */
export interface BoundFields {
  /** Proto field paths set by URL path variables. */
  path: readonly (readonly string[])[];
  /** The body field's path, [] when the body is the whole request ("*"), undefined when there is no body. */
  body: readonly string[] | undefined;
}

/** Well-known types that a single query value can express. */
const queryableWellKnown = new Set([
  "google.protobuf.Timestamp",
  "google.protobuf.Duration",
  "google.protobuf.FieldMask",
  "google.protobuf.DoubleValue",
  "google.protobuf.FloatValue",
  "google.protobuf.Int64Value",
  "google.protobuf.UInt64Value",
  "google.protobuf.Int32Value",
  "google.protobuf.UInt32Value",
  "google.protobuf.BoolValue",
  "google.protobuf.StringValue",
  "google.protobuf.BytesValue",
]);

const integer = /^-?\d+$/;
const snakeSegment = /_([a-z0-9])/g;

/** A resolved query parameter. */
interface Param {
  key: string;
  /** Proto field path, e.g. "uidp.descendants_of". */
  path: string;
  fields: DescField[];
  values: string[];
}

/**
 * Sets the request fields named by the query parameters on message, ignoring keys that name no field. Throws
 * INVALID_ARGUMENT naming every offending parameter by its proto path (a path through a field that has no
 * fields to name, a message, a map, bound elsewhere, repeated for a single field, a value of the wrong type).
 * Returns the proto paths that were set.
 */
export function applyQuery(
  schema: DescMessage,
  message: Message,
  params: Iterable<[string, string]>,
  bound: BoundFields,
  registry: Registry,
): Set<string> {
  const grouped = groupByKey(params);
  if (grouped.size === 0) return new Set();
  const violations: FieldViolation[] = [];
  const resolved: Param[] = [];
  for (const [key, values] of grouped) {
    const r = resolveParam(schema, key, values, bound);
    if (r === undefined) continue;
    if ("description" in r) violations.push(r);
    else resolved.push(r);
  }
  violations.push(...conflicts(resolved));
  if (violations.length > 0) throw invalidArgument(violations);
  if (resolved.length === 0) return new Set();
  const tree: JsonObject = {};
  for (const p of resolved) insert(tree, p.fields, paramJson(p));
  try {
    mergeFromJson(schema, message, tree, { registry });
  } catch (err) {
    throw invalidArgument(blameParams(schema, resolved, registry, err));
  }
  return new Set(resolved.map((p) => p.path));
}

/** Values by key, in first-seen order. */
function groupByKey(params: Iterable<[string, string]>): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [k, v] of params) {
    const list = out.get(k);
    if (list) list.push(v);
    else out.set(k, [v]);
  }
  return out;
}

/**
 * Resolves a key to its field path and checks that a query value may set it; undefined when a segment names
 * no field of its message (the parameter is ignored).
 */
function resolveParam(schema: DescMessage, key: string, values: string[], bound: BoundFields): Param | FieldViolation | undefined {
  const segments = key.split(".");
  const fields: DescField[] = [];
  let desc = schema;
  for (let i = 0; i < segments.length; i++) {
    const field = fieldByName(desc, segments[i]!);
    if (!field) return undefined;
    fields.push(field);
    if (i === segments.length - 1) break;
    if (field.fieldKind !== "message" || isWellKnown(field.message)) {
      const here = fields.map((f) => f.name).join(".");
      return { field: [here, ...segments.slice(i + 1)].join("."), description: `names no field: ${here} ${opaqueKind(field)}` };
    }
    desc = field.message;
  }
  const names = fields.map((f) => f.name);
  const path = names.join(".");
  const problem = leafProblem(fields[fields.length - 1]!) ?? boundProblem(names, bound);
  if (problem) return { field: path, description: problem };
  const leaf = fields[fields.length - 1]!;
  if (leaf.fieldKind !== "list" && values.length > 1) return { field: path, description: "must not be repeated: the field takes a single value" };
  return { key, path, fields, values };
}

/** Why a query parameter cannot name a field inside this one. */
function opaqueKind(field: DescField): string {
  if (field.fieldKind === "list") return "is a repeated field";
  if (field.fieldKind === "map") return "is a map";
  if (field.fieldKind === "message") return `is a ${field.message.typeName}, set as one value`;
  return "is not a message";
}

/** Why the leaf field cannot be set from a query value, or undefined. */
function leafProblem(field: DescField): string | undefined {
  if (field.fieldKind === "map") return "map fields cannot be set from query parameters";
  const message = field.fieldKind === "message" ? field.message : field.fieldKind === "list" && field.listKind === "message" ? field.message : undefined;
  if (message && !queryableWellKnown.has(message.typeName)) {
    return `is a message (${message.typeName}); set its fields instead, as ${field.name}.<field>`;
  }
  return undefined;
}

/** Why the path collides with a field the URL path or the body already binds, or undefined. */
function boundProblem(path: readonly string[], bound: BoundFields): string | undefined {
  if (bound.body !== undefined && overlaps(path, bound.body)) {
    return bound.body.length === 0 ? "query parameters are not accepted: the body carries the whole request" : "is carried by the request body";
  }
  if (bound.path.some((p) => overlaps(path, p))) return "is bound by the URL path";
  return undefined;
}

/** True when one path is a prefix of the other. */
function overlaps(a: readonly string[], b: readonly string[]): boolean {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** The same field named twice (`pageSize` and `page_size`), or two members of one oneof. */
function conflicts(params: Param[]): FieldViolation[] {
  const out: FieldViolation[] = [];
  const byPath = new Map<string, Param>();
  const byOneof = new Map<string, Param>();
  for (const p of params) {
    if (byPath.has(p.path)) {
      out.push({ field: p.path, description: `set twice (as ${byPath.get(p.path)!.key} and ${p.key})` });
      continue;
    }
    byPath.set(p.path, p);
    const leaf = p.fields[p.fields.length - 1]!;
    if (!leaf.oneof) continue;
    const oneofKey = [...p.path.split(".").slice(0, -1), leaf.oneof.name].join(".");
    const other = byOneof.get(oneofKey);
    if (other) out.push({ field: p.path, description: `only one of ${other.path} and ${p.path} may be set` });
    else byOneof.set(oneofKey, p);
  }
  return out;
}

/** The proto3 JSON value of a parameter: an array for a repeated field. */
function paramJson(p: Param): JsonValue {
  const leaf = p.fields[p.fields.length - 1]!;
  if (leaf.fieldKind === "list") return p.values.map((v) => textToJson(leaf, v));
  return textToJson(leaf, p.values[0]!);
}

/**
 * The proto3 JSON form of a text value for a scalar, enum or queryable well-known field (or an element of a
 * repeated one). Values JSON would reject are passed through so the parser reports them.
 */
export function textToJson(field: DescField, text: string): JsonValue {
  const scalar = field.fieldKind === "scalar" || (field.fieldKind === "list" && field.listKind === "scalar") ? field.scalar : undefined;
  if (scalar !== undefined) return scalarTextToJson(scalar, text);
  const isEnum = field.fieldKind === "enum" || (field.fieldKind === "list" && field.listKind === "enum");
  if (isEnum) return integer.test(text) ? Number(text) : text;
  const message = field.fieldKind === "message" || (field.fieldKind === "list" && field.listKind === "message") ? field.message : undefined;
  if (message) return wellKnownTextToJson(message, text);
  return text;
}

function scalarTextToJson(scalar: ScalarType, text: string): JsonValue {
  if (scalar === ScalarType.BOOL) return text === "true" ? true : text === "false" ? false : text;
  return text;
}

function wellKnownTextToJson(message: DescMessage, text: string): JsonValue {
  if (message.typeName === "google.protobuf.FieldMask") {
    return text === "" ? "" : text.split(",").map(camelCasePath).join(",");
  }
  const value = message.fields.length === 1 ? message.fields[0] : undefined;
  if (value && value.name === "value" && value.fieldKind === "scalar") return scalarTextToJson(value.scalar, text);
  return text;
}

/** "update_time.seconds" -> "updateTime.seconds": the JSON form of a FieldMask path. */
function camelCasePath(path: string): string {
  return path.replace(snakeSegment, (_, c: string) => c.toUpperCase());
}

/** Sets value at the field path in a JSON tree keyed by JSON names. */
export function insert(tree: JsonObject, fields: readonly DescField[], value: JsonValue): void {
  let node = tree;
  for (let i = 0; i < fields.length - 1; i++) {
    const name = fields[i]!.jsonName;
    const next = node[name];
    if (typeof next === "object" && next !== null && !Array.isArray(next)) {
      node = next;
    } else {
      const created: JsonObject = {};
      node[name] = created;
      node = created;
    }
  }
  node[fields[fields.length - 1]!.jsonName] = value;
}

/** Finds the parameters whose values do not parse, one at a time (only after the whole query failed). */
function blameParams(schema: DescMessage, params: Param[], registry: Registry, err: unknown): FieldViolation[] {
  const out: FieldViolation[] = [];
  for (const p of params) {
    const tree: JsonObject = {};
    insert(tree, p.fields, paramJson(p));
    try {
      fromJson(schema, tree, { registry });
    } catch (e) {
      out.push({ field: p.path, description: describeJsonError(e) });
    }
  }
  return out.length > 0 ? out : [{ field: params[0]?.path ?? "query", description: describeJsonError(err) }];
}
