// Requests for access to a group over every protocol: GroupsService.RequestGroupAccess (who may ask, what an
// unknown group or a sub-group reveals, the repeat window with its RetryInfo, a caller who has access already, the record
// and its event), and the owners' list apiserver.iam.v1.GroupAccessRequestsService.ListGroupAccessRequests
// (pending only, the group and beneath it, authorization), with approval by a role binding end to end.
import { Code } from "@connectrpc/connect";
import { durationMs } from "@bufbuild/protobuf/wkt";
import { and, eq, sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupAccessRequestsService } from "../../gen/apiserver/iam/v1/group_access_requests_pb.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { BadRequestSchema, ErrorInfoSchema, PreconditionFailureSchema, ResourceInfoSchema, RetryInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { groupAccessRequests, identities, outboxEvents, roleBindings } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { insertPerson, seedWorld, type World } from "../support/world.js";
import { call, contractCase, detail, protocols, runContractCases, type Protocol } from "./harness.js";

const GROUP = "chainguard.platform.iam.v2.Group";
const HOUR_MS = 3_600_000;

let server: TestServer;
/** Requests are made in this one. */
let world: World;
/** Another organization requests are made for. */
let spare: World;
/** Requests inserted, none ever made: list results are exact. */
let quiet: World;
const q = { a: "", b: "", c: "", approved: "" };

const base = () => server.baseUrl;

/** A root-level identity (a person) with no bindings, and its authorization header. */
const person = (name: string, email = "") => insertPerson(server, name, email);

async function insertRequest(group: string, identityUid: string, at: Date): Promise<string> {
  const uid = newChildUid(group);
  await server.database.db.insert(groupAccessRequests).values({ uid, groupUid: group, identityUid, createTime: at, requestTime: at });
  return uid;
}

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "acme");
  spare = await seedWorld(server, "spare");
  quiet = await seedWorld(server, "quiet");
  const day = (d: number) => new Date(Date.UTC(2024, 0, d));
  const [a, b, c, approved] = await Promise.all([person("alice", "alice@example.com"), person("bob"), person("carol"), person("dave")]);
  q.a = await insertRequest(quiet.org, a.uid, day(1));
  q.b = await insertRequest(quiet.team, b.uid, day(2));
  q.c = await insertRequest(quiet.other, c.uid, day(3));
  // dave asked for the team and was given a binding on the organization: approved, no longer pending.
  q.approved = await insertRequest(quiet.team, approved.uid, day(4));
  await server.database.db
    .insert(roleBindings)
    .values({ uid: newChildUid(quiet.org), groupUid: quiet.org, identityUid: approved.uid, roleUid: managedRole("viewer").uid });
});

afterAll(async () => {
  await server?.close();
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("RequestGroupAccess: refusals", base, [
  contractCase({
    name: "a group that does not exist: NOT_FOUND (nothing else is revealed)",
    method: GroupsService.method.requestGroupAccess,
    request: () => ({ groupUid: newRootUid() }),
    headers: () => world.auth("stranger"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: GROUP } }] },
  }),
  contractCase({
    name: "a malformed group uid: INVALID_ARGUMENT on group_uid",
    method: GroupsService.method.requestGroupAccess,
    request: { groupUid: "NOT-A-UID" },
    headers: () => world.auth("stranger"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "group_uid" }] } }] },
  }),
  contractCase({
    name: "no group uid: INVALID_ARGUMENT on group_uid",
    method: GroupsService.method.requestGroupAccess,
    request: { groupUid: "" },
    headers: () => world.auth("stranger"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "group_uid" }] } }] },
    // REST: the group uid is the path; an empty one names no route.
    only: ["grpc", "grpc-web", "connect-json", "connect-binary-h2"],
  }),
  contractCase({
    name: "an identity created under a group is not eligible",
    method: GroupsService.method.requestGroupAccess,
    request: () => ({ groupUid: spare.org }),
    headers: () => world.auth("confined"),
    error: { code: Code.PermissionDenied, reason: "NOT_ELIGIBLE" },
  }),
  contractCase({
    name: "a caller bound on the group already: FAILED_PRECONDITION",
    method: GroupsService.method.requestGroupAccess,
    request: () => ({ groupUid: world.org }),
    headers: () => world.auth("viewer"),
    error: { code: Code.FailedPrecondition, reason: "ACCESS_ALREADY_GRANTED", details: [{ schema: PreconditionFailureSchema, value: { violations: [{ type: "ALREADY_GRANTED" }] } }] },
  }),
  contractCase({
    name: "a sub-group: NOT_FOUND, as a group that does not exist (access is asked of an organization)",
    method: GroupsService.method.requestGroupAccess,
    request: () => ({ groupUid: world.team }),
    headers: () => world.auth("stranger"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: GROUP, resourceName: expect.stringMatching(/^[0-9a-f]{40}\/[0-9a-f]{16}$/) } }] },
  }),
  contractCase({
    name: "a sub-group, to a caller bound on it: the same NOT_FOUND",
    method: GroupsService.method.requestGroupAccess,
    request: () => ({ groupUid: world.team }),
    headers: () => world.auth("teamViewer"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: GROUP } }] },
  }),
  contractCase({
    name: "no token: UNAUTHENTICATED",
    method: GroupsService.method.requestGroupAccess,
    request: () => ({ groupUid: world.org }),
    error: { code: Code.Unauthenticated },
  }),
]);

describe.each(protocols)("RequestGroupAccess [%s]", (protocol: Protocol) => {
  it("a person asks for a group they cannot see: recorded and evented; a repeat within the window is RESOURCE_EXHAUSTED", async () => {
    const me = await person(`asker-${protocol}`);
    const { db } = server.database;
    const first = await call(protocol, base(), GroupsService.method.requestGroupAccess, { groupUid: world.org }, me.auth);
    expect(first.error?.message).toBeUndefined();

    const [row] = await db.select().from(groupAccessRequests).where(eq(groupAccessRequests.identityUid, me.uid));
    expect(row).toMatchObject({ groupUid: world.org });
    expect(row!.uid.startsWith(world.org + "/")).toBe(true);
    const events = await db.select().from(outboxEvents).where(and(eq(outboxEvents.actor, me.uid), eq(outboxEvents.type, "dev.chainguard.api.iam.group_access.requested.v1")));
    expect(events).toHaveLength(1);
    expect(events[0]).toMatchObject({ subject: world.org, groupUid: world.org, body: { groupUid: world.org } });

    const again = await call(protocol, base(), GroupsService.method.requestGroupAccess, { groupUid: world.org }, me.auth);
    expect(again.error?.code).toBe(Code.ResourceExhausted);
    expect(detail(again.error!, ErrorInfoSchema)?.reason).toBe("ACCESS_ALREADY_REQUESTED");
    const retry = detail(again.error!, RetryInfoSchema);
    expect(retry?.retryDelay).toBeDefined();
    const delay = durationMs(retry!.retryDelay!);
    expect(delay).toBeGreaterThan(0);
    expect(delay).toBeLessThanOrEqual(HOUR_MS);
    if (protocol === "rest") expect(again.error!.httpStatus).toBe(429);
    // The refused repeat recorded nothing more.
    expect(await db.select().from(outboxEvents).where(eq(outboxEvents.actor, me.uid))).toHaveLength(1);

    // Another group is another request.
    const other = await call(protocol, base(), GroupsService.method.requestGroupAccess, { groupUid: spare.org }, me.auth);
    expect(other.error?.message).toBeUndefined();
  });

  it("after the window, a repeat renews the request (its first time kept) and is evented again", async () => {
    const me = await person(`renewer-${protocol}`);
    const { db } = server.database;
    expect((await call(protocol, base(), GroupsService.method.requestGroupAccess, { groupUid: spare.org }, me.auth)).error).toBeUndefined();
    const old = new Date(Date.now() - 2 * HOUR_MS);
    await db
      .update(groupAccessRequests)
      .set({ createTime: old, requestTime: old })
      .where(eq(groupAccessRequests.identityUid, me.uid));
    const again = await call(protocol, base(), GroupsService.method.requestGroupAccess, { groupUid: spare.org }, me.auth);
    expect(again.error?.message).toBeUndefined();
    const rows = await db.select().from(groupAccessRequests).where(eq(groupAccessRequests.identityUid, me.uid));
    expect(rows).toHaveLength(1);
    expect(rows[0]!.createTime.getTime()).toBe(old.getTime());
    expect(rows[0]!.requestTime.getTime()).toBeGreaterThan(old.getTime());
    expect(await db.select().from(outboxEvents).where(eq(outboxEvents.actor, me.uid))).toHaveLength(2);
  });

  it("approval: the owner sees the request, binds a role, and the request is no longer pending", async () => {
    const me = await person(`joiner-${protocol}`, `joiner-${protocol}@example.com`);
    expect((await call(protocol, base(), GroupsService.method.requestGroupAccess, { groupUid: world.org }, me.auth)).error).toBeUndefined();
    const pending = async () => {
      const out = await call(protocol, base(), GroupAccessRequestsService.method.listGroupAccessRequests, { group: world.org, pageSize: 200 }, world.auth("owner"));
      expect(out.error?.message).toBeUndefined();
      return out.message!.groupAccessRequests.filter((r) => r.identityUid === me.uid);
    };
    const [listed] = await pending();
    expect(listed).toMatchObject({ groupUid: world.org, identityName: `joiner-${protocol}`, identityEmail: `joiner-${protocol}@example.com` });

    const bound = await call(
      protocol,
      base(),
      RoleBindingsService.method.createRoleBinding,
      { parent: listed!.groupUid, roleBinding: { identityUid: listed!.identityUid, roleUid: managedRole("viewer").uid } },
      world.auth("owner"),
    );
    expect(bound.error?.message).toBeUndefined();
    expect(await pending()).toEqual([]);
    // The requester now has access, and asking again says so.
    const repeat = await call(protocol, base(), GroupsService.method.requestGroupAccess, { groupUid: world.org }, me.auth);
    expect(repeat.error?.code).toBe(Code.FailedPrecondition);
    const got = await call(protocol, base(), GroupsService.method.getGroup, { uid: world.team }, me.auth);
    expect(got.message?.uid).toBe(world.team);
  });
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("ListGroupAccessRequests", base, [
  contractCase({
    name: "the owner sees the pending requests of the organization and of the groups beneath it, newest first",
    method: GroupAccessRequestsService.method.listGroupAccessRequests,
    request: () => ({ group: quiet.org }),
    headers: () => quiet.auth("owner"),
    response: (r) => {
      expect(r.groupAccessRequests.map((x) => x.uid)).toEqual([q.c, q.b, q.a]);
      expect(r.groupAccessRequests[2]).toMatchObject({ groupUid: quiet.org, identityName: "alice", identityEmail: "alice@example.com" });
      expect(r.groupAccessRequests[2]!.createTime?.seconds).toBe(BigInt(Date.UTC(2024, 0, 1) / 1000));
      expect(r.totalCount).toBe(3n);
    },
  }),
  contractCase({
    name: "a sub-group: its own requests only; an approved one is not listed",
    method: GroupAccessRequestsService.method.listGroupAccessRequests,
    request: () => ({ group: quiet.team }),
    headers: () => quiet.auth("owner"),
    response: (r) => {
      expect(r.groupAccessRequests.map((x) => x.uid)).toEqual([q.b]);
      expect(r.totalCount).toBe(1n);
    },
  }),
  contractCase({
    name: "ordered by create_time, paged",
    method: GroupAccessRequestsService.method.listGroupAccessRequests,
    request: () => ({ group: quiet.org, orderBy: "create_time", pageSize: 2 }),
    headers: () => quiet.auth("owner"),
    response: (r) => {
      expect(r.groupAccessRequests.map((x) => x.uid)).toEqual([q.a, q.b]);
      expect(r.nextPageToken).not.toBe("");
      expect(r.totalCount).toBe(3n);
    },
  }),
  contractCase({
    name: "a viewer (no IAM_ROLE_BINDINGS_CREATE) may not list",
    method: GroupAccessRequestsService.method.listGroupAccessRequests,
    request: () => ({ group: quiet.org }),
    headers: () => quiet.auth("viewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "an owner confined to a sibling sub-group may not list another sub-group's",
    method: GroupAccessRequestsService.method.listGroupAccessRequests,
    request: () => ({ group: quiet.team }),
    headers: () => quiet.auth("confinedOther"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "an unknown order_by field: INVALID_ARGUMENT",
    method: GroupAccessRequestsService.method.listGroupAccessRequests,
    request: () => ({ group: quiet.org, orderBy: "identity_name" }),
    headers: () => quiet.auth("owner"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "order_by" }] } }] },
  }),
  contractCase({
    name: "a sub-group that does not exist: NOT_FOUND",
    method: GroupAccessRequestsService.method.listGroupAccessRequests,
    request: () => ({ group: `${quiet.org}/ffffffffffffffff` }),
    headers: () => quiet.auth("owner"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: GROUP } }] },
  }),
]);

describe("group access requests go with their group and their requester", () => {
  it("deleting the requesting identity deletes its requests", async () => {
    const me = await person("leaver");
    await insertRequest(world.other, me.uid, new Date());
    await server.database.db.delete(identities).where(eq(identities.uid, me.uid));
    const [left] = await server.database.db.select({ n: sql<number>`count(*)::int` }).from(groupAccessRequests).where(eq(groupAccessRequests.identityUid, me.uid));
    expect(left!.n).toBe(0);
  });
});

// The embedded database runs one transaction at a time: concurrency needs PostgreSQL.
describe.skipIf(!process.env.DATABASE_URL)("concurrent repeats (PostgreSQL)", () => {
  it("eight requests at once for one group: one is recorded and evented, the others are RESOURCE_EXHAUSTED", async () => {
    const me = await person("eager");
    const outs = await Promise.all(
      Array.from({ length: 8 }, (_, i) => call(protocols[i % protocols.length]!, base(), GroupsService.method.requestGroupAccess, { groupUid: spare.org }, me.auth)),
    );
    const codes = outs.map((o) => (o.error ? Code[o.error.code] : "OK")).sort();
    expect(codes).toEqual(["OK", ...Array<string>(7).fill("ResourceExhausted")].sort());
    const { db } = server.database;
    expect(await db.select().from(groupAccessRequests).where(eq(groupAccessRequests.identityUid, me.uid))).toHaveLength(1);
    expect(await db.select().from(outboxEvents).where(eq(outboxEvents.actor, me.uid))).toHaveLength(1);
  });
});
