// The list kernel: page size, order_by, signed page tokens, skip, total count and keyset SQL.
//
//   // once per resource
//   const repoList = defineListSpec({ name: "registry.v2.ListRepos", message: RepoSchema,
//                                     orderBy: ["create_time", "update_time", "name"], defaultOrder: "create_time" });
//   // handler (deps.lists = createListPlanner({ secret }): the token is bound to the whole request)
//   const scopes = await listScopesOf(ctx);
//   const page = await repos(ctx).list(deps.lists.plan(req, repoList, scopes), { scopes, uidp: req.uidp, name: req.name });
//   // store: listPage(db, { table, where, orderColumns, plan })
//   // a store with joins, or selecting some columns: keysetPage over its own select
//   //   keysetPage(db, db.select({ row, ...pageColumns(plan, orderColumns, total) }).from(t).innerJoin(...).$dynamic(),
//   //              { plan, orderColumns, where, total })
//   return create(ListReposResponseSchema, { repos: page.rows.map(toRepo), ...pageFields(page) });
//
// Indexes a store should have, per allowed order key K: a btree on (<equality filter/scope columns>, K, uid),
// so both the keyset condition `(K, uid) > ($1, $2)` and the ORDER BY are served by one index range scan
// (backwards for desc). Declare uid (and parent) `COLLATE "C"`: byte order everywhere, and LIKE-prefix
// (uidp.descendants_of) can use the same index. Sort columns should be NOT NULL; nullable ones work (the
// expanded NULL-aware condition) but index use is weaker.
//
// Totals: counted once on the first page (or not at all when the first page is the whole result), then
// carried in the signed token: a snapshot of the first page's moment, not re-counted while the walk lasts.
// The count rides in the page's own statement (a scalar subquery), so a first page is one round trip.
export { canonicalJson, digestOf } from "./canonical.js";
export {
  defineListSpec,
  orderText,
  parseOrderBy,
} from "./order-by.js";
export { decodePageToken, encodePageToken } from "./page-token.js";
export {
  DEFAULT_PAGE_SIZE,
  MAX_PAGE_SIZE,
  PAGE_TOKEN_LIFETIME_MS,
  createListPlanner,
  parseListRequest,
  type ListContext,
  type ListPlanner,
  type ListPlan,
  type ListRequestFields,
} from "./plan.js";
export {
  completePage,
  countExpression,
  keysetOrderBy,
  keysetPage,
  keysetPredicate,
  listPage,
  pageColumns,
  pageFields,
  sortKeySelection,
  type AnyPgDatabase,
  type ListPage,
  type OrderColumns,
} from "./keyset.js";
export { boundValues, createPreparedList, type Param, type PreparedListQuery } from "./prepared.js";
