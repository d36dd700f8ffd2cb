// SCIM filters (RFC 7644 3.4.2.2), the part this server evaluates: comparisons with `eq`, joined by `and`
// and `or`, grouped by parentheses. That covers what identity providers send (`userName eq "..."`,
// `externalId eq "..."`, and PATCH value paths such as `emails[type eq "work"]`). Any other operator, `not`
// or a malformed filter is a SCIM error the caller can read (scimType invalidFilter), never a guess.
//
// No npm package was used: the candidates (scim2-parse-filter, scimmy) parse the whole grammar, but the
// server would still have to refuse what it cannot translate to SQL, which is most of it.

/** A parsed filter: a comparison, or two filters joined. */
export type ScimFilter =
  | { kind: "compare"; attr: string; op: "eq"; value: string | boolean | number | null }
  | { kind: "and"; left: ScimFilter; right: ScimFilter }
  | { kind: "or"; left: ScimFilter; right: ScimFilter };

export class ScimFilterError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ScimFilterError";
  }
}

/** The longest filter read: identity providers send short ones. */
export const MAX_FILTER_LENGTH = 4096;

const USER_SCHEMA_PREFIX = "urn:ietf:params:scim:schemas:core:2.0:user:";
const OPERATORS = new Set(["eq", "ne", "co", "sw", "ew", "gt", "ge", "lt", "le", "pr"]);

type Token = { kind: "word"; text: string } | { kind: "string"; text: string } | { kind: "paren"; text: "(" | ")" };

function tokenize(text: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === " " || c === "\t") {
      i++;
    } else if (c === "(" || c === ")") {
      tokens.push({ kind: "paren", text: c });
      i++;
    } else if (c === '"') {
      // A JSON string: find its closing quote, skipping escaped characters.
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === "\\" ? 2 : 1;
      if (j >= text.length) throw new ScimFilterError("a string is not closed");
      try {
        tokens.push({ kind: "string", text: JSON.parse(text.slice(i, j + 1)) as string });
      } catch {
        throw new ScimFilterError(`${text.slice(i, j + 1)} is not a valid string`);
      }
      i = j + 1;
    } else {
      let j = i;
      while (j < text.length && !' \t()"'.includes(text[j]!)) j++;
      tokens.push({ kind: "word", text: text.slice(i, j) });
      i = j;
    }
  }
  return tokens;
}

/** The attribute path without the User schema's URN (compared case-insensitively, as RFC 7643 2.1 says). */
export function normalizeAttr(path: string): string {
  const lower = path.toLowerCase();
  return lower.startsWith(USER_SCHEMA_PREFIX) ? lower.slice(USER_SCHEMA_PREFIX.length) : lower;
}

const ATTR_PATH = /^[A-Za-z][\w$-]*(\.[A-Za-z][\w$-]*)?$/;

/** Parses a filter; throws ScimFilterError saying what is wrong or not supported. */
export function parseScimFilter(text: string): ScimFilter {
  if (text.length > MAX_FILTER_LENGTH) throw new ScimFilterError(`longer than ${MAX_FILTER_LENGTH} characters`);
  const tokens = tokenize(text);
  let pos = 0;
  const peekWord = () => {
    const t = tokens[pos];
    return t?.kind === "word" ? t.text.toLowerCase() : undefined;
  };

  const parseOr = (): ScimFilter => {
    let left = parseAnd();
    while (peekWord() === "or") {
      pos++;
      left = { kind: "or", left, right: parseAnd() };
    }
    return left;
  };
  const parseAnd = (): ScimFilter => {
    let left = parseTerm();
    while (peekWord() === "and") {
      pos++;
      left = { kind: "and", left, right: parseTerm() };
    }
    return left;
  };
  const parseTerm = (): ScimFilter => {
    const t = tokens[pos++];
    if (!t) throw new ScimFilterError("ends where a comparison was expected");
    if (t.kind === "paren" && t.text === "(") {
      const inner = parseOr();
      const close = tokens[pos++];
      if (close?.kind !== "paren" || close.text !== ")") throw new ScimFilterError("a parenthesis is not closed");
      return inner;
    }
    if (t.kind !== "word") throw new ScimFilterError(`expected an attribute, found ${JSON.stringify(t.text)}`);
    if (t.text.toLowerCase() === "not") throw new ScimFilterError('"not" is not supported');
    const attr = normalizeAttr(t.text);
    if (!ATTR_PATH.test(attr)) throw new ScimFilterError(`${JSON.stringify(t.text)} is not an attribute path this server filters on`);
    const opToken = tokens[pos++];
    const op = opToken?.kind === "word" ? opToken.text.toLowerCase() : undefined;
    if (!op || !OPERATORS.has(op)) throw new ScimFilterError(`expected an operator after ${t.text}`);
    if (op !== "eq") throw new ScimFilterError(`the operator "${op}" is not supported (only "eq")`);
    const v = tokens[pos++];
    if (!v || v.kind === "paren") throw new ScimFilterError(`expected a value after ${t.text} ${op}`);
    return { kind: "compare", attr, op: "eq", value: v.kind === "string" ? v.text : literal(v.text) };
  };

  const filter = parseOr();
  if (pos < tokens.length) throw new ScimFilterError(`unexpected ${JSON.stringify(tokens[pos]!.text)}`);
  return filter;
}

function literal(text: string): boolean | number | null {
  const lower = text.toLowerCase();
  if (lower === "true") return true;
  if (lower === "false") return false;
  if (lower === "null") return null;
  if (/^-?\d+(\.\d+)?([eE][-+]?\d+)?$/.test(text)) return Number(text);
  throw new ScimFilterError(`${JSON.stringify(text)} is not a value (strings are quoted)`);
}

/**
 * Whether a JSON object (an element of a multi-valued attribute, such as one email) matches the filter.
 * Strings compare case-insensitively: the sub-attributes value filters name (type, value, display) are not
 * case-exact (RFC 7643 2.4, 4.1.2).
 */
export function matchesScimFilter(filter: ScimFilter, element: Record<string, unknown>): boolean {
  if (filter.kind === "and") return matchesScimFilter(filter.left, element) && matchesScimFilter(filter.right, element);
  if (filter.kind === "or") return matchesScimFilter(filter.left, element) || matchesScimFilter(filter.right, element);
  const key = Object.keys(element).find((k) => k.toLowerCase() === filter.attr);
  const actual = key === undefined ? undefined : element[key];
  if (typeof actual === "string" && typeof filter.value === "string") return actual.toLowerCase() === filter.value.toLowerCase();
  if (filter.value === null) return actual === undefined || actual === null;
  return actual === filter.value;
}
