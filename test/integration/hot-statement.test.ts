// Hot statements (kernel/prepared-rows.ts) against a real database: the rows are those Drizzle's own execute
// gives (a one-table select through the compiled mapper, a join through Drizzle's mapping), and on PostgreSQL
// the statement runs as a named statement of the connection (it is in pg_prepared_statements once it ran),
// except when it is planned per call. On PGlite only the rows are checked.
import { DrizzleQueryError, eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { groups, identities, roleBindings, roles } from "../../src/db/schema/index.js";
import { executeHot, hotStatement } from "../../src/kernel/prepared-rows.js";
import { executedRows } from "../../src/kernel/store.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";

const ROOT = "a".repeat(40);
let database: TestDatabase;

beforeAll(async () => {
  // One connection, so the statements this test prepares are those pg_prepared_statements shows.
  database = await openTestDatabase({ max: 1 });
  const { db } = database;
  await db.insert(groups).values([
    { uid: ROOT, parentUid: null, name: "root", description: "", verified: false },
    { uid: `${ROOT}/0000000000000001`, parentUid: ROOT, name: "child", description: "d", verified: true },
  ] as (typeof groups.$inferInsert)[]);
  // Two identities, one bound to a role and one bound to nothing (the join's null side).
  const relationship = { claimMatch: { issuer: "https://issuer.example", subject: "s" } };
  await db.insert(identities).values([
    { uid: `${ROOT}/00000000000000a1`, parentUid: ROOT, name: "bound", relationship, relationshipType: 1 },
    { uid: `${ROOT}/00000000000000a2`, parentUid: ROOT, name: "unbound", relationship, relationshipType: 1 },
  ]);
  await db.insert(roles).values({ uid: `${ROOT}/00000000000000b1`, parentUid: ROOT, name: "r", capabilities: [1, 2] });
  await db.insert(roleBindings).values({ uid: `${ROOT}/00000000000000c1`, groupUid: ROOT, identityUid: `${ROOT}/00000000000000a1`, roleUid: `${ROOT}/00000000000000b1` });
}, 60_000);

afterAll(async () => database?.dispose());

/** The statements the pool's one connection holds, by their text. */
async function namedStatements(): Promise<string[]> {
  const rows = (await database.db.execute(sql`select statement from pg_prepared_statements`)) as unknown as { statement: string }[];
  return rows.map((r) => r.statement);
}

describe("hot statements", () => {
  it("give Drizzle's rows for a one-table select, and run named on PostgreSQL", async () => {
    const { db } = database;
    const select = () => db.select().from(groups).where(eq(groups.parentUid, sql.placeholder("parent")));
    const plain = select().prepare("plain_groups");
    const hot = hotStatement(select().prepare("hot_groups"));
    for (let i = 0; i < 7; i++) expect(await hot.execute({ parent: ROOT })).toEqual(await plain.execute({ parent: ROOT }));
    const [child] = await hot.execute({ parent: ROOT });
    expect(child!.name).toBe("child");
    expect(child!.createTime).toBeInstanceOf(Date);
    expect(await hot.execute({ parent: "none" })).toEqual([]);
    if (database.kind === "postgres") {
      const text = select().toSQL().sql;
      expect((await namedStatements()).filter((s) => s === text)).toHaveLength(1);
    }
  });

  it("give Drizzle's rows for a join (mapped by Drizzle, nullable sides and all)", async () => {
    const { db } = database;
    const select = () =>
      db
        .select({ uid: identities.uid, groupUid: roleBindings.groupUid, capabilities: roles.capabilities })
        .from(identities)
        .leftJoin(roleBindings, eq(roleBindings.identityUid, identities.uid))
        .leftJoin(roles, eq(roles.uid, roleBindings.roleUid))
        .where(eq(identities.parentUid, sql.placeholder("parent")));
    const hot = hotStatement(select().prepare("hot_join"));
    const rows = await hot.execute({ parent: ROOT });
    expect(rows).toEqual(await select().prepare("plain_join").execute({ parent: ROOT }));
    expect(rows).toHaveLength(2);
    expect(rows).toContainEqual({ uid: `${ROOT}/00000000000000a2`, groupUid: null, capabilities: null });
    expect(rows).toContainEqual({ uid: `${ROOT}/00000000000000a1`, groupUid: ROOT, capabilities: [1, 2] });
    if (database.kind === "postgres") expect(await namedStatements()).toContain(select().toSQL().sql);
  });

  it("map an inner join's rows with the compiled mapper (no side can be null), the rows Drizzle's own mapping gives", async () => {
    const { db } = database;
    const select = () =>
      db
        .select({ row: { uid: roleBindings.uid, createTime: roleBindings.createTime, identityName: identities.name, roleName: roles.name, groupName: groups.name } })
        .from(roleBindings)
        .innerJoin(identities, eq(identities.uid, roleBindings.identityUid))
        .innerJoin(roles, eq(roles.uid, roleBindings.roleUid))
        .innerJoin(groups, eq(groups.uid, roleBindings.groupUid))
        .where(eq(roleBindings.groupUid, sql.placeholder("group")));
    const hot = hotStatement(select().prepare("hot_inner_join"));
    expect((hot as unknown as { customResultMapper?: unknown }).customResultMapper).toBeTypeOf("function");
    const rows = await hot.execute({ group: ROOT });
    expect(rows).toEqual(await select().prepare("plain_inner_join").execute({ group: ROOT }));
    expect(rows).toEqual([{ row: { uid: `${ROOT}/00000000000000c1`, createTime: expect.any(Date), identityName: "bound", roleName: "r", groupName: "root" } }]);
    expect(await hot.execute({ group: "none" })).toEqual([]);
  });

  it("stay unnamed when planned per call", async () => {
    const { db } = database;
    const select = () => db.select({ name: groups.name }).from(groups).where(sql`${groups.name} ilike ${sql.placeholder("pattern")}`);
    const hot = hotStatement(select().prepare("hot_pattern"), { planEachCall: true });
    expect(await hot.execute({ pattern: "%hil%" })).toEqual([{ name: "child" }]);
    if (database.kind === "postgres") expect(await namedStatements()).not.toContain(select().toSQL().sql);
  });

  it("fail as Drizzle's execute fails: a DrizzleQueryError with the database's error as its cause", async () => {
    const { db } = database;
    const select = () => db.select({ name: groups.name }).from(groups).where(sql`${groups.kind} = cast(${sql.placeholder("kind")} as integer)`);
    const hot = hotStatement(select().prepare("hot_failing"));
    const plain = select().prepare("plain_failing");
    const failure = async (q: { execute(v: Record<string, unknown>): Promise<unknown> }) => {
      const err = await q.execute({ kind: "not a number" }).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(DrizzleQueryError);
      return (err as DrizzleQueryError).cause as { code?: string };
    };
    expect((await failure(hot)).code).toBe((await failure(plain)).code);
    expect((await failure(hot)).code).toBe("22P02");
  });

  it("run a raw statement as db.execute runs it (the rows, a write's effect), named on PostgreSQL, in a transaction too", async () => {
    const { db } = database;
    // A write and a read in one statement, its values parameters: the text is the same on every call.
    const statement = (name: string) =>
      sql`with renamed as (update ${groups} set description = ${name} where uid = ${`${ROOT}/0000000000000001`} returning uid) select uid, ${name}::text as name from renamed`;
    for (let i = 0; i < 7; i++) {
      const hot = executedRows(await executeHot(db, statement(`hot ${i}`)));
      expect(hot).toEqual(executedRows(await db.execute(statement(`hot ${i}`))));
      expect(hot).toEqual([{ uid: `${ROOT}/0000000000000001`, name: `hot ${i}` }]);
    }
    const [row] = await db.select({ description: groups.description }).from(groups).where(eq(groups.uid, `${ROOT}/0000000000000001`));
    expect(row!.description).toBe("hot 6");
    if (database.kind === "postgres") {
      const text = (db as unknown as { dialect: { sqlToQuery(q: unknown): { sql: string } } }).dialect.sqlToQuery(statement("x")).sql;
      expect((await namedStatements()).filter((s) => s === text)).toHaveLength(1);
    }
    // In a transaction: on the transaction's connection, rolled back with it.
    await db
      .transaction(async (tx) => {
        expect(executedRows(await executeHot(tx, statement("in a transaction")))).toEqual([{ uid: `${ROOT}/0000000000000001`, name: "in a transaction" }]);
        throw new Error("roll back");
      })
      .catch(() => {});
    const [after] = await db.select({ description: groups.description }).from(groups).where(eq(groups.uid, `${ROOT}/0000000000000001`));
    expect(after!.description).toBe("hot 6");
  });

  it("fail a raw statement as db.execute fails it: a DrizzleQueryError with the database's error as its cause", async () => {
    const { db } = database;
    const statement = sql`select cast(${"not a number"}::text as integer) as n`;
    const failure = async (run: () => PromiseLike<unknown>) => {
      const err = await Promise.resolve(run()).then(() => undefined, (e: unknown) => e);
      expect(err).toBeInstanceOf(DrizzleQueryError);
      return (err as DrizzleQueryError).cause as { code?: string };
    };
    expect((await failure(() => executeHot(db, statement))).code).toBe("22P02");
    expect((await failure(() => db.execute(statement))).code).toBe("22P02");
  });
});
