// DeleteGroup racing creates beneath the same group, on real PostgreSQL (PGlite runs one transaction at a
// time, so it cannot race). Each race must end in exactly one of two consistent outcomes:
//   - the delete wins: the group is gone, and both creates fail with NOT_FOUND naming it;
//   - a create wins: the delete is refused (FAILED_PRECONDITION, RESOURCE_NOT_EMPTY) and both creates
//     succeed (a refused delete changes nothing, so the group is still there for the other create);
// and afterwards no row anywhere references a group that does not exist.
import { Code, ConnectError } from "@connectrpc/connect";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentitiesService, RelationshipType } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { PreconditionFailureSchema } from "../../gen/google/rpc/error_details_pb.js";
import type { Db } from "../../src/db/client.js";
import { groups, identities } from "../../src/db/schema/index.js";
import { createGroupStore } from "../../src/iam/groups.store.js";
import { createIdentityStore } from "../../src/iam/identities.store.js";
import { ensureManagedRoles } from "../../src/iam/managed-roles.js";
import { newRootUid } from "../../src/kernel/uidp.js";
import { call, detail, type CallError } from "../contract/harness.js";
import { openTestDatabase, type TestDatabase } from "../support/database.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

/** One operation's result: undefined code for success. */
interface Result {
  code: Code | undefined;
  message: string;
  violation?: { type: string; subject: string } | undefined;
}
type Outcome = "delete-won" | "create-won";

/** A store call's result. */
async function viaStore(op: () => Promise<unknown>): Promise<Result> {
  try {
    await op();
    return { code: undefined, message: "ok" };
  } catch (e) {
    const err = ConnectError.from(e);
    return { code: err.code, message: err.rawMessage, violation: err.findDetails(PreconditionFailureSchema)[0]?.violations[0] };
  }
}

/** An API call's result, as the contract harness decodes it. */
async function viaWire(p: Promise<{ error?: CallError | undefined }>): Promise<Result> {
  const out = await p;
  if (!out.error) return { code: undefined, message: "ok" };
  const pf = detail(out.error, PreconditionFailureSchema);
  return { code: out.error.code, message: out.error.message, violation: pf?.violations[0] };
}

/** Rows that reference a group that does not exist, in every table with a group reference. */
async function orphans(db: Db): Promise<number> {
  const rows = await db.execute<{ n: string }>(sql`
    select count(*)::text as n from (
      select c.uid from groups c left join groups p on p.uid = c.parent_uid where c.parent_uid is not null and p.uid is null
      union all
      select i.uid from identities i left join groups p on p.uid = i.parent_uid where i.parent_uid is not null and p.uid is null
      union all
      select r.uid from roles r left join groups p on p.uid = r.parent_uid where r.parent_uid is not null and p.uid is null
      union all
      select b.uid from role_bindings b left join groups p on p.uid = b.group_uid where p.uid is null
    ) o`);
  const list = Array.isArray(rows) ? rows : (rows as unknown as { rows: { n: string }[] }).rows;
  return Number(list[0]!.n);
}

async function childrenOf(db: Db, uid: string) {
  const g = await db.select({ uid: groups.uid }).from(groups).where(eq(groups.parentUid, uid));
  const i = await db.select({ uid: identities.uid }).from(identities).where(eq(identities.parentUid, uid));
  return { groups: g.length, identities: i.length };
}

/** Starts the operations at once, in a shuffled order, and waits for all. */
async function race(ops: Array<() => Promise<Result>>): Promise<Result[]> {
  const order = ops.map((op, i) => ({ op, i, k: Math.random() })).sort((a, b) => a.k - b.k);
  const results: Result[] = new Array(ops.length);
  await Promise.all(order.map(async ({ op, i }) => (results[i] = await op())));
  return results;
}

/** Checks one race's results and the database after it; returns which way it went. */
async function judge(db: Db, uid: string, [del, child, identity]: Result[]): Promise<Outcome> {
  const [row] = await db.select({ uid: groups.uid }).from(groups).where(eq(groups.uid, uid));
  const after = await childrenOf(db, uid);
  const summary = `delete: ${del!.message}; child: ${child!.message}; identity: ${identity!.message}`;
  if (del!.code === undefined) {
    expect(child!.code, summary).toBe(Code.NotFound);
    expect(identity!.code, summary).toBe(Code.NotFound);
    expect(row, summary).toBeUndefined();
    expect(after).toEqual({ groups: 0, identities: 0 });
    return "delete-won";
  }
  expect(del!.code, summary).toBe(Code.FailedPrecondition);
  expect(del!.violation).toMatchObject({ type: "RESOURCE_NOT_EMPTY", subject: uid });
  expect(child!.code, summary).toBeUndefined();
  expect(identity!.code, summary).toBeUndefined();
  expect(row, summary).toBeDefined();
  expect(after).toEqual({ groups: 1, identities: 1 });
  return "create-won";
}

const claim = (subject: string) => ({
  relationship: { claimMatch: { issuer: "https://issuer.test", subject } },
  relationshipType: RelationshipType.CLAIM_MATCH,
  issuer: "https://issuer.test",
  subject,
});

describe.skipIf(!process.env.DATABASE_URL)("DeleteGroup racing creates beneath it (PostgreSQL)", () => {
  describe("through the stores", () => {
    let database: TestDatabase;
    let org: string;
    beforeAll(async () => {
      database = await openTestDatabase();
      await ensureManagedRoles(database.db);
      org = newRootUid();
      await database.db.insert(groups).values({ uid: org, parentUid: null, name: "race" });
    });
    afterAll(async () => {
      await database?.dispose();
    });

    it("100 races of delete vs create-child-group vs create-identity: one consistent outcome each, no orphan", async () => {
      const { db } = database;
      const groupStore = createGroupStore(db);
      const identityStore = createIdentityStore(db);
      const tally: Record<Outcome, number> = { "delete-won": 0, "create-won": 0 };
      for (let i = 0; i < 100; i++) {
        const target = await groupStore.create(org, { name: `target ${i}`, description: "", verified: false, kind: 0 });
        const results = await race([
          () => viaStore(() => groupStore.remove(target.uid)),
          () => viaStore(() => groupStore.create(target.uid, { name: `child ${i}`, description: "", verified: false, kind: 0 })),
          () => viaStore(() => identityStore.create(target.uid, { name: `robot ${i}`, description: "", company: "", ...claim(`robot-${i}`) })),
        ]);
        tally[await judge(db, target.uid, results)]++;
      }
      expect(tally["delete-won"] + tally["create-won"]).toBe(100);
      expect(await orphans(db)).toBe(0);
      console.info("store races:", tally);
    });
  });

  describe("through the API (gRPC)", () => {
    let server: TestServer;
    let world: World;
    beforeAll(async () => {
      server = await startTestServer();
      world = await seedWorld(server, "race");
    });
    afterAll(async () => {
      await server?.close();
    });

    it("40 races over the wire: one consistent outcome each, no orphan", async () => {
      const { db } = server.database;
      const owner = world.auth("owner");
      const tally: Record<Outcome, number> = { "delete-won": 0, "create-won": 0 };
      for (let i = 0; i < 40; i++) {
        const created = await call("grpc", server.baseUrl, GroupsService.method.createGroup, { parent: world.org, group: { name: `target ${i}` } }, owner);
        const uid = created.message!.uid;
        const results = await race([
          () => viaWire(call("grpc", server.baseUrl, GroupsService.method.deleteGroup, { uid }, owner)),
          () => viaWire(call("grpc", server.baseUrl, GroupsService.method.createGroup, { parent: uid, group: { name: `child ${i}` } }, owner)),
          () =>
            viaWire(
              call(
                "grpc",
                server.baseUrl,
                IdentitiesService.method.createIdentity,
                {
                  parent: uid,
                  identity: {
                    name: `robot ${i}`,
                    relationship: { case: "claimMatch", value: { iss: { case: "issuer", value: "https://issuer.test" }, sub: { case: "subject", value: `r-${i}` } } },
                  },
                },
                owner,
              ),
            ),
        ]);
        tally[await judge(db, uid, results)]++;
      }
      expect(await orphans(db)).toBe(0);
      console.info("API races:", tally);
    });
  });
});
