// Generators of hostile requests, read from the descriptors: for a method, JSON values shaped like its input
// message (most fields plausible, some of the wrong type, missing, unknown, huge or deeply nested), the
// binary and gRPC-framed forms of them (valid, truncated, wrong wire types, invalid UTF-8), REST paths and
// query strings from the method's google.api.http bindings, and the headers around them (tokens, content
// types, encodings, timeouts, oversized values).
import { fromJson, ScalarType, toBinary, type DescField, type DescMessage, type DescMethod, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import fc from "fast-check";
import { httpRuleOf, registry } from "../../src/kernel/descriptors.js";

/** Values a generated request may carry where it names something of the world: real and near-real uids. */
export interface Pools {
  /** Uids of groups and resources the callers can see (and some they cannot). */
  uids: readonly string[];
  /** Authorization header values: mostly the owner's token, then others, garbage and none (undefined). */
  tokens: fc.Arbitrary<string | undefined>;
}

const huge = (n: number) => fc.constantFrom("a", "é", "𝄞", "/", "%", "\u0000").map((c) => c.repeat(n));

/** Strings that hurt parsers: huge, control and surrogate characters, path tricks, SQL and template metacharacters. */
const nastyString: fc.Arbitrary<string> = fc.oneof(
  fc.string({ maxLength: 40 }),
  fc.string({ unit: "binary", maxLength: 40 }),
  huge(100_000),
  huge(5_000),
  fc.constantFrom("", " ", "\uD800", "\uDFFF", "a\uD800b", "\u0000", "..", "../..", "%2F", "%", "%zz", "'; drop table groups; --", "\\", "*", "**", "{uid}", "%00", "\u202E", "NaN", "-0"),
);

/** Page tokens: empty, malformed, truncated or edited base64, and huge. */
const pageToken: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom("", "!!!", "====", "a", "eyJ9", "e30", "e30.e30.e30", "%%%", "\uD800"),
  fc.base64String({ maxLength: 200 }),
  fc.uint8Array({ maxLength: 120 }).map((b) => Buffer.from(b).toString("base64url")),
  huge(20_000),
);

/** order_by values: known and unknown fields, bad directions, separators and duplicates. */
const orderBy: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom("", "name", "name desc", "name asc", "uid desc", "created_at", "updated_at desc", "createTime", "update_time", "name desc desc", "name sideways", ",", "name,,uid", "name, name", " name  desc ", "nosuchfield", "name desc, uid", "name;drop", "\uD800", "name.desc"),
  fc.array(fc.constantFrom("name", "uid", "create_time", "bogus", "desc", "asc", ",", " "), { maxLength: 8 }).map((a) => a.join(" ")),
  huge(10_000),
);

/** Field mask paths: real, unknown, nested, empty, repeated and malformed. */
const fieldMask: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom("", "name", "description", "name,description", "uid", "create_time", "*", "nosuch", "a..b", ".", ",", "name,", "Name", "display_name", "sync_config.source", "claim_match.issuer", "a.b.c.d.e.f", "\uD800", "name,name"),
  fc.array(fc.string({ maxLength: 12 }), { maxLength: 6 }).map((a) => a.join(",")),
  huge(10_000),
);

/** Numbers as JSON: in and out of range, non-integral, non-numeric, as strings. */
const number: fc.Arbitrary<JsonValue> = fc.oneof(
  fc.integer(),
  fc.constantFrom(0, -1, 1, 200, 201, 2 ** 31, -(2 ** 31) - 1, 2 ** 53, 1e308, -1e308, 1.5, -0.5, 1e-300),
  fc.constantFrom("1", "-1", "9223372036854775808", "-9223372036854775809", "1e400", "NaN", "Infinity", "0x10", "", "12a", " 1", "1.0"),
  fc.double().filter(Number.isFinite),
);

/** Any JSON value, sometimes nested thousands of levels deep. */
const anyJson: fc.Arbitrary<JsonValue> = fc.oneof(
  { weight: 4, arbitrary: fc.jsonValue({ maxDepth: 3 }) as fc.Arbitrary<JsonValue> },
  { weight: 1, arbitrary: deep() },
);

/** A value nested `depth` levels deep in arrays or objects. */
function deep(): fc.Arbitrary<JsonValue> {
  return fc.tuple(fc.integer({ min: 50, max: 5_000 }), fc.boolean()).map(([depth, arrays]) => {
    let v: JsonValue = "x";
    for (let i = 0; i < depth; i++) v = arrays ? [v] : { a: v };
    return v;
  });
}

function wellKnown(message: DescMessage): fc.Arbitrary<JsonValue> | undefined {
  switch (message.typeName) {
    case "google.protobuf.FieldMask":
      return fieldMask;
    case "google.protobuf.Timestamp":
      return fc.oneof(fc.constantFrom("2024-01-01T00:00:00Z", "1970-01-01T00:00:00.000000001Z", "9999-12-31T23:59:59Z", "0000-01-01T00:00:00Z", "not a time", "2024-13-45T99:99:99Z", ""), fc.date({ noInvalidDate: true }).map((d) => d.toISOString()));
    case "google.protobuf.Duration":
      return fc.constantFrom("1s", "-1s", "1.5s", "315576000001s", "s", "1m", "");
    case "google.protobuf.Struct":
      return fc.oneof(fc.dictionary(fc.string({ maxLength: 8 }), anyJson, { maxKeys: 4 }), deep());
    case "google.protobuf.Value":
      return anyJson;
    case "google.protobuf.ListValue":
      return fc.array(anyJson, { maxLength: 4 });
    case "google.protobuf.Any":
      return fc.oneof(
        fc.constantFrom<JsonValue>({ "@type": "type.googleapis.com/no.such.Type" }, { "@type": "" }, { value: 1 }, { "@type": "type.googleapis.com/google.protobuf.Empty" }),
        fc.string({ maxLength: 30 }).map((t) => ({ "@type": t })),
      );
    case "google.protobuf.Empty":
      return fc.constant({});
    case "google.protobuf.StringValue":
    case "google.protobuf.BytesValue":
      return nastyString;
    case "google.protobuf.BoolValue":
      return fc.boolean();
    case "google.protobuf.Int32Value":
    case "google.protobuf.Int64Value":
    case "google.protobuf.UInt32Value":
    case "google.protobuf.UInt64Value":
    case "google.protobuf.DoubleValue":
    case "google.protobuf.FloatValue":
      return number;
    default:
      return undefined;
  }
}

export interface ValueContext {
  pools: Pools;
  depth: number;
}

function stringFor(field: DescField, pools: Pools): fc.Arbitrary<JsonValue> {
  const name = field.name;
  if (name === "page_token") return pageToken;
  if (name === "order_by") return orderBy;
  if (name.endsWith("_mask") || name === "paths") return fieldMask;
  const uid = fc.constantFrom(...pools.uids);
  if (name === "uid" || name === "parent" || name.endsWith("_uid") || name === "group" || name.endsWith("_of") || name === "ids") {
    return fc.oneof({ weight: 6, arbitrary: uid }, { weight: 2, arbitrary: tricked(uid) }, { weight: 1, arbitrary: nastyString });
  }
  return fc.oneof({ weight: 3, arbitrary: fc.constantFrom("fuzz", "name", "a b", "x.y-z_1", "https://issuer.test", "sha256:" + "0".repeat(64), "latest") }, { weight: 2, arbitrary: nastyString }, { weight: 1, arbitrary: uid });
}

const tricked = (uid: fc.Arbitrary<string>) => fc.tuple(uid, fc.nat()).map(([u, i]) => uidTrick(u, i));

/** A uid edited the ways an attacker edits them: case, traversal, encoded separators, extra segments. */
function uidTrick(uid: string, which: number): string {
  const tricks = [
    uid.toUpperCase(),
    `${uid}/..`,
    `${uid}/../..`,
    uid.replaceAll("/", "%2F"),
    `${uid}/`,
    `/${uid}`,
    `${uid}/extra/segments`,
    `${uid}\u0000`,
    uid.slice(0, -1),
    `${uid}${uid}`,
  ];
  return tricks[which % tricks.length]!;
}

function scalarFor(field: DescField & { fieldKind: "scalar" } | { scalar: ScalarType; name: string; jsonName: string }, pools: Pools): fc.Arbitrary<JsonValue> {
  switch (field.scalar) {
    case ScalarType.STRING:
      return stringFor(field as DescField, pools);
    case ScalarType.BOOL:
      return fc.boolean();
    case ScalarType.BYTES:
      return fc.oneof(fc.base64String({ maxLength: 40 }), fc.constantFrom("!!!", "a", "ab=", "====", "YQ", "YQ==x", "\uD800", "-_-_"));
    default:
      return number;
  }
}

function elementFor(field: DescField, ctx: ValueContext): fc.Arbitrary<JsonValue> {
  switch (field.fieldKind) {
    case "scalar":
      return scalarFor(field, ctx.pools);
    case "enum":
      return fc.oneof(fc.constantFrom(...field.enum.values.map((v) => v.name)), fc.constantFrom("NO_SUCH_VALUE", "", "0", 0, 1, 999999, -1, 2 ** 31));
    case "message":
      return messageValue(field.message, { ...ctx, depth: ctx.depth + 1 });
    case "list": {
      const el =
        field.listKind === "scalar"
          ? scalarFor({ scalar: field.scalar, name: field.name, jsonName: field.jsonName }, ctx.pools)
          : field.listKind === "enum"
            ? fc.constantFrom(...field.enum.values.map((v) => v.name), "NOPE")
            : messageValue(field.message, { ...ctx, depth: ctx.depth + 1 });
      return fc.array(el, { maxLength: 3 });
    }
    case "map": {
      const value =
        field.mapKind === "message" ? messageValue(field.message, { ...ctx, depth: ctx.depth + 1 }) : field.mapKind === "enum" ? fc.constantFrom(...field.enum.values.map((v) => v.name)) : scalarFor({ scalar: field.scalar, name: field.name, jsonName: field.jsonName }, ctx.pools);
      return fc.dictionary(fc.string({ maxLength: 10 }), value, { maxKeys: 3 });
    }
  }
}

/**
 * A JSON value for a message: each field present or not, most of the right shape, some of any type; a few
 * unknown keys; JSON or proto field names. Beyond a small depth, an empty object.
 */
export function messageValue(message: DescMessage, ctx: ValueContext): fc.Arbitrary<JsonValue> {
  const wk = wellKnown(message);
  if (wk) return fc.oneof({ weight: 5, arbitrary: wk }, { weight: 1, arbitrary: anyJson });
  if (ctx.depth > 3) return fc.constant({});
  const entries = message.fields.map((f) =>
    fc.option(
      fc.tuple(
        fc.constantFrom(f.jsonName, f.name),
        fc.oneof({ weight: 8, arbitrary: elementFor(f, ctx) }, { weight: 1, arbitrary: anyJson }, { weight: 1, arbitrary: fc.constant(null) }),
      ),
      { freq: 2 },
    ),
  );
  const unknown = fc.array(fc.tuple(fc.oneof(fc.string({ maxLength: 12 }), fc.constantFrom("__proto__", "constructor", "@type", "")), anyJson), { maxLength: 2 });
  const shaped = fc.tuple(fc.tuple(...entries), unknown).map(([known, extra]) => {
    const out: JsonObject = {};
    for (const kv of [...known, ...extra]) if (kv) Object.defineProperty(out, kv[0], { value: kv[1], enumerable: true, writable: true, configurable: true });
    return out as JsonValue;
  });
  return ctx.depth === 0 ? fc.oneof({ weight: 12, arbitrary: shaped }, { weight: 1, arbitrary: anyJson }) : shaped;
}

/** The binary form of a JSON value when it is a valid message, else undefined. */
export function binaryOf(message: DescMessage, json: JsonValue): Uint8Array | undefined {
  try {
    return toBinary(message, fromJson(message, json, { registry, ignoreUnknownFields: true }));
  } catch {
    return undefined;
  }
}

const varint = (n: number): number[] => {
  const out: number[] = [];
  let v = n >>> 0;
  while (v > 0x7f) {
    out.push((v & 0x7f) | 0x80);
    v >>>= 7;
  }
  out.push(v);
  return out;
};

/**
 * Raw protobuf bytes that do not come from a valid message: random bytes, a field of the wrong wire type,
 * a string field holding invalid UTF-8, a length beyond the end, a truncated varint, a group tag.
 */
export function rawProtobuf(message: DescMessage): fc.Arbitrary<Uint8Array> {
  const numbers = message.fields.length ? message.fields.map((f) => f.number) : [1];
  const stringFields = message.fields.filter((f) => f.fieldKind === "scalar" && f.scalar === ScalarType.STRING).map((f) => f.number);
  const field = fc.constantFrom(...numbers, 999, 536870911);
  return fc.oneof(
    fc.uint8Array({ maxLength: 64 }),
    fc.tuple(field, fc.integer({ min: 0, max: 7 }), fc.uint8Array({ maxLength: 16 })).map(([n, wt, rest]) => Uint8Array.from([...varint((n << 3) | wt), ...rest])),
    fc.tuple(fc.constantFrom(...(stringFields.length ? stringFields : numbers)), fc.constantFrom([0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0x61, 0xfe])).map(([n, bad]) => Uint8Array.from([...varint((n << 3) | 2), bad.length, ...bad])),
    fc.tuple(field, fc.integer({ min: 2, max: 2 ** 31 })).map(([n, len]) => Uint8Array.from([...varint((n << 3) | 2), ...varint(len), 0x61])),
    fc.constant(Uint8Array.from([0x08, 0xff, 0xff, 0xff])),
    fc.constant(Uint8Array.from([0x0b, 0x0c])),
    fc.constant(Uint8Array.from([0x7b])), // "{": JSON sent as binary
  );
}

/** A gRPC length-prefixed frame around `data`: well formed, or lying about its length or compression. */
export function grpcFrames(data: fc.Arbitrary<Uint8Array>): fc.Arbitrary<{ bytes: Uint8Array; note: string }> {
  const frame = (flag: number, length: number, payload: Uint8Array) => {
    const out = new Uint8Array(5 + payload.byteLength);
    out[0] = flag;
    new DataView(out.buffer).setUint32(1, length >>> 0);
    out.set(payload, 5);
    return out;
  };
  return fc.oneof(
    { weight: 8, arbitrary: data.map((d) => ({ bytes: frame(0, d.byteLength, d), note: "frame" })) },
    { weight: 2, arbitrary: fc.tuple(data, fc.integer({ min: 1, max: 2 ** 31 })).map(([d, extra]) => ({ bytes: frame(0, d.byteLength + extra, d), note: "truncated frame (length prefix beyond the data)" })) },
    { weight: 1, arbitrary: data.map((d) => ({ bytes: frame(0, d.byteLength, d).subarray(0, Math.min(4, d.byteLength + 5)), note: "truncated prefix" })) },
    { weight: 1, arbitrary: data.map((d) => ({ bytes: frame(1, d.byteLength, d), note: "compressed flag, not compressed" })) },
    { weight: 1, arbitrary: data.map((d) => ({ bytes: Buffer.concat([frame(0, d.byteLength, d), frame(0, d.byteLength, d)]), note: "two messages to a unary method" })) },
    { weight: 1, arbitrary: data.map((d) => ({ bytes: frame(0x80, d.byteLength, d), note: "trailer flag from a client" })) },
    { weight: 1, arbitrary: fc.tuple(data, fc.uint8Array({ minLength: 1, maxLength: 8 })).map(([d, tail]) => ({ bytes: Buffer.concat([frame(0, d.byteLength, d), tail]), note: "trailing garbage" })) },
    { weight: 1, arbitrary: fc.constant({ bytes: new Uint8Array(0), note: "empty body" }) },
  );
}

/** Bytes of a JSON text, sometimes corrupted: invalid UTF-8 spliced in, truncated, or not JSON at all. */
export function jsonBytes(value: fc.Arbitrary<JsonValue>): fc.Arbitrary<{ bytes: Uint8Array; note: string }> {
  const text = value.map((v) => {
    try {
      return JSON.stringify(v) ?? "null";
    } catch {
      return "null"; // too deep to stringify: send null rather than fail the generator
    }
  });
  return fc.oneof(
    { weight: 10, arbitrary: text.map((t) => ({ bytes: Buffer.from(t), note: "json" })) },
    {
      weight: 1,
      arbitrary: fc.tuple(text, fc.nat(), fc.constantFrom([0xff], [0xc3], [0xed, 0xa0, 0x80], [0xfe, 0xff], [0xef, 0xbb, 0xbf])).map(([t, at, bad]) => {
        const b = Buffer.from(t);
        const i = at % (b.byteLength + 1);
        return { bytes: Buffer.concat([b.subarray(0, i), Buffer.from(bad), b.subarray(i)]), note: "invalid UTF-8 in JSON" };
      }),
    },
    { weight: 1, arbitrary: fc.tuple(text, fc.nat()).map(([t, at]) => ({ bytes: Buffer.from(t.slice(0, at % (t.length + 1))), note: "truncated JSON" })) },
    { weight: 1, arbitrary: fc.constantFrom("", "{", "}", "[", "nul", "\"\\ud800\"", "{\"a\":}", "{'a':1}", "1e999999", "{\"__proto__\":{\"x\":1}}", "\u0000").map((t) => ({ bytes: Buffer.from(t), note: "malformed JSON" })) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 64 }).map((b) => ({ bytes: b, note: "random bytes" })) },
  );
}

export interface RestBinding {
  verb: string;
  template: string;
  body: string;
}

/** A method's REST bindings: its google.api.http rule and the rule's additional bindings. */
export function restBindingsOf(method: DescMethod): RestBinding[] {
  const rule = httpRuleOf(method);
  if (!rule) return [];
  const out: RestBinding[] = [];
  for (const r of [rule, ...rule.additionalBindings]) {
    if (r.pattern.case === undefined) continue;
    if (r.pattern.case === "custom") out.push({ verb: r.pattern.value.kind.toUpperCase(), template: r.pattern.value.path, body: r.body });
    else out.push({ verb: r.pattern.case.toUpperCase(), template: r.pattern.value, body: r.body });
  }
  return out;
}

/** A path variable's value: a plain or tricked uid, or anything; encoded as a client would, or not. */
function pathValue(pools: Pools, multi: boolean): fc.Arbitrary<string> {
  const uid = fc.constantFrom(...pools.uids);
  const raw = fc.oneof({ weight: 6, arbitrary: uid }, { weight: 2, arbitrary: tricked(uid) }, { weight: 2, arbitrary: nastyString.map((s) => s.slice(0, 2_000)) });
  return fc.tuple(raw, fc.constantFrom("encoded", "encoded", "raw", "percent-garbage")).map(([v, how]) => {
    // Raw: as typed, but with what no HTTP request line may carry (controls, spaces, non-ASCII) escaped.
    const raw = (x: string) => x.replace(/[?#]/g, "_").replace(/[^\x21-\x7e]/gu, (c) => encodeURIComponent(c.replace(/[\uD800-\uDFFF]/g, "\uFFFD")));
    if (how === "raw") return raw(v);
    if (how === "percent-garbage") return `${raw(v.slice(0, 20))}%${["zz", "ff", "00", "2f", "c0%80", "e2%82", ""][v.length % 7]}`;
    const wellFormed = v.replace(/[\uD800-\uDFFF]/g, "\uFFFD"); // encodeURIComponent throws on lone surrogates
    return multi ? wellFormed.split("/").map(encodeURIComponent).join("/") : encodeURIComponent(wellFormed);
  });
}

/** A REST path from a template, each variable filled by `pathValue`. */
export function restPath(template: string, pools: Pools): fc.Arbitrary<string> {
  const vars = [...template.matchAll(/\{([^}=]+)(?:=([^}]*))?\}/g)];
  return fc.tuple(...vars.map((m) => pathValue(pools, m[2] === "**"))).map((values) => {
    let i = 0;
    return template.replace(/\{([^}=]+)(?:=([^}]*))?\}/g, () => values[i++] ?? "");
  });
}

/** Query parameters from a JSON value: dotted names, repeated keys, and some raw garbage. */
export function restQuery(value: fc.Arbitrary<JsonValue>): fc.Arbitrary<string> {
  const fromValue = value.map((v) => {
    const params = new URLSearchParams();
    const flatten = (prefix: string, x: JsonValue, depth: number): void => {
      if (depth > 6) return;
      if (Array.isArray(x)) x.slice(0, 4).forEach((e) => flatten(prefix, e, depth + 1));
      else if (x !== null && typeof x === "object") for (const [k, e] of Object.entries(x).slice(0, 8)) flatten(prefix ? `${prefix}.${k}` : k, e, depth + 1);
      else params.append(prefix || "value", String(x).slice(0, 1_000));
    };
    flatten("", v, 0);
    // Huge values go in bodies: a query past the listener's 64 KiB of headers is refused by the HTTP parser.
    return params.toString().slice(0, 16_000).replace(/%[0-9A-F]?$/i, "");
  });
  return fc.oneof(
    { weight: 8, arbitrary: fromValue },
    { weight: 1, arbitrary: fc.constantFrom("", "a=%zz", "%ff=1", "page_size=abc", "page_size=-1", "skip=-5", "page_size=99999999999999999999", "=", "&&&", "a.b.c.d.e.f.g.h=1", "uidp.ids=%00", "order_by=nosuch", "page_token=!!!", "update_mask=a..b", "field_mask=%ff") },
    { weight: 1, arbitrary: fc.string({ maxLength: 60 }).map((s) => encodeURI(s.replace(/[\uD800-\uDFFF]/g, "x"))) },
  );
}
