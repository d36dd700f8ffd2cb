// Protobuf binary encoding compiled once per message type, for the gRPC unary path's responses. protobuf-es's
// toBinary writes through its BinaryWriter, which grows a list of chunks, forks and joins one per nested
// message and encodes every string on its own: about 0.3 ms for a page of 50 tags. Here a first pass sizes
// the message (noting, in order, each nested message's size and each string's byte length), then one buffer
// of exactly that size is filled: about 0.08 ms for the same page, and the gRPC envelope's five bytes are
// reserved in front of it, so the frame needs no copy. The bytes are exactly toBinary's (fields by number,
// packed repeated scalars, explicit presence honoured), as test/unit/binary.test.ts checks.
//
// Compiled: strings, bytes, bools, int32/uint32/int64/uint64, enums, lists of those and of messages, oneofs
// of them, maps with string keys, and messages of the same kinds (Timestamp among them); 50 advisories with
// their events (oneofs) 1.35 -> 0.27 ms. Any other message type (other map keys, floats, zigzag and fixed
// integers, proto2 required or group fields), and any value a compiled encoder does not expect (a wrong type, an out-of-range integer, unknown
// fields), sends the whole message through toBinary, which encodes or throws exactly as before.
import { ScalarType, toBinary, type DescField, type DescMessage, type Message } from "@bufbuild/protobuf";
import { Buffer } from "node:buffer";

type Rec = Record<string, unknown>;

interface Out {
  buf: Buffer;
  pos: number;
  /** The next entry of `sizes` to read (the write pass reads them in the order the size pass noted them). */
  next: number;
  sizes: number[];
}

interface Encoder {
  /** The message's encoded size; notes nested sizes and string lengths in `sizes`, in writing order. */
  size(m: Rec, sizes: number[]): number;
  write(m: Rec, out: Out): void;
}

class Unexpected extends Error {}
const unexpected = new Unexpected("value not handled by the compiled binary encoder");
function fail(): never {
  throw unexpected;
}

const IMPLICIT = 2; // google.protobuf.FeatureSet.FieldPresence.IMPLICIT
const EXPLICIT = 1;
const VARINT = 0;
const LENGTH_DELIMITED = 2;
const TWO_63 = 1n << 63n;
const TWO_64 = 1n << 64n;

function varintSize(n: number): number {
  return n < 0x80 ? 1 : n < 0x4000 ? 2 : n < 0x200000 ? 3 : n < 0x10000000 ? 4 : 5;
}

function writeVarint(out: Out, n: number): void {
  const buf = out.buf;
  while (n >= 0x80) {
    buf[out.pos++] = (n & 0x7f) | 0x80;
    n >>>= 7;
  }
  buf[out.pos++] = n;
}

const TWO_53 = 2n ** 53n;

/** The varint size of a non-negative integer below 2^53. */
function varint53Size(n: number): number {
  let size = 1;
  while (n >= 0x80) {
    n = Math.floor(n / 128);
    size++;
  }
  return size;
}

/** Writes a non-negative integer below 2^53 as a varint. */
function writeVarint53(out: Out, n: number): void {
  const buf = out.buf;
  while (n >= 0x80) {
    buf[out.pos++] = (n % 128) | 0x80;
    n = Math.floor(n / 128);
  }
  buf[out.pos++] = n;
}

function varint64Size(v: bigint): number {
  // Below 2^53 (timestamps' seconds, totals): number arithmetic, BigInt's is several times slower.
  if (v < TWO_53) return varint53Size(Number(v));
  let size = 1;
  while (v >= 0x80n) {
    v >>= 7n;
    size++;
  }
  return size;
}

function writeVarint64(out: Out, v: bigint): void {
  const buf = out.buf;
  if (v < TWO_53) return writeVarint53(out, Number(v));
  while (v >= 0x80n) {
    buf[out.pos++] = Number(v & 0x7fn) | 0x80;
    v >>= 7n;
  }
  buf[out.pos++] = Number(v);
}

/** A scalar's wire encoding: its size, its write, and whether a value is the type's zero (implicit presence). */
interface ScalarCodec {
  size(v: unknown): number;
  write(out: Out, v: unknown): void;
  isZero(v: unknown): boolean;
  /** Strings and bytes: length-delimited, their byte length noted in `sizes` by the size pass. */
  delimited?: true;
}

const int32Codec: ScalarCodec = {
  size: (v) => {
    if (typeof v !== "number" || !Number.isInteger(v) || v < -0x80000000 || v > 0x7fffffff) fail();
    return v < 0 ? 10 : varintSize(v);
  },
  write: (out, v) => {
    const n = v as number;
    if (n >= 0) writeVarint(out, n);
    else writeVarint64(out, BigInt.asUintN(64, BigInt(n))); // negative int32: sign-extended, ten bytes
  },
  isZero: (v) => v === 0,
};

const uint32Codec: ScalarCodec = {
  size: (v) => {
    if (typeof v !== "number" || !Number.isInteger(v) || v < 0 || v > 0xffffffff) fail();
    return varintSize(v);
  },
  write: (out, v) => {
    const n = v as number;
    if (n < 0x80000000) writeVarint(out, n);
    else writeVarint64(out, BigInt(n));
  },
  isZero: (v) => v === 0,
};

/** A 64-bit value as protobuf-es holds it (bigint, or a safe integer), unsigned as it goes on the wire. */
function wire64(v: unknown, signed: boolean): bigint {
  let b: bigint;
  if (typeof v === "bigint") b = v;
  else if (typeof v === "number" && Number.isSafeInteger(v)) b = BigInt(v);
  else fail();
  if (signed ? b < -TWO_63 || b >= TWO_63 : b < 0n || b >= TWO_64) fail();
  return BigInt.asUintN(64, b);
}

const int64Codec = (signed: boolean): ScalarCodec => ({
  size: (v) => varint64Size(wire64(v, signed)),
  write: (out, v) => writeVarint64(out, wire64(v, signed)),
  isZero: (v) => v == 0, // 0n or 0, as protobuf-es's zero check
});

const boolCodec: ScalarCodec = {
  size: (v) => (typeof v === "boolean" ? 1 : fail()),
  write: (out, v) => void (out.buf[out.pos++] = v ? 1 : 0),
  isZero: (v) => v === false,
};

const stringCodec: ScalarCodec = {
  size: (v) => (typeof v === "string" ? Buffer.byteLength(v) : fail()),
  write: (out, v) => void (out.pos += out.buf.write(v as string, out.pos, "utf8")),
  isZero: (v) => v === "",
  delimited: true,
};

const bytesCodec: ScalarCodec = {
  size: (v) => (v instanceof Uint8Array ? v.byteLength : fail()),
  write: (out, v) => {
    out.buf.set(v as Uint8Array, out.pos);
    out.pos += (v as Uint8Array).byteLength;
  },
  isZero: (v) => v instanceof Uint8Array && v.byteLength === 0,
  delimited: true,
};

function scalarCodec(type: ScalarType): ScalarCodec | undefined {
  switch (type) {
    case ScalarType.STRING:
      return stringCodec;
    case ScalarType.BYTES:
      return bytesCodec;
    case ScalarType.BOOL:
      return boolCodec;
    case ScalarType.INT32:
      return int32Codec;
    case ScalarType.UINT32:
      return uint32Codec;
    case ScalarType.INT64:
      return int64Codec(true);
    case ScalarType.UINT64:
      return int64Codec(false);
    default:
      return undefined;
  }
}

/** A field's tag (number and wire type) as the bytes written before its value. */
function tagBytes(number: number, wireType: number): number[] {
  let t = (number << 3) | wireType;
  const bytes: number[] = [];
  while (t >= 0x80) {
    bytes.push((t & 0x7f) | 0x80);
    t >>>= 7;
  }
  bytes.push(t);
  return bytes;
}

function writeTag(out: Out, tag: readonly number[]): void {
  for (const b of tag) out.buf[out.pos++] = b;
}

interface BinaryEncoder {
  /** The message's bytes, after `reserve` bytes left for the caller (a gRPC envelope's five). */
  encode(desc: DescMessage, message: Message, reserve?: number): Buffer;
  /** Whether messages of this type are encoded by a compiled encoder (else always by toBinary). */
  compiles(desc: DescMessage): boolean;
}

export function createBinaryEncoder(): BinaryEncoder {
  const encoders = new Map<string, Encoder | null>();

  /** The encoder of a message type (null: not compiled), compiled on first use; recursive types resolve lazily. */
  function encoderOf(desc: DescMessage): Encoder | null {
    const known = encoders.get(desc.typeName);
    if (known !== undefined) return known;
    const lazy: Encoder = {
      size: (m, sizes) => (encoders.get(desc.typeName) ?? fail()).size(m, sizes),
      write: (m, out) => (encoders.get(desc.typeName) ?? fail()).write(m, out),
    };
    encoders.set(desc.typeName, lazy);
    const compiled = compile(desc);
    encoders.set(desc.typeName, compiled);
    return compiled;
  }

  function compile(desc: DescMessage): Encoder | null {
    const fields = [...desc.fields].sort((a, b) => a.number - b.number);
    // Types without maps (the list pages, most resources, advisories with their oneofs): generated source.
    if (fields.every((f) => f.fieldKind !== "map")) return generate(desc, fields);
    const parts: Encoder[] = [];
    for (const f of fields) {
      const part = fieldEncoder(f);
      if (!part) return null;
      parts.push(part);
    }
    return {
      size(m, sizes) {
        const unknown = m.$unknown as unknown[] | undefined;
        if (unknown && unknown.length > 0) fail();
        let n = 0;
        for (const p of parts) n += p.size(m, sizes);
        return n;
      },
      write(m, out) {
        for (const p of parts) p.write(m, out);
      },
    };
  }

  /**
   * A message type's encoder as generated JavaScript (as the REST gateway's JSON writer is generated): each
   * field read by its own name (monomorphic property loads, where the closures below share one megamorphic
   * `m[name]`), tag bytes written as constants, strings and bools inline, the other scalars through their
   * codecs. The same two passes and `sizes` protocol as the closures, so the two kinds nest in each other.
   * Only JSON.stringify'd names and numbers go into the source; values and functions come in as `d[i]`.
   * Null when a field's kind is not compiled (as compile). Maps stay with the closures.
   */
  function generate(desc: DescMessage, fields: readonly DescField[]): Encoder | null {
    const deps: unknown[] = [];
    const dep = (value: unknown) => `d[${deps.push(value) - 1}]`;
    const size: string[] = [];
    const write: string[] = [];
    const writeTagSource = (tag: readonly number[]) => tag.map((b) => `buf[out.pos++] = ${b};`).join(" ");
    for (const f of fields) {
      if (f.presence !== IMPLICIT && f.presence !== EXPLICIT) return null;
      // A oneof member is held as `m[<oneof>] = { case: <member>, value }`: present when its case is chosen.
      const read =
        f.oneof === undefined
          ? `v = m[${JSON.stringify(f.localName)}];`
          : `v = m[${JSON.stringify(f.oneof.localName)}]; if (v === undefined || v === null || typeof v !== "object") fail(); v = v.case === ${JSON.stringify(f.localName)} ? v.value : undefined;`;
      const explicit = f.presence === EXPLICIT || f.oneof !== undefined;
      switch (f.fieldKind) {
        case "scalar":
        case "enum": {
          const codec = f.fieldKind === "enum" ? int32Codec : scalarCodec(f.scalar);
          if (!codec) return null;
          const tag = tagBytes(f.number, codec.delimited ? LENGTH_DELIMITED : VARINT);
          if (codec === stringCodec) {
            const absent = explicit ? "v === undefined" : `v === ""`;
            size.push(`${read} if (!(${absent})) { if (typeof v !== "string") fail(); len = Buffer.byteLength(v); sizes.push(len); n += ${tag.length} + varintSize(len) + len; }`);
            write.push(`${read} if (!(${absent})) { ${writeTagSource(tag)} writeVarint(out, out.sizes[out.next++]); out.pos += buf.write(v, out.pos, "utf8"); }`);
          } else if (codec === boolCodec) {
            const absent = explicit ? "v === undefined" : "v === false";
            size.push(`${read} if (!(${absent})) { if (typeof v !== "boolean") fail(); n += ${tag.length + 1}; }`);
            write.push(`${read} if (!(${absent})) { ${writeTagSource(tag)} buf[out.pos++] = v ? 1 : 0; }`);
          } else if (f.fieldKind === "scalar" && (f.scalar === ScalarType.INT64 || f.scalar === ScalarType.UINT64)) {
            // A bigint in [0, 2^53) (timestamps' seconds, totals) in number arithmetic; any other through the codec.
            const c = dep(codec);
            const absent = explicit ? "v === undefined" : "v == 0";
            const small = "typeof v === \"bigint\" && v >= 0n && v < TWO_53";
            size.push(`${read} if (!(${absent})) n += ${tag.length} + (${small} ? varint53Size(Number(v)) : ${c}.size(v));`);
            write.push(`${read} if (!(${absent})) { ${writeTagSource(tag)} if (${small}) writeVarint53(out, Number(v)); else ${c}.write(out, v); }`);
          } else {
            const c = dep(codec);
            const absent = explicit ? "v === undefined" : `${c}.isZero(v)`;
            if (codec.delimited) {
              size.push(`${read} if (!(${absent})) { len = ${c}.size(v); sizes.push(len); n += ${tag.length} + varintSize(len) + len; }`);
              write.push(`${read} if (!(${absent})) { ${writeTagSource(tag)} writeVarint(out, out.sizes[out.next++]); ${c}.write(out, v); }`);
            } else {
              size.push(`${read} if (!(${absent})) n += ${tag.length} + ${c}.size(v);`);
              write.push(`${read} if (!(${absent})) { ${writeTagSource(tag)} ${c}.write(out, v); }`);
            }
          }
          break;
        }
        case "message": {
          if (f.delimitedEncoding) return null;
          const child = encoderOf(f.message);
          if (!child) return null;
          const e = dep(child);
          const tag = tagBytes(f.number, LENGTH_DELIMITED);
          size.push(`${read} if (v !== undefined) n += sizeNested(${e}, v, sizes, ${tag.length});`);
          write.push(`${read} if (v !== undefined) { ${writeTagSource(tag)} writeVarint(out, out.sizes[out.next++]); ${e}.write(v, out); }`);
          break;
        }
        case "list": {
          const delimited = f.listKind === "message" || f.packed || (f.listKind === "scalar" && (f.scalar === ScalarType.STRING || f.scalar === ScalarType.BYTES));
          const tag = tagBytes(f.number, delimited ? LENGTH_DELIMITED : VARINT);
          const list = `${read} if (!Array.isArray(v)) fail();`;
          if (f.listKind === "message") {
            if (f.delimitedEncoding) return null;
            const child = encoderOf(f.message);
            if (!child) return null;
            const e = dep(child);
            size.push(`${list} for (let i = 0; i < v.length; i++) n += sizeNested(${e}, v[i], sizes, ${tag.length});`);
            write.push(`${read} for (let i = 0; i < v.length; i++) { ${writeTagSource(tag)} writeVarint(out, out.sizes[out.next++]); ${e}.write(v[i], out); }`);
            break;
          }
          const codec = f.listKind === "enum" ? int32Codec : scalarCodec(f.scalar);
          if (!codec) return null;
          const c = dep(codec);
          if (codec.delimited) {
            size.push(`${list} for (let i = 0; i < v.length; i++) { len = ${c}.size(v[i]); sizes.push(len); n += ${tag.length} + varintSize(len) + len; }`);
            write.push(`${read} for (let i = 0; i < v.length; i++) { ${writeTagSource(tag)} writeVarint(out, out.sizes[out.next++]); ${c}.write(out, v[i]); }`);
          } else if (f.packed) {
            size.push(`${list} if (v.length > 0) { len = 0; for (let i = 0; i < v.length; i++) len += ${c}.size(v[i]); sizes.push(len); n += ${tag.length} + varintSize(len) + len; }`);
            write.push(`${read} if (v.length > 0) { ${writeTagSource(tag)} writeVarint(out, out.sizes[out.next++]); for (let i = 0; i < v.length; i++) ${c}.write(out, v[i]); }`);
          } else {
            size.push(`${list} for (let i = 0; i < v.length; i++) n += ${tag.length} + ${c}.size(v[i]);`);
            write.push(`${read} for (let i = 0; i < v.length; i++) { ${writeTagSource(tag)} ${c}.write(out, v[i]); }`);
          }
          break;
        }
        default:
          return null;
      }
    }
    const source = [
      "return {",
      "  size(m, sizes) {",
      "    const u = m.$unknown; if (u !== undefined && u.length > 0) fail();",
      "    let n = 0, v, len;",
      ...size.map((l) => "    " + l),
      "    return n;",
      "  },",
      "  write(m, out) {",
      "    const buf = out.buf; let v;",
      ...write.map((l) => "    " + l),
      "  },",
      "};",
    ].join("\n");
    return new Function("d", "fail", "varintSize", "writeVarint", "varint53Size", "writeVarint53", "TWO_53", "sizeNested", "Buffer", source)(
      deps,
      fail,
      varintSize,
      writeVarint,
      varint53Size,
      writeVarint53,
      TWO_53,
      sizeNested,
      Buffer,
    ) as Encoder;
  }

  /** Sizes a nested message, noting its size before its contents' notes. */
  function sizeNested(child: Encoder, v: unknown, sizes: number[], tagLength: number): number {
    if (typeof v !== "object" || v === null) fail();
    const slot = sizes.length;
    sizes.push(0);
    const s = child.size(v as Rec, sizes);
    sizes[slot] = s;
    return tagLength + varintSize(s) + s;
  }

  function writeNested(child: Encoder, v: unknown, out: Out, tag: readonly number[]): void {
    writeTag(out, tag);
    writeVarint(out, out.sizes[out.next++]!);
    child.write(v as Rec, out);
  }

  function fieldEncoder(f: DescField): Encoder | undefined {
    if (f.presence !== IMPLICIT && f.presence !== EXPLICIT) return undefined;
    // A oneof member is held as `m[<oneof>] = { case: <member>, value }`: present when its case is chosen.
    const name = f.localName;
    const oneof = f.oneof?.localName;
    const get: (m: Rec) => unknown =
      oneof === undefined
        ? (m) => m[name]
        : (m) => {
            const o = m[oneof] as { case?: unknown; value?: unknown } | undefined;
            if (o === undefined || o === null || typeof o !== "object") fail();
            return o.case === name ? o.value : undefined;
          };
    switch (f.fieldKind) {
      case "scalar":
      case "enum": {
        const codec = f.fieldKind === "enum" ? int32Codec : scalarCodec(f.scalar);
        if (!codec) return undefined;
        const tag = tagBytes(f.number, codec.delimited ? LENGTH_DELIMITED : VARINT);
        const explicit = f.presence === EXPLICIT || oneof !== undefined;
        const absent = (v: unknown) => (explicit ? v === undefined : codec.isZero(v));
        if (codec.delimited) {
          return {
            size(m, sizes) {
              const v = get(m);
              if (absent(v)) return 0;
              const n = codec.size(v);
              sizes.push(n);
              return tag.length + varintSize(n) + n;
            },
            write(m, out) {
              const v = get(m);
              if (absent(v)) return;
              writeTag(out, tag);
              writeVarint(out, out.sizes[out.next++]!);
              codec.write(out, v);
            },
          };
        }
        return {
          size(m) {
            const v = get(m);
            return absent(v) ? 0 : tag.length + codec.size(v);
          },
          write(m, out) {
            const v = get(m);
            if (absent(v)) return;
            writeTag(out, tag);
            codec.write(out, v);
          },
        };
      }
      case "message": {
        if (f.delimitedEncoding) return undefined;
        const child = encoderOf(f.message);
        if (!child) return undefined;
        const tag = tagBytes(f.number, LENGTH_DELIMITED);
        return {
          size: (m, sizes) => {
            const v = get(m);
            return v === undefined ? 0 : sizeNested(child, v, sizes, tag.length);
          },
          write: (m, out) => {
            const v = get(m);
            if (v !== undefined) writeNested(child, v, out, tag);
          },
        };
      }
      case "list": {
        // Messages, strings and packed scalars are length-delimited; unpacked scalars repeat their varint tag.
        const delimited = f.listKind === "message" || f.packed || (f.listKind === "scalar" && (f.scalar === ScalarType.STRING || f.scalar === ScalarType.BYTES));
        const tag = tagBytes(f.number, delimited ? LENGTH_DELIMITED : VARINT);
        const list = (m: Rec): unknown[] => {
          const v = m[name];
          return Array.isArray(v) ? v : fail();
        };
        if (f.listKind === "message") {
          if (f.delimitedEncoding) return undefined;
          const child = encoderOf(f.message);
          if (!child) return undefined;
          return {
            size(m, sizes) {
              let n = 0;
              for (const v of list(m)) n += sizeNested(child, v, sizes, tag.length);
              return n;
            },
            write(m, out) {
              for (const v of list(m)) writeNested(child, v, out, tag);
            },
          };
        }
        const codec = f.listKind === "enum" ? int32Codec : scalarCodec(f.scalar);
        if (!codec) return undefined;
        if (codec.delimited) {
          return {
            size(m, sizes) {
              let n = 0;
              for (const v of list(m)) {
                const len = codec.size(v);
                sizes.push(len);
                n += tag.length + varintSize(len) + len;
              }
              return n;
            },
            write(m, out) {
              for (const v of list(m)) {
                writeTag(out, tag);
                writeVarint(out, out.sizes[out.next++]!);
                codec.write(out, v);
              }
            },
          };
        }
        if (f.packed) {
          return {
            size(m, sizes) {
              const items = list(m);
              if (items.length === 0) return 0;
              let payload = 0;
              for (const v of items) payload += codec.size(v);
              sizes.push(payload);
              return tag.length + varintSize(payload) + payload;
            },
            write(m, out) {
              const items = list(m);
              if (items.length === 0) return;
              writeTag(out, tag);
              writeVarint(out, out.sizes[out.next++]!);
              for (const v of items) codec.write(out, v);
            },
          };
        }
        return {
          size(m) {
            let n = 0;
            for (const v of list(m)) n += tag.length + codec.size(v);
            return n;
          },
          write(m, out) {
            for (const v of list(m)) {
              writeTag(out, tag);
              codec.write(out, v);
            }
          },
        };
      }
      case "map": {
        // Entries as toBinary writes them: one length-delimited entry per key (in the object's key order),
        // the key (field 1) and the value (field 2) always written, zero or not. String keys only.
        if (f.mapKey !== ScalarType.STRING) return undefined;
        const tag = tagBytes(f.number, LENGTH_DELIMITED);
        const keyTag = tagBytes(1, LENGTH_DELIMITED);
        const child = f.mapKind === "message" ? encoderOf(f.message) : undefined;
        const codec = f.mapKind === "enum" ? int32Codec : f.mapKind === "scalar" ? scalarCodec(f.scalar) : undefined;
        if (f.mapKind === "message" ? !child : !codec) return undefined;
        const valueTag = tagBytes(2, child || codec!.delimited ? LENGTH_DELIMITED : VARINT);
        const entries = (m: Rec): Rec => {
          const v = m[name];
          return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Rec) : fail();
        };
        return {
          size(m, sizes) {
            const obj = entries(m);
            let total = 0;
            for (const key of Object.keys(obj)) {
              const slot = sizes.length;
              sizes.push(0);
              const keyLength = Buffer.byteLength(key);
              sizes.push(keyLength);
              let n = keyTag.length + varintSize(keyLength) + keyLength;
              const v = obj[key];
              if (child) n += sizeNested(child, v, sizes, valueTag.length);
              else if (codec!.delimited) {
                const length = codec!.size(v);
                sizes.push(length);
                n += valueTag.length + varintSize(length) + length;
              } else n += valueTag.length + codec!.size(v);
              sizes[slot] = n;
              total += tag.length + varintSize(n) + n;
            }
            return total;
          },
          write(m, out) {
            const obj = entries(m);
            for (const key of Object.keys(obj)) {
              writeTag(out, tag);
              writeVarint(out, out.sizes[out.next++]!);
              writeTag(out, keyTag);
              writeVarint(out, out.sizes[out.next++]!);
              out.pos += out.buf.write(key, out.pos, "utf8");
              const v = obj[key];
              if (child) writeNested(child, v, out, valueTag);
              else {
                writeTag(out, valueTag);
                if (codec!.delimited) writeVarint(out, out.sizes[out.next++]!);
                codec!.write(out, v);
              }
            }
          },
        };
      }
      default:
        return undefined;
    }
  }

  return {
    compiles: (desc) => encoderOf(desc) !== null,
    encode(desc, message, reserve = 0) {
      const encoder = encoderOf(desc);
      if (encoder) {
        try {
          const sizes: number[] = [];
          const size = encoder.size(message as unknown as Rec, sizes);
          const out: Out = { buf: Buffer.allocUnsafe(reserve + size), pos: reserve, next: 0, sizes };
          encoder.write(message as unknown as Rec, out);
          if (out.pos !== reserve + size) throw new Error(`compiled binary encoder: wrote ${out.pos - reserve} bytes of ${size} for ${desc.typeName}`);
          return out.buf;
        } catch (err) {
          if (err !== unexpected) throw err;
        }
      }
      const bytes = toBinary(desc, message);
      const buf = Buffer.allocUnsafe(reserve + bytes.byteLength);
      buf.set(bytes, reserve);
      return buf;
    },
  };
}
