// Repository names and references as the OCI distribution spec writes them, and how a /v2/ path splits into
// a repository name and what is asked of it.
//
// A name is "<organization>/<repo name>": the organization is a root group, by its uid or, when no other
// root group has the same name, by its name; everything after it is the name of a repo of that root group
// (a repo name may hold slashes: "acme/tools/git" is the repo "tools/git" of organization acme). Repos in
// subgroups are not addressed over /v2/.

/** The spec's name grammar: path components of lowercase letters and digits joined by separators. */
const NAME = /^[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*$/;
/** The longest name accepted (the spec lets registries limit it; Distribution uses 255). */
const MAX_NAME = 255;
const TAG = /^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$/;
const DIGEST = /^[a-z0-9]+(?:[+._-][a-z0-9]+)*:[a-zA-Z0-9=_-]+$/;
const SUPPORTED_DIGEST = /^(?:sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})$/;

/** Whether `name` follows the spec's grammar and has an organization and a repo part. */
export function isValidName(name: string): boolean {
  return name.length <= MAX_NAME && NAME.test(name) && name.includes("/");
}

export function isTag(ref: string): boolean {
  return TAG.test(ref);
}

/** Whether `ref` looks like a digest (any algorithm); whether this server can verify it is supportedDigest. */
export function looksLikeDigest(ref: string): boolean {
  return DIGEST.test(ref);
}

export function isSupportedDigest(digest: string): boolean {
  return SUPPORTED_DIGEST.test(digest);
}

/** The organization and the repo name of a valid name. */
export function splitName(name: string): { organization: string; repo: string } {
  const slash = name.indexOf("/");
  return { organization: name.slice(0, slash), repo: name.slice(slash + 1) };
}

export type V2Path =
  | { kind: "base" }
  | { kind: "manifest"; name: string; reference: string }
  | { kind: "blob"; name: string; digest: string }
  | { kind: "uploads"; name: string }
  | { kind: "upload"; name: string; id: string }
  | { kind: "tags"; name: string }
  | { kind: "referrers"; name: string; digest: string };

const PATTERNS: ReadonlyArray<[RegExp, (m: RegExpMatchArray) => V2Path]> = [
  [/^\/v2\/?$/, () => ({ kind: "base" })],
  [/^\/v2\/(.+)\/manifests\/([^/]+)$/, (m) => ({ kind: "manifest", name: m[1]!, reference: m[2]! })],
  [/^\/v2\/(.+)\/blobs\/uploads\/?$/, (m) => ({ kind: "uploads", name: m[1]! })],
  [/^\/v2\/(.+)\/blobs\/uploads\/([^/]+)$/, (m) => ({ kind: "upload", name: m[1]!, id: m[2]! })],
  [/^\/v2\/(.+)\/blobs\/([^/]+)$/, (m) => ({ kind: "blob", name: m[1]!, digest: m[2]! })],
  [/^\/v2\/(.+)\/tags\/list$/, (m) => ({ kind: "tags", name: m[1]! })],
  [/^\/v2\/(.+)\/referrers\/([^/]+)$/, (m) => ({ kind: "referrers", name: m[1]!, digest: m[2]! })],
];

/** What a /v2/ path asks for, or undefined when it is none of the spec's endpoints. */
export function parseV2Path(path: string): V2Path | undefined {
  for (const [re, make] of PATTERNS) {
    const m = path.match(re);
    if (m) return make(m);
  }
  return undefined;
}
