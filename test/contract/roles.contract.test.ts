// RolesService over every protocol: managed roles readable by every authenticated caller, custom roles under
// a group (create, get, update, delete), capability validation, no escalation, visibility of lists and
// their totals, and a role still bound refused deletion with nothing changed.
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { GroupSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { RoleSchema, RolesService, type Role } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import { BadRequestSchema, PreconditionFailureSchema, ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { identities, roleBindings, roles } from "../../src/db/schema/index.js";
import { managedRole, managedRoles } from "../../src/iam/managed-roles.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type World } from "../support/world.js";
import { call, contractCase, protocols, runContractCases } from "./harness.js";

const C = Capability;
const MANAGED = managedRoles.length;

let server: TestServer;
/** Where roles are created, changed and deleted. */
let world: World;
/** Where nothing changes: list visibility and totals. */
let quiet: World;
const uid: Record<string, string> = {};
let teamAdminToken = "";

const teamAdmin = () => ({ authorization: `Bearer ${teamAdminToken}` });
const as = (w: () => World, caller: Parameters<World["auth"]>[0]) => () => w().auth(caller);
const field = (name: string, description?: unknown) => ({
  schema: BadRequestSchema,
  value: { fieldViolations: [description === undefined ? { field: name } : { field: name, description }] },
});

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server);
  quiet = await seedWorld(server, "quiet");
  const { db } = server.database;
  const role = (key: string, group: string, name: string, capabilities: Capability[], description = "") => {
    uid[key] = newChildUid(group);
    return { uid: uid[key]!, parentUid: group, name, description, capabilities };
  };
  await db.insert(roles).values([
    role("orgReader", world.org, "org-reader", [C.CAP_REPO_LIST], "reads repos"),
    role("bound", world.org, "bound", [C.CAP_REPO_LIST]),
    role("rename", world.org, "rename-me", [C.CAP_REPO_LIST], "kept"),
    role("describe", world.org, "describe-me", [C.CAP_REPO_LIST], "before"),
    role("teamAdmin", world.team, "team-admin", [C.CAP_IAM_ROLES_CREATE, C.CAP_IAM_ROLES_UPDATE, C.CAP_IAM_ROLES_LIST, C.CAP_IAM_ROLES_DELETE, C.CAP_REPO_LIST, C.CAP_TAG_LIST]),
    role("teamReader", world.team, "team-reader", [C.CAP_REPO_LIST]),
    role("teamMixed", world.team, "team-mixed", [C.CAP_REPO_LIST, C.CAP_REPO_DELETE]),
    role("q1", quiet.org, "q-org-1", [C.CAP_REPO_LIST]),
    role("q2", quiet.org, "q-org-2", [C.CAP_TAG_LIST]),
    role("qTeam", quiet.team, "q-team", [C.CAP_REPO_LIST]),
    role("qOther", quiet.other, "q-other", [C.CAP_REPO_LIST]),
  ]);
  // teamAdmin: a person whose only binding is the custom role team-admin on org/team.
  const admin = newRootUid();
  await db.insert(identities).values({
    uid: admin,
    name: "team admin",
    relationship: { claimMatch: { issuer: "https://issuer.test", subject: admin } },
    relationshipType: 1,
    issuer: "https://issuer.test",
    subject: admin,
  });
  await db.insert(roleBindings).values([
    { uid: newChildUid(world.team), groupUid: world.team, identityUid: admin, roleUid: uid.teamAdmin! },
    { uid: newChildUid(world.org), groupUid: world.org, identityUid: world.identity.viewer, roleUid: uid.bound! },
  ]);
  teamAdminToken = await server.token(admin);
});
afterAll(async () => {
  await server?.close();
});

const isManaged = (r: Role) => !r.uid.includes("/");

runContractCases("RolesService.ListRoles", () => server.baseUrl, [
  contractCase({
    name: "a caller with no binding at all lists exactly the managed roles, with their capabilities",
    method: RolesService.method.listRoles,
    request: {},
    headers: as(() => world, "stranger"),
    response: (res) => {
      expect(res.totalCount).toBe(BigInt(MANAGED));
      expect(res.roles.map((r) => r.name)).toEqual(managedRoles.map((r) => r.name).sort());
      expect(res.roles.every(isManaged)).toBe(true);
      const viewer = res.roles.find((r) => r.name === "viewer")!;
      expect(viewer.uid).toBe(managedRole("viewer").uid);
      expect(viewer.capabilities).toEqual(managedRole("viewer").capabilities);
      expect(res.nextPageToken).toBe("");
    },
  }),
  contractCase({
    name: "a viewer of an organization: the managed roles and every custom role of the organization; the total counts only those",
    method: RolesService.method.listRoles,
    request: {},
    headers: as(() => quiet, "viewer"),
    response: (res) => {
      expect(res.totalCount).toBe(BigInt(MANAGED + 4));
      expect(res.roles.filter((r) => !isManaged(r)).map((r) => r.uid).sort()).toEqual([uid.q1, uid.q2, uid.qTeam, uid.qOther].sort());
    },
  }),
  contractCase({
    name: "a viewer of a team: the team's custom roles, not its organization's or a sibling's",
    method: RolesService.method.listRoles,
    request: {},
    headers: as(() => quiet, "teamViewer"),
    response: (res) => {
      expect(res.totalCount).toBe(BigInt(MANAGED + 1));
      expect(res.roles.filter((r) => !isManaged(r)).map((r) => r.uid)).toEqual([uid.qTeam]);
    },
  }),
  contractCase({
    name: "uidp.children_of a group: that group's custom roles",
    method: RolesService.method.listRoles,
    request: () => ({ uidp: { childrenOf: quiet.org } }),
    headers: as(() => quiet, "viewer"),
    response: (res) => {
      expect(res.totalCount).toBe(2n);
      expect(res.roles.map((r) => r.name)).toEqual(["q-org-1", "q-org-2"]);
      expect(res.roles[0]!.capabilities).toEqual([C.CAP_REPO_LIST]);
    },
  }),
  contractCase({
    name: "uidp.children_of a group the caller cannot see: nothing, and a total of 0",
    method: RolesService.method.listRoles,
    request: () => ({ uidp: { childrenOf: quiet.org } }),
    headers: as(() => quiet, "teamViewer"),
    response: (res) => {
      expect(res.roles).toEqual([]);
      expect(res.totalCount).toBe(0n);
    },
  }),
  contractCase({
    name: "uidp.descendants_of the organization: its custom roles at every depth",
    method: RolesService.method.listRoles,
    request: () => ({ uidp: { descendantsOf: quiet.org } }),
    headers: as(() => quiet, "viewer"),
    response: (res) => expect(res.totalCount).toBe(4n),
  }),
  contractCase({
    name: "uidp.in_root: the managed roles only",
    method: RolesService.method.listRoles,
    request: { uidp: { inRoot: true } },
    headers: as(() => quiet, "viewer"),
    response: (res) => {
      expect(res.totalCount).toBe(BigInt(MANAGED));
      expect(res.roles.every(isManaged)).toBe(true);
    },
  }),
  contractCase({
    name: "name: exact match",
    method: RolesService.method.listRoles,
    request: { name: "registry.pull" },
    headers: as(() => quiet, "viewer"),
    response: (res) => {
      expect(res.roles.map((r) => r.uid)).toEqual([managedRole("registry.pull").uid]);
      expect(res.totalCount).toBe(1n);
    },
  }),
  contractCase({
    name: "order_by name desc with page_size 5: a first page, a next page token and the total",
    method: RolesService.method.listRoles,
    request: { orderBy: "name desc", pageSize: 5 },
    headers: as(() => quiet, "viewer"),
    response: (res) => {
      expect(res.roles).toHaveLength(5);
      const names = res.roles.map((r) => r.name);
      expect(names).toEqual([...names].sort().reverse());
      expect(res.nextPageToken).not.toBe("");
      expect(res.totalCount).toBe(BigInt(MANAGED + 4));
    },
  }),
  contractCase({
    name: "order_by create_time with skip: skipped echoed",
    method: RolesService.method.listRoles,
    request: { orderBy: "create_time", skip: MANAGED },
    headers: as(() => quiet, "viewer"),
    response: (res) => {
      expect(res.skipped).toBe(MANAGED);
      expect(res.roles).toHaveLength(4);
      expect(res.totalCount).toBe(BigInt(MANAGED + 4));
    },
  }),
  contractCase({
    name: "an unknown order_by field: INVALID_ARGUMENT on order_by",
    method: RolesService.method.listRoles,
    request: { orderBy: "capabilities" },
    headers: as(() => quiet, "viewer"),
    error: { code: Code.InvalidArgument, details: [field("order_by")] },
  }),
  contractCase({
    name: "no token: UNAUTHENTICATED",
    method: RolesService.method.listRoles,
    request: {},
    error: { code: Code.Unauthenticated },
  }),
]);

describe.each(protocols)("RolesService.ListRoles paging [%s]", (protocol) => {
  it("walks every page by keyset: each visible role once, the same total on every page", async () => {
    const seen: string[] = [];
    let pageToken = "";
    let pages = 0;
    do {
      const out = await call(protocol, server.baseUrl, RolesService.method.listRoles, { pageSize: 3, orderBy: "update_time desc", pageToken }, quiet.auth("viewer"));
      expect(out.error).toBeUndefined();
      expect(out.message!.totalCount).toBe(BigInt(MANAGED + 4));
      seen.push(...out.message!.roles.map((r) => r.uid));
      pageToken = out.message!.nextPageToken;
      pages++;
    } while (pageToken !== "" && pages < 20);
    expect(seen).toHaveLength(MANAGED + 4);
    expect(new Set(seen).size).toBe(MANAGED + 4);
  });
});

runContractCases("RolesService.GetRole", () => server.baseUrl, [
  contractCase({
    name: "a managed role, to a caller with no binding at all",
    method: RolesService.method.getRole,
    request: { uid: managedRole("owner").uid },
    headers: as(() => world, "stranger"),
    response: (role) => {
      expect(role.name).toBe("owner");
      expect(role.capabilities).toEqual(managedRole("owner").capabilities);
      expect(role.createTime).toBeDefined();
    },
  }),
  contractCase({
    name: "a custom role, to a viewer of its group",
    method: RolesService.method.getRole,
    request: () => ({ uid: uid.orgReader! }),
    headers: as(() => world, "viewer"),
    response: (role) => {
      expect(role).toMatchObject({ uid: uid.orgReader, name: "org-reader", description: "reads repos", capabilities: [C.CAP_REPO_LIST] });
      expect(role.updateTime).toBeDefined();
    },
  }),
  contractCase({
    name: "a custom role of an ancestor group is not visible from a team: PERMISSION_DENIED",
    method: RolesService.method.getRole,
    request: () => ({ uid: uid.orgReader! }),
    headers: as(() => world, "teamViewer"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
  }),
  contractCase({
    name: "a custom role, to a caller without CAP_IAM_ROLES_LIST there: PERMISSION_DENIED",
    method: RolesService.method.getRole,
    request: () => ({ uid: uid.orgReader! }),
    headers: as(() => world, "stranger"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
  }),
  contractCase({
    name: "a custom role that does not exist, to the same caller: the same PERMISSION_DENIED (authorization before existence)",
    method: RolesService.method.getRole,
    request: () => ({ uid: `${world.org}/0123456789abcdef` }),
    headers: as(() => world, "stranger"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
  }),
  contractCase({
    name: "a custom role that does not exist, to a caller who could see it: NOT_FOUND with ResourceInfo",
    method: RolesService.method.getRole,
    request: () => ({ uid: `${world.org}/0123456789abcdef` }),
    headers: as(() => world, "viewer"),
    error: {
      code: Code.NotFound,
      reason: "NOT_FOUND",
      details: [{ schema: ResourceInfoSchema, value: { resourceType: RoleSchema.typeName, resourceName: expect.stringMatching(/^[0-9a-f]{40}\/0123456789abcdef$/) } }],
    },
  }),
  contractCase({
    name: "a root uid that is no managed role: NOT_FOUND",
    method: RolesService.method.getRole,
    request: { uid: "0000000000000000000000000000000000000000" },
    headers: as(() => world, "stranger"),
    error: { code: Code.NotFound, reason: "NOT_FOUND" },
  }),
  contractCase({
    name: "a malformed uid: INVALID_ARGUMENT on uid",
    method: RolesService.method.getRole,
    request: { uid: "Not.A.Uid" },
    headers: as(() => world, "viewer"),
    error: { code: Code.InvalidArgument, message: "Invalid argument: uid: is not a valid uid", details: [field("uid")] },
  }),
]);

runContractCases("RolesService.CreateRole", () => server.baseUrl, [
  contractCase({
    name: "an owner creates a custom role under its organization: uid <group>/<16 hex>, capabilities sorted without repeats",
    method: RolesService.method.createRole,
    request: () => ({
      parent: world.org,
      role: { name: "release managers", description: "push and tag", capabilities: [C.CAP_TAG_LIST, C.CAP_REPO_LIST, C.CAP_TAG_LIST] },
    }),
    headers: as(() => world, "owner"),
    response: (role) => {
      expect(role.uid).toMatch(new RegExp(`^${world.org}/[0-9a-f]{16}$`));
      expect(role).toMatchObject({ name: "release managers", description: "push and tag", capabilities: [C.CAP_REPO_LIST, C.CAP_TAG_LIST] });
      expect(role.createTime).toBeDefined();
      expect(role.updateTime).toEqual(role.createTime);
    },
  }),
  contractCase({
    name: "no name: INVALID_ARGUMENT on role.name",
    method: RolesService.method.createRole,
    request: () => ({ parent: world.org, role: { capabilities: [C.CAP_REPO_LIST] } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, message: "Invalid argument: role.name: is required", details: [field("role.name", "is required")] },
  }),
  contractCase({
    name: "no capability: INVALID_ARGUMENT on role.capabilities",
    method: RolesService.method.createRole,
    request: () => ({ parent: world.org, role: { name: "empty" } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [field("role.capabilities", "at least one capability is required")] },
  }),
  contractCase({
    name: "UNKNOWN among the capabilities: INVALID_ARGUMENT on role.capabilities",
    method: RolesService.method.createRole,
    request: () => ({ parent: world.org, role: { name: "unknown", capabilities: [C.CAP_REPO_LIST, C.UNKNOWN] } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [field("role.capabilities", "UNKNOWN is not a capability")] },
  }),
  contractCase({
    name: "an internal-only capability: INVALID_ARGUMENT on role.capabilities, for every caller",
    method: RolesService.method.createRole,
    request: () => ({ parent: world.org, role: { name: "internal", capabilities: [C.CAP_REPO_LIST, C.CAP_INTERNAL, C.CAP_REPO_INTERNAL_ADMIN] } }),
    headers: as(() => world, "owner"),
    error: {
      code: Code.InvalidArgument,
      message: /CAP_INTERNAL is internal-only/,
      details: [
        {
          schema: BadRequestSchema,
          value: {
            fieldViolations: [
              { field: "role.capabilities", description: "CAP_INTERNAL is internal-only and cannot be put in a role" },
              { field: "role.capabilities", description: "CAP_REPO_INTERNAL_ADMIN is internal-only and cannot be put in a role" },
            ],
          },
        },
      ],
    },
  }),
  contractCase({
    name: "an editor (no CAP_IAM_ROLES_CREATE): PERMISSION_DENIED",
    method: RolesService.method.createRole,
    request: () => ({ parent: world.org, role: { name: "editors own", capabilities: [C.CAP_REPO_LIST] } }),
    headers: as(() => world, "editor"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
  }),
  contractCase({
    name: "a team admin creates a role with capabilities it holds on its team",
    method: RolesService.method.createRole,
    request: () => ({ parent: world.team, role: { name: "team tags", capabilities: [C.CAP_TAG_LIST, C.CAP_REPO_LIST] } }),
    headers: teamAdmin,
    response: (role) => {
      expect(role.uid).toMatch(new RegExp(`^${world.team}/[0-9a-f]{16}$`));
      expect(role.capabilities).toEqual([C.CAP_REPO_LIST, C.CAP_TAG_LIST]);
    },
  }),
  contractCase({
    name: "escalation: a team admin creating a role with a capability it does not hold: PERMISSION_DENIED naming it",
    method: RolesService.method.createRole,
    request: () => ({ parent: world.team, role: { name: "sneaky", capabilities: [C.CAP_REPO_LIST, C.CAP_REPO_DELETE] } }),
    headers: teamAdmin,
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED", message: /does not hold .*: CAP_REPO_DELETE$/ },
  }),
  contractCase({
    name: "escalation: a team admin creating IAM powers it does not hold (bindings): PERMISSION_DENIED",
    method: RolesService.method.createRole,
    request: () => ({ parent: world.team, role: { name: "grant all", capabilities: [C.CAP_IAM_ROLE_BINDINGS_CREATE] } }),
    headers: teamAdmin,
    error: { code: Code.PermissionDenied, message: /CAP_IAM_ROLE_BINDINGS_CREATE/ },
  }),
  contractCase({
    name: "a team admin creating a role on the organization above its team: PERMISSION_DENIED",
    method: RolesService.method.createRole,
    request: () => ({ parent: world.org, role: { name: "up", capabilities: [C.CAP_REPO_LIST] } }),
    headers: teamAdmin,
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "an identity confined to the team (owner on the organization) creates on its team",
    method: RolesService.method.createRole,
    request: () => ({ parent: world.team, role: { name: "confined made", capabilities: [C.CAP_REPO_CREATE] } }),
    headers: as(() => world, "confined"),
    response: (role) => expect(role.uid.startsWith(`${world.team}/`)).toBe(true),
  }),
  contractCase({
    name: "an identity confined to the team cannot create on the organization: PERMISSION_DENIED",
    method: RolesService.method.createRole,
    request: () => ({ parent: world.org, role: { name: "confined up", capabilities: [C.CAP_REPO_LIST] } }),
    headers: as(() => world, "confined"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "under a group that does not exist: NOT_FOUND naming the group",
    method: RolesService.method.createRole,
    request: () => ({ parent: `${world.org}/00000000000000ff`, role: { name: "orphan", capabilities: [C.CAP_REPO_LIST] } }),
    headers: as(() => world, "owner"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: GroupSchema.typeName, resourceName: expect.stringMatching(/^[0-9a-f]{40}\/00000000000000ff$/) } }] },
  }),
]);

runContractCases("RolesService.UpdateRole", () => server.baseUrl, [
  contractCase({
    name: "update_mask name: the name changes, the description stays",
    method: RolesService.method.updateRole,
    request: () => ({ role: { uid: uid.rename!, name: "renamed", description: "ignored" }, updateMask: { paths: ["name"] } }),
    headers: as(() => world, "owner"),
    response: (role) => {
      expect(role).toMatchObject({ uid: uid.rename, name: "renamed", description: "kept", capabilities: [C.CAP_REPO_LIST] });
    },
  }),
  contractCase({
    name: "no update_mask: only the fields present change",
    method: RolesService.method.updateRole,
    request: () => ({ role: { uid: uid.describe!, description: "after" } }),
    headers: as(() => world, "owner"),
    response: (role) => expect(role).toMatchObject({ name: "describe-me", description: "after", capabilities: [C.CAP_REPO_LIST] }),
  }),
  contractCase({
    name: "capabilities with UNKNOWN: INVALID_ARGUMENT on role.capabilities",
    method: RolesService.method.updateRole,
    request: () => ({ role: { uid: uid.describe!, capabilities: [C.UNKNOWN] }, updateMask: { paths: ["capabilities"] } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [field("role.capabilities")] },
  }),
  contractCase({
    name: "capabilities emptied: INVALID_ARGUMENT on role.capabilities",
    method: RolesService.method.updateRole,
    request: () => ({ role: { uid: uid.describe! }, updateMask: { paths: ["capabilities"] } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [field("role.capabilities", "at least one capability is required")] },
  }),
  contractCase({
    name: "an internal-only capability added: INVALID_ARGUMENT on role.capabilities",
    method: RolesService.method.updateRole,
    request: () => ({ role: { uid: uid.describe!, capabilities: [C.CAP_REPO_LIST, C.CAP_INTERNAL] }, updateMask: { paths: ["capabilities"] } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [field("role.capabilities")] },
  }),
  contractCase({
    name: "escalation: a team admin adding a capability it does not hold: PERMISSION_DENIED",
    method: RolesService.method.updateRole,
    request: () => ({ role: { uid: uid.teamReader!, capabilities: [C.CAP_REPO_LIST, C.CAP_REPO_CREATE] } }),
    headers: teamAdmin,
    error: { code: Code.PermissionDenied, message: /CAP_REPO_CREATE/ },
  }),
  contractCase({
    name: "a team admin removing a capability it does not hold itself: allowed (nothing is granted)",
    method: RolesService.method.updateRole,
    request: () => ({ role: { uid: uid.teamMixed!, capabilities: [C.CAP_REPO_LIST] }, updateMask: { paths: ["capabilities"] } }),
    headers: teamAdmin,
    response: (role) => expect(role.capabilities).toEqual([C.CAP_REPO_LIST]),
  }),
  contractCase({
    name: "a managed role can never be changed, even by an owner: PERMISSION_DENIED",
    method: RolesService.method.updateRole,
    request: { role: { uid: managedRole("viewer").uid, description: "mine now" } },
    headers: as(() => world, "owner"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
  }),
  contractCase({
    name: "the organization's own uid is no custom role: PERMISSION_DENIED like a managed role",
    method: RolesService.method.updateRole,
    request: () => ({ role: { uid: world.org, description: "x" } }),
    headers: as(() => world, "owner"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "a custom role that does not exist: NOT_FOUND",
    method: RolesService.method.updateRole,
    request: () => ({ role: { uid: `${world.org}/0123456789abcdef`, name: "x" } }),
    headers: as(() => world, "owner"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: RoleSchema.typeName } }] },
  }),
  contractCase({
    name: "a viewer (no CAP_IAM_ROLES_UPDATE): PERMISSION_DENIED",
    method: RolesService.method.updateRole,
    request: () => ({ role: { uid: uid.describe!, description: "viewer was here" } }),
    headers: as(() => world, "viewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "an unknown update_mask path: INVALID_ARGUMENT on update_mask",
    method: RolesService.method.updateRole,
    request: () => ({ role: { uid: uid.describe! }, updateMask: { paths: ["colour"] } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [field("update_mask")] },
  }),
]);

runContractCases("RolesService.DeleteRole", () => server.baseUrl, [
  contractCase({
    name: "a role still bound: FAILED_PRECONDITION with a PreconditionFailure naming it",
    method: RolesService.method.deleteRole,
    request: () => ({ uid: uid.bound! }),
    headers: as(() => world, "owner"),
    error: {
      code: Code.FailedPrecondition,
      reason: "FAILED_PRECONDITION",
      message: /^Precondition failed: the role .* is still bound; delete its role bindings first$/,
      details: [{ schema: PreconditionFailureSchema, value: { violations: [{ type: "RESOURCE_IN_USE", subject: expect.stringMatching(/^[0-9a-f]{40}\/[0-9a-f]{16}$/) }] } }],
    },
  }),
  contractCase({
    name: "...and nothing changed: the role is still there",
    method: RolesService.method.getRole,
    request: () => ({ uid: uid.bound! }),
    headers: as(() => world, "owner"),
    response: (role) => expect(role.name).toBe("bound"),
  }),
  contractCase({
    name: "a managed role can never be deleted: PERMISSION_DENIED",
    method: RolesService.method.deleteRole,
    request: { uid: managedRole("editor").uid },
    headers: as(() => world, "owner"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
  }),
  contractCase({
    name: "an editor (no CAP_IAM_ROLES_DELETE): PERMISSION_DENIED",
    method: RolesService.method.deleteRole,
    request: () => ({ uid: uid.orgReader! }),
    headers: as(() => world, "editor"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "a custom role that does not exist: NOT_FOUND",
    method: RolesService.method.deleteRole,
    request: () => ({ uid: `${world.org}/0123456789abcdef` }),
    headers: as(() => world, "owner"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: RoleSchema.typeName } }] },
  }),
]);

describe.each(protocols)("RolesService lifecycle [%s]", (protocol) => {
  it("create, get, update, delete; then NOT_FOUND for get and delete", async () => {
    const owner = world.auth("owner");
    const created = await call(protocol, server.baseUrl, RolesService.method.createRole, { parent: world.org, role: { name: "temp", capabilities: [C.CAP_REPO_LIST] } }, owner);
    expect(created.error).toBeUndefined();
    const roleUid = created.message!.uid;
    const got = await call(protocol, server.baseUrl, RolesService.method.getRole, { uid: roleUid }, owner);
    expect(got.message).toEqual(created.message);
    const updated = await call(
      protocol,
      server.baseUrl,
      RolesService.method.updateRole,
      { role: { uid: roleUid, capabilities: [C.CAP_REPO_LIST, C.CAP_REPO_CREATE] }, updateMask: { paths: ["capabilities"] } },
      owner,
    );
    expect(updated.message?.capabilities).toEqual([C.CAP_REPO_CREATE, C.CAP_REPO_LIST]);
    expect(updated.message?.createTime).toEqual(created.message!.createTime);
    const deleted = await call(protocol, server.baseUrl, RolesService.method.deleteRole, { uid: roleUid }, owner);
    expect(deleted.error).toBeUndefined();
    const gone = await call(protocol, server.baseUrl, RolesService.method.getRole, { uid: roleUid }, owner);
    expect(gone.error?.code).toBe(Code.NotFound);
    const again = await call(protocol, server.baseUrl, RolesService.method.deleteRole, { uid: roleUid }, owner);
    expect(again.error?.code).toBe(Code.NotFound);
  });

  it("a refused escalation changes nothing", async () => {
    const out = await call(protocol, server.baseUrl, RolesService.method.updateRole, { role: { uid: uid.teamReader!, capabilities: [C.CAP_REPO_CREATE] } }, teamAdmin());
    expect(out.error?.code).toBe(Code.PermissionDenied);
    const got = await call(protocol, server.baseUrl, RolesService.method.getRole, { uid: uid.teamReader! }, teamAdmin());
    expect(got.message?.capabilities).toEqual([C.CAP_REPO_LIST]);
  });
});
