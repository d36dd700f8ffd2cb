// Parsing a List request into a plan: pure, no database. The keyset adapter (keyset.ts) runs the plan.
import { invalidArgument } from "../errors/index.js";
import { canonicalJson, digestOf } from "./canonical.js";
import { orderText, parseOrderBy, type ListSpec, type OrderTerm } from "./order-by.js";
import { decodePageToken, encodePageToken } from "./page-token.js";

export const DEFAULT_PAGE_SIZE = 50;
export const MAX_PAGE_SIZE = 200;
/** A valid page token older than this restarts the query from the first page (no error). */
export const PAGE_TOKEN_LIFETIME_MS = 3 * 24 * 60 * 60 * 1000;

/** The paging fields every List request has (generated request messages satisfy this). */
export interface ListRequestFields {
  pageSize?: number;
  pageToken?: string;
  orderBy?: string;
  skip?: number;
}

export interface ListContext {
  /** The page-token signing secret (at least 16 bytes), shared by every replica. */
  secret: Uint8Array;
  /** Retired secrets still accepted for verification while walks signed with them finish. */
  previousSecrets?: readonly Uint8Array[];
  /**
   * The request's filters in any JSON-like form; canonicalized and bound into the page token, so a token
   * used with other filters is rejected. The request message itself may be passed: its paging fields
   * (pageSize, pageToken, orderBy, skip) are left out. A UIDPFilter message inside is canonicalized by
   * meaning (ids order does not matter; absent = empty).
   */
  filters?: unknown;
  /**
   * The caller's visibility (for example the scope uids the store filters on). Not an error when it differs
   * from the token's: the keyset position is kept and the total is recounted, so a total is never carried
   * from one caller's view into another's.
   */
  scope?: unknown;
  /** Clock, epoch milliseconds. Default Date.now. */
  now?: () => number;
  /** Token lifetime. Default PAGE_TOKEN_LIFETIME_MS. */
  tokenLifetimeMs?: number;
}

/** Mints the next page's token from the keyset position of the last row returned. */
interface PageTokenMinter {
  mint(keys: readonly (string | null)[], total: bigint): string;
}

export interface ListPlan {
  /** The spec's name. */
  list: string;
  /** Rows per page (1..200). */
  limit: number;
  /** Sort terms, the uid last. */
  order: readonly OrderTerm[];
  /** Rows to skip after the cursor position (or from the start). Echoed as `skipped`. */
  skip: number;
  /** The keyset position to continue after (one text value per order term), or undefined on a first page. */
  cursor: readonly (string | null)[] | undefined;
  /** The total carried from the first page, or undefined when this page must count. */
  total: bigint | undefined;
  /** True when the given token had expired and the query restarted from the first page. */
  restarted: boolean;
  tokens: PageTokenMinter;
}

const PAGING_FIELDS = new Set(["pageSize", "pageToken", "orderBy", "skip"]);

/** The filters without the paging fields, so the request message itself can be bound. */
function withoutPaging(filters: unknown): unknown {
  if (typeof filters !== "object" || filters === null || Array.isArray(filters)) return filters;
  const out: Record<string, unknown> = {};
  for (const key of Object.keys(filters)) if (!PAGING_FIELDS.has(key)) out[key] = (filters as Record<string, unknown>)[key];
  return out;
}

function pageSizeOf(value: number | undefined): number {
  const n = value ?? 0;
  if (!Number.isInteger(n)) throw invalidArgument({ field: "page_size", description: "must be an integer" });
  if (n < 0) throw invalidArgument({ field: "page_size", description: "must not be negative" });
  if (n === 0) return DEFAULT_PAGE_SIZE;
  return Math.min(n, MAX_PAGE_SIZE);
}

function skipOf(value: number | undefined): number {
  const n = value ?? 0;
  if (!Number.isInteger(n)) throw invalidArgument({ field: "skip", description: "must be an integer" });
  if (n < 0) throw invalidArgument({ field: "skip", description: "must not be negative" });
  return n;
}

/**
 * The digest of a caller's visibility, remembered per object: the caller's access hands every call the same
 * array of scopes while its grants are unchanged (kernel/auth/access.ts), and a caller bound in 10,000 groups
 * took some 50 ms to digest them on every page.
 */
const scopeDigests = new WeakMap<object, string>();
function scopeDigestOf(scope: unknown): string {
  if (typeof scope !== "object" || scope === null) return digestOf(canonicalJson(scope));
  let digest = scopeDigests.get(scope);
  if (digest === undefined) scopeDigests.set(scope, (digest = digestOf(canonicalJson(scope))));
  return digest;
}

/**
 * Parses the paging fields of a List request into a plan. Throws INVALID_ARGUMENT on `page_size`, `skip`,
 * `order_by` or `page_token`. A valid token older than the lifetime silently restarts from the first page.
 */
export function parseListRequest(request: ListRequestFields, spec: ListSpec, context: ListContext): ListPlan {
  const limit = pageSizeOf(request.pageSize);
  const skip = skipOf(request.skip);
  const order = parseOrderBy(request.orderBy ?? "", spec);
  const now = context.now ?? Date.now;
  const lifetime = context.tokenLifetimeMs ?? PAGE_TOKEN_LIFETIME_MS;

  // The digests a token binds, computed when a token is read or minted (a page that fits needs neither).
  let digests: { query: string; scope: string } | undefined;
  const bound = () =>
    (digests ??= {
      query: digestOf(spec.name, canonicalJson(withoutPaging(context.filters)), orderText(order)),
      scope: scopeDigestOf(context.scope),
    });
  const tokens: PageTokenMinter = {
    mint: (keys, total) => encodePageToken({ ...bound(), issuedAt: now(), total, keys: [...keys] }, context.secret),
  };
  const plan: ListPlan = { list: spec.name, limit, order, skip, cursor: undefined, total: undefined, restarted: false, tokens };

  const token = request.pageToken ?? "";
  if (token === "") return plan;
  const payload = decodePageToken(token, [context.secret, ...(context.previousSecrets ?? [])]);
  if (now() - payload.issuedAt > lifetime) return { ...plan, restarted: true };
  const { query: queryDigest, scope: scopeDigest } = bound();
  if (payload.query !== queryDigest) {
    throw invalidArgument({
      field: "page_token",
      description: "the page token belongs to a different query: filters and order_by must stay the same across pages",
    });
  }
  if (payload.keys.length !== order.length) throw invalidArgument({ field: "page_token", description: "malformed or tampered page token" });
  return { ...plan, cursor: payload.keys, total: payload.scope === scopeDigest ? payload.total : undefined };
}

/**
 * Plans the pages of List requests for handlers. The page token is bound to the whole request with its
 * paging fields cleared (as aip-go does): every filter field, present or added later, is bound without the
 * handler naming it, so a token cannot be replayed with other filters.
 */
export interface ListPlanner {
  /** The plan of `request` (the generated request message) for a caller who sees `scopes`. */
  plan(request: ListRequestFields, spec: ListSpec, scopes: readonly string[]): ListPlan;
}

export function createListPlanner(context: Omit<ListContext, "filters" | "scope">): ListPlanner {
  return { plan: (request, spec, scopes) => parseListRequest(request, spec, { ...context, filters: request, scope: scopes }) };
}
