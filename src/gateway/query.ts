// Query parameters -> request fields. Each key is a dotted field path (proto or JSON names per segment:
// `uidp.descendants_of`, `uidp.descendantsOf`, `pageSize`); a repeated field takes every value of its key.
// A key naming a field the request does not have is ignored, as an unknown JSON field is (and as grpc-gateway
// does), so clients built for a newer API keep working.
// Values are turned into their proto3 JSON form and parsed by protobuf-es in one pass, so every type reads
// the way it reads in a JSON body (int64, bytes as base64 or base64url, Timestamp as RFC 3339, Duration
// "1.5s", wrappers); what JSON cannot say in a query string is adapted here (bool "true", enum numbers,
// FieldMask paths in snake_case).
// A key naming a message field (not a well-known type) takes the message as its proto3 JSON object text, once
// for a singular field and once per element for a repeated one (`imageRefs={"repo":"nginx"}`): grpc-gateway
// has no way to send a repeated message in a query string, and a GET such as ListResolvedVulnsReports needs
// one. Unknown keys inside are dropped as in a body. A singular message may instead be set field by field
// (`uidp.childrenOf=x`), never both ways at once. The whole query is bounded by the listener's header limit
// (64 KiB; HTTP/1.1 answers 431 beyond), well under the body limit; a JSON value is also bounded in depth.
import { fromJson, mergeFromJson, ScalarType, type DescField, type DescMessage, type JsonObject, type JsonValue, type Message, type Registry } from "@bufbuild/protobuf";
import { invalidArgument, type FieldViolation } from "../kernel/errors/index.js";
import { describeJsonError, fieldByName, isPlainObject, isWellKnown, locateJsonError, withoutUnknownFields } from "./fields.js";

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
/** Deepest nesting of a JSON query value (protobuf's usual recursion limit): deeper is INVALID_ARGUMENT. */
const MAX_QUERY_JSON_DEPTH = 100;
const snakeSegment = /_([a-z0-9])/g;

/** A resolved query parameter. */
interface Param {
  key: string;
  /** Proto field path, e.g. "uidp.descendants_of". */
  path: string;
  fields: DescField[];
  values: string[];
  /** A message field's values, parsed (one per value), when the leaf takes the JSON form. */
  elements?: JsonValue[];
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
  const message = jsonMessageOf(leaf);
  if (!message) return { key, path, fields, values };
  const elements: JsonValue[] = [];
  for (const [i, text] of values.entries()) {
    const element = parseElement(message, text);
    // The first bad element of a parameter is enough to name it.
    if (typeof element === "string") return { field: elementPath(leaf, path, i), description: element };
    elements.push(element);
  }
  return { key, path, fields, values, elements };
}

/** The message type of a field a query value sets as a JSON object: a message or a list of messages, not a well-known type. */
export function jsonMessageOf(field: DescField): DescMessage | undefined {
  const message = field.fieldKind === "message" || (field.fieldKind === "list" && field.listKind === "message") ? field.message : undefined;
  return message && !isWellKnown(message) ? message : undefined;
}

/** "image_refs[1]" for an element of a repeated field, the field's path for a singular one. */
function elementPath(field: DescField, path: string, index: number): string {
  return field.fieldKind === "list" ? `${path}[${index}]` : path;
}

/** A message's JSON object from a query value, without the keys naming no field; or why it is not one. */
function parseElement(message: DescMessage, text: string): JsonValue | string {
  const expected = `is a message (${message.typeName}): the value must be its proto3 JSON object`;
  let value: JsonValue;
  try {
    value = JSON.parse(text) as JsonValue;
  } catch {
    return `${expected}; got text that is not JSON`;
  }
  if (!isPlainObject(value)) return `${expected}; got ${value === null ? "null" : Array.isArray(value) ? "an array" : `a ${typeof value}`}`;
  if (depthOf(value, MAX_QUERY_JSON_DEPTH) > MAX_QUERY_JSON_DEPTH) return `is nested more than ${MAX_QUERY_JSON_DEPTH} levels deep`;
  return withoutUnknownFields(message, value);
}

/** The nesting depth of a JSON value, counted without recursion and only up to limit + 1. */
function depthOf(value: JsonValue, limit: number): number {
  let max = 0;
  const stack: Array<[JsonValue, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== "object" || v === null) continue;
    if (depth > max) max = depth;
    if (max > limit) return max;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth + 1]);
  }
  return max;
}

/** A query parameter the gateway accepts for a request: the fields its key names, from the request root. */
interface QueryParameter {
  fields: DescField[];
}

/**
 * Every query parameter applyQuery accepts for this request and bindings, by the same rules (a leaf a query
 * value can set, not bound by the URL path or the body, reached through singular non-well-known messages; a
 * repeated message in its JSON form, a singular one by its fields): what the OpenAPI document lists. A message met again on its own path (a recursive type) is not entered a
 * second time, so the list is finite; applyQuery itself has no such limit.
 */
export function queryParameters(schema: DescMessage, bound: BoundFields): QueryParameter[] {
  const out: QueryParameter[] = [];
  const visit = (desc: DescMessage, prefix: DescField[], entered: ReadonlySet<string>): void => {
    for (const field of desc.fields) {
      const fields = [...prefix, field];
      const names = fields.map((f) => f.name);
      // A singular message is listed field by field only: its JSON form is accepted too, but a UI filling a
      // listed JSON parameter with a sample object (Swagger UI does) would send it, filtering every call.
      const listed = field.fieldKind !== "message" || isWellKnown(field.message);
      if (listed && leafProblem(field) === undefined && boundProblem(names, bound) === undefined) out.push({ fields });
      if (field.fieldKind === "message" && !isWellKnown(field.message) && !entered.has(field.message.typeName) && !covered(names, bound)) {
        // Entered even when a field inside it is bound (`{repo.uid}`): its other fields may still be set.
        visit(field.message, fields, new Set([...entered, field.message.typeName]));
      }
    }
  };
  visit(schema, [], new Set([schema.typeName]));
  return out;
}

/** True when the URL path or the body binds this field itself or a field above it. */
function covered(path: readonly string[], bound: BoundFields): boolean {
  const within = (b: readonly string[]) => b.length <= path.length && overlaps(path, b);
  return (bound.body !== undefined && within(bound.body)) || bound.path.some(within);
}

/** Why a query parameter cannot name a field inside this one. */
function opaqueKind(field: DescField): string {
  if (field.fieldKind === "list") return field.listKind === "message" ? `is a repeated field; give each element as its JSON object (${field.jsonName}={...})` : "is a repeated field";
  if (field.fieldKind === "map") return "is a map";
  if (field.fieldKind === "message") return `is a ${field.message.typeName}, set as one value`;
  return "is not a message";
}

/** Why the leaf field cannot be set from a query value, or undefined. */
function leafProblem(field: DescField): string | undefined {
  if (field.fieldKind === "map") return "map fields cannot be set from query parameters";
  const message = field.fieldKind === "message" ? field.message : field.fieldKind === "list" && field.listKind === "message" ? field.message : undefined;
  // Other messages take their JSON object; the remaining well-known types (Struct, Any...) appear in no request.
  if (message && isWellKnown(message) && !queryableWellKnown.has(message.typeName)) {
    return `is a ${message.typeName}, which query parameters cannot set`;
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

/**
 * The same field named twice (`pageSize` and `page_size`), two members of one oneof, or a message set both as
 * a whole and by its fields (`uidp={...}` and `uidp.childrenOf=x`: which would win is not obvious, so neither).
 */
function conflicts(params: Param[]): FieldViolation[] {
  const out: FieldViolation[] = [];
  const byPath = new Map<string, Param>();
  const byOneof = new Map<string, Param>();
  const wholes = new Map(params.filter((p) => p.elements).map((p) => [p.path, p]));
  for (const p of params) {
    const whole = wholeAbove(p.path, wholes);
    if (whole) {
      out.push({ field: p.path, description: `set both as a whole (as ${whole.key}) and by its fields (as ${p.key})` });
      continue;
    }
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

/** The JSON-form parameter setting a message above this path, if any. */
function wholeAbove(path: string, wholes: ReadonlyMap<string, Param>): Param | undefined {
  for (let i = path.indexOf("."); i >= 0; i = path.indexOf(".", i + 1)) {
    const whole = wholes.get(path.slice(0, i));
    if (whole) return whole;
  }
  return undefined;
}

/** The proto3 JSON value of a parameter: an array for a repeated field. */
function paramJson(p: Param): JsonValue {
  const leaf = p.fields[p.fields.length - 1]!;
  if (p.elements) return leaf.fieldKind === "list" ? p.elements : p.elements[0]!;
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
    if (isPlainObject(next)) {
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
    const blamed = p.elements && blameElements(p, registry);
    if (blamed) {
      out.push(blamed);
      continue;
    }
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

/** The first element of a JSON-form parameter that does not parse as its message, with the innermost failing field. */
function blameElements(p: Param, registry: Registry): FieldViolation | undefined {
  const leaf = p.fields[p.fields.length - 1]!;
  const message = jsonMessageOf(leaf)!;
  for (const [i, element] of p.elements!.entries()) {
    try {
      fromJson(message, element, { registry });
    } catch {
      return locateJsonError(message, element, elementPath(leaf, p.path, i), { registry });
    }
  }
  return undefined;
}
