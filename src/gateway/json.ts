// REST response bodies: the JSON text protobuf-es's toJson gives with alwaysEmitImplicit (the gateway's
// options), written by a function compiled once per message type from its descriptor. toJson walks each
// message by reflection and formats each Timestamp through two Date.parse calls; on a page of 50 tags that
// was a fifth of a REST call's main thread. The compiled writers produce the text itself, as
// fast-json-stringify does, rather than a JSON object for JSON.stringify: building the object and then
// stringifying it cost twice as much for a page of 50 tags (65 against 30 µs in process).
//
// Compiled: messages whose fields are strings, bools, 32- and 64-bit integers, enums, lists of those or of
// messages, Timestamps and messages of the same kinds. Anything else (maps, oneofs, bytes, floats, other
// well-known types, proto2 required fields) is written by toJson for that message type, and so is any value
// a compiled writer does not expect (a wrong type, an unknown enum number, a Timestamp out of range, unknown
// fields): the whole response then goes through toJson, which answers or throws exactly as before.
// Members come in field-number order, as toJson writes them, so the text is JSON.stringify(toJson(...))'s.
import { ScalarType, toJson, type DescEnum, type DescMessage, type Message, type Registry } from "@bufbuild/protobuf";

/** A message's JSON text. */
type Writer = (message: Record<string, unknown>) => string;

/** Thrown by a compiled writer meeting a value it does not handle: the caller falls back to toJson. */
class Unexpected extends Error {}
const unexpected = new Unexpected("value not handled by the compiled JSON writer");

const IMPLICIT = 2; // google.protobuf.FeatureSet.FieldPresence.IMPLICIT
const EXPLICIT = 1;
const MIN_TIMESTAMP_MS = Date.parse("0001-01-01T00:00:00Z");
const MAX_TIMESTAMP_MS = Date.parse("9999-12-31T23:59:59Z");

const INT32 = new Set<ScalarType>([ScalarType.INT32, ScalarType.SINT32, ScalarType.SFIXED32, ScalarType.UINT32, ScalarType.FIXED32]);
const INT64 = new Set<ScalarType>([ScalarType.INT64, ScalarType.SINT64, ScalarType.SFIXED64, ScalarType.UINT64, ScalarType.FIXED64]);

/** Characters JSON.stringify escapes in a string: controls, quote, backslash and (when lone) surrogates. */
// eslint-disable-next-line no-control-regex -- the control characters are what it looks for
const NEEDS_ESCAPE = /[\u0000-\u001f"\\\ud800-\udfff]/;

/** A string as JSON.stringify writes it: quoted as it is when nothing needs escaping (most uids and names). */
function quote(v: string): string {
  return NEEDS_ESCAPE.test(v) ? JSON.stringify(v) : '"' + v + '"';
}

/** A 64-bit integer's JSON: a quoted decimal (protobuf-es holds it as a bigint, or a string or number). */
function int64Json(v: unknown): string {
  return typeof v === "bigint" || typeof v === "string" ? quote(v.toString()) : typeof v === "number" && Number.isInteger(v) ? '"' + v + '"' : fail();
}

/** An enum value's JSON: its name (`names`: number to quoted name); an undefined number goes to toJson. */
function enumJson(names: Map<number, string>, v: unknown): string {
  return (typeof v === "number" ? names.get(v) : undefined) ?? fail();
}

/** Source for a scalar's JSON text from the expression `x`; undefined for the scalar types not compiled. */
function scalarExpr(type: ScalarType): ((x: string) => string) | undefined {
  if (type === ScalarType.STRING) return (x) => `(typeof ${x} === "string" ? quote(${x}) : fail())`;
  if (type === ScalarType.BOOL) return (x) => `(${x} === true ? "true" : ${x} === false ? "false" : fail())`;
  if (INT32.has(type)) return (x) => `(typeof ${x} === "number" && Number.isFinite(${x}) ? "" + ${x} : fail())`;
  if (INT64.has(type)) return (x) => `int64Json(${x})`;
  return undefined;
}

/** Source for an enum value's JSON text from the expression `x`; undefined for NullValue (not compiled). */
function enumExpr(e: DescEnum, dep: (value: unknown) => string): ((x: string) => string) | undefined {
  if (e.typeName === "google.protobuf.NullValue") return undefined;
  const names = dep(new Map(e.values.map((v) => [v.number, JSON.stringify(v.name)])));
  return (x) => `enumJson(${names}, ${x})`;
}

function fail(): never {
  throw unexpected;
}

/** "00" to "99": two-digit fields without building a string each time. */
const TWO_DIGITS = Array.from({ length: 100 }, (_, n) => (n < 10 ? "0" : "") + n);

/**
 * "YYYY-MM-DD" of a day number (days since 1970-01-01, years 1 to 9999), by integer arithmetic (the civil
 * date of a day number, as in Howard Hinnant's date algorithms).
 */
function civilDate(days: number): string {
  const z = days + 719468;
  const era = Math.floor(z / 146097);
  const doe = z - era * 146097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36524) - Math.floor(doe / 146096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const day = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const month = mp < 10 ? mp + 3 : mp - 9;
  const year = yoe + era * 400 + (month <= 2 ? 1 : 0);
  const y = year < 1000 ? ("000" + year).slice(-4) : "" + year;
  return y + "-" + TWO_DIGITS[month] + "-" + TWO_DIGITS[day];
}

// The opening of the last day written ('"YYYY-MM-DDT'): the timestamps of one page mostly share their day.
let lastDay = NaN;
let lastDayOpening = "";

/**
 * '"YYYY-MM-DDTHH:MM:SS' of seconds since 1970 (UTC, years 1 to 9999): a third of the time of
 * Date.toISOString and a replace, for the two timestamps of every listed row.
 */
function quotedIsoSeconds(secs: number): string {
  const days = Math.floor(secs / 86400);
  let rest = secs - days * 86400;
  const hours = Math.floor(rest / 3600);
  rest -= hours * 3600;
  const minutes = Math.floor(rest / 60);
  const seconds = rest - minutes * 60;
  if (days !== lastDay) {
    lastDayOpening = '"' + civilDate(days) + "T";
    lastDay = days;
  }
  return lastDayOpening + TWO_DIGITS[hours] + ":" + TWO_DIGITS[minutes] + ":" + TWO_DIGITS[seconds];
}

/** Exactly protobuf-es's Timestamp JSON (it throws, through the fallback, where that one throws). */
function timestampJson(m: Record<string, unknown>): string {
  const seconds = m.seconds;
  const nanos = m.nanos;
  if (typeof nanos !== "number" || (typeof seconds !== "bigint" && typeof seconds !== "string" && typeof seconds !== "number")) fail();
  const secs = Number(seconds);
  const ms = secs * 1000;
  if (!(ms >= MIN_TIMESTAMP_MS && ms <= MAX_TIMESTAMP_MS) || !Number.isInteger(secs) || !Number.isInteger(nanos) || nanos < 0 || nanos > 999_999_999) fail();
  let z = "Z";
  if (nanos > 0) {
    const text = (nanos + 1_000_000_000).toString().substring(1);
    if (text.endsWith("000000")) z = "." + text.substring(0, 3) + "Z";
    else if (text.endsWith("000")) z = "." + text.substring(0, 6) + "Z";
    else z = "." + text + "Z";
  }
  return quotedIsoSeconds(secs) + z + '"';
}

/** Writes REST response bodies (see the top of this file). */
export function createJsonWriter(registry: Registry): (desc: DescMessage, message: Message) => string {
  const options = { registry, alwaysEmitImplicit: true };
  const writers = new Map<string, Writer>();

  /** The writer of a message type, compiled on first use (a recursive type refers to its writer through this map). */
  function writerOf(desc: DescMessage): Writer {
    let w = writers.get(desc.typeName);
    if (!w) {
      writers.set(desc.typeName, (m) => writers.get(desc.typeName)!(m)); // resolved once compiled
      w = compile(desc);
      writers.set(desc.typeName, w);
    }
    return w;
  }

  /** A writer that hands the message to toJson: every case not compiled. */
  const viaToJson = (desc: DescMessage): Writer => (m) => JSON.stringify(toJson(desc, m as unknown as Message, options));

  /**
   * The writer of one message type, generated as JavaScript source (as fast-json-stringify does): each field
   * read by its own name, so every property load is monomorphic, where a closure per field shared one
   * megamorphic `m[name]` between all fields (twice the time for a page of tags). Everything placed in the
   * source is a JSON.stringify'd literal or a generated identifier; values and functions come in as `d[i]`.
   */
  function compile(desc: DescMessage): Writer {
    if (desc.typeName === "google.protobuf.Timestamp") return timestampJson;
    if (desc.typeName.startsWith("google.protobuf.")) return viaToJson(desc);
    const deps: unknown[] = [];
    const dep = (value: unknown) => `d[${deps.push(value) - 1}]`;
    const lazies: string[] = [];
    /** A nested message type's writer, looked up on first use (a type may contain itself). */
    const writerExpr = (child: DescMessage) => {
      const w = `w${lazies.length}`;
      lazies.push(w);
      return `(${w} || (${w} = writerOf(${dep(child)})))`;
    };
    const lines: string[] = [];
    // Whether a member has surely been written before this field: then its key takes a comma; if none can
    // have been, it takes none; in between, the source checks. (No comma to cut off at the end: a substring
    // of the text built so far would flatten it, a copy per message.)
    let written: "surely" | "never" | "maybe" = "never";
    for (const f of [...desc.fields].sort((a, b) => a.number - b.number)) {
      if (f.oneof !== undefined || (f.presence !== IMPLICIT && f.presence !== EXPLICIT)) return viaToJson(desc);
      const bare = JSON.stringify(JSON.stringify(f.jsonName) + ":");
      const comma = JSON.stringify("," + JSON.stringify(f.jsonName) + ":");
      const key = written === "surely" ? comma : written === "never" ? bare : `(s === "" ? ${bare} : ${comma})`;
      const always = f.fieldKind === "list" || ((f.fieldKind === "scalar" || f.fieldKind === "enum") && f.presence === IMPLICIT);
      written = always ? "surely" : written === "surely" ? "surely" : "maybe";
      const read = `v = m[${JSON.stringify(f.localName)}];`;
      switch (f.fieldKind) {
        case "scalar":
        case "enum": {
          const value = f.fieldKind === "scalar" ? scalarExpr(f.scalar) : enumExpr(f.enum, dep);
          if (!value) return viaToJson(desc);
          // Implicit presence: the zero value is written too (alwaysEmitImplicit).
          lines.push(f.presence === EXPLICIT ? `${read} if (v !== undefined) s += ${key} + ${value("v")};` : `${read} s += ${key} + ${value("v")};`);
          break;
        }
        case "message":
          lines.push(`${read} if (v !== undefined) s += ${key} + ${writerExpr(f.message)}(v);`);
          break;
        case "list": {
          const item =
            f.listKind === "scalar" ? scalarExpr(f.scalar) : f.listKind === "enum" ? enumExpr(f.enum, dep) : ((x: string) => `${writerExpr(f.message)}(${x})`);
          if (!item) return viaToJson(desc);
          // Lists have implicit presence: an empty one is written as [] (alwaysEmitImplicit).
          lines.push(`${read} if (!Array.isArray(v)) fail(); s += ${key} + "["; for (let i = 0; i < v.length; i++) { if (i > 0) s += ","; s += ${item("v[i]")}; } s += "]";`);
          break;
        }
        default:
          return viaToJson(desc);
      }
    }
    const source = [
      lazies.length > 0 ? `let ${lazies.join(", ")};` : "",
      "return function (m) {",
      "  const u = m.$unknown; if (u !== undefined && u.length > 0) fail();",
      '  let s = "", v;',
      ...lines.map((l) => "  " + l),
      '  return "{" + s + "}";',
      "};",
    ].join("\n");
    // Generated from our own descriptors only (see above).
    return new Function("d", "writerOf", "fail", "quote", "int64Json", "enumJson", source)(deps, writerOf, fail, quote, int64Json, enumJson) as Writer;
  }

  return (desc, message) => {
    try {
      return writerOf(desc)(message as unknown as Record<string, unknown>);
    } catch (err) {
      if (err === unexpected) return JSON.stringify(toJson(desc, message, options));
      throw err;
    }
  };
}
