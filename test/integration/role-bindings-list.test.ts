// The role-bindings store's list on its prepared statements (kernel/list/prepared.ts): every filter shape
// gives the rows, order and total the same filter gives written out by hand, and on PostgreSQL the page runs
// as a named statement of the connection (in pg_prepared_statements once it ran).
import { create } from "@bufbuild/protobuf";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ListRoleBindingsRequestSchema } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { groups, identities, roleBindings, roles } from "../../src/db/schema/index.js";
import { roleBindingListSpec } from "../../src/iam/role-bindings.service.js";
import { createRoleBindingStore, type BindingListFilter } from "../../src/iam/role-bindings.store.js";
import { createListPlanner } from "../../src/kernel/list/index.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";

const ROOT = "b".repeat(40);
const OTHER = "c".repeat(40);
const CHILD = `${ROOT}/0000000000000001`;
const hex = (n: number) => n.toString(16).padStart(16, "0");
let database: TestDatabase;

beforeAll(async () => {
  database = await openTestDatabase({ max: 1 });
  const { db } = database;
  await db.insert(groups).values([
    { uid: ROOT, parentUid: null, name: "root" },
    { uid: CHILD, parentUid: ROOT, name: "child", description: "c" },
    { uid: OTHER, parentUid: null, name: "other" },
  ]);
  const relationship = { claimMatch: { issuer: "https://issuer.example", subject: "s" } };
  await db.insert(identities).values(Array.from({ length: 4 }, (_, i) => ({ uid: `${ROOT}/${hex(0xa0 + i)}`, parentUid: ROOT, name: `identity ${i}`, relationship, relationshipType: 1 })));
  await db.insert(roles).values([
    { uid: `${ROOT}/${hex(0xb0)}`, parentUid: ROOT, name: "r0", capabilities: [1] },
    { uid: `${ROOT}/${hex(0xb1)}`, parentUid: ROOT, name: "r1", capabilities: [2] },
  ]);
  // Bindings on the root, on its child and on another organization, with distinct create times.
  const at = (i: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, i));
  const bindings = [
    ...Array.from({ length: 5 }, (_, i) => ({ uid: `${ROOT}/${hex(0xc0 + i)}`, groupUid: ROOT, identityUid: `${ROOT}/${hex(0xa0 + (i % 4))}`, roleUid: `${ROOT}/${hex(i === 4 ? 0xb1 : 0xb0 + (i % 2))}`, createTime: at(10 - i) })),
    ...Array.from({ length: 3 }, (_, i) => ({ uid: `${CHILD}/${hex(0xd0 + i)}`, groupUid: CHILD, identityUid: `${ROOT}/${hex(0xa0 + i)}`, roleUid: `${ROOT}/${hex(0xb0)}`, createTime: at(20 + i) })),
  ];
  await db.insert(roleBindings).values(bindings);
}, 60_000);

afterAll(async () => database?.dispose());

describe("role bindings list", () => {
  const planner = () => createListPlanner({ secret: new Uint8Array(32).fill(7) });
  const filter = (f: Partial<BindingListFilter>): BindingListFilter => ({ uidp: undefined, identity: "", group: "", role: "", scopes: [ROOT], ...f });
  /** Every page of a filter, two at a time: the uids in order, and the total of each page. */
  async function walk(f: BindingListFilter, request: Record<string, unknown> = {}) {
    const store = createRoleBindingStore(database.db);
    const lists = planner();
    const uids: string[] = [];
    const totals: bigint[] = [];
    let pageToken = "";
    do {
      const req = create(ListRoleBindingsRequestSchema, { pageSize: 2, pageToken, ...request, uidp: f.uidp, identity: f.identity, group: f.group, role: f.role });
      const page = await store.list(lists.plan(req, roleBindingListSpec, f.scopes), f);
      uids.push(...page.rows.map((r) => r.uid));
      totals.push(page.totalCount);
      expect(page.rows.every((r) => r.identityName.startsWith("identity ") && (r.roleName === "r0" || r.roleName === "r1"))).toBe(true);
      pageToken = page.nextPageToken;
    } while (pageToken);
    return { uids, totals };
  }
  /** The same selection, in create_time then uid order, by hand. */
  async function expected(where: ReturnType<typeof sql>) {
    const rows = (await database.db.execute(sql`select uid from role_bindings where ${where} order by create_time, uid`)) as unknown as { uid: string }[];
    return (Array.isArray(rows) ? rows : (rows as unknown as { rows: { uid: string }[] }).rows).map((r) => r.uid);
  }

  const cases: [string, { uidp?: { descendantsOf?: string; childrenOf?: string; ids?: string[] }; identity?: string; role?: string; group?: string }, ReturnType<typeof sql>][] = [
    ["no uidp filter", {}, sql`group_uid = ${ROOT} or group_uid like ${`${ROOT}/%`}`],
    ["descendants_of the root", { uidp: { descendantsOf: ROOT } }, sql`uid like ${`${ROOT}/%`}`],
    ["descendants_of the child", { uidp: { descendantsOf: CHILD } }, sql`uid like ${`${CHILD}/%`}`],
    ["children_of the child", { uidp: { childrenOf: CHILD } }, sql`group_uid = ${CHILD}`],
    ["an identity", { identity: `${ROOT}/${hex(0xa1)}` }, sql`identity_uid = ${`${ROOT}/${hex(0xa1)}`}`],
    ["a role beneath the root", { role: `${ROOT}/${hex(0xb1)}`, uidp: { descendantsOf: ROOT } }, sql`role_uid = ${`${ROOT}/${hex(0xb1)}`}`],
    ["a group", { group: CHILD }, sql`group_uid = ${CHILD}`],
    ["ids (built for the call)", { uidp: { ids: [`${ROOT}/${hex(0xc1)}`, `${CHILD}/${hex(0xd2)}`] } }, sql`uid in (${`${ROOT}/${hex(0xc1)}`}, ${`${CHILD}/${hex(0xd2)}`})`],
  ];
  it.each(cases)("%s: every visible binding once, in order, the same total on every page", async (_, f, where) => {
    const uidp = "uidp" in f ? create(ListRoleBindingsRequestSchema, { uidp: f.uidp }).uidp : undefined;
    const { uids, totals } = await walk(filter({ ...f, uidp }));
    const want = await expected(where);
    expect(want.length).toBeGreaterThan(0);
    expect(uids).toEqual(want);
    expect(new Set(totals)).toEqual(new Set([BigInt(want.length)]));
  });

  it("a scope narrower than the filter: only the bindings within it, counted as such", async () => {
    const { uids, totals } = await walk(filter({ scopes: [CHILD], uidp: create(ListRoleBindingsRequestSchema, { uidp: { descendantsOf: ROOT } }).uidp }));
    expect(uids).toEqual(await expected(sql`group_uid = ${CHILD}`));
    expect(totals[0]).toBe(3n);
  });

  it("no scope: nothing", async () => {
    const { uids, totals } = await walk(filter({ scopes: [] }));
    expect(uids).toEqual([]);
    expect(totals).toEqual([0n]);
  });

  it("on PostgreSQL, a page runs as a named statement of the connection", async () => {
    await walk(filter({ uidp: create(ListRoleBindingsRequestSchema, { uidp: { descendantsOf: ROOT } }).uidp }));
    if (database.kind !== "postgres") return;
    const rows = (await database.db.execute(sql`select statement from pg_prepared_statements`)) as unknown as { statement: string }[];
    const named = rows.map((r) => r.statement).filter((s) => s.includes(`from "role_bindings" inner join "identities"`));
    expect(named.length).toBeGreaterThan(0);
  });
});
