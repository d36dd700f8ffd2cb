// A caller bound in thousands of groups lists exactly what it may see, on both databases: every page of
// ListGroups, ListRepos and ListRoleBindings, and their totals, against the groups it is bound in (and what
// lies beneath them), with groups and repos it is not bound in beside them. The statement's scope predicate
// keeps one text and one parameter however many scopes the caller has (kernel/auth/scope-sql.ts).
import { sql } from "drizzle-orm";
import { PgDialect } from "drizzle-orm/pg-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DescMessage, DescMethodUnary, MessageInitShape, MessageShape } from "@bufbuild/protobuf";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { repos } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { SCOPE_RANGES_MAX, scopePredicate } from "../../src/kernel/auth/scope-sql.js";
import { newRootUid } from "../../src/kernel/uidp.js";
import { call } from "../contract/harness.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { insertPerson } from "../support/world.js";

const BOUND = 2_000;
let server: TestServer;
let caller: { uid: string; auth: Record<string, string> };
const expected = { groups: [] as string[], repos: [] as string[], bindings: [] as string[] };

beforeAll(async () => {
  server = await startTestServer();
  const db = server.database.db;
  const org = newRootUid();
  caller = await insertPerson(server, "bound in many groups");
  const viewer = managedRole("viewer").uid;
  // The org, BOUND groups the caller is bound in (viewer) and 300 it is not, each with one repo; a subgroup
  // (with a repo) beneath every tenth bound group, seen through its parent's binding.
  await db.execute(sql`insert into groups (uid, name) values (${org}, 'org')`);
  await db.execute(sql`
    insert into groups (uid, parent_uid, name)
    select ${org} || '/' || substr(md5('g' || i), 1, 16), ${org}, 'team ' || i from generate_series(1, ${BOUND + 300}::int) i`);
  await db.execute(sql`
    insert into groups (uid, parent_uid, name)
    select ${org} || '/' || substr(md5('g' || i), 1, 16) || '/' || substr(md5('s' || i), 1, 16), ${org} || '/' || substr(md5('g' || i), 1, 16), 'sub ' || i
    from generate_series(10, ${BOUND + 300}::int, 10) i`);
  await db.execute(sql`
    insert into repos (uid, group_uid, name)
    select g.uid || '/' || substr(md5('r' || g.uid), 1, 16), g.uid, 'repo-' || substr(md5(g.uid), 1, 12) from groups g where g.uid like ${org} || '/%'`);
  await db.execute(sql`
    insert into role_bindings (uid, group_uid, identity_uid, role_uid)
    select ${org} || '/' || substr(md5('g' || i), 1, 16) || '/' || substr(md5('b' || i), 1, 16), ${org} || '/' || substr(md5('g' || i), 1, 16), ${caller.uid}, ${viewer}
    from generate_series(1, ${BOUND}::int) i`);
  const rows = <T>(q: ReturnType<typeof sql>) => db.execute(q).then((r) => ((r as { rows?: T[] }).rows ?? (r as unknown as T[])));
  const bound = new Set((await rows<{ g: string }>(sql`select group_uid as g from role_bindings where identity_uid = ${caller.uid}`)).map((r) => r.g));
  expect(bound.size).toBe(BOUND);
  const within = (uid: string) => [...ancestorsAndSelf(uid)].some((a) => bound.has(a));
  expected.groups = (await rows<{ uid: string }>(sql`select uid from groups where uid like ${org} || '/%'`)).map((r) => r.uid).filter(within);
  expected.repos = (await rows<{ uid: string }>(sql`select uid from repos where uid like ${org} || '/%'`)).map((r) => r.uid).filter(within);
  expected.bindings = (await rows<{ uid: string }>(sql`select uid from role_bindings where identity_uid = ${caller.uid}`)).map((r) => r.uid);
}, 120_000);
afterAll(async () => {
  await server?.close();
});

function* ancestorsAndSelf(uid: string) {
  for (let i = uid.indexOf("/"); i >= 0; i = uid.indexOf("/", i + 1)) yield uid.slice(0, i);
  yield uid;
}

/** Every page of a list (page size 500), its uids and the first page's total. */
async function listAll<I extends DescMessage, O extends DescMessage>(
  method: DescMethodUnary<I, O>,
  items: (r: MessageShape<O>) => readonly { uid: string }[],
): Promise<{ uids: string[]; total: bigint | undefined }> {
  const uids: string[] = [];
  let pageToken = "";
  let total: bigint | undefined;
  for (let page = 0; page < 100; page++) {
    const r = await call("connect-json", server.baseUrl, method, { pageSize: 500, pageToken } as unknown as MessageInitShape<I>, caller.auth);
    expect(r.error, r.error?.message).toBeUndefined();
    const m = r.message! as MessageShape<O> & { nextPageToken: string; totalCount?: bigint };
    uids.push(...items(m).map((x) => x.uid));
    total ??= m.totalCount;
    if (!m.nextPageToken) return { uids, total };
    pageToken = m.nextPageToken;
  }
  throw new Error("too many pages");
}

describe(`a caller bound in ${BOUND} groups`, () => {
  it("lists exactly the groups it may see, and counts them", async () => {
    const { uids, total } = await listAll(GroupsService.method.listGroups, (r) => r.groups);
    expect(uids.length).toBe(new Set(uids).size);
    expect(uids.sort()).toEqual([...expected.groups].sort());
    expect(total).toBe(BigInt(expected.groups.length));
    expect(expected.groups.length).toBe(BOUND + BOUND / 10);
  });

  it("lists exactly the repos it may see, and counts them", async () => {
    const { uids, total } = await listAll(ReposService.method.listRepos, (r) => r.repos);
    expect(uids.sort()).toEqual([...expected.repos].sort());
    expect(total).toBe(BigInt(expected.repos.length));
  });

  it("lists exactly the role bindings it may see, and counts them", async () => {
    const { uids, total } = await listAll(RoleBindingsService.method.listRoleBindings, (r) => r.roleBindings);
    expect(uids.sort()).toEqual([...expected.bindings].sort());
    expect(total).toBe(BigInt(BOUND));
  });
});

describe("the scope predicate's statement", () => {
  const render = (n: number) => new PgDialect().sqlToQuery(scopePredicate(repos.uid, Array.from({ length: n }, (_, i) => `${"a".repeat(40)}/${i.toString(16).padStart(16, "0")}`)));

  it("has the same text and one parameter for any number of scopes beyond the written-out ranges", () => {
    const few = render(SCOPE_RANGES_MAX + 1);
    for (const n of [100, 10_000]) {
      const q = render(n);
      expect(q.sql).toBe(few.sql);
      expect(q.params).toHaveLength(1);
      expect((q.params[0] as string[]).length).toBe(n);
    }
    expect(render(SCOPE_RANGES_MAX).params).toHaveLength(3 * SCOPE_RANGES_MAX);
  });
});
