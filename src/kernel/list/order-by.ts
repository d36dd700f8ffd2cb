// order_by: the per-resource allow-list (a ListSpec) and the parser.
//
// Syntax (AIP-132): one or more terms separated by commas, each `field`, `field asc` or `field desc`
// (direction case-insensitive, surrounding spaces ignored). A field may be named by its proto name, its JSON
// name, or an alias (`created_at` -> create_time, `updated_at` -> update_time). The uid is appended as the
// last term (same direction as the term before it) unless the client ordered by uid already, so every order
// is total and keyset continuation is exact.
import type { DescMessage } from "@bufbuild/protobuf";
import { invalidArgument } from "../errors/index.js";

export interface OrderTerm {
  /** Canonical key: the proto field name (a key of the adapter's orderColumns). */
  key: string;
  desc: boolean;
}

interface ListSpecInit {
  /**
   * Names the query in page tokens (for example "registry.v2.ListRepos"): a token issued by one list is never
   * accepted by another.
   */
  name: string;
  /** Proto field names a client may order by. `uid` is always allowed and need not be listed. */
  orderBy: readonly string[];
  /** The resource message; when given, the fields' JSON names (which may be customised) are accepted too. */
  message?: DescMessage;
  /** The order when order_by is empty, in order_by syntax. Default "uid". */
  defaultOrder?: string;
}

/** A compiled allow-list; build once per resource with defineListSpec. */
export interface ListSpec {
  readonly name: string;
  /** Canonical keys, sorted, uid included. */
  readonly keys: readonly string[];
  /** Every accepted spelling -> canonical key. */
  readonly names: ReadonlyMap<string, string>;
  readonly defaultOrder: readonly OrderTerm[];
}

/** The most terms a client may give (the uid tie-breaker is added on top). */
const MAX_ORDER_TERMS = 3;

const ALIASES: Readonly<Record<string, string>> = { created_at: "create_time", updated_at: "update_time" };

function lowerCamel(protoName: string): string {
  return protoName.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());
}

export function defineListSpec(init: ListSpecInit): ListSpec {
  if (!init.name) throw new Error("list spec needs a name");
  const keys = [...new Set([...init.orderBy, "uid"])].sort();
  const names = new Map<string, string>();
  const add = (spelling: string, key: string) => {
    const existing = names.get(spelling);
    if (existing !== undefined && existing !== key) throw new Error(`order_by name ${spelling} is ambiguous (${existing}, ${key})`);
    names.set(spelling, key);
  };
  for (const key of keys) {
    if (!/^[a-z][a-z0-9_]*$/.test(key)) throw new Error(`order_by key ${key} is not a proto field name`);
    add(key, key);
    // The JSON name: the field's own (it may be customised) when the message is given, else lowerCamelCase.
    const field = init.message?.fields.find((f) => f.name === key);
    add(field ? field.jsonName : lowerCamel(key), key);
  }
  for (const [alias, key] of Object.entries(ALIASES)) if (keys.includes(key)) add(alias, key);
  const spec: ListSpec = { name: init.name, keys, names, defaultOrder: [] };
  const defaultOrder = parseOrderBy(init.defaultOrder?.trim() || "uid", spec);
  return { ...spec, defaultOrder };
}

const TERM = /^([A-Za-z_][A-Za-z0-9_]*)(?:\s+([A-Za-z]+))?$/;

function orderError(description: string) {
  return invalidArgument({ field: "order_by", description });
}

/**
 * Parses order_by against the spec. Empty (or blank) gives the spec's default order. The result always
 * ends with the uid term. Throws INVALID_ARGUMENT on `order_by` naming the allowed fields.
 */
export function parseOrderBy(text: string, spec: ListSpec): OrderTerm[] {
  if (text.trim() === "") return [...spec.defaultOrder];
  // Written only into an error.
  const allowed = () => `allowed fields: ${spec.keys.join(", ")}, each optionally followed by " desc"`;
  const parts = text.split(",");
  if (parts.length > MAX_ORDER_TERMS) throw orderError(`at most ${MAX_ORDER_TERMS} sort fields; ${allowed()}`);
  const terms: OrderTerm[] = [];
  for (const raw of parts) {
    const m = TERM.exec(raw.trim());
    if (!m) throw orderError(`expected "<field>" or "<field> desc", got ${JSON.stringify(clip(raw.trim()))}; ${allowed()}`);
    const [, name = "", direction] = m;
    const key = spec.names.get(name);
    if (key === undefined) throw orderError(`unknown field ${JSON.stringify(clip(name))}; ${allowed()}`);
    let desc = false;
    if (direction !== undefined) {
      const d = direction.toLowerCase();
      if (d !== "asc" && d !== "desc") throw orderError(`unknown direction ${JSON.stringify(clip(direction))} (use asc or desc)`);
      desc = d === "desc";
    }
    if (terms.some((t) => t.key === key)) throw orderError(`field ${JSON.stringify(name)} is named twice`);
    if (terms.some((t) => t.key === "uid")) throw orderError(`uid is unique, so no field may follow it`);
    terms.push({ key, desc });
  }
  const last = terms[terms.length - 1];
  if (last && last.key !== "uid") terms.push({ key: "uid", desc: last.desc });
  return terms;
}

/** The canonical text of an order, for the page-token binding ("create_time desc,uid desc"). */
export function orderText(terms: readonly OrderTerm[]): string {
  return terms.map((t) => `${t.key} ${t.desc ? "desc" : "asc"}`).join(",");
}

function clip(s: string): string {
  return s.length > 64 ? s.slice(0, 61) + "..." : s;
}
