// Canonical forms of list filters, and the digests page tokens are bound to.
import { hash } from "node:crypto";
import { uidpCanonical } from "../uidp.js";
import type { UIDPFilter } from "../../../gen/platform/common/v1/uidp.platform_pb.js";

const UIDP_TYPE = "chainguard.platform.common.UIDPFilter";

function isUidpFilter(value: object): value is UIDPFilter {
  return (value as { $typeName?: unknown }).$typeName === UIDP_TYPE;
}

/**
 * A deterministic JSON text for a filter value: object keys sorted, undefined members dropped, bigint as
 * "<n>n", bytes as base64, dates as ISO text, and a UIDPFilter message in its canonical form (so ids in a
 * different order, or an absent versus an empty filter, bind the same). Arrays keep their order.
 */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(normalize(value));
}

function normalize(value: unknown): unknown {
  switch (typeof value) {
    case "undefined":
      return null;
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) ? value : String(value);
    case "bigint":
      return `${value}n`;
    case "object": {
      if (value === null) return null;
      if (Array.isArray(value)) return value.map(normalize);
      if (value instanceof Uint8Array) return { $bytes: Buffer.from(value).toString("base64") };
      if (value instanceof Date) return { $date: value.toISOString() };
      if (value instanceof Set) return { $set: [...value].map((v) => canonicalJson(v)).sort() };
      if (isUidpFilter(value)) return { $uidp: uidpCanonical(value) };
      const out: Record<string, unknown> = {};
      for (const key of Object.keys(value).sort()) {
        const v = (value as Record<string, unknown>)[key];
        if (v !== undefined) out[key] = normalize(v);
      }
      return out;
    }
    default:
      throw new TypeError(`cannot canonicalize a ${typeof value} in list filters`);
  }
}

/** A short digest (16 bytes of SHA-256, base64url) of the given parts. */
export function digestOf(...parts: string[]): string {
  // crypto.hash: one call, no Hash object (a third of createHash's time for inputs this small); hex, as a
  // Buffer's subarray costs more than decoding half the hex.
  return Buffer.from(hash("sha256", JSON.stringify(parts)).slice(0, 32), "hex").toString("base64url");
}
