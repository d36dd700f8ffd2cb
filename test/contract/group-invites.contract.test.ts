// GroupInvitesService over every protocol, and the accept method of this server's own package
// (apiserver.iam.v1.GroupInviteAcceptanceService): create (role visible from the group and existing, email,
// ttl bounds, no escalation, NOT_FOUND of the group), the code returned by create only (never by get, list
// or in a stored column), get, delete, list (visible scopes, uidp and key_id filters, newest first), and
// accept (a caller with no identity yet, by a token of an issuer the test runs; one refusal for every bad
// code). Invites for fixtures are inserted straight into their table or made as the owner.
import { Code } from "@connectrpc/connect";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupInviteAcceptanceService } from "../../gen/apiserver/iam/v1/group_invites_pb.js";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { GroupInviteSchema, GroupInvitesService, type GroupInvite } from "../../gen/chainguard/platform/iam/v2/group_invites_pb.js";
import { GroupSchema, GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { RolesService } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import { BadRequestSchema, ErrorInfoSchema, ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { groupInvites, groups, identities, roleBindings, roles } from "../../src/db/schema/index.js";
import { inviteCodeHash, newInviteCode } from "../../src/iam/group-invite-code.js";
import { INVITE_REFUSED_REASON } from "../../src/iam/group-invites.accept.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { startFakeIssuer, type FakeIssuer } from "../support/fake-issuer.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type Caller, type World } from "../support/world.js";
import { call, contractCase, detail, protocols, runContractCases } from "./harness.js";

const C = Capability;
const S = GroupInvitesService.method;
const A = GroupInviteAcceptanceService.method;
const INVITE = GroupInviteSchema.typeName;
const viewerRole = managedRole("viewer").uid;
const CODE = /^cginv_[0-9a-f]{16}\.[A-Za-z0-9_-]{43}$/;
const DAY = { seconds: 86_400n };

let server: TestServer;
/** Invites are created and deleted here. */
let world: World;
/** Nothing changes here: list results are exact. */
let quiet: World;
let foreign: World;
let idp: FakeIssuer;
const uid: Record<string, string> = {};
let inviterToken = "";
/** quiet's invites: org (oldest), team, other (newest); and their key ids. */
const q: { uid: string; keyId: string }[] = [];

let seq = 0;
const unique = (prefix: string) => `${prefix}-${++seq}`;
const as = (w: () => World, caller: Caller) => () => w().auth(caller);
const inviter = () => ({ authorization: `Bearer ${inviterToken}` });
const violation = (field: string) => ({ schema: BadRequestSchema, value: { fieldViolations: [{ field }] } });
const resource = (resourceType: string) => ({ schema: ResourceInfoSchema, value: { resourceType } });

async function insertInvite(group: string, createTime: Date, fields: Partial<typeof groupInvites.$inferInsert> = {}) {
  const { code, keyId } = newInviteCode();
  const id = newChildUid(group);
  await server.database.db.insert(groupInvites).values({
    uid: id,
    groupUid: group,
    roleUid: viewerRole,
    expirationTime: new Date(Date.now() + 86_400_000),
    codeHash: inviteCodeHash(code),
    keyId,
    createTime,
    ...fields,
  });
  return { uid: id, keyId, code };
}

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "acme");
  quiet = await seedWorld(server, "quiet");
  foreign = await seedWorld(server, "foreign");
  idp = await startFakeIssuer({ audience: server.baseUrl });
  const { db } = server.database;
  const role = (key: string, group: string, capabilities: Capability[]) => {
    uid[key] = newChildUid(group);
    return { uid: uid[key]!, parentUid: group, name: key, description: `${key} role`, capabilities };
  };
  await db.insert(roles).values([
    role("teamReader", world.team, [C.CAP_REPO_LIST]),
    // May invite and bind, holds CAP_REPO_LIST only besides: inviting with viewer would escalate.
    role("inviter", world.team, [C.CAP_IAM_GROUP_INVITES_CREATE, C.CAP_IAM_GROUP_INVITES_LIST, C.CAP_IAM_ROLE_BINDINGS_CREATE, C.CAP_REPO_LIST]),
    role("foreignRole", foreign.org, [C.CAP_REPO_LIST]),
  ]);
  const person = newRootUid();
  await db.insert(identities).values({
    uid: person,
    name: "inviter",
    relationship: { claimMatch: { issuer: "https://issuer.test", subject: `sub-${person}` } },
    relationshipType: 1,
    issuer: "https://issuer.test",
    subject: `sub-${person}`,
  });
  await db.insert(roleBindings).values({ uid: newChildUid(world.team), groupUid: world.team, identityUid: person, roleUid: uid.inviter! });
  inviterToken = await server.token(person);

  const t0 = Date.now() - 3_600_000;
  for (const [i, g] of [quiet.org, quiet.team, quiet.other].entries()) q.push(await insertInvite(g, new Date(t0 + i * 1000)));
  uid.toGet = (await insertInvite(world.team, new Date(), { email: "ana@example.com", singleUse: true })).uid;
});
afterAll(async () => {
  await idp?.close();
  await server?.close();
});

const hasNoCode = (i: GroupInvite) => expect(i.code).toBe("");

runContractCases("CreateGroupInvite", () => server.baseUrl, [
  contractCase({
    name: "creates an invite: the code once, its key id, the role block, expiration = now + ttl",
    method: S.createGroupInvite,
    request: () => ({ parent: world.team, groupInvite: { roleUid: viewerRole, email: "Bob@Example.com", ttl: DAY, singleUse: true } }),
    headers: as(() => world, "owner"),
    response: (i) => {
      expect(i.uid.startsWith(`${world.team}/`)).toBe(true);
      expect(i.code).toMatch(CODE);
      expect(i.code.slice(6, 22)).toBe(i.keyId);
      expect(i.role).toMatchObject({ uid: viewerRole, name: "viewer" });
      expect(i.role!.capabilities).toContain(C.CAP_REPO_LIST);
      expect(i.email).toBe("bob@example.com");
      expect(i.singleUse).toBe(true);
      expect(i.ttl).toBeUndefined();
      const left = timestampDate(i.expirationTime!).getTime() - Date.now();
      expect(left).toBeGreaterThan(86_400_000 - 120_000);
      expect(left).toBeLessThanOrEqual(86_400_000);
    },
  }),
  contractCase({
    name: "a custom role of an ancestor group, by a caller holding its capabilities",
    method: S.createGroupInvite,
    request: () => ({ parent: world.team, groupInvite: { roleUid: uid.teamReader!, ttl: { seconds: 60n } } }),
    headers: inviter,
    response: (i) => expect(i.role?.uid).toBe(uid.teamReader),
  }),
  contractCase({
    name: "no escalation: a role with capabilities the caller does not hold is PERMISSION_DENIED",
    method: S.createGroupInvite,
    request: () => ({ parent: world.team, groupInvite: { roleUid: viewerRole, ttl: DAY } }),
    headers: inviter,
    error: { code: Code.PermissionDenied, message: /would grant capabilities the caller does not hold/ },
  }),
  contractCase({
    name: "an editor (no CAP_IAM_GROUP_INVITES_CREATE) is PERMISSION_DENIED",
    method: S.createGroupInvite,
    request: () => ({ parent: world.team, groupInvite: { roleUid: viewerRole, ttl: DAY } }),
    headers: as(() => world, "editor"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "another organization's owner is PERMISSION_DENIED",
    method: S.createGroupInvite,
    request: () => ({ parent: world.team, groupInvite: { roleUid: viewerRole, ttl: DAY } }),
    headers: as(() => foreign, "owner"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "no token: UNAUTHENTICATED",
    method: S.createGroupInvite,
    request: () => ({ parent: world.team, groupInvite: { roleUid: viewerRole, ttl: DAY } }),
    error: { code: Code.Unauthenticated },
  }),
  contractCase({
    name: "a group that does not exist: NOT_FOUND naming the group",
    method: S.createGroupInvite,
    request: () => ({ parent: `${world.team}/ffffffffffffffff`, groupInvite: { roleUid: viewerRole, ttl: DAY } }),
    headers: as(() => world, "owner"),
    error: { code: Code.NotFound, details: [resource(GroupSchema.typeName)] },
  }),
  contractCase({
    name: "group_invite missing: INVALID_ARGUMENT",
    method: S.createGroupInvite,
    // REST always has a body (the invite): an empty one is an invite without role and ttl.
    only: ["grpc", "grpc-web", "connect-json", "connect-binary-h2"],
    request: () => ({ parent: world.team }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("group_invite")] },
  }),
  contractCase({
    name: "role_uid missing: INVALID_ARGUMENT",
    method: S.createGroupInvite,
    request: () => ({ parent: world.team, groupInvite: { ttl: DAY } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("group_invite.role_uid")] },
  }),
  contractCase({
    name: "a role of another organization: INVALID_ARGUMENT, its existence not told",
    method: S.createGroupInvite,
    request: () => ({ parent: world.team, groupInvite: { roleUid: uid.foreignRole!, ttl: DAY } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("group_invite.role_uid")] },
  }),
  contractCase({
    name: "a custom role of a sibling group: INVALID_ARGUMENT",
    method: S.createGroupInvite,
    request: () => ({ parent: world.other, groupInvite: { roleUid: uid.teamReader!, ttl: DAY } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("group_invite.role_uid")] },
  }),
  contractCase({
    name: "a role that does not exist: INVALID_ARGUMENT",
    method: S.createGroupInvite,
    request: () => ({ parent: world.team, groupInvite: { roleUid: `${world.org}/ffffffffffffffff`, ttl: DAY } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("group_invite.role_uid")] },
  }),
  contractCase({
    name: "an email that is not one: INVALID_ARGUMENT",
    method: S.createGroupInvite,
    request: () => ({ parent: world.team, groupInvite: { roleUid: viewerRole, email: "not an email", ttl: DAY } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("group_invite.email")] },
  }),
  contractCase({
    name: "ttl missing: INVALID_ARGUMENT",
    method: S.createGroupInvite,
    request: () => ({ parent: world.team, groupInvite: { roleUid: viewerRole } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("group_invite.ttl")] },
  }),
  contractCase({
    name: "ttl zero: INVALID_ARGUMENT",
    method: S.createGroupInvite,
    request: () => ({ parent: world.team, groupInvite: { roleUid: viewerRole, ttl: { seconds: 0n } } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("group_invite.ttl")] },
  }),
  contractCase({
    name: "ttl beyond 30 days: INVALID_ARGUMENT",
    method: S.createGroupInvite,
    request: () => ({ parent: world.team, groupInvite: { roleUid: viewerRole, ttl: { seconds: 30n * 86_400n + 1n } } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("group_invite.ttl")] },
  }),
]);

runContractCases("GetGroupInvite", () => server.baseUrl, [
  contractCase({
    name: "returns the invite without its code",
    method: S.getGroupInvite,
    request: () => ({ uid: uid.toGet! }),
    headers: as(() => world, "teamViewer"),
    response: (i) => {
      hasNoCode(i);
      expect(i).toMatchObject({ uid: uid.toGet, roleUid: viewerRole, email: "ana@example.com", singleUse: true });
      expect(i.keyId).toMatch(/^[0-9a-f]{16}$/);
      expect(i.role?.name).toBe("viewer");
    },
  }),
  contractCase({
    name: "a sibling group's viewer is PERMISSION_DENIED",
    method: S.getGroupInvite,
    request: () => ({ uid: uid.toGet! }),
    headers: as(() => world, "otherViewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "an invite that does not exist: NOT_FOUND",
    method: S.getGroupInvite,
    request: () => ({ uid: `${world.team}/ffffffffffffffff` }),
    headers: as(() => world, "owner"),
    error: { code: Code.NotFound, details: [resource(INVITE)] },
  }),
]);

describe.each(protocols)("DeleteGroupInvite [%s]", (protocol) => {
  it("deletes the invite; then NOT_FOUND; a viewer may not", async () => {
    const invite = await insertInvite(world.team, new Date());
    const denied = await call(protocol, server.baseUrl, S.deleteGroupInvite, { uid: invite.uid }, world.auth("viewer"));
    expect(denied.error?.code).toBe(Code.PermissionDenied);
    const ok = await call(protocol, server.baseUrl, S.deleteGroupInvite, { uid: invite.uid }, world.auth("owner"));
    expect(ok.error).toBeUndefined();
    const again = await call(protocol, server.baseUrl, S.deleteGroupInvite, { uid: invite.uid }, world.auth("owner"));
    expect(again.error?.code).toBe(Code.NotFound);
  });
});

describe("an invite holds its group and its role", () => {
  it("a group with an invite, and a role an invite promises, cannot be deleted: FAILED_PRECONDITION", async () => {
    const group = newChildUid(world.team);
    await server.database.db.insert(groups).values({ uid: group, parentUid: world.team, name: unique("invited") });
    const role = newChildUid(world.team);
    await server.database.db.insert(roles).values({ uid: role, parentUid: world.team, name: unique("promised"), capabilities: [C.CAP_REPO_LIST] });
    await insertInvite(group, new Date(), { roleUid: role });
    const delGroup = await call("connect-json", server.baseUrl, GroupsService.method.deleteGroup, { uid: group }, world.auth("owner"));
    expect(delGroup.error?.code).toBe(Code.FailedPrecondition);
    const delRole = await call("connect-json", server.baseUrl, RolesService.method.deleteRole, { uid: role }, world.auth("owner"));
    expect(delRole.error?.code).toBe(Code.FailedPrecondition);
  });
});

runContractCases("ListGroupInvites", () => server.baseUrl, [
  contractCase({
    name: "newest first by default, codes never shown",
    method: S.listGroupInvites,
    request: () => ({ uidp: { descendantsOf: quiet.org } }),
    headers: as(() => quiet, "owner"),
    response: (res) => {
      expect(res.groupInvites.map((i) => i.uid)).toEqual([q[2]!.uid, q[1]!.uid, q[0]!.uid]);
      res.groupInvites.forEach(hasNoCode);
    },
  }),
  contractCase({
    name: "children_of the organization: the invites on the organization itself",
    method: S.listGroupInvites,
    request: () => ({ uidp: { childrenOf: quiet.org }, orderBy: "create_time" }),
    headers: as(() => quiet, "owner"),
    response: (res) => {
      expect(res.groupInvites.map((i) => i.uid)).toEqual([q[0]!.uid]);
    },
  }),
  contractCase({
    name: "only what the caller may list: a team viewer sees the team's",
    method: S.listGroupInvites,
    request: {},
    headers: as(() => quiet, "teamViewer"),
    response: (res) => {
      expect(res.groupInvites.map((i) => i.uid)).toEqual([q[1]!.uid]);
      expect(res.totalCount).toBe(1n);
    },
  }),
  contractCase({
    name: "another organization sees none of them",
    method: S.listGroupInvites,
    request: () => ({ keyId: q[0]!.keyId }),
    headers: as(() => foreign, "owner"),
    response: (res) => expect(res.groupInvites).toEqual([]),
  }),
  contractCase({
    name: "key_id filter: the invite of that code",
    method: S.listGroupInvites,
    request: () => ({ keyId: q[2]!.keyId }),
    headers: as(() => quiet, "owner"),
    response: (res) => {
      expect(res.groupInvites.map((i) => i.uid)).toEqual([q[2]!.uid]);
      expect(res.groupInvites[0]!.keyId).toBe(q[2]!.keyId);
    },
  }),
  contractCase({
    name: "a key_id that is not 16 hex: INVALID_ARGUMENT",
    method: S.listGroupInvites,
    request: { keyId: "nope" },
    headers: as(() => quiet, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("key_id")] },
  }),
  contractCase({
    name: "an order_by field that is not sortable: INVALID_ARGUMENT",
    method: S.listGroupInvites,
    request: { orderBy: "email" },
    headers: as(() => quiet, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("order_by")] },
  }),
  contractCase({
    name: "pages of one carry a token",
    method: S.listGroupInvites,
    request: () => ({ uidp: { descendantsOf: quiet.org }, pageSize: 1 }),
    headers: as(() => quiet, "owner"),
    response: (res) => {
      expect(res.groupInvites.map((i) => i.uid)).toEqual([q[2]!.uid]);
      expect(res.nextPageToken).not.toBe("");
      expect(res.totalCount).toBe(3n);
    },
  }),
]);

describe.each(protocols)("AcceptGroupInvite [%s]", (protocol) => {
  const accept = (code: string, token: string) => call(protocol, server.baseUrl, A.acceptGroupInvite, { code }, { authorization: `Bearer ${token}` });

  it("a caller with no identity yet accepts: an identity in the group, bound to the role; the code is stored only as a hash", async () => {
    const made = await call(protocol, server.baseUrl, S.createGroupInvite, { parent: world.team, groupInvite: { roleUid: viewerRole, ttl: DAY } }, world.auth("owner"));
    const code = made.message!.code;
    const [row] = await server.database.db.select().from(groupInvites).where(eq(groupInvites.uid, made.message!.uid));
    expect(JSON.stringify(row)).not.toContain(code.slice(23));
    const sub = unique("person");
    const token = await idp.mint({ sub, name: "Pat Doe" });
    const out = await accept(code, token);
    expect(out.error?.message).toBeUndefined();
    expect(out.message).toMatchObject({ groupUid: world.team, roleUid: viewerRole });
    const [identity] = await server.database.db.select().from(identities).where(eq(identities.uid, out.message!.identityUid));
    expect(identity).toMatchObject({ parentUid: world.team, issuer: idp.url, subject: sub, name: "pat doe" });
    // Accepting again (a multi-use code) finds the same identity and binding.
    const again = await accept(code, token);
    expect(again.message).toMatchObject({ identityUid: out.message!.identityUid, roleBindingUid: out.message!.roleBindingUid });
  });

  it("an unknown code and a code of the wrong shape are refused alike", async () => {
    const token = await idp.mint({ sub: unique("person") });
    const a = await accept(newInviteCode().code, token);
    const b = await accept("garbage", world.token.stranger);
    for (const out of [a, b]) {
      expect(out.error?.code).toBe(Code.PermissionDenied);
      expect(detail(out.error!, ErrorInfoSchema)?.reason).toBe(INVITE_REFUSED_REASON);
    }
    expect(a.error!.message).toBe(b.error!.message);
  });

  it("an empty code is INVALID_ARGUMENT; no token is UNAUTHENTICATED", async () => {
    const empty = await accept("", world.token.stranger);
    expect(empty.error?.code).toBe(Code.InvalidArgument);
    const none = await call(protocol, server.baseUrl, A.acceptGroupInvite, { code: "x" });
    expect(none.error?.code).toBe(Code.Unauthenticated);
  });
});
