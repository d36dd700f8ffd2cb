// REST response bodies: the JSON protobuf-es's toJson gives with alwaysEmitImplicit (the gateway's options),
// written by a function compiled once per message type from its descriptor. toJson walks each message by
// reflection and formats each Timestamp through two Date.parse calls; on a page of 50 tags that was a fifth
// of a REST call's main thread.
//
// Compiled: messages whose fields are strings, bools, 32- and 64-bit integers, enums, lists of those or of
// messages, Timestamps and messages of the same kinds. Anything else (maps, oneofs, bytes, floats, other
// well-known types, proto2 required fields) is written by toJson for that message type, and so is any value
// a compiled writer does not expect (a wrong type, an unknown enum number, a Timestamp out of range, unknown
// fields): the whole response then goes through toJson, which answers or throws exactly as before.
import { ScalarType, toJson, type DescField, type DescMessage, type JsonObject, type JsonValue, type Message, type Registry } from "@bufbuild/protobuf";

type Writer = (message: Record<string, unknown>) => JsonValue;

/** Thrown by a compiled writer meeting a value it does not handle: the caller falls back to toJson. */
class Unexpected extends Error {}
const unexpected = new Unexpected("value not handled by the compiled JSON writer");

const IMPLICIT = 2; // google.protobuf.FeatureSet.FieldPresence.IMPLICIT
const EXPLICIT = 1;
const MIN_TIMESTAMP_MS = Date.parse("0001-01-01T00:00:00Z");
const MAX_TIMESTAMP_MS = Date.parse("9999-12-31T23:59:59Z");

const INT32 = new Set<ScalarType>([ScalarType.INT32, ScalarType.SINT32, ScalarType.SFIXED32, ScalarType.UINT32, ScalarType.FIXED32]);
const INT64 = new Set<ScalarType>([ScalarType.INT64, ScalarType.SINT64, ScalarType.SFIXED64, ScalarType.UINT64, ScalarType.FIXED64]);

/** A scalar's JSON, and whether it is its type's zero value; undefined for the scalar types not compiled. */
function scalarOf(type: ScalarType): { json: (v: unknown) => JsonValue; isZero: (v: unknown) => boolean } | undefined {
  if (type === ScalarType.STRING) return { json: (v) => (typeof v === "string" ? v : fail()), isZero: (v) => v === "" };
  if (type === ScalarType.BOOL) return { json: (v) => (typeof v === "boolean" ? v : fail()), isZero: (v) => v === false };
  if (INT32.has(type)) return { json: (v) => (typeof v === "number" ? v : fail()), isZero: (v) => v === 0 };
  if (INT64.has(type)) {
    return {
      json: (v) => (typeof v === "bigint" || typeof v === "string" ? v.toString() : typeof v === "number" && Number.isInteger(v) ? v.toString() : fail()),
      isZero: (v) => v == 0, // 0n, "0" or 0, as protobuf-es's zero check
    };
  }
  return undefined;
}

function fail(): never {
  throw unexpected;
}

const pad2 = (n: number) => (n < 10 ? "0" + n : "" + n);

/**
 * "YYYY-MM-DDTHH:MM:SS" of seconds since 1970 (UTC, years 1 to 9999), by integer arithmetic (the civil date
 * of a day number, as in Howard Hinnant's date algorithms): a third of the time of Date.toISOString and a
 * replace, for the two timestamps of every listed row.
 */
function isoSeconds(secs: number): string {
  const days = Math.floor(secs / 86400);
  let rest = secs - days * 86400;
  const hours = Math.floor(rest / 3600);
  rest -= hours * 3600;
  const minutes = Math.floor(rest / 60);
  const seconds = rest - minutes * 60;
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
  return y + "-" + pad2(month) + "-" + pad2(day) + "T" + pad2(hours) + ":" + pad2(minutes) + ":" + pad2(seconds);
}

/** Exactly protobuf-es's Timestamp JSON (it throws, through the fallback, where that one throws). */
function timestampJson(m: Record<string, unknown>): JsonValue {
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
  return isoSeconds(secs) + z;
}

/** Writes REST response bodies (see the top of this file). */
export function createJsonWriter(registry: Registry): (desc: DescMessage, message: Message) => JsonValue {
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
  const viaToJson = (desc: DescMessage): Writer => (m) => toJson(desc, m as unknown as Message, options);

  function compile(desc: DescMessage): Writer {
    if (desc.typeName === "google.protobuf.Timestamp") return timestampJson;
    if (desc.typeName.startsWith("google.protobuf.")) return viaToJson(desc);
    const fields = [...desc.fields].sort((a, b) => a.number - b.number);
    const parts: ((m: Record<string, unknown>, out: JsonObject) => void)[] = [];
    for (const f of fields) {
      const part = fieldWriter(f);
      if (!part) return viaToJson(desc);
      parts.push(part);
    }
    return (m) => {
      const unknown = m.$unknown as unknown[] | undefined;
      if (unknown && unknown.length > 0) fail();
      const out: JsonObject = {};
      for (const part of parts) part(m, out);
      return out;
    };
  }

  /** Writes one field into the JSON object, or undefined when the field's kind is not compiled. */
  function fieldWriter(f: DescField): ((m: Record<string, unknown>, out: JsonObject) => void) | undefined {
    if (f.oneof !== undefined || (f.presence !== IMPLICIT && f.presence !== EXPLICIT)) return undefined;
    const key = f.jsonName;
    const name = f.localName;
    switch (f.fieldKind) {
      case "scalar": {
        const s = scalarOf(f.scalar);
        if (!s) return undefined;
        if (f.presence === EXPLICIT) {
          return (m, out) => {
            const v = m[name];
            if (v !== undefined) out[key] = s.json(v);
          };
        }
        // Implicit presence: the zero value is written too (alwaysEmitImplicit).
        return (m, out) => void (out[key] = s.json(m[name]));
      }
      case "enum": {
        if (f.enum.typeName === "google.protobuf.NullValue") return undefined;
        const names = new Map(f.enum.values.map((v) => [v.number, v.name]));
        const json = (v: unknown) => (typeof v === "number" ? (names.get(v) ?? fail()) : fail());
        if (f.presence === EXPLICIT) {
          return (m, out) => {
            const v = m[name];
            if (v !== undefined) out[key] = json(v);
          };
        }
        return (m, out) => void (out[key] = json(m[name]));
      }
      case "message": {
        const child = f.message;
        return (m, out) => {
          const v = m[name];
          if (v !== undefined) out[key] = writerOf(child)(v as Record<string, unknown>);
        };
      }
      case "list": {
        let item: (v: unknown) => JsonValue;
        if (f.listKind === "scalar") {
          const s = scalarOf(f.scalar);
          if (!s) return undefined;
          item = s.json;
        } else if (f.listKind === "enum") {
          if (f.enum.typeName === "google.protobuf.NullValue") return undefined;
          const names = new Map(f.enum.values.map((v) => [v.number, v.name]));
          item = (v) => (typeof v === "number" ? (names.get(v) ?? fail()) : fail());
        } else {
          const child = f.message;
          item = (v) => writerOf(child)(v as Record<string, unknown>);
        }
        // Lists have implicit presence: an empty one is written as [] (alwaysEmitImplicit).
        return (m, out) => {
          const v = m[name];
          if (!Array.isArray(v)) fail();
          out[key] = v.map(item);
        };
      }
      default:
        return undefined;
    }
  }

  return (desc, message) => {
    try {
      return writerOf(desc)(message as unknown as Record<string, unknown>);
    } catch (err) {
      if (err === unexpected) return toJson(desc, message, options);
      throw err;
    }
  };
}
