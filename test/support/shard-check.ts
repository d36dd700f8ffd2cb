// What a statement would do on a distributed PostgreSQL laid out as src/db/schema/distribution.ts says
// (docs/sharding.md): which shards it reaches, and whether it joins rows of different organizations.
//
// The statement is parsed by PostgreSQL's own parser (libpg-query). Every table it names is one occurrence.
// Two tenant occurrences are known to be of one organization when some predicate that must hold (a join's ON,
// a WHERE, an IN (subquery), an INSERT ... SELECT's column mapping; AND-ed, never under OR or NOT) equates an
// organization column of one with an organization column of the other in the same domain. An occurrence is
// pinned to one organization (one shard) when such a predicate equates one of its uid organization columns
// with a single value, or asks that it start with one (LIKE 'x/%'). Then:
// - every tenant occurrence tied into one class: co-located; pinned: `router` (one shard), else `multi-shard`
//   (every shard, each joining its own rows);
// - occurrences tied only through a column the distribution declares as crossing (`crossOrg`): `cross-shard`,
//   listed in `crossings` (known, documented);
// - occurrences not tied at all, or a table that is not classified, or a local table together with another:
//   `problems` (what the test fails on).
import { parse } from "libpg-query";
import { is } from "drizzle-orm";
import { getTableConfig, PgTable } from "drizzle-orm/pg-core";
import * as schema from "../../src/db/schema/index.js";
import { DISTRIBUTION, type OrgDomain, type TableDistribution } from "../../src/db/schema/distribution.js";

export type ShardBehaviour = "none" | "reference" | "local" | "router" | "multi-shard" | "cross-shard";

export interface Verdict {
  sql: string;
  /** The tables the statement names, in order of appearance, once each. */
  tables: string[];
  shards: ShardBehaviour;
  /** Declared crossings the statement joins over: "role_bindings.identity_uid". */
  crossings: string[];
  /** Why the statement could not run as laid out: empty when it can. */
  problems: string[];
  /** Whether it locks rows (FOR UPDATE / FOR SHARE ...). */
  locks: boolean;
}

/** The columns of every table of the drizzle schema, by SQL name. */
export function schemaTables(): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const value of Object.values(schema)) {
    if (!is(value, PgTable)) continue;
    const config = getTableConfig(value);
    out.set(config.name, config.columns.map((c) => c.name));
  }
  return out;
}

type Node = Record<string, unknown>;

interface Occurrence {
  id: number;
  table: string;
  alias: string;
  /** Undefined for a CTE or a derived table (its own statement is checked on its own). */
  distribution: TableDistribution | undefined;
  known: boolean;
  /** The unit (the part of the statement that runs as one join) it is in. */
  unit: number;
  /** A CTE or derived table: its output columns, as the columns of the tables they come from. */
  derived?: Map<string, Col | undefined>;
}

interface Col {
  occ: Occurrence;
  column: string;
}

const isNode = (v: unknown): v is Node => typeof v === "object" && v !== null && !Array.isArray(v);

/** The single key of a wrapped node ({ "ColumnRef": {...} }) and its body. */
function unwrap(v: unknown): [string, Node] | undefined {
  if (!isNode(v)) return undefined;
  const keys = Object.keys(v);
  if (keys.length !== 1) return undefined;
  const body = v[keys[0]!];
  return isNode(body) ? [keys[0]!, body] : undefined;
}

function strings(list: unknown): string[] {
  return Array.isArray(list) ? list.map((f) => (unwrap(f)?.[1].sval as string | undefined) ?? "*") : [];
}

/** The expression beneath casts and COLLATE clauses. */
function bare(v: unknown): [string, Node] | undefined {
  let u = unwrap(v);
  while (u && (u[0] === "TypeCast" || u[0] === "CollateClause")) u = unwrap(u[1].arg);
  return u;
}

/** Checks one statement (a single SQL statement as Drizzle sends it, with $n parameters). */
export async function checkStatement(
  sql: string,
  distribution: Readonly<Record<string, TableDistribution>> = DISTRIBUTION,
  columns: Map<string, string[]> = schemaTables(),
): Promise<Verdict> {
  const tree = (await parse(sql)) as { stmts: { stmt: unknown }[] };
  const occurrences: Occurrence[] = [];
  const ties: [Col, Col][] = [];
  /** An inserted row's organization columns and where their values come from. */
  const writes: [Col, Col][] = [];
  const pins: Col[] = [];
  let locks = false;
  const ctes = new Map<string, { columns: Map<string, Col | undefined>; unit: number }>();

  // Units: the parts of a statement that run as one join. A subquery (scalar, IN, EXISTS, ARRAY), a CTE and
  // a side of a UNION start one of their own; it joins the unit that refers to its columns (a correlated
  // subquery, a CTE or derived table in a FROM). Independent units are planned apart (Citus runs such a
  // subquery first and hands its result on), so only occurrences in one unit must be of one organization.
  const units: number[] = [];
  const newUnit = () => (units.push(units.length), units.length - 1);
  const unitOf = (u: number): number => (units[u] === u ? u : (units[u] = unitOf(units[u]!)));
  const joinUnits = (a: number, b: number) => {
    units[unitOf(a)] = unitOf(b);
  };
  let unit = newUnit();
  const inUnit = <T>(fn: () => T): [T, number] => {
    const outer = unit;
    unit = newUnit();
    try {
      return [fn(), unit];
    } finally {
      unit = outer;
    }
  };

  // Scopes, innermost last: the occurrences a statement level declares.
  const scopes: Occurrence[][] = [];

  const declare = (rangeVar: Node, scope: Occurrence[]) => {
    const table = rangeVar.relname as string;
    const alias = ((rangeVar.alias as Node | undefined)?.aliasname as string | undefined) ?? table;
    const cte = rangeVar.schemaname === undefined ? ctes.get(table) : undefined;
    if (cte) {
      joinUnits(cte.unit, unit);
      scope.push({ id: -1, table, alias, distribution: undefined, known: true, unit, derived: cte.columns });
      return;
    }
    const occ: Occurrence = { id: occurrences.length, table, alias, distribution: distribution[table], known: distribution[table] !== undefined, unit };
    occurrences.push(occ);
    scope.push(occ);
  };

  /** Declares a FROM item's tables in `scope`; returns the ON conditions to walk after. */
  const declareFrom = (item: unknown, scope: Occurrence[], later: (() => void)[]) => {
    const u = unwrap(item);
    if (!u) return;
    const [kind, body] = u;
    if (kind === "RangeVar") declare(body, scope);
    else if (kind === "JoinExpr") {
      declareFrom(body.larg, scope, later);
      declareFrom(body.rarg, scope, later);
      if (body.quals) later.push(() => conditions(body.quals));
    } else if (kind === "RangeSubselect") {
      // A derived table is part of this FROM's join.
      const alias = ((body.alias as Node | undefined)?.aliasname as string | undefined) ?? "";
      const [derived, inner] = inUnit(() => outputs(body.subquery));
      joinUnits(inner, unit);
      scope.push({ id: -1, table: `(subquery ${alias})`, alias, distribution: undefined, known: true, unit, derived });
    } else later.push(() => walk(body));
  };

  const resolve = (ref: Node): Col | undefined => {
    const fields = strings(ref.fields);
    const column = fields[fields.length - 1]!;
    const qualifier = fields.length >= 2 ? fields[fields.length - 2] : undefined;
    for (let i = scopes.length - 1; i >= 0; i--) {
      const found = scopes[i]!.filter((o) => (qualifier ? o.alias === qualifier : o.derived ? o.derived.has(column) : columns.get(o.table)?.includes(column)));
      if (found.length > 1) return undefined;
      if (found.length === 0) continue;
      const o = found[0]!;
      // A reference to an outer query's row (correlation) makes this unit part of that one's join.
      if (unitOf(o.unit) !== unitOf(unit)) joinUnits(unit, o.unit);
      return o.derived ? o.derived.get(column) : o.distribution ? { occ: o, column } : undefined;
    }
    return undefined;
  };

  const columnOf = (v: unknown): Col | undefined => {
    const u = bare(v);
    return u && u[0] === "ColumnRef" ? resolve(u[1]) : undefined;
  };
  const isValue = (v: unknown): boolean => {
    const u = bare(v);
    if (u && u[0] === "FuncCall" && strings(u[1].funcname).at(-1) === "like_escape") return isValue((u[1].args as unknown[])[0]);
    return !!u && (u[0] === "ParamRef" || u[0] === "A_Const");
  };
  const tie = (a: Col | undefined, b: Col | undefined) => {
    if (a && b) ties.push([a, b]);
  };
  const pin = (c: Col | undefined) => {
    if (c) pins.push(c);
  };

  /** The single output column of a subquery, walked in a unit of its own. */
  const subqueryColumn = (subselect: unknown): Col | undefined => {
    const inner = unwrap(subselect)?.[1];
    const targets = (inner?.targetList as unknown[] | undefined) ?? [];
    if (!inner || targets.length !== 1 || inner.larg) {
      inUnit(() => walk(subselect));
      return undefined;
    }
    let col: Col | undefined;
    inUnit(() => select(inner, () => (col = columnOf(unwrap(targets[0])?.[1].val))));
    return col;
  };

  /** A boolean condition: its AND-ed conjuncts tie and pin; everything in it is walked for subqueries. */
  const conditions = (cond: unknown) => {
    const u = unwrap(cond);
    if (!u) return;
    const [kind, body] = u;
    if (kind === "BoolExpr" && body.boolop === "AND_EXPR") {
      for (const arg of body.args as unknown[]) conditions(arg);
      return;
    }
    if (kind === "A_Expr") {
      const op = strings(body.name)[0];
      if (body.kind === "AEXPR_OP" && op === "=") {
        const l = columnOf(body.lexpr);
        const r = columnOf(body.rexpr);
        if (l && r) tie(l, r);
        else if (l && isValue(body.rexpr)) pin(l);
        else if (r && isValue(body.lexpr)) pin(r);
      } else if ((body.kind === "AEXPR_LIKE" && op === "~~") || (body.kind === "AEXPR_OP" && op === "~~")) {
        // uid LIKE 'x/%': rows beneath one uid, of its organization.
        if (isValue(body.rexpr)) pin(columnOf(body.lexpr));
      } else if (body.kind === "AEXPR_IN" && Array.isArray(body.rexpr) && body.rexpr.length === 1 && isValue(body.rexpr[0])) {
        pin(columnOf(body.lexpr));
      } else if (body.kind === "AEXPR_OP_ANY" && op === "=") {
        const l = columnOf(body.lexpr);
        const r = bare(body.rexpr);
        if (r?.[0] === "FuncCall" && strings(r[1].funcname).at(-1) === "uid_lineage") {
          // x = ANY (uid_lineage(y)): x is y or one of its ancestors, of y's organization.
          tie(l, columnOf((r[1].args as unknown[])[0]));
          return;
        }
        if (r?.[0] === "SubLink" && r[1].subLinkType === "ARRAY_SUBLINK") {
          tie(l, subqueryColumn(r[1].subselect));
          return;
        }
      }
    }
    if (kind === "SubLink" && body.subLinkType === "ANY_SUBLINK") {
      // x IN (SELECT y ...): a semi-join on x = y.
      const left = columnOf(body.testexpr);
      tie(left, subqueryColumn(body.subselect));
      return;
    }
    walk(cond);
  };

  /** Declares a statement level's FROM, runs `inside` in its scope, then walks its conditions. */
  const withScope = (s: Node, inside: () => void) => {
    const scope: Occurrence[] = [];
    const later: (() => void)[] = [];
    scopes.push(scope);
    for (const item of (s.fromClause as unknown[] | undefined) ?? []) declareFrom(item, scope, later);
    inside();
    if (s.whereClause) conditions(s.whereClause);
    if (s.lockingClause) locks = true;
    for (const key of ["targetList", "havingClause", "sortClause", "groupClause", "valuesLists"]) walk(s[key]);
    for (const f of later) f();
    scopes.pop();
  };

  const select = (s: Node, inside: () => void = () => {}) => {
    if (s.withClause) withClause(s.withClause as Node);
    if (s.larg || s.rarg) {
      // UNION / INTERSECT / EXCEPT: each side planned on its own.
      if (s.larg) inUnit(() => select(s.larg as Node));
      if (s.rarg) inUnit(() => select(s.rarg as Node));
      return;
    }
    withScope(s, inside);
  };

  const withClause = (w: Node) => {
    for (const c of (w.ctes as unknown[]) ?? []) {
      const cte = unwrap(c)?.[1];
      if (!cte) continue;
      const [cols, u] = inUnit(() => outputs(cte.ctequery));
      ctes.set(cte.ctename as string, { columns: cols, unit: u });
    }
  };

  /** Walks a subquery (a CTE's, a derived table's) and answers its output columns by name. */
  const outputs = (query: unknown): Map<string, Col | undefined> => {
    const out = new Map<string, Col | undefined>();
    const named = (list: unknown) => {
      for (const t of (list as unknown[] | undefined) ?? []) {
        const target = unwrap(t)?.[1];
        if (!target) continue;
        const ref = bare(target.val);
        const name = (target.name as string | undefined) ?? (ref?.[0] === "ColumnRef" ? strings(ref[1].fields).at(-1) : undefined);
        if (name) out.set(name, columnOf(target.val));
      }
    };
    const u = unwrap(query);
    const returning = (s: Node) => () => named((s.returningClause as Node | undefined)?.exprs ?? s.returningList);
    if (u?.[0] === "SelectStmt" && !u[1].larg) select(u[1], () => named(u[1].targetList));
    else if (u?.[0] === "DeleteStmt") modify(u[1], "usingClause", returning(u[1]));
    else if (u?.[0] === "UpdateStmt") modify(u[1], "fromClause", returning(u[1]));
    else if (u?.[0] === "InsertStmt") insert(u[1], returning(u[1]));
    else walk(query);
    return out;
  };

  /** Any node: statements found in it are checked in their own scope; everything else is searched. */
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) {
      for (const x of v) walk(x);
      return;
    }
    const u = unwrap(v);
    if (!u) {
      if (isNode(v)) for (const x of Object.values(v)) walk(x);
      return;
    }
    const [kind, body] = u;
    if (kind === "SelectStmt") select(body);
    else if (kind === "InsertStmt") insert(body);
    else if (kind === "UpdateStmt" || kind === "DeleteStmt") modify(body, kind === "UpdateStmt" ? "fromClause" : "usingClause");
    else if (kind === "SubLink") {
      if (body.testexpr) walk(body.testexpr);
      inUnit(() => walk(body.subselect));
    } else for (const x of Object.values(body)) walk(x);
  };

  const insert = (s: Node, returning: () => void = () => {}) => {
    if (s.withClause) withClause(s.withClause as Node);
    const scope: Occurrence[] = [];
    scopes.push(scope);
    declare(s.relation as Node, scope);
    const target = scope[0]!;
    const cols = ((s.cols as unknown[] | undefined) ?? []).map((c) => unwrap(c)?.[1].name as string);
    const source = unwrap(s.selectStmt)?.[1];
    scopes.pop();
    if (source?.valuesLists) {
      // VALUES: one row pins the target by its organization columns; several rows may be of several.
      const rows = source.valuesLists as unknown[];
      if (rows.length === 1) {
        const values = (unwrap(rows[0])?.[1].items as unknown[]) ?? [];
        cols.forEach((c, i) => {
          if (isValue(values[i]) && target.distribution) pin({ occ: target, column: c });
        });
      }
      walk(rows);
    } else if (source) {
      // INSERT ... SELECT: each target column takes the select's expression at its position.
      select(source, () => {
        const targets = (source.targetList as unknown[]) ?? [];
        cols.forEach((c, i) => {
          const val = unwrap(targets[i])?.[1].val;
          if (!target.distribution) return;
          const from = columnOf(val);
          if (isValue(val)) pin({ occ: target, column: c });
          else if (from) writes.push([{ occ: target, column: c }, from]);
        });
      });
    }
    scopes.push(scope);
    const conflict = s.onConflictClause as Node | undefined;
    if (conflict) walk([conflict.targetList, conflict.whereClause]);
    walk((s.returningClause as Node | undefined)?.exprs ?? s.returningList);
    returning();
    scopes.pop();
  };

  const modify = (s: Node, fromKey: string, returning: () => void = () => {}) => {
    if (s.withClause) withClause(s.withClause as Node);
    const scope: Occurrence[] = [];
    const later: (() => void)[] = [];
    scopes.push(scope);
    declare(s.relation as Node, scope);
    for (const item of (s[fromKey] as unknown[] | undefined) ?? []) declareFrom(item, scope, later);
    if (s.whereClause) conditions(s.whereClause);
    walk(s.targetList);
    walk((s.returningClause as Node | undefined)?.exprs ?? s.returningList);
    for (const f of later) f();
    returning();
    scopes.pop();
  };

  for (const { stmt } of tree.stmts) walk(stmt);

  return judge(sql, occurrences, ties, writes, pins, locks, (o) => unitOf(o.unit));
}

function judge(
  sql: string,
  occurrences: Occurrence[],
  ties: [Col, Col][],
  writes: [Col, Col][],
  pins: Col[],
  locks: boolean,
  unitOf: (o: Occurrence) => number,
): Verdict {
  const problems: string[] = [];
  const crossings = new Set<string>();
  const tables = [...new Set(occurrences.map((o) => o.table))];
  for (const o of occurrences) if (!o.known) problems.push(`table ${o.table} is not classified in src/db/schema/distribution.ts`);
  const kindOf = (o: Occurrence) => o.distribution?.kind;
  const tenants = occurrences.filter((o) => kindOf(o) === "tenant");
  const locals = occurrences.filter((o) => kindOf(o) === "local");
  if (locals.length > 0 && occurrences.length > 1) problems.push(`local table ${locals[0]!.table} is used together with other tables`);

  // Union-find over occurrences: ties of organization columns of one domain, then declared crossings.
  const parent = occurrences.map((o) => o.id);
  const find = (i: number): number => (parent[i] === i ? i : (parent[i] = find(parent[i]!)));
  const domain = (c: Col): OrgDomain | undefined => {
    const d = c.occ.distribution;
    return d?.kind === "tenant" ? d.org.find((o) => o.column === c.column)?.domain : undefined;
  };
  const crossing = (c: Col): string | undefined => {
    const d = c.occ.distribution;
    return d?.kind === "tenant" && d.crossOrg?.[c.column] !== undefined ? `${c.occ.table}.${c.column}` : undefined;
  };
  const tenantTies = ties.filter(([a, b]) => kindOf(a.occ) === "tenant" && kindOf(b.occ) === "tenant");
  for (const [a, b] of tenantTies) {
    const da = domain(a);
    if (da !== undefined && da === domain(b)) parent[find(a.occ.id)] = find(b.occ.id);
  }
  // An inserted row takes its organization from the rows it is made of, which must be of one organization
  // themselves: its organization columns are what is being written, not a fact to join by.
  for (const target of new Set(writes.map(([t]) => t.occ))) {
    const sources = writes.filter(([t, from]) => t.occ === target && kindOf(from.occ) === "tenant" && domain(t) !== undefined && domain(t) === domain(from));
    if (new Set(sources.map(([, from]) => find(from.occ.id))).size > 1) problems.push(`inserts into ${target.table} a row made of rows of different organizations`);
    for (const [, from] of sources) parent[find(from.occ.id)] = find(target.id);
  }
  for (const [a, b] of tenantTies) {
    if (find(a.occ.id) === find(b.occ.id)) continue;
    const declared = crossing(a) ?? crossing(b);
    if (declared !== undefined && (domain(a) === "uid" || domain(b) === "uid")) {
      crossings.add(declared);
      parent[find(a.occ.id)] = find(b.occ.id);
    }
  }

  // Within each unit, one organization.
  const byUnit = new Map<number, Occurrence[]>();
  for (const o of tenants) byUnit.set(unitOf(o), [...(byUnit.get(unitOf(o)) ?? []), o]);
  const pinned = new Set(pins.filter((p) => kindOf(p.occ) === "tenant" && domain(p) !== undefined).map((p) => find(p.occ.id)));
  let worst = 0;
  for (const list of byUnit.values()) {
    const classes = new Map<number, Occurrence[]>();
    for (const o of list) classes.set(find(o.id), [...(classes.get(find(o.id)) ?? []), o]);
    if (classes.size > 1) {
      const names = [...classes.values()].map((c) => c.map((o) => (o.alias === o.table ? o.table : `${o.table} ${o.alias}`)).join(" + "));
      problems.push(`joins rows of different organizations: ${names.join(" | ")} are not tied by an organization column`);
      worst = 3;
    } else worst = Math.max(worst, pinned.has(find(list[0]!.id)) ? 1 : 2);
  }
  if (crossings.size > 0) worst = 3;

  let shards: ShardBehaviour;
  if (tenants.length === 0) shards = locals.length > 0 ? "local" : occurrences.length > 0 ? "reference" : "none";
  else shards = (["none", "router", "multi-shard", "cross-shard"] as const)[worst]!;
  return { sql, tables, shards, crossings: [...crossings].sort(), problems, locks };
}

/** The tables of the drizzle schema. */
export function schemaTableObjects(): PgTable[] {
  return (Object.values(schema) as unknown[]).filter((v): v is PgTable => is(v, PgTable));
}

/**
 * What is wrong with a distribution for these tables: a table it does not classify (or an entry for no
 * table), a tenant table without an organization column, an organization column (or a crossing) that is not a
 * column, a first organization column that may be null, and a foreign key that leaves its organization
 * without being declared (or one Citus cannot hold: from a reference or local table to a tenant table).
 */
export function checkSchema(tables: readonly PgTable[], distribution: Readonly<Record<string, TableDistribution>>): string[] {
  const problems: string[] = [];
  const configs = new Map(tables.map((t) => [getTableConfig(t).name, getTableConfig(t)]));
  for (const name of Object.keys(distribution)) if (!configs.has(name)) problems.push(`${name} is classified but is no table of the schema`);
  const domainOf = (table: string, column: string) => {
    const d = distribution[table];
    return d?.kind === "tenant" ? d.org.find((c) => c.column === column)?.domain : undefined;
  };
  for (const [name, config] of configs) {
    const d = distribution[name];
    if (!d) {
      problems.push(`${name} is not classified in src/db/schema/distribution.ts (tenant with its organization column, reference, or local)`);
      continue;
    }
    const columns = new Map(config.columns.map((c) => [c.name, c]));
    if (d.kind === "tenant") {
      if (d.org.length === 0) problems.push(`${name} is a tenant table with no organization column`);
      for (const c of d.org) if (!columns.has(c.column)) problems.push(`${name}: organization column ${c.column} is not a column`);
      const first = d.org[0] && columns.get(d.org[0].column);
      if (first && !first.notNull && !first.primary) problems.push(`${name}: organization column ${first.name} may be null`);
      for (const c of Object.keys(d.crossOrg ?? {})) if (!columns.has(c)) problems.push(`${name}: crossing column ${c} is not a column`);
    }
    for (const fk of config.foreignKeys) {
      const ref = fk.reference();
      const target = getTableConfig(ref.foreignTable).name;
      const to = distribution[target];
      const edge = `${name}(${ref.columns.map((c) => c.name).join(", ")}) -> ${target}(${ref.foreignColumns.map((c) => c.name).join(", ")})`;
      if (!to) continue; // reported above
      if (to.kind === "tenant" && d.kind !== "tenant") {
        if (d.kind === "reference" && ref.columns.every((c) => d.dropForeignKeys?.[c.name] !== undefined)) continue;
        problems.push(`foreign key ${edge}: a ${d.kind} table cannot reference a distributed one`);
        continue;
      }
      if (to.kind === "local" && d.kind !== "local") {
        problems.push(`foreign key ${edge}: a ${d.kind} table cannot reference a coordinator-local one`);
        continue;
      }
      if (d.kind !== "tenant" || to.kind !== "tenant") continue;
      const same = ref.columns.some((c, i) => {
        const dom = domainOf(name, c.name);
        return dom !== undefined && dom === domainOf(target, ref.foreignColumns[i]!.name);
      });
      const declared = ref.columns.every((c) => d.crossOrg?.[c.name] !== undefined);
      if (!same && !declared) problems.push(`foreign key ${edge} may point into another organization and is not declared in crossOrg`);
    }
  }
  return problems;
}
