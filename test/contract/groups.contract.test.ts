// GroupsService over every protocol: create (sub-group and organization), get, list (visibility, filters,
// order, paging, total), update (field masks), delete (refused while anything references the group),
// lookup, eligibility and the access-request method this server does not offer.
import { Code } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { count, eq, like, or } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { GroupsService, OrgKind, OrgStatus, type UpdateGroupRequestSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { RelationshipType } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { BadRequestSchema, PreconditionFailureSchema, ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { groups, identities, roleBindings } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type Caller, type World } from "../support/world.js";
import { call, contractCase, detail, protocols, runContractCases, type Protocol } from "./harness.js";
import { listVisibilityCases } from "./list-visibility.js";

const GROUP = "chainguard.platform.iam.v2.Group";
const HEX16 = /^[0-9a-f]{16}$/;

let server: TestServer;
/** Groups are created and deleted in this one. */
let world: World;
/** Nothing is ever created in this one: list results and totals are exact. */
let quiet: World;
/** A root-level identity with no bindings, for LookupGroup's NOT_FOUND. */
let loner: { uid: string; auth: Record<string, string> };
/** LookupGroup: organizations named after email domains, and callers with such emails. */
const lk = { verifiedOrg: "", auth: {} as Record<"alice" | "bob" | "carol" | "eve" | "confined", Record<string, string>> };
/** Fixtures under world.org. */
const fx = {
  /** Has a child group. */ withChild: "",
  child: "",
  /** Has an identity. */ withIdentity: "",
  identity: "",
  /** Has a role binding. */ withBinding: "",
  binding: "",
  /** Target of updates. */ target: "",
};

async function insertGroup(parent: string | null, name: string, extra: Partial<typeof groups.$inferInsert> = {}): Promise<string> {
  const uid = parent ? newChildUid(parent) : newRootUid();
  await server.database.db.insert(groups).values({ uid, parentUid: parent, name, ...extra });
  return uid;
}

async function insertIdentity(parent: string | null, name: string, emails: { email?: string; emailUnverified?: string } = {}): Promise<string> {
  const uid = parent ? newChildUid(parent) : newRootUid();
  const subject = `subject-${uid}`;
  await server.database.db.insert(identities).values({
    uid,
    parentUid: parent,
    name,
    ...emails,
    relationship: { claimMatch: { issuer: "https://issuer.test", subject } },
    relationshipType: RelationshipType.CLAIM_MATCH,
    issuer: "https://issuer.test",
    subject,
  });
  return uid;
}

/** Rows that reference `uid` or live beneath it: what a refused delete must leave untouched. */
async function footprint(uid: string) {
  const { db } = server.database;
  const under = (c: typeof groups.uid) => or(eq(c, uid), like(c, `${uid}/%`));
  const [g] = await db.select({ n: count() }).from(groups).where(under(groups.uid));
  const [i] = await db.select({ n: count() }).from(identities).where(like(identities.uid, `${uid}/%`));
  const [b] = await db.select({ n: count() }).from(roleBindings).where(eq(roleBindings.groupUid, uid));
  const [row] = await db.select().from(groups).where(eq(groups.uid, uid));
  return { groups: g!.n, identities: i!.n, bindings: b!.n, row };
}

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "acme");
  quiet = await seedWorld(server, "quiet");
  const lonerUid = await insertIdentity(null, "loner");
  loner = { uid: lonerUid, auth: { authorization: `Bearer ${await server.token(lonerUid)}` } };

  // An older unverified organization of the same name, an unverified one, a verified sub-group.
  await insertGroup(null, "lookup-verified.test");
  lk.verifiedOrg = await insertGroup(null, "lookup-verified.test", { verified: true });
  await insertGroup(null, "lookup-unverified.test");
  await insertGroup(world.org, "lookup-sub.test", { verified: true });
  const people = {
    alice: await insertIdentity(null, "alice", { email: "Alice@Lookup-Verified.TEST" }),
    bob: await insertIdentity(null, "bob", { email: "bob@lookup-unverified.test" }),
    carol: await insertIdentity(null, "carol", { email: "carol@lookup-sub.test" }),
    eve: await insertIdentity(null, "eve", { emailUnverified: "eve@lookup-verified.test" }),
    confined: await insertIdentity(world.team, "confined", { email: "confined@lookup-verified.test" }),
  };
  for (const [k, uid] of Object.entries(people)) lk.auth[k as keyof typeof people] = { authorization: `Bearer ${await server.token(uid)}` };

  fx.withChild = await insertGroup(world.org, "with-child");
  fx.child = await insertGroup(fx.withChild, "child");
  fx.withIdentity = await insertGroup(world.org, "with-identity");
  fx.identity = await insertIdentity(fx.withIdentity, "robot");
  fx.withBinding = await insertGroup(world.org, "with-binding");
  fx.binding = newChildUid(fx.withBinding);
  await server.database.db.insert(roleBindings).values({
    uid: fx.binding,
    groupUid: fx.withBinding,
    identityUid: world.identity.viewer,
    roleUid: managedRole("viewer").uid,
  });
  fx.target = await insertGroup(world.org, "target", { description: "before", kind: OrgKind.CUSTOMER });
});

afterAll(async () => {
  await server?.close();
});

const base = () => server.baseUrl;
const missingIn = (parent: () => string) => () => `${parent()}/ffffffffffffffff`;

// ---------------------------------------------------------------------------------------------------------
runContractCases("GetGroup", base, [
  contractCase({
    name: "owner reads the organization",
    method: GroupsService.method.getGroup,
    request: () => ({ uid: world.org }),
    headers: () => world.auth("owner"),
    response: (g) => {
      expect(g.uid).toBe(world.org);
      expect(g.name).toBe("acme");
      expect(g.status).toBe(OrgStatus.READY);
      expect(g.createTime).toBeDefined();
      expect(g.updateTime).toBeDefined();
    },
  }),
  contractCase({
    name: "a viewer bound on team reads team",
    method: GroupsService.method.getGroup,
    request: () => ({ uid: world.team }),
    headers: () => world.auth("teamViewer"),
    response: (g) => expect(g).toMatchObject({ uid: world.team, name: "team" }),
  }),
  contractCase({
    name: "missing group: NOT_FOUND with ResourceInfo",
    method: GroupsService.method.getGroup,
    request: () => ({ uid: missingIn(() => world.org)() }),
    headers: () => world.auth("viewer"),
    error: {
      code: Code.NotFound,
      reason: "NOT_FOUND",
      domain: "iam.platform.test",
      details: [{ schema: ResourceInfoSchema, value: { resourceType: GROUP, resourceName: expect.stringMatching(/^[0-9a-f]{40}\/ffffffffffffffff$/) } }],
    },
  }),
  contractCase({
    name: "a viewer of a sibling group: PERMISSION_DENIED on an existing group",
    method: GroupsService.method.getGroup,
    request: () => ({ uid: world.team }),
    headers: () => world.auth("otherViewer"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
  }),
  contractCase({
    name: "a viewer of a sibling group: PERMISSION_DENIED on a missing group too",
    method: GroupsService.method.getGroup,
    request: () => ({ uid: missingIn(() => world.team)() }),
    headers: () => world.auth("otherViewer"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
  }),
  contractCase({
    name: "a team viewer cannot read the organization above it",
    method: GroupsService.method.getGroup,
    request: () => ({ uid: world.org }),
    headers: () => world.auth("teamViewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "stranger: PERMISSION_DENIED on an existing organization",
    method: GroupsService.method.getGroup,
    request: () => ({ uid: world.org }),
    headers: () => world.auth("stranger"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
  }),
  contractCase({
    name: "stranger: PERMISSION_DENIED on a missing organization",
    method: GroupsService.method.getGroup,
    request: { uid: "0".repeat(40) },
    headers: () => world.auth("stranger"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
  }),
  contractCase({
    name: "an identity confined to team (owner on org) cannot read org",
    method: GroupsService.method.getGroup,
    request: () => ({ uid: world.org }),
    headers: () => world.auth("confined"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "an identity confined to team (owner on org) reads team",
    method: GroupsService.method.getGroup,
    request: () => ({ uid: world.team }),
    headers: () => world.auth("confined"),
    response: (g) => expect(g.uid).toBe(world.team),
  }),
  contractCase({
    name: "no credentials: UNAUTHENTICATED",
    method: GroupsService.method.getGroup,
    request: () => ({ uid: world.org }),
    error: { code: Code.Unauthenticated },
  }),
]);

// ---------------------------------------------------------------------------------------------------------
const names = (gs: { name: string }[]) => gs.map((g) => g.name);

runContractCases("ListGroups", base, [
  contractCase({
    name: "a viewer on the organization sees the whole tree, and total_count says so",
    method: GroupsService.method.listGroups,
    request: {},
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(r.groups.map((g) => g.uid).sort()).toEqual([quiet.org, quiet.team, quiet.other].sort());
      expect(r.totalCount).toBe(3n);
      expect(r.nextPageToken).toBe("");
    },
  }),
  ...listVisibilityCases({
    method: GroupsService.method.listGroups,
    noun: "groups",
    world: () => quiet,
    items: (r) => r.groups,
    teamViewer: () => [quiet.team],
    outside: { request: () => ({ uidp: { ids: [quiet.org, quiet.other, quiet.team] } }), uids: () => [quiet.other] },
  }),
  contractCase({
    name: "uidp.children_of the organization",
    method: GroupsService.method.listGroups,
    request: () => ({ uidp: { childrenOf: quiet.org } }),
    headers: () => quiet.auth("owner"),
    response: (r) => {
      expect(names(r.groups).sort()).toEqual(["other", "team"]);
      expect(r.totalCount).toBe(2n);
    },
  }),
  contractCase({
    name: "uidp.in_root: the organization only",
    method: GroupsService.method.listGroups,
    request: { uidp: { inRoot: true } },
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(r.groups.map((g) => g.uid)).toEqual([quiet.org]),
  }),
  contractCase({
    name: "exact name filter",
    method: GroupsService.method.listGroups,
    request: { name: "team" },
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(r.groups.map((g) => g.uid)).toEqual([quiet.team]);
      expect(r.totalCount).toBe(1n);
    },
  }),
  contractCase({
    name: "order_by name desc",
    method: GroupsService.method.listGroups,
    request: { orderBy: "name desc" },
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(names(r.groups)).toEqual(["team", "quiet", "other"]),
  }),
  contractCase({
    name: "order_by create_time (alias created_at) and update_time are accepted",
    method: GroupsService.method.listGroups,
    request: { orderBy: "created_at, update_time desc" },
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(r.totalCount).toBe(3n),
  }),
  contractCase({
    name: "order_by an unknown field: INVALID_ARGUMENT on order_by",
    method: GroupsService.method.listGroups,
    request: { orderBy: "verified" },
    headers: () => quiet.auth("viewer"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "order_by" }] } }] },
  }),
  contractCase({
    name: "an invalid uid in the uidp filter: INVALID_ARGUMENT",
    method: GroupsService.method.listGroups,
    request: { uidp: { childrenOf: "Not A Uid" } },
    headers: () => quiet.auth("viewer"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "uidp.children_of" }] } }] },
  }),
]);

describe.each(protocols)("ListGroups paging [%s]", (protocol: Protocol) => {
  it("walks the visible tree a page at a time with a carried total", async () => {
    const seen: string[] = [];
    let pageToken = "";
    for (let i = 0; i < 5; i++) {
      const out = await call(protocol, base(), GroupsService.method.listGroups, { pageSize: 1, pageToken, orderBy: "name" }, quiet.auth("viewer"));
      expect(out.error).toBeUndefined();
      expect(out.message!.totalCount).toBe(3n);
      seen.push(...names(out.message!.groups));
      pageToken = out.message!.nextPageToken;
      if (!pageToken) break;
    }
    expect(seen).toEqual(["other", "quiet", "team"]);
  });
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("CreateGroup", base, [
  contractCase({
    name: "verified: INVALID_ARGUMENT (only the operator marks an organization verified)",
    method: GroupsService.method.createGroup,
    request: () => ({ parent: world.org, group: { name: "self-verified", verified: true } }),
    headers: () => world.auth("owner"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "group.verified" }] } }] },
  }),
  contractCase({
    name: "owner creates a sub-group; output-only fields in the request are ignored",
    method: GroupsService.method.createGroup,
    request: () => ({
      parent: world.org,
      group: {
        uid: "ignored",
        name: "created",
        description: "made by a test",
        kind: OrgKind.DEV,
        status: OrgStatus.SUSPENDED,
        resourceLimits: { repos: 1 },
        createTime: { seconds: 1n },
      },
    }),
    headers: () => world.auth("owner"),
    response: (g) => {
      expect(g.uid.startsWith(world.org + "/")).toBe(true);
      expect(g.uid.slice(world.org.length + 1)).toMatch(HEX16);
      expect(g).toMatchObject({ name: "created", description: "made by a test", kind: OrgKind.DEV, status: OrgStatus.READY });
      expect(g.resourceLimits).toEqual({});
      expect(Math.abs(timestampDate(g.createTime!).getTime() - Date.now())).toBeLessThan(60_000);
    },
  }),
  contractCase({
    name: "a missing parent: NOT_FOUND with ResourceInfo naming the parent",
    method: GroupsService.method.createGroup,
    request: () => ({ parent: missingIn(() => world.org)(), group: { name: "orphan" } }),
    headers: () => world.auth("owner"),
    error: {
      code: Code.NotFound,
      reason: "NOT_FOUND",
      details: [{ schema: ResourceInfoSchema, value: { resourceType: GROUP, resourceName: expect.stringMatching(/^[0-9a-f]{40}\/ffffffffffffffff$/) } }],
    },
  }),
  contractCase({
    name: "a viewer (no IAM_GROUPS_CREATE): PERMISSION_DENIED",
    method: GroupsService.method.createGroup,
    request: () => ({ parent: world.org, group: { name: "nope" } }),
    headers: () => world.auth("viewer"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
  }),
  contractCase({
    name: "a viewer under a missing parent: PERMISSION_DENIED, not NOT_FOUND",
    method: GroupsService.method.createGroup,
    request: () => ({ parent: missingIn(() => world.org)(), group: { name: "nope" } }),
    headers: () => world.auth("viewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "an owner confined to team cannot create beside it",
    method: GroupsService.method.createGroup,
    request: () => ({ parent: world.org, group: { name: "nope" } }),
    headers: () => world.auth("confined"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "stranger: PERMISSION_DENIED",
    method: GroupsService.method.createGroup,
    request: () => ({ parent: world.team, group: { name: "nope" } }),
    headers: () => world.auth("stranger"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "no name: INVALID_ARGUMENT on group.name",
    method: GroupsService.method.createGroup,
    request: () => ({ parent: world.org, group: { description: "nameless" } }),
    headers: () => world.auth("owner"),
    error: {
      code: Code.InvalidArgument,
      reason: "INVALID_ARGUMENT",
      message: "Invalid argument: group.name: is required",
      details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "group.name", description: "is required" }] } }],
    },
  }),
  contractCase({
    name: "a name and a description too long: INVALID_ARGUMENT on both",
    method: GroupsService.method.createGroup,
    request: () => ({ parent: world.org, group: { name: "n".repeat(257), description: "d".repeat(4097) } }),
    headers: () => world.auth("owner"),
    error: {
      code: Code.InvalidArgument,
      details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "group.name" }, { field: "group.description" }] } }],
    },
  }),
  contractCase({
    name: "an invalid parent uid: INVALID_ARGUMENT on parent",
    method: GroupsService.method.createGroup,
    request: { parent: "Not/A/Uid", group: { name: "x" } },
    headers: () => world.auth("owner"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "parent" }] } }] },
  }),
  contractCase({
    name: "a parent so deep that a child's uid would exceed 1024 characters: INVALID_ARGUMENT on parent",
    method: GroupsService.method.createGroup,
    request: () => ({ parent: `${world.org}/${"a".repeat(1020 - world.org.length)}`, group: { name: "too deep" } }),
    headers: () => world.auth("owner"),
    error: { code: Code.InvalidArgument, message: /^Invalid argument: parent: the group tree is too deep here/, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "parent" }] } }] },
  }),
  contractCase({
    // REST cannot carry an empty parent: POST /iam/v2/groups/{parent=**} needs at least one segment.
    name: "an identity confined to a group cannot create an organization",
    method: GroupsService.method.createGroup,
    request: { group: { name: "breakout" } },
    headers: () => world.auth("confined"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED", message: /root-level identity/ },
    only: ["grpc", "grpc-web", "connect-json", "connect-binary-h2"],
  }),
]);

describe.each(protocols.filter((p) => p !== "rest"))("CreateGroup: a new organization [%s]", (protocol: Protocol) => {
  it("a root-level identity creates an organization, is bound owner on it, and can then read and use it", async () => {
    const founder = await insertIdentity(null, "founder");
    const auth = { authorization: `Bearer ${await server.token(founder)}` };
    const eligible = await call(protocol, base(), GroupsService.method.checkEligibility, {}, auth);
    expect(eligible.message?.eligible).toBe(true);

    const out = await call(protocol, base(), GroupsService.method.createGroup, { group: { name: "new org", description: "fresh" } }, auth);
    expect(out.error, out.error?.message).toBeUndefined();
    const org = out.message!;
    expect(org.uid).toMatch(/^[0-9a-f]{40}$/);
    expect(org).toMatchObject({ name: "new org", description: "fresh", status: OrgStatus.READY });

    const bindings = await server.database.db.select().from(roleBindings).where(eq(roleBindings.groupUid, org.uid));
    expect(bindings).toHaveLength(1);
    expect(bindings[0]).toMatchObject({ identityUid: founder, roleUid: managedRole("owner").uid });
    expect(bindings[0]!.uid.startsWith(org.uid + "/")).toBe(true);

    const got = await call(protocol, base(), GroupsService.method.getGroup, { uid: org.uid }, auth);
    expect(got.error, got.error?.message).toBeUndefined();
    expect(got.message?.uid).toBe(org.uid);
    const sub = await call(protocol, base(), GroupsService.method.createGroup, { parent: org.uid, group: { name: "first team" } }, auth);
    expect(sub.message?.uid.startsWith(org.uid + "/")).toBe(true);
    // Others see nothing of it.
    const peek = await call(protocol, base(), GroupsService.method.getGroup, { uid: org.uid }, world.auth("owner"));
    expect(peek.error?.code).toBe(Code.PermissionDenied);
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("UpdateGroup [%s]", (protocol: Protocol) => {
  const update = (request: MessageInitShape<typeof UpdateGroupRequestSchema>) =>
    call(protocol, base(), GroupsService.method.updateGroup, request, world.auth("owner"));

  it("a mask naming description changes only the description; update_time moves", async () => {
    const before = (await call(protocol, base(), GroupsService.method.getGroup, { uid: fx.target }, world.auth("owner"))).message!;
    const out = await update({
      group: { uid: fx.target, name: "renamed?", description: `desc ${protocol}`, kind: OrgKind.DEV, status: OrgStatus.SUSPENDED },
      updateMask: { paths: ["description"] },
    });
    expect(out.error, out.error?.message).toBeUndefined();
    const g = out.message!;
    expect(g).toMatchObject({ uid: fx.target, name: before.name, description: `desc ${protocol}`, kind: before.kind, status: OrgStatus.READY });
    expect(timestampDate(g.updateTime!).getTime()).toBeGreaterThanOrEqual(timestampDate(before.updateTime!).getTime());
    expect(g.updateTime).not.toEqual(before.updateTime);
    expect(g.createTime).toEqual(before.createTime);
  });

  it("without a mask, only the fields present change; output-only fields are ignored", async () => {
    const before = (await call(protocol, base(), GroupsService.method.getGroup, { uid: fx.target }, world.auth("owner"))).message!;
    const out = await update({ group: { uid: fx.target, kind: OrgKind.INFRA, status: OrgStatus.SUSPENDED, createTime: { seconds: 5n } } });
    expect(out.error, out.error?.message).toBeUndefined();
    expect(out.message).toMatchObject({ name: before.name, description: before.description, kind: OrgKind.INFRA, verified: false, status: OrgStatus.READY });
    expect(out.message!.createTime).toEqual(before.createTime);
    // Put it back for the next protocol.
    await update({ group: { uid: fx.target, kind: before.kind }, updateMask: { paths: ["kind"] } });
  });

  it("verified cannot be set by a caller, with a mask or without, and changes nothing; it can be cleared", async () => {
    const before = (await call(protocol, base(), GroupsService.method.getGroup, { uid: fx.target }, world.auth("owner"))).message!;
    for (const request of [{ group: { uid: fx.target, verified: true } }, { group: { uid: fx.target, verified: true, description: "x" }, updateMask: { paths: ["verified", "description"] } }]) {
      const out = await update(request);
      expect(out.error?.code).toBe(Code.InvalidArgument);
      expect(detail(out.error!, BadRequestSchema)?.fieldViolations.map((v) => v.field)).toEqual(["group.verified"]);
    }
    expect((await call(protocol, base(), GroupsService.method.getGroup, { uid: fx.target }, world.auth("owner"))).message).toEqual(before);
    await server.database.db.update(groups).set({ verified: true }).where(eq(groups.uid, fx.target));
    const cleared = await update({ group: { uid: fx.target, verified: false }, updateMask: { paths: ["verified"] } });
    expect(cleared.message?.verified).toBe(false);
  });

  it("a mask naming only output-only fields changes nothing, update_time included", async () => {
    const before = (await call(protocol, base(), GroupsService.method.getGroup, { uid: fx.target }, world.auth("owner"))).message!;
    const out = await update({ group: { uid: fx.target, status: OrgStatus.SUSPENDED }, updateMask: { paths: ["status", "create_time"] } });
    expect(out.message).toEqual(before);
  });

  it("full replacement (*) with no name: INVALID_ARGUMENT on group.name, nothing changed", async () => {
    const before = (await call(protocol, base(), GroupsService.method.getGroup, { uid: fx.target }, world.auth("owner"))).message!;
    const out = await update({ group: { uid: fx.target, description: "all new" }, updateMask: { paths: ["*"] } });
    expect(out.error?.code).toBe(Code.InvalidArgument);
    expect(out.error?.message).toBe("Invalid argument: group.name: is required");
    const after = (await call(protocol, base(), GroupsService.method.getGroup, { uid: fx.target }, world.auth("owner"))).message!;
    expect(after).toEqual(before);
  });

  it("an unknown mask path: INVALID_ARGUMENT on update_mask", async () => {
    const out = await update({ group: { uid: fx.target, description: "x" }, updateMask: { paths: ["colour"] } });
    expect(out.error?.code).toBe(Code.InvalidArgument);
    expect(out.error?.message).toMatch(/^Invalid argument: update_mask: /);
  });

  it("an unknown kind value: INVALID_ARGUMENT on group.kind", async () => {
    const out = await update({ group: { uid: fx.target, kind: 99 as OrgKind }, updateMask: { paths: ["kind"] } });
    expect(out.error?.code).toBe(Code.InvalidArgument);
    expect(out.error?.message).toMatch(/^Invalid argument: group\.kind: /);
  });

  it("a missing group: NOT_FOUND; a viewer: PERMISSION_DENIED whether or not it exists", async () => {
    const missing = `${world.org}/ffffffffffffffff`;
    const notFound = await update({ group: { uid: missing, description: "x" } });
    expect(notFound.error?.code).toBe(Code.NotFound);
    for (const uid of [fx.target, missing]) {
      const denied = await call(protocol, base(), GroupsService.method.updateGroup, { group: { uid, description: "x" } }, world.auth("viewer"));
      expect(denied.error?.code).toBe(Code.PermissionDenied);
    }
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("DeleteGroup [%s]", (protocol: Protocol) => {
  const del = (uid: string, caller: Caller = "owner") =>
    call(protocol, base(), GroupsService.method.deleteGroup, { uid }, world.auth(caller));

  it("deletes an empty group; it is gone afterwards", async () => {
    const uid = await insertGroup(world.org, `empty ${protocol}`);
    const out = await del(uid);
    expect(out.error, out.error?.message).toBeUndefined();
    const got = await call(protocol, base(), GroupsService.method.getGroup, { uid }, world.auth("owner"));
    expect(got.error?.code).toBe(Code.NotFound);
    expect((await footprint(uid)).row).toBeUndefined();
  });

  for (const [what, key, words] of [
    ["a child group", "withChild", "sub-groups"],
    ["an identity", "withIdentity", "identities"],
    ["a role binding", "withBinding", "role bindings"],
  ] as const) {
    it(`is refused while the group has ${what}: FAILED_PRECONDITION RESOURCE_NOT_EMPTY, nothing changed`, async () => {
      const uid = fx[key];
      const before = await footprint(uid);
      const out = await del(uid);
      expect(out.error?.code).toBe(Code.FailedPrecondition);
      expect(out.error?.message).toBe(`Precondition failed: group ${uid} still contains ${words}; delete what it contains first`);
      const pf = out.error!.details.find((d) => d.$typeName === PreconditionFailureSchema.typeName);
      expect(pf).toMatchObject({ violations: [{ type: "RESOURCE_NOT_EMPTY", subject: uid }] });
      expect(await footprint(uid)).toEqual(before);
      expect(before.row).toBeDefined();
    });
  }

  it("a missing group: NOT_FOUND with ResourceInfo", async () => {
    const missing = `${world.org}/ffffffffffffffff`;
    const out = await del(missing);
    expect(out.error?.code).toBe(Code.NotFound);
    expect(out.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject({ resourceType: GROUP, resourceName: missing });
  });

  it("an editor (no IAM_GROUPS_DELETE): PERMISSION_DENIED whether or not the group exists, nothing changed", async () => {
    const uid = await insertGroup(world.org, `kept ${protocol}`);
    expect((await del(uid, "editor")).error?.code).toBe(Code.PermissionDenied);
    expect((await del(`${world.org}/ffffffffffffffff`, "editor")).error?.code).toBe(Code.PermissionDenied);
    expect((await footprint(uid)).row).toBeDefined();
  });
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("LookupGroup, CheckEligibility", base, [
  contractCase({
    name: "a person with a verified email: the verified organization named after its domain (case aside)",
    method: GroupsService.method.lookupGroup,
    request: {},
    headers: () => lk.auth.alice,
    response: (r) => expect(r.group).toMatchObject({ uid: lk.verifiedOrg, name: "lookup-verified.test", verified: true }),
  }),
  ...(
    [
      ["an organization of its domain that is not verified", () => lk.auth.bob],
      ["only a verified sub-group of its domain", () => lk.auth.carol],
      ["an unverified email only", () => lk.auth.eve],
      ["an identity created under a group, whatever its email", () => lk.auth.confined],
      ["no email, bound in an organization", () => quiet.auth("teamViewer")],
      ["no email and no binding", () => loner.auth],
    ] as const
  ).map(([what, headers]) =>
    contractCase({
      name: `${what}: NOT_FOUND`,
      method: GroupsService.method.lookupGroup,
      request: {},
      headers,
      error: { code: Code.NotFound, reason: "NOT_FOUND", details: [{ schema: ResourceInfoSchema, value: { resourceType: GROUP } }] },
    }),
  ),
  contractCase({
    name: "a root-level identity may create an organization",
    method: GroupsService.method.checkEligibility,
    request: {},
    headers: () => quiet.auth("stranger"),
    response: (r) => expect(r.eligible).toBe(true),
  }),
  contractCase({
    name: "an identity confined to a group may not",
    method: GroupsService.method.checkEligibility,
    request: {},
    headers: () => quiet.auth("confined"),
    response: (r) => expect(r.eligible).toBe(false),
  }),
  // RequestGroupAccess: group-access.contract.test.ts.
]);
