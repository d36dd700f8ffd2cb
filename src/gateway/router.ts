// The route table: templates compiled once, grouped by template, indexed by their first literal segment and
// ordered most specific first. A lookup tries only the templates that can start with the request's first
// segment, and tells a path no template matches (404) from a path served under other HTTP methods (405).
import { compareSpecificity, matchTemplate, parseTemplate, type PathTemplate, type RequestPath } from "./template.js";

interface Route<T> {
  /** Upper-case HTTP method: GET, POST, PATCH, or a custom kind. */
  verb: string;
  template: PathTemplate;
  target: T;
}

type RouteResult<T> =
  | { kind: "match"; route: Route<T>; variables: Map<string, string> }
  | { kind: "method-not-allowed"; allowed: string[] }
  | { kind: "not-found" };

interface RouteTable<T> {
  readonly routes: readonly Route<T>[];
  match(verb: string, path: RequestPath): RouteResult<T>;
}

/** The routes sharing one template, by HTTP method. */
interface TemplateEntry<T> {
  template: PathTemplate;
  byVerb: Map<string, Route<T>>;
}

class DuplicateRouteError extends Error {
  constructor(verb: string, template: string) {
    super(`two methods are bound to ${verb} ${template}`);
    this.name = "DuplicateRouteError";
  }
}

/** Builds the table. Throws on a malformed template or two methods bound to the same verb and template. */
export function createRouteTable<T>(bindings: ReadonlyArray<{ verb: string; template: string; target: T }>): RouteTable<T> {
  const entries = new Map<string, TemplateEntry<T>>();
  const routes: Route<T>[] = [];
  for (const b of bindings) {
    let entry = entries.get(b.template);
    if (!entry) {
      entry = { template: parseTemplate(b.template), byVerb: new Map() };
      entries.set(b.template, entry);
    }
    const verb = b.verb.toUpperCase();
    if (entry.byVerb.has(verb)) throw new DuplicateRouteError(verb, b.template);
    const route: Route<T> = { verb, template: entry.template, target: b.target };
    entry.byVerb.set(verb, route);
    routes.push(route);
  }
  const index = buildIndex([...entries.values()]);
  return {
    routes,
    match: (verb, path) => lookup(index, verb.toUpperCase(), path),
  };
}

interface Index<T> {
  byFirst: Map<string, TemplateEntry<T>[]>;
  /** Templates that do not start with a plain literal segment: tried for every request. */
  fallback: TemplateEntry<T>[];
}

function firstLiteral(t: PathTemplate): string | undefined {
  const first = t.parts[0];
  // A one-segment template with a verb ("/things:do") sees "things:do" as the first request segment.
  if (!first || first.kind !== "literal" || (t.parts.length === 1 && t.verb !== undefined)) return undefined;
  return first.value;
}

function buildIndex<T>(entries: TemplateEntry<T>[]): Index<T> {
  const bySpecificity = (a: TemplateEntry<T>, b: TemplateEntry<T>) => compareSpecificity(a.template, b.template);
  const fallback = entries.filter((e) => firstLiteral(e.template) === undefined).sort(bySpecificity);
  const byFirst = new Map<string, TemplateEntry<T>[]>();
  for (const e of entries) {
    const key = firstLiteral(e.template);
    if (key === undefined) continue;
    const list = byFirst.get(key) ?? [];
    list.push(e);
    byFirst.set(key, list);
  }
  for (const [key, list] of byFirst) byFirst.set(key, [...list, ...fallback].sort(bySpecificity));
  return { byFirst, fallback };
}

function lookup<T>(index: Index<T>, verb: string, path: RequestPath): RouteResult<T> {
  const candidates = index.byFirst.get(path.decoded[0] ?? "") ?? index.fallback;
  const allowed = new Set<string>();
  for (const entry of candidates) {
    const variables = matchTemplate(entry.template, path);
    if (!variables) continue;
    const route = entry.byVerb.get(verb);
    if (route) return { kind: "match", route, variables };
    for (const v of entry.byVerb.keys()) allowed.add(v);
  }
  if (allowed.size > 0) return { kind: "method-not-allowed", allowed: [...allowed].sort() };
  return { kind: "not-found" };
}
