// Applying a PATCH (specification, "Update rules for PATCH"; AIP-134) to a resource message.
//
// - A mask names the fields to change, as proto field names (a field's JSON name is accepted as well), with
//   `a.b` reaching into singular message fields. Named fields take the patch's value, and a field the patch
//   leaves unset is reset to its default. Other patch fields are ignored.
// - No mask (or a mask with no paths): an implied mask of the fields present in the patch. Presence is
//   protobuf's: implicit-presence scalars when not the zero value, message and `optional` fields when set,
//   repeated and map fields when not empty. Message fields are followed into their present sub-fields, so
//   `{"syncConfig": {"google": "x"}}` changes sync_config.google and keeps the other sync_config fields.
// - `*` (alone): full replacement of every writable field; fields the patch leaves unset are reset.
// - OUTPUT_ONLY fields are never changed: silently ignored when named, when present in the patch, and under
//   `*`, also inside a message field being replaced (the current values are kept).
// - IMMUTABLE fields are never changed. Named in the mask (or present in the patch without a mask) with a
//   value different from the current one: INVALID_ARGUMENT on `update_mask`. Under `*` or inside a replaced
//   message field, an immutable field the patch leaves unset keeps its value; one it sets differently is an
//   error.
// - A repeated or map field is replaced as a whole; paths cannot reach into one. Well-known types
//   (google.protobuf.*, such as Timestamp) are replaced as a whole.
// - Unknown path, or `*` combined with other paths: INVALID_ARGUMENT on `update_mask` naming the path.
import { clone, create, equals, type DescField, type DescMessage, type MessageShape } from "@bufbuild/protobuf";
import { reflect } from "@bufbuild/protobuf/reflect";
import { FieldMaskSchema, type FieldMask } from "@bufbuild/protobuf/wkt";
import { isImmutable, isOutputOnly } from "./descriptors.js";
import { invalidArgument } from "./errors/index.js";

interface UpdateResult<T> {
  /** The updated resource: a new message; `current` and `patch` are not modified. */
  message: T;
  /** The paths whose value changed (in the order applied, without duplicates); empty for a no-op. */
  changed: string[];
}

type Raw = Record<string, unknown>;
type OneofValue = { case: string | undefined; value?: unknown };

const MASK_FIELD = "update_mask";

function maskError(description: string) {
  return invalidArgument({ field: MASK_FIELD, description });
}

function isAtomicMessage(field: DescField): boolean {
  return field.fieldKind === "message" && field.message.typeName.startsWith("google.protobuf.");
}

/** A singular message field that paths may descend into. */
function isNavigable(field: DescField): field is DescField & { fieldKind: "message" } {
  return field.fieldKind === "message" && !isAtomicMessage(field);
}

function getRaw(msg: Raw, field: DescField): unknown {
  if (field.oneof) {
    const o = msg[field.oneof.localName] as OneofValue;
    return o.case === field.localName ? o.value : undefined;
  }
  return msg[field.localName];
}

function setRaw(msg: Raw, field: DescField, value: unknown): void {
  if (field.oneof) msg[field.oneof.localName] = { case: field.localName, value };
  else msg[field.localName] = value;
}

function isSet(desc: DescMessage, msg: Raw, field: DescField): boolean {
  return reflect(desc, msg as MessageShape<DescMessage>, false).isSet(field);
}

function clearField(desc: DescMessage, msg: Raw, field: DescField): void {
  if (field.oneof) {
    const o = msg[field.oneof.localName] as OneofValue;
    if (o.case === field.localName) msg[field.oneof.localName] = { case: undefined };
    return;
  }
  reflect(desc, msg as MessageShape<DescMessage>, false).clear(field);
}

/** Resolves a dotted path to its fields; throws INVALID_ARGUMENT for an unknown one. */
function resolvePath(schema: DescMessage, path: string): DescField[] {
  const segments = path.split(".");
  const fields: DescField[] = [];
  let desc: DescMessage | undefined = schema;
  for (const [i, name] of segments.entries()) {
    if (!desc) {
      throw maskError(`unknown field path ${JSON.stringify(path)}: ${JSON.stringify(segments.slice(0, i).join("."))} is not a message field`);
    }
    const d: DescMessage = desc;
    const field = d.fields.find((f) => f.name === name) ?? d.fields.find((f) => f.jsonName === name);
    if (!field || name === "") throw maskError(`unknown field path ${JSON.stringify(path)}`);
    fields.push(field);
    desc = isNavigable(field) ? field.message : undefined;
  }
  return fields;
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

function scalarEqual(a: unknown, b: unknown): boolean {
  if (a instanceof Uint8Array && b instanceof Uint8Array) return bytesEqual(a, b);
  return a === b || (typeof a === "number" && typeof b === "number" && Number.isNaN(a) && Number.isNaN(b));
}

function elementEqual(field: DescField, a: unknown, b: unknown): boolean {
  if ((field.fieldKind === "list" && field.listKind === "message") || (field.fieldKind === "map" && field.mapKind === "message")) {
    return equals(field.message, a as MessageShape<DescMessage>, b as MessageShape<DescMessage>);
  }
  return scalarEqual(a, b);
}

/** True when the field holds the same value (and presence) in both messages of type `desc`. */
function fieldEqual(desc: DescMessage, a: Raw, b: Raw, field: DescField): boolean {
  const setA = isSet(desc, a, field);
  if (setA !== isSet(desc, b, field)) return false;
  if (!setA) return true;
  const va = getRaw(a, field);
  const vb = getRaw(b, field);
  switch (field.fieldKind) {
    case "message":
      return equals(field.message, va as MessageShape<DescMessage>, vb as MessageShape<DescMessage>);
    case "list": {
      const la = va as unknown[];
      const lb = vb as unknown[];
      return la.length === lb.length && la.every((x, i) => elementEqual(field, x, lb[i]));
    }
    case "map": {
      const ma = va as Record<string, unknown>;
      const mb = vb as Record<string, unknown>;
      const keys = Object.keys(ma);
      return keys.length === Object.keys(mb).length && keys.every((k) => k in mb && elementEqual(field, ma[k], mb[k]));
    }
    default:
      return scalarEqual(va, vb);
  }
}

/** Equality of the value at a path, treating an unset intermediate message as empty but not equal to a set one. */
function pathEqual(schema: DescMessage, a: Raw | undefined, b: Raw | undefined, fields: readonly DescField[]): boolean {
  let desc = schema;
  let ma = a ?? (create(desc) as Raw);
  let mb = b ?? (create(desc) as Raw);
  for (const [i, field] of fields.entries()) {
    if (i === fields.length - 1) return fieldEqual(desc, ma, mb, field);
    if (isSet(desc, ma, field) !== isSet(desc, mb, field)) return false;
    if (!isNavigable(field)) return fieldEqual(desc, ma, mb, field);
    desc = field.message;
    ma = (getRaw(ma, field) as Raw | undefined) ?? (create(desc) as Raw);
    mb = (getRaw(mb, field) as Raw | undefined) ?? (create(desc) as Raw);
  }
  return true;
}

/**
 * Replaces `field` of `target` with its value in `source` (both of type `desc`; source is a private copy,
 * so values are moved without copying). Output-only fields are kept; immutable fields are kept, and an
 * attempt to set one to a different value throws. Singular messages are replaced field by field so the
 * rules hold inside them too.
 */
function replaceField(desc: DescMessage, target: Raw, source: Raw, field: DescField, path: string): void {
  if (isOutputOnly(field)) return;
  if (isImmutable(field)) {
    if (isSet(desc, source, field) && !fieldEqual(desc, target, source, field)) throw immutableError(path);
    return;
  }
  if (!isSet(desc, source, field)) {
    clearField(desc, target, field);
    return;
  }
  if (isNavigable(field)) {
    let sub = getRaw(target, field) as Raw | undefined;
    if (sub === undefined) {
      sub = create(field.message) as Raw;
      setRaw(target, field, sub);
    }
    const from = getRaw(source, field) as Raw;
    for (const f of field.message.fields) replaceField(field.message, sub, from, f, `${path}.${f.name}`);
    return;
  }
  setRaw(target, field, getRaw(source, field));
}

function immutableError(path: string) {
  return maskError(`field ${JSON.stringify(path)} is immutable and cannot be changed`);
}

/** Applies one explicit path (already resolved). */
function applyPath(schema: DescMessage, target: Raw, source: Raw, current: Raw, fields: readonly DescField[], path: string): boolean {
  if (fields.some(isOutputOnly)) return false;
  if (fields.some(isImmutable)) {
    if (!pathEqual(schema, current, source, fields)) throw immutableError(path);
    return false;
  }
  let desc = schema;
  let t: Raw = target;
  let s: Raw | undefined = source;
  for (const field of fields.slice(0, -1)) {
    if (!isNavigable(field)) return false;
    let tSub = getRaw(t, field) as Raw | undefined;
    const sSub: Raw | undefined = s === undefined ? undefined : (getRaw(s, field) as Raw | undefined);
    if (tSub === undefined) {
      // Nothing to set into an absent message: the patch leaves it absent too.
      if (sSub === undefined) return true;
      tSub = create(field.message) as Raw;
      setRaw(t, field, tSub);
    }
    desc = field.message;
    t = tSub;
    s = sSub;
  }
  const leaf = fields[fields.length - 1]!;
  replaceField(desc, t, s ?? (create(desc) as Raw), leaf, path);
  return true;
}

/** The implied mask of a patch: the paths of its present fields, following present message fields. */
export function impliedPaths(desc: DescMessage, msg: MessageShape<DescMessage>, prefix = ""): string[] {
  const out: string[] = [];
  const raw = msg as Raw;
  for (const field of desc.fields) {
    if (isOutputOnly(field) || !isSet(desc, raw, field)) continue;
    const path = prefix + field.name;
    if (isNavigable(field)) {
      const value = getRaw(raw, field) as MessageShape<DescMessage>;
      const sub = impliedPaths(field.message, value, path + ".");
      // An empty sub-message present in the body replaces the field (clears it); one whose only set fields
      // are output-only changes nothing.
      const empty = !field.message.fields.some((f) => isSet(field.message, value as Raw, f));
      out.push(...(sub.length > 0 ? sub : empty ? [path] : []));
    } else {
      out.push(path);
    }
  }
  return out;
}

/** The mask's paths, validated against the schema (throws INVALID_ARGUMENT on `update_mask`). */
export function validateUpdateMask(schema: DescMessage, mask: FieldMask | undefined): void {
  const paths = mask?.paths ?? [];
  if (paths.includes("*")) {
    if (paths.length > 1) throw maskError(`"*" must be the only path`);
    return;
  }
  for (const path of paths) resolvePath(schema, path);
}

/**
 * Applies `patch` to `current` under `mask` (see the rules at the top of this file) and returns the updated
 * copy with the paths that changed. Throws INVALID_ARGUMENT on `update_mask` for an unknown path or an
 * attempt to change an immutable field.
 */
export function applyUpdate<Desc extends DescMessage>(
  schema: Desc,
  current: MessageShape<Desc>,
  patch: MessageShape<Desc>,
  mask: FieldMask | undefined,
): UpdateResult<MessageShape<Desc>> {
  validateUpdateMask(schema, mask);
  const before = current as Raw;
  const target = clone(schema, current) as Raw;
  const source = clone(schema, patch) as Raw;
  const given = mask?.paths ?? [];
  const changed: string[] = [];
  const note = (path: string, fields: readonly DescField[]) => {
    if (!changed.includes(path) && !pathEqual(schema, before, target, fields)) changed.push(path);
  };

  if (given.length === 1 && given[0] === "*") {
    for (const field of schema.fields) replaceField(schema, target, source, field, field.name);
    for (const field of schema.fields) note(field.name, [field]);
  } else {
    const paths = given.length > 0 ? given : impliedPaths(schema, patch);
    const resolved = paths.map((p) => ({ path: p, fields: resolvePath(schema, p) }));
    const applied = resolved.filter(({ path, fields }) => applyPath(schema, target, source, before, fields, path));
    for (const { fields } of applied) note(fields.map((f) => f.name).join("."), fields);
  }
  return { message: target as MessageShape<Desc>, changed };
}

/**
 * The message as a client may write it: every field the client may not set (OUTPUT_ONLY, at any depth)
 * dropped, by replacing every writable field of an empty message.
 */
export function writableOf<Desc extends DescMessage>(schema: Desc, message: MessageShape<Desc>): MessageShape<Desc> {
  return applyUpdate(schema, create(schema), message, create(FieldMaskSchema, { paths: ["*"] })).message;
}
