// Path templates of google.api.http rules: parsing (once, at start-up) and matching (per request, no regular
// expressions). Grammar, as in google/api/http.proto, extended the way common transcoders extend it: a `**`
// may be followed by more segments (`/repos/{uid=**}/readme`), at most one `**` per template.
//
//   Template = "/" Segments [ Verb ] ;  Segments = Segment { "/" Segment } ;
//   Segment  = "*" | "**" | LITERAL | Variable ;  Variable = "{" FieldPath [ "=" Segments ] "}" ;
//   FieldPath = IDENT { "." IDENT } ;  Verb = ":" LITERAL ;
//
// Every variable and wildcard matches non-empty segments: `{uid=**}` needs at least one, so
// `/registry/v2/repos` never matches `/registry/v2/repos/{uid=**}` with an empty uid.

/** One segment of a compiled template. */
type TemplatePart = { kind: "literal"; value: string } | { kind: "wildcard" } | { kind: "deep" };

/** A variable of a template: the request field it sets and the parts it covers. */
interface TemplateVariable {
  /** Field path as written, proto names (`repo.uid` -> ["repo", "uid"]). */
  fieldPath: string[];
  /** First part covered (index into `parts`). */
  start: number;
  /** One past the last part covered. */
  end: number;
  /**
   * True when the value may span several segments. Its segments are joined with "/", and an encoded `%2F`
   * within one is "/" too: OpenAPI-generated clients encode a path parameter's slashes, and the values these
   * variables carry (uids) never contain "%" (google.api.http would keep `%2F` encoded; this server decodes it).
   */
  multi: boolean;
}

export interface PathTemplate {
  source: string;
  parts: TemplatePart[];
  /** The custom verb after the last ":", without the colon. */
  verb: string | undefined;
  variables: TemplateVariable[];
  /** Index of the `**` part, or -1. */
  deepIndex: number;
  /** Literal parts, plus one for a verb: the precedence weight of the template. */
  literalCount: number;
}

/** A request path split once, shared by every template tried against it. */
export interface RequestPath {
  /** Segments as sent (percent-encoded). */
  raw: string[];
  /** Segments percent-decoded. */
  decoded: string[];
}

export class TemplateSyntaxError extends Error {
  constructor(template: string, reason: string) {
    super(`invalid path template ${JSON.stringify(template)}: ${reason}`);
    this.name = "TemplateSyntaxError";
  }
}

export class PathEncodingError extends Error {
  constructor(segment: string) {
    super(`malformed percent-encoding in URL path segment ${JSON.stringify(segment)}`);
    this.name = "PathEncodingError";
  }
}

const identifier = /^[A-Za-z_][A-Za-z0-9_]*$/;
const literalChars = /^[^/{}*:=]+$/;

/** Parses a template such as `/registry/v2/repos/{repo_uid=**}/digests/{digest}/architectures`. */
export function parseTemplate(source: string): PathTemplate {
  const fail = (reason: string): never => {
    throw new TemplateSyntaxError(source, reason);
  };
  if (!source.startsWith("/")) fail("must start with /");
  const { path, verb } = splitVerb(source);
  if (verb !== undefined && !literalChars.test(verb)) fail(`invalid verb ${JSON.stringify(verb)}`);
  const parts: TemplatePart[] = [];
  const variables: TemplateVariable[] = [];
  for (const token of tokenize(path.slice(1), fail)) {
    if (token.startsWith("{")) {
      variables.push(parseVariable(token, parts, fail));
    } else {
      parts.push(parsePart(token, fail));
    }
  }
  const deepParts = parts.filter((p) => p.kind === "deep").length;
  if (deepParts > 1) fail("at most one ** is supported");
  const seen = new Set<string>();
  for (const v of variables) {
    const key = v.fieldPath.join(".");
    if (seen.has(key)) fail(`variable ${key} appears twice`);
    seen.add(key);
  }
  return {
    source,
    parts,
    verb,
    variables,
    deepIndex: parts.findIndex((p) => p.kind === "deep"),
    literalCount: parts.filter((p) => p.kind === "literal").length + (verb === undefined ? 0 : 1),
  };
}

/** Separates a trailing `:verb` (a colon after the last `/` and outside braces). */
function splitVerb(source: string): { path: string; verb: string | undefined } {
  const colon = source.lastIndexOf(":");
  if (colon < 0 || colon < source.lastIndexOf("/") || colon < source.lastIndexOf("}")) return { path: source, verb: undefined };
  return { path: source.slice(0, colon), verb: source.slice(colon + 1) };
}

/** Splits the path (without its leading "/") on "/" outside braces; a variable is one token. */
function tokenize(path: string, fail: (reason: string) => never): string[] {
  const tokens: string[] = [];
  let current = "";
  let depth = 0;
  for (const ch of path) {
    if (ch === "{") {
      if (depth > 0) fail("nested variables are not allowed");
      depth++;
    } else if (ch === "}") {
      if (depth === 0) fail("unbalanced }");
      depth--;
    } else if (ch === "/" && depth === 0) {
      tokens.push(current);
      current = "";
      continue;
    }
    current += ch;
  }
  if (depth !== 0) fail("unbalanced {");
  tokens.push(current);
  for (const t of tokens) if (t === "") fail("empty segment");
  return tokens;
}

function parsePart(token: string, fail: (reason: string) => never): TemplatePart {
  if (token === "*") return { kind: "wildcard" };
  if (token === "**") return { kind: "deep" };
  if (!literalChars.test(token)) fail(`invalid literal ${JSON.stringify(token)}`);
  return { kind: "literal", value: token };
}

/** Parses `{a.b}` or `{a.b=segments}`, appending the parts it covers. */
function parseVariable(token: string, parts: TemplatePart[], fail: (reason: string) => never): TemplateVariable {
  const inner = token.slice(1, -1);
  const eq = inner.indexOf("=");
  const name = eq < 0 ? inner : inner.slice(0, eq);
  const fieldPath = name.split(".");
  if (!fieldPath.every((s) => identifier.test(s))) fail(`invalid field path ${JSON.stringify(name)}`);
  const pattern = eq < 0 ? "*" : inner.slice(eq + 1);
  const start = parts.length;
  for (const seg of pattern.split("/")) {
    if (seg === "") fail(`empty segment in variable ${name}`);
    parts.push(parsePart(seg, fail));
  }
  const covered = parts.slice(start);
  const multi = covered.length > 1 || covered.some((p) => p.kind === "deep");
  return { fieldPath, start, end: parts.length, multi };
}

/**
 * Splits a URL path ("/a/b%20c/d") into raw and decoded segments. Throws PathEncodingError on malformed
 * percent-encoding.
 */
export function splitRequestPath(pathname: string): RequestPath {
  const raw = pathname.startsWith("/") ? pathname.slice(1).split("/") : pathname.split("/");
  return { raw, decoded: raw.map(decodeSegment) };
}

function decodeSegment(segment: string): string {
  if (!segment.includes("%")) return segment;
  try {
    return decodeURIComponent(segment);
  } catch {
    throw new PathEncodingError(segment);
  }
}

/**
 * Matches a request path against a template. Returns the variable values keyed by dotted field path, or
 * undefined when the path does not match.
 */
export function matchTemplate(template: PathTemplate, path: RequestPath): Map<string, string> | undefined {
  const view = template.verb === undefined ? path : stripVerb(path, template.verb);
  if (!view) return undefined;
  const { parts, deepIndex } = template;
  const n = view.raw.length;
  if (deepIndex < 0 ? n !== parts.length : n < parts.length) return undefined;
  for (let i = 0; i < parts.length; i++) {
    const from = requestStart(template, n, i);
    const to = requestEnd(template, n, i);
    for (let j = from; j < to; j++) {
      if (!partMatches(parts[i]!, view.raw[j]!, view.decoded[j]!)) return undefined;
    }
  }
  const values = new Map<string, string>();
  for (const v of template.variables) {
    values.set(v.fieldPath.join("."), variableValue(template, v, view, n));
  }
  return values;
}

function partMatches(part: TemplatePart, raw: string, decoded: string): boolean {
  return part.kind === "literal" ? decoded === part.value : raw !== "";
}

/** First request segment covered by template part i, for a request of n segments. */
function requestStart(t: PathTemplate, n: number, i: number): number {
  return t.deepIndex < 0 || i <= t.deepIndex ? i : n - t.parts.length + i;
}

/** One past the last request segment covered by template part i. */
function requestEnd(t: PathTemplate, n: number, i: number): number {
  return t.deepIndex < 0 || i < t.deepIndex ? i + 1 : n - t.parts.length + i + 1;
}

function variableValue(t: PathTemplate, v: TemplateVariable, path: RequestPath, n: number): string {
  const from = requestStart(t, n, v.start);
  const to = requestEnd(t, n, v.end - 1);
  if (!v.multi) return path.decoded[from]!;
  return path.decoded.slice(from, to).join("/");
}

/** The request path with `:verb` removed from its last segment, or undefined when it does not end so. */
function stripVerb(path: RequestPath, verb: string): RequestPath | undefined {
  const last = path.raw[path.raw.length - 1]!;
  const suffix = ":" + verb;
  if (!last.endsWith(suffix)) return undefined;
  const rest = last.slice(0, -suffix.length);
  return {
    raw: [...path.raw.slice(0, -1), rest],
    decoded: [...path.decoded.slice(0, -1), decodeSegment(rest)],
  };
}

/** Orders templates most specific first: more literals, then no `**`, then more segments. */
export function compareSpecificity(a: PathTemplate, b: PathTemplate): number {
  if (a.literalCount !== b.literalCount) return b.literalCount - a.literalCount;
  const aDeep = a.deepIndex >= 0 ? 1 : 0;
  const bDeep = b.deepIndex >= 0 ? 1 : 0;
  if (aDeep !== bDeep) return aDeep - bDeep;
  return b.parts.length - a.parts.length;
}
