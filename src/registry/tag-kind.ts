// What a tag name and a digest must look like, and what a tag name says about the tag.
import { TagKind } from "../db/schema/index.js";

/** sha256:<64 lowercase hex>. */
const DIGEST_PATTERN = /^sha256:[0-9a-f]{64}$/;

/** The OCI distribution spec's tag grammar: a letter, digit or _, then up to 127 letters, digits, _, . or -. */
export const TAG_NAME_PATTERN = /^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/;

export function isValidDigest(digest: string): boolean {
  return DIGEST_PATTERN.test(digest);
}

const REFERRER = /^sha256-[0-9a-f]{64}(\.[A-Za-z0-9_.-]+)?$/; // cosign-style: sha256-<hex>.sig / .att / .sbom
const DATE = /-20\d\d(0[1-9]|1[0-2])(0[1-9]|[12]\d|3[01])$/; // ...-20yymmdd
const EPOCH = /-r\d+$/; // ...-r<N>

/** The kind of a tag from its name: referrer tags, date tags and epoch tags are hidden by default in lists. */
export function tagKindOf(name: string): number {
  if (REFERRER.test(name)) return TagKind.referrer;
  if (DATE.test(name)) return TagKind.date;
  if (EPOCH.test(name)) return TagKind.epoch;
  return TagKind.regular;
}
