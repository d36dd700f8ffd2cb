// Page tokens: signed, not stored, so any replica can continue any client's walk.
//
// Wire form: base64url( version byte 0x01 | payload JSON | HMAC-SHA256(secret, label | version | payload) ).
// The payload is readable by whoever holds the token (it holds only the sort values of a row the holder
// has already seen, digests, a time and a count); the MAC makes it unforgeable. A token carries:
//   q  digest of (list name, canonical filters, canonical order): the query it continues
//   s  digest of the caller's visibility (scopes): a token carried to another scope recounts its total
//   t  issue time, epoch milliseconds (tokens older than the lifetime restart the query)
//   n  the total count taken on the first page (decimal text), so later pages never recount
//   k  the keyset position: the sort values of the last row returned, one per order term (uid last), as
//      PostgreSQL text (exact: timestamps keep their microseconds)
import { hash, timingSafeEqual } from "node:crypto";
import { invalidArgument } from "../errors/index.js";

interface PageTokenPayload {
  query: string;
  scope: string;
  issuedAt: number;
  total: bigint;
  keys: (string | null)[];
}

const VERSION = 1;
const LABEL = Buffer.from("apiserver.page-token\0");
const MAC_LENGTH = 32;
/** Longer tokens are rejected before any decoding. */
const MAX_PAGE_TOKEN_LENGTH = 8192;
const MIN_SECRET_LENGTH = 16;

const BLOCK = 64; // SHA-256's block size
/** Each secret's HMAC key pads (RFC 2104), made once: a token's MAC is then two one-shot hashes. */
const pads = new WeakMap<Uint8Array, { inner: Buffer; outer: Buffer }>();

function padsOf(secret: Uint8Array): { inner: Buffer; outer: Buffer } {
  let p = pads.get(secret);
  if (!p) {
    const key = secret.length > BLOCK ? hash("sha256", secret, "buffer") : secret;
    const inner = Buffer.alloc(BLOCK, 0x36);
    const outer = Buffer.alloc(BLOCK, 0x5c);
    for (let i = 0; i < key.length; i++) {
      inner[i]! ^= key[i]!;
      outer[i]! ^= key[i]!;
    }
    p = { inner, outer };
    pads.set(secret, p);
  }
  return p;
}

/**
 * HMAC-SHA256(secret, LABEL | body), from `buf` = inner pad (64 bytes, filled here) | LABEL | body: the
 * inner hash is taken over `buf` as it is, so the body is never copied (equal to createHmac's:
 * test/unit/list.test.ts).
 */
function macOver(secret: Uint8Array, buf: Buffer): Buffer {
  const { inner, outer } = padsOf(secret);
  inner.copy(buf, 0);
  const tail = Buffer.allocUnsafe(BLOCK + MAC_LENGTH);
  outer.copy(tail, 0);
  hash("sha256", buf, "buffer").copy(tail, BLOCK);
  return hash("sha256", tail, "buffer");
}

function mac(secret: Uint8Array, body: Uint8Array): Buffer {
  return macOver(secret, Buffer.concat([Buffer.alloc(BLOCK), LABEL, body]));
}

function checkSecret(secret: Uint8Array): void {
  if (secret.length < MIN_SECRET_LENGTH) throw new Error(`page-token secret must be at least ${MIN_SECRET_LENGTH} bytes`);
}

export function encodePageToken(payload: PageTokenPayload, secret: Uint8Array): string {
  checkSecret(secret);
  const json = JSON.stringify({ q: payload.query, s: payload.scope, t: payload.issuedAt, n: payload.total.toString(), k: payload.keys });
  // One buffer: the inner pad and label (hashed, not sent), then the token: version | payload | MAC.
  const start = BLOCK + LABEL.length;
  const length = Buffer.byteLength(json, "utf8");
  const buf = Buffer.allocUnsafe(start + 1 + length + MAC_LENGTH);
  LABEL.copy(buf, BLOCK);
  buf[start] = VERSION;
  buf.write(json, start + 1, "utf8");
  macOver(secret, buf.subarray(0, start + 1 + length)).copy(buf, start + 1 + length);
  return buf.toString("base64url", start);
}

function malformed() {
  return invalidArgument({ field: "page_token", description: "malformed or tampered page token; omit it to start from the first page" });
}

/**
 * Verifies and decodes a token. `secrets` are tried in order (the current one first, then retired ones, so a
 * secret can be rotated without breaking walks in progress). Throws INVALID_ARGUMENT on `page_token` when the
 * token is malformed or its signature does not verify.
 */
export function decodePageToken(token: string, secrets: readonly Uint8Array[]): PageTokenPayload {
  if (token.length > MAX_PAGE_TOKEN_LENGTH || !/^[A-Za-z0-9_-]+$/.test(token)) throw malformed();
  const raw = Buffer.from(token, "base64url");
  if (raw.length < 1 + 2 + MAC_LENGTH) throw malformed();
  const body = raw.subarray(0, raw.length - MAC_LENGTH);
  const sig = raw.subarray(raw.length - MAC_LENGTH);
  if (!secrets.some((secret) => (checkSecret(secret), timingSafeEqual(mac(secret, body), sig)))) throw malformed();
  if (body[0] !== VERSION) throw malformed();
  let parsed: unknown;
  try {
    parsed = JSON.parse(body.subarray(1).toString("utf8"));
  } catch {
    throw malformed();
  }
  const p = parsed as { q?: unknown; s?: unknown; t?: unknown; n?: unknown; k?: unknown };
  if (
    typeof p !== "object" || p === null ||
    typeof p.q !== "string" || typeof p.s !== "string" ||
    typeof p.t !== "number" || !Number.isSafeInteger(p.t) ||
    typeof p.n !== "string" || !/^\d{1,19}$/.test(p.n) ||
    !Array.isArray(p.k) || p.k.length === 0 || !p.k.every((v) => v === null || typeof v === "string")
  ) {
    throw malformed();
  }
  return { query: p.q, scope: p.s, issuedAt: p.t, total: BigInt(p.n), keys: p.k as (string | null)[] };
}
