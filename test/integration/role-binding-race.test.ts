// CreateRoleBinding racing DeleteGroup of the binding's group, through the API on real PostgreSQL (PGlite
// runs one transaction at a time, so it cannot race). The create reads the group, the identity and the role,
// then inserts; the delete may land anywhere in between. Each round must end in one consistent outcome:
//   - the delete wins: the group is gone and the create answers NOT_FOUND;
//   - the create wins: the binding exists and the delete is refused (FAILED_PRECONDITION, RESOURCE_NOT_EMPTY);
// never INTERNAL, and afterwards no binding references a group that does not exist. The same create racing
// DeleteIdentity of its identity: the delete goes through (taking the identity's bindings with it), and a
// refused create names the identity (NOT_FOUND of an Identity), never the group.
import { Code } from "@connectrpc/connect";
import { eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentitiesService } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { RolesService } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { PreconditionFailureSchema } from "../../gen/google/rpc/error_details_pb.js";
import type { Db } from "../../src/db/client.js";
import { groups, roleBindings } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { call, detail, type CallError } from "../contract/harness.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";

interface Result {
  code: Code | undefined;
  message: string;
  violation?: { type: string; subject: string } | undefined;
}

async function viaWire(p: Promise<{ error?: CallError | undefined }>): Promise<Result> {
  const out = await p;
  if (!out.error) return { code: undefined, message: "ok" };
  return { code: out.error.code, message: out.error.message, violation: detail(out.error, PreconditionFailureSchema)?.violations[0] };
}

/** Starts the operations at once, in a shuffled order, and waits for all. */
async function race(ops: Array<() => Promise<Result>>): Promise<Result[]> {
  const order = ops.map((op, i) => ({ op, i, k: Math.random() })).sort((a, b) => a.k - b.k);
  const results: Result[] = new Array(ops.length);
  await Promise.all(order.map(async ({ op, i }) => (results[i] = await op())));
  return results;
}

/** Bindings whose group does not exist. */
async function orphanBindings(db: Db): Promise<number> {
  const rows = await db.execute<{ n: string }>(
    sql`select count(*)::text as n from role_bindings b left join groups g on g.uid = b.group_uid where g.uid is null`,
  );
  const list = Array.isArray(rows) ? rows : (rows as unknown as { rows: { n: string }[] }).rows;
  return Number(list[0]!.n);
}

const ROUNDS = 100;

describe.skipIf(!process.env.DATABASE_URL)("CreateRoleBinding racing DeleteGroup (PostgreSQL)", () => {
  let server: TestServer;
  let world: World;
  beforeAll(async () => {
    server = await startTestServer();
    world = await seedWorld(server, "binding-race");
  });
  afterAll(async () => {
    await server?.close();
  });

  it(`${ROUNDS} rounds over gRPC: OK, NOT_FOUND or FAILED_PRECONDITION, never INTERNAL; no orphan`, async () => {
    const { db } = server.database;
    const owner = world.auth("owner");
    // A custom role of the organization, so the create also reads (and share-locks) a role row of the org.
    const role = await call("grpc", server.baseUrl, RolesService.method.createRole, { parent: world.org, role: { name: "race", capabilities: [Capability.CAP_IAM_GROUPS_LIST] } }, owner);
    expect(role.error?.message).toBeUndefined();
    const roleUids = [managedRole("viewer").uid, role.message!.uid];
    const tally = { "delete-won": 0, "create-won": 0 };
    for (let i = 0; i < ROUNDS; i++) {
      const created = await call("grpc", server.baseUrl, GroupsService.method.createGroup, { parent: world.org, group: { name: `target ${i}` } }, owner);
      expect(created.error?.message).toBeUndefined();
      const uid = created.message!.uid;
      const [del, bind] = await race([
        // The create does more work than the delete: the delete starts up to a few ms late, so that it lands
        // before, inside and after the create's transaction across the rounds.
        async () => {
          await new Promise((r) => setTimeout(r, i % 8));
          return viaWire(call("grpc", server.baseUrl, GroupsService.method.deleteGroup, { uid }, owner));
        },
        () =>
          viaWire(
            call(
              "grpc",
              server.baseUrl,
              RoleBindingsService.method.createRoleBinding,
              { parent: uid, roleBinding: { identityUid: world.identity.stranger, roleUid: roleUids[i % 2]! } },
              owner,
            ),
          ),
      ]);
      const name = (r: Result) => (r.code === undefined ? "OK" : `${Code[r.code]} ${r.message}`);
      const summary = `round ${i}: delete: ${name(del!)}; create: ${name(bind!)}`;
      expect([undefined, Code.FailedPrecondition], summary).toContain(del!.code);
      expect([undefined, Code.NotFound], summary).toContain(bind!.code);
      const [row] = await db.select({ uid: groups.uid }).from(groups).where(eq(groups.uid, uid));
      const bound = await db.select({ uid: roleBindings.uid }).from(roleBindings).where(eq(roleBindings.groupUid, uid));
      if (del!.code === undefined) {
        expect(bind!.code, summary).toBe(Code.NotFound);
        expect(row, summary).toBeUndefined();
        tally["delete-won"]++;
      } else {
        expect(del!.violation, summary).toMatchObject({ type: "RESOURCE_NOT_EMPTY", subject: uid });
        expect(bind!.code, summary).toBeUndefined();
        expect(row, summary).toBeDefined();
        expect(bound.length, summary).toBe(1);
        tally["create-won"]++;
      }
    }
    expect(await orphanBindings(db)).toBe(0);
    console.info("binding races:", tally);
  });

  it(`${ROUNDS} rounds against DeleteIdentity of the bound identity: the create answers OK or names the identity, never INTERNAL`, async () => {
    const owner = world.auth("owner");
    const tally = { "delete-first": 0, "create-first": 0 };
    for (let i = 0; i < ROUNDS; i++) {
      const identity = await call(
        "grpc",
        server.baseUrl,
        IdentitiesService.method.createIdentity,
        {
          parent: world.org,
          identity: { name: `robot ${i}`, relationship: { case: "claimMatch", value: { iss: { case: "issuer", value: "https://issuer.test" }, sub: { case: "subject", value: `robot-${i}` } } } },
        },
        owner,
      );
      expect(identity.error?.message).toBeUndefined();
      const identityUid = identity.message!.uid;
      const [del, bind] = await race([
        async () => {
          await new Promise((r) => setTimeout(r, i % 8));
          return viaWire(call("grpc", server.baseUrl, IdentitiesService.method.deleteIdentity, { uid: identityUid }, owner));
        },
        () =>
          viaWire(
            call("grpc", server.baseUrl, RoleBindingsService.method.createRoleBinding, { parent: world.team, roleBinding: { identityUid, roleUid: managedRole("viewer").uid } }, owner),
          ),
      ]);
      const summary = `round ${i}: delete: ${del!.code === undefined ? "OK" : del!.message}; create: ${bind!.code === undefined ? "OK" : bind!.message}`;
      // The delete always goes through (it takes the identity's bindings with it).
      expect(del!.code, summary).toBeUndefined();
      // The group is there all along: a refused create names the identity, never the group.
      if (bind!.code !== undefined) {
        expect(bind!.code, summary).toBe(Code.NotFound);
        expect(bind!.message, summary).toContain(`Identity ${JSON.stringify(identityUid)}`);
        tally["delete-first"]++;
      } else tally["create-first"]++;
      const left = await server.database.db.select({ uid: roleBindings.uid }).from(roleBindings).where(eq(roleBindings.identityUid, identityUid));
      expect(left, summary).toEqual([]);
    }
    console.info("identity races:", tally);
  });
});
