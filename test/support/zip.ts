// Zip archives for test fixtures (wheels, OSV exports). No zip writer is among the project's dependencies
// (yauzl only reads), so tests build the few bytes they need here: local headers, deflated (or stored) data,
// the central directory and its end record. `declaredSize` lets a test lie about an entry's uncompressed size,
// as a hostile archive would.
import { crc32, deflateRawSync } from "node:zlib";

export interface ZipFileSpec {
  content: string | Buffer;
  /** Store without compression. */
  stored?: boolean;
  /** The uncompressed size written in the headers (default: the real one). */
  declaredSize?: number;
}

/** A zip of the given files (name -> content or spec), deflated unless a spec says stored. */
export function zip(files: Record<string, string | Buffer | ZipFileSpec>): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  const names = Object.keys(files);
  for (const name of names) {
    const given = files[name]!;
    const spec: ZipFileSpec = typeof given === "string" || Buffer.isBuffer(given) ? { content: given } : given;
    const data = Buffer.from(spec.content);
    const method = spec.stored ? 0 : 8;
    const packed = spec.stored ? data : deflateRawSync(data);
    const size = spec.declaredSize ?? data.length;
    const n = Buffer.from(name);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(method, 8);
    local.writeUInt32LE(crc32(data), 14);
    local.writeUInt32LE(packed.length, 18);
    local.writeUInt32LE(size, 22);
    local.writeUInt16LE(n.length, 26);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(method, 10);
    central.writeUInt32LE(crc32(data), 16);
    central.writeUInt32LE(packed.length, 20);
    central.writeUInt32LE(size, 24);
    central.writeUInt16LE(n.length, 28);
    central.writeUInt32LE(offset, 42);
    locals.push(local, n, packed);
    centrals.push(central, n);
    offset += 30 + n.length + packed.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(names.length, 8);
  end.writeUInt16LE(names.length, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, end]);
}
