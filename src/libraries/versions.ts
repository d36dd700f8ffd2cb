// The ecosystems' own version orderings: Maven's ComparableVersion and PEP 440. No maintained npm package
// implements ComparableVersion, and PEP 440's rules are short: both are implemented here, after the published
// algorithms, and unit-tested on their published examples (test/unit/library-versions.test.ts).

// ---- Maven ComparableVersion (maven-artifact 3.x) ----

type MavenItem = { kind: "int"; value: bigint } | { kind: "string"; value: string } | { kind: "list"; items: MavenItem[] };

const QUALIFIERS = ["alpha", "beta", "milestone", "rc", "snapshot", "", "sp"];
const ALIASES: Readonly<Record<string, string>> = { ga: "", final: "", release: "", cr: "rc" };
const RELEASE_INDEX = String(QUALIFIERS.indexOf(""));

function stringItem(value: string, followedByDigit: boolean): MavenItem {
  let v = value;
  if (followedByDigit && v.length === 1) {
    v = v === "a" ? "alpha" : v === "b" ? "beta" : v === "m" ? "milestone" : v;
  }
  return { kind: "string", value: ALIASES[v] ?? v };
}

function comparableQualifier(q: string): string {
  const i = QUALIFIERS.indexOf(q);
  return i === -1 ? `${QUALIFIERS.length}-${q}` : String(i);
}

function cmpStr(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function isNullItem(item: MavenItem): boolean {
  if (item.kind === "int") return item.value === 0n;
  if (item.kind === "string") return item.value === "";
  return item.items.length === 0;
}

/** Compares an item with another, or with nothing (null): ComparableVersion's Item.compareTo. */
function compareItem(a: MavenItem, b: MavenItem | null): number {
  switch (a.kind) {
    case "int":
      if (b === null) return a.value === 0n ? 0 : 1;
      if (b.kind === "int") return a.value < b.value ? -1 : a.value > b.value ? 1 : 0;
      return 1;
    case "string":
      if (b === null) return cmpStr(comparableQualifier(a.value), RELEASE_INDEX);
      if (b.kind === "int" || b.kind === "list") return -1;
      return cmpStr(comparableQualifier(a.value), comparableQualifier(b.value));
    case "list": {
      if (b === null) return a.items.length === 0 ? 0 : compareItem(a.items[0]!, null);
      if (b.kind === "int") return -1;
      if (b.kind === "string") return 1;
      const n = Math.max(a.items.length, b.items.length);
      for (let i = 0; i < n; i++) {
        const l = a.items[i] ?? null;
        const r = b.items[i] ?? null;
        const result = l === null ? (r === null ? 0 : -compareItem(r, l)) : compareItem(l, r);
        if (result !== 0) return result;
      }
      return 0;
    }
  }
}

function normalize(list: MavenItem[]): void {
  for (let i = list.length - 1; i >= 0; i--) {
    const last = list[i]!;
    if (isNullItem(last)) list.splice(i, 1);
    else if (last.kind !== "list") break;
  }
}

/** Parses a version as ComparableVersion.parseVersion does. */
function parseMavenVersion(version: string): MavenItem {
  const v = version.toLowerCase();
  const root: MavenItem[] = [];
  let list = root;
  const stack: MavenItem[][] = [root];
  let isDigit = false;
  let start = 0;
  const parseItem = (digit: boolean, buf: string): MavenItem => (digit ? { kind: "int", value: BigInt(buf) } : stringItem(buf, false));
  const sublist = () => {
    const next: MavenItem[] = [];
    list.push({ kind: "list", items: next });
    list = next;
    stack.push(next);
  };
  for (let i = 0; i < v.length; i++) {
    const c = v[i]!;
    if (c === ".") {
      list.push(i === start ? { kind: "int", value: 0n } : parseItem(isDigit, v.slice(start, i)));
      start = i + 1;
    } else if (c === "-") {
      list.push(i === start ? { kind: "int", value: 0n } : parseItem(isDigit, v.slice(start, i)));
      start = i + 1;
      sublist();
    } else if (c >= "0" && c <= "9") {
      if (!isDigit && i > start) {
        list.push(stringItem(v.slice(start, i), true));
        start = i;
        sublist();
      }
      isDigit = true;
    } else {
      if (isDigit && i > start) {
        list.push(parseItem(true, v.slice(start, i)));
        start = i;
        sublist();
      }
      isDigit = false;
    }
  }
  if (v.length > start) {
    // 1.0.0.X1 < 1.0.0-X2: a string qualifier after "." is treated as after "-".
    if (!isDigit && list.length > 0) sublist();
    list.push(parseItem(isDigit, v.slice(start)));
  }
  while (stack.length > 0) normalize(stack.pop()!);
  return { kind: "list", items: root };
}

export function compareMavenVersions(a: string, b: string): number {
  return compareItem(parseMavenVersion(a), parseMavenVersion(b));
}

// ---- PEP 440 ----

const PEP440 =
  /^\s*v?(?:(?:(?<epoch>[0-9]+)!)?(?<release>[0-9]+(?:\.[0-9]+)*)(?<pre>[-_.]?(?<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?<pre_n>[0-9]+)?)?(?<post>(?:-(?<post_n1>[0-9]+))|(?:[-_.]?(?<post_l>post|rev|r)[-_.]?(?<post_n2>[0-9]+)?))?(?<dev>[-_.]?(?<dev_l>dev)[-_.]?(?<dev_n>[0-9]+)?)?)(?:\+(?<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$/i;

interface Pep440Key {
  epoch: bigint;
  release: bigint[];
  /** [-1] before any pre-release (a dev release of the final), [1] after (no pre-release), else [0, rank, n]. */
  pre: [number, number?, bigint?];
  post: bigint | null;
  dev: bigint | null;
  local: (bigint | string)[] | null;
}

/** The sort key of a PEP 440 version, or null when the string is not one. */
function pep440Key(version: string): Pep440Key | null {
  const m = PEP440.exec(version);
  if (!m?.groups) return null;
  const g = m.groups;
  const release = g.release!.split(".").map((p) => BigInt(p));
  while (release.length > 1 && release[release.length - 1] === 0n) release.pop();
  const preLetter = g.pre_l?.toLowerCase();
  const preRank = preLetter === undefined ? -1 : preLetter.startsWith("a") ? 0 : preLetter === "b" || preLetter === "beta" ? 1 : 2;
  const post = g.post === undefined ? null : BigInt(g.post_n1 ?? g.post_n2 ?? "0");
  const dev = g.dev === undefined ? null : BigInt(g.dev_n ?? "0");
  let pre: Pep440Key["pre"];
  if (preRank >= 0) pre = [0, preRank, BigInt(g.pre_n ?? "0")];
  else if (post === null && dev !== null) pre = [-1];
  else pre = [1];
  const local = g.local === undefined ? null : g.local.toLowerCase().split(/[-_.]/).map((p) => (/^[0-9]+$/.test(p) ? BigInt(p) : p));
  return { epoch: BigInt(g.epoch ?? "0"), release, pre, post, dev, local };
}

function cmpBig(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function comparePep440Keys(a: Pep440Key, b: Pep440Key): number {
  let c = cmpBig(a.epoch, b.epoch);
  if (c) return c;
  for (let i = 0; i < Math.max(a.release.length, b.release.length); i++) {
    c = cmpBig(a.release[i] ?? 0n, b.release[i] ?? 0n);
    if (c) return c;
  }
  c = a.pre[0] - b.pre[0] || (a.pre[1] ?? 0) - (b.pre[1] ?? 0) || cmpBig(a.pre[2] ?? 0n, b.pre[2] ?? 0n);
  if (c) return Math.sign(c);
  // No post-release sorts before any; no dev release sorts after any.
  if (a.post !== b.post) {
    if (a.post === null) return -1;
    if (b.post === null) return 1;
    c = cmpBig(a.post, b.post);
    if (c) return c;
  }
  if (a.dev !== b.dev) {
    if (a.dev === null) return 1;
    if (b.dev === null) return -1;
    c = cmpBig(a.dev, b.dev);
    if (c) return c;
  }
  if (a.local === null || b.local === null) return a.local === b.local ? 0 : a.local === null ? -1 : 1;
  for (let i = 0; i < Math.max(a.local.length, b.local.length); i++) {
    const l = a.local[i];
    const r = b.local[i];
    if (l === undefined) return -1;
    if (r === undefined) return 1;
    // Numeric segments sort after alphanumeric ones.
    if (typeof l !== typeof r) return typeof l === "bigint" ? 1 : -1;
    c = typeof l === "bigint" ? cmpBig(l, r as bigint) : cmpStr(l, r as string);
    if (c) return c;
  }
  return 0;
}

/** PEP 440 order; strings that are not PEP 440 versions sort before every version, among themselves by text. */
export function comparePep440Versions(a: string, b: string): number {
  const ka = pep440Key(a);
  const kb = pep440Key(b);
  if (ka && kb) return comparePep440Keys(ka, kb);
  if (!ka && !kb) return cmpStr(a, b);
  return ka ? 1 : -1;
}
