// The one shape of a resource store. Every resource's store is a `create<X>Store(db)` factory over an
// Executor (the database, or the transaction of the call's unit of work: see unit-of-work.ts), built on
// resourceStore below, which owns what every resource table shares:
//
//   find(uid)              the row, or undefined
//   get(uid)               the row, or NOT_FOUND naming the resource (its type: `<X>Schema.typeName`)
//   lock(uid)              the row locked FOR UPDATE for the rest of the transaction, or NOT_FOUND
//   create(parent, fields) a row created under a parent, its uid `<parent>/<16 hex>` (createMany: several,
//                          all or none); NOT_FOUND naming the parent when it does not exist (never created,
//                          or deleted concurrently: the foreign key decides); ALREADY_EXISTS when a unique
//                          key is taken (ON CONFLICT DO NOTHING, so concurrent creates of one key yield one
//                          row and the transaction stays usable)
//   insert(parent, rows)   the same for rows whose uid and parent column the store sets itself
//   write(uid, fields)     the fields written and update_time moved (ALREADY_EXISTS on a taken unique key)
//   remove(uid)            deleted, or NOT_FOUND; FAILED_PRECONDITION when other rows still reference it
//
// A domain store spreads these and adds its lists and special reads; it returns rows, never messages. The
// update of a resource through a field mask, under its row lock, is kernel/update.ts.
import { and, eq, getTableColumns, is, sql, type SQL } from "drizzle-orm";
import { PgTransaction, type AnyPgColumn, type PgTable } from "drizzle-orm/pg-core";
import type { ConnectError } from "@connectrpc/connect";
import { failedPrecondition, isMissingReference, isStillReferenced, isUniqueViolation, notFound, type PreconditionViolation } from "./errors/index.js";
import type { AnyPgDatabase } from "./list/keyset.js";
import { newChildUid } from "./uidp.js";
import { hotStatement } from "./prepared-rows.js";

/** What a store is made over: a Drizzle database of either driver, or a transaction of one. */
export type Executor = AnyPgDatabase;

/**
 * The rows of a raw statement (`db.execute(sql...)`), as either driver returns them: postgres.js an array,
 * PGlite an object with `rows`.
 */
export function executedRows(result: unknown): Record<string, unknown>[] {
  return (Array.isArray(result) ? result : (result as { rows: Record<string, unknown>[] }).rows) as Record<string, unknown>[];
}

/** The SQL type of an array of `column`'s values (`text[]` for a collated text such as the uid columns'). */
export function arrayTypeOf(column: AnyPgColumn): SQL {
  return sql.raw(`${column.getSQLType().replace(/ COLLATE .*$/, "")}[]`);
}

/**
 * `column` equal to one of `values`, the values as one array parameter (`column = any($1::<type>[])`): the
 * statement's text is the same for any number of them, where Drizzle's inArray writes a placeholder per value
 * (a statement per count, and past 65,535 values more parameters than PostgreSQL takes).
 */
export function equalsAny(column: AnyPgColumn, values: readonly unknown[]): SQL {
  return sql`${column} = any(${sql.param([...values])}::${arrayTypeOf(column)})`;
}

/** Whether `db` is a transaction (so locks last until it ends). */
export function isTransaction(db: Executor): boolean {
  return is(db, PgTransaction);
}

/**
 * Runs `fn` so that its failure leaves `db` usable: in a savepoint when `db` is a transaction (a failed
 * statement would otherwise abort the whole transaction), directly otherwise.
 */
function attempt<T>(db: Executor, fn: (db: Executor) => Promise<T>): Promise<T> {
  return isTransaction(db) ? db.transaction(fn) : fn(db);
}

/**
 * Runs a write of rows that live under `parent` (their foreign key names it). When the parent does not
 * exist, never created or deleted concurrently, the database refuses and this becomes NOT_FOUND naming the
 * parent (`parentType` is its resource type).
 */
export async function underParent<T>(parentType: string, parent: string, write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if (isMissingReference(err)) throw notFound(parentType, parent);
    throw err;
  }
}

/**
 * The conflict action of an upsert that writes only what differs: each of `columns` (property name ->
 * column) is taken from the proposed row, and the existing row is left untouched (not even locked for
 * writing, nor returned) when none of them differs. `also` adds assignments made on a change (update_time).
 */
export function updateWhereChanged(columns: Record<string, AnyPgColumn>, also: Record<string, SQL> = {}): { set: Record<string, SQL>; setWhere: SQL } {
  const set = proposedValues(columns);
  return {
    set: { ...set, ...also },
    setWhere: sql`(${sql.join(Object.values(columns).map((c) => sql`${c}`), sql`, `)}) is distinct from (${sql.join(Object.values(set), sql`, `)})`,
  };
}

/**
 * The `set` of an upsert's conflict action that takes each of `columns` (property name -> column) from the
 * proposed row: `{ name: excluded.name, ... }` (for rows the caller already knows to differ).
 */
export function proposedValues(columns: Record<string, AnyPgColumn>): Record<string, SQL> {
  return Object.fromEntries(Object.entries(columns).map(([key, c]) => [key, sql`excluded.${sql.identifier(c.name)}`]));
}

/** The table columns every resource table has (an immutable resource, such as a role mapping, has no update_time). */
interface ResourceColumns {
  uid: AnyPgColumn;
  updateTime?: AnyPgColumn;
}

interface ResourceSpec<T extends PgTable & ResourceColumns, P extends string = never> {
  table: T;
  /** The resource's message type name (`<X>Schema.typeName`), named in NOT_FOUND and ALREADY_EXISTS. */
  type: string;
  /** The parent's message type name, named in NOT_FOUND when an insert's parent does not exist. */
  parentType?: string;
  /** The column (its property name) holding the parent's uid, set by create. */
  parentColumn?: P;
  /** The columns read and returned (default: all of them). */
  columns?: Record<string, AnyPgColumn>;
  /** Rows of the table this store may lock, write and remove (managed roles are not the API's to change). */
  writable?: SQL;
  /**
   * A unique key besides the uid: its columns (the conflict target of inserts) and the error for a row whose
   * key is taken (it may read the existing row: the transaction is still usable when it runs).
   */
  unique?: { columns: AnyPgColumn[]; taken: (db: Executor, row: Record<string, unknown>) => Promise<ConnectError> };
  /** What a delete refused because other rows still reference the resource means. */
  stillReferenced?: (uid: string, err: unknown) => PreconditionViolation;
}

/** The columns create sets itself, besides the parent column. */
type Generated = "uid" | "createTime" | "updateTime";

interface ResourceStore<Row, Insert, P extends string = never> {
  find(uid: string): Promise<Row | undefined>;
  get(uid: string): Promise<Row>;
  lock(uid: string): Promise<Row>;
  create(parent: string, fields: Omit<Insert, Generated | P>): Promise<Row>;
  createMany(parent: string, fields: readonly Omit<Insert, Generated | P>[]): Promise<Row[]>;
  insert(parent: string, rows: readonly Insert[]): Promise<Row[]>;
  write(uid: string, fields: Partial<Insert>): Promise<Row>;
  remove(uid: string): Promise<void>;
}

function inUse(uid: string): PreconditionViolation {
  return { type: "RESOURCE_IN_USE", subject: uid, description: `${uid} is still referenced; remove those references first` };
}

/** The shared part of a resource's store, over `db` (see the top of this file). */
export function resourceStore<
  T extends PgTable & ResourceColumns,
  Row = T["$inferSelect"],
  Insert = T["$inferInsert"],
  P extends keyof Insert & string = never,
>(db: Executor, spec: ResourceSpec<T, P>): ResourceStore<Row, Insert, P> {
  const table = spec.table as PgTable & ResourceColumns;
  const columns = spec.columns ?? getTableColumns(table);
  const byUid = (uid: string) => eq(table.uid, uid);
  const writableUid = (uid: string) => (spec.writable ? and(byUid(uid), spec.writable)! : byUid(uid));
  const missing = (uid: string) => notFound(spec.type, uid);

  // The point read of every Get, prepared on first use (its query built once per executor, not per call).
  let findStatement: { execute(values: { uid: string }): Promise<unknown[]> } | undefined;
  const find = async (uid: string): Promise<Row | undefined> => {
    findStatement ??= hotStatement(db.select(columns).from(table).where(eq(table.uid, sql.placeholder("uid"))).prepare(`find_${spec.type}`));
    const [row] = await findStatement.execute({ uid });
    return row as Row | undefined;
  };

  const insert = async (parent: string, rows: readonly Insert[]): Promise<Row[]> => {
    if (rows.length === 0) return [];
    const write = () => {
      const values = db.insert(table).values(rows as unknown as T["$inferInsert"][]);
      const guarded = spec.unique ? values.onConflictDoNothing({ target: spec.unique.columns }) : values;
      return guarded.returning(columns) as Promise<Row[]>;
    };
    const inserted = spec.parentType ? await underParent(spec.parentType, parent, write) : await write();
    if (inserted.length < rows.length && spec.unique) {
      // A row whose key was taken, by an existing row or an earlier row of the same insert.
      const done = new Set(inserted.map((r) => (r as { uid: string }).uid));
      const taken = rows.find((r) => !done.has((r as { uid: string }).uid))!;
      throw await spec.unique.taken(db, taken as Record<string, unknown>);
    }
    return inserted;
  };

  const createMany = (parent: string, fields: readonly Omit<Insert, Generated | P>[]): Promise<Row[]> => {
    if (!spec.parentColumn) throw new Error(`${spec.type}: create() needs the spec's parentColumn`);
    const key = spec.parentColumn;
    return insert(parent, fields.map((f) => ({ ...f, uid: newChildUid(parent), [key]: parent }) as Insert));
  };

  return {
    find,
    insert,
    createMany,

    async create(parent, fields) {
      const [row] = await createMany(parent, [fields]);
      return row!;
    },

    async get(uid) {
      const row = await find(uid);
      if (!row) throw missing(uid);
      return row;
    },

    async lock(uid) {
      if (!isTransaction(db)) throw new Error(`${spec.type}: lock() outside a transaction holds no lock; run it in a unit of work`);
      const [row] = await db.select(columns).from(table).where(writableUid(uid)).for("update");
      if (!row) throw missing(uid);
      return row as Row;
    },

    async write(uid, fields) {
      const update = (on: Executor) =>
        on
          .update(table)
          .set((table.updateTime ? { ...fields, updateTime: sql`now()` } : fields) as Partial<T["$inferInsert"]>)
          .where(writableUid(uid))
          .returning(columns) as Promise<Row[]>;
      let rows: Row[];
      if (!spec.unique) rows = await update(db);
      else {
        try {
          rows = await attempt(db, update);
        } catch (err) {
          if (isUniqueViolation(err)) throw await spec.unique.taken(db, { ...(await find(uid)), ...fields });
          throw err;
        }
      }
      if (!rows[0]) throw missing(uid);
      return rows[0];
    },

    async remove(uid) {
      let deleted: unknown[];
      try {
        deleted = await db.delete(table).where(writableUid(uid)).returning({ uid: table.uid });
      } catch (err) {
        if (isStillReferenced(err)) throw failedPrecondition((spec.stillReferenced ?? inUse)(uid, err));
        throw err;
      }
      if (deleted.length === 0) throw missing(uid);
    },
  };
}
