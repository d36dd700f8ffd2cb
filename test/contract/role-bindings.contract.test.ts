// RoleBindingsService over every protocol: hydrated creates, what a binding may name, no escalation,
// ALREADY_EXISTS, atomic batches of at most 25 whose items agree with the batch's role_uid, get/update/delete (a deleted binding's access ends with the
// next request), and list visibility with totals that count only what the caller sees.
import { Code } from "@connectrpc/connect";
import { eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { GroupSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentitySchema } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { RoleBindingSchema, RoleBindingsService, type RoleBinding } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { RolesService } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import { BadRequestSchema, ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { identities, roleBindings, roles } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type Caller, type World } from "../support/world.js";
import { call, contractCase, protocols, runContractCases, type Protocol } from "./harness.js";

const C = Capability;
const viewerRole = managedRole("viewer").uid;
const editorRole = managedRole("editor").uid;
const ownerRole = managedRole("owner").uid;
const pullRole = managedRole("registry.pull").uid;

let server: TestServer;
/** Where bindings are created, changed and deleted. */
let world: World;
/** Where nothing changes: list visibility and totals. */
let quiet: World;
/** Another organization. */
let foreign: World;
const uid: Record<string, string> = {};
let teamAdminToken = "";
/** The quiet organization's bindings (seedWorld's and 3 registry.pull on team), counted in the database. */
let QUIET_ALL = 0;
let QUIET_TEAM = 0;

/** Root-level identities never bound before, handed out one per use. */
const pool: string[] = [];
/** Identities living under world.other, handed out one per use. */
const childPool: string[] = [];
const fresh = () => pool.shift()!;
const freshChild = () => childPool.shift()!;

const teamAdmin = () => ({ authorization: `Bearer ${teamAdminToken}` });
const as = (w: () => World, caller: Caller) => () => w().auth(caller);
/** The NOT_FOUND of an identity a binding may not name (unknown, foreign or unseen alike). */
const identityNotFound = (uid?: string) => ({
  schema: ResourceInfoSchema,
  value: { resourceType: IdentitySchema.typeName, ...(uid === undefined ? {} : { resourceName: uid }) },
});
const violation = (field: string, description?: unknown) => ({
  schema: BadRequestSchema,
  value: { fieldViolations: [description === undefined ? { field } : { field, description }] },
});
const UID_IN_GROUP = /^[0-9a-f]{40}(\/[0-9a-f]{16})+$/;

function person(name: string, parentUid: string | null = null) {
  const id = parentUid ? newChildUid(parentUid) : newRootUid();
  return {
    uid: id,
    parentUid,
    name,
    description: `${name} description`,
    email: `${name.replace(/ /g, ".")}@example.test`,
    relationship: { claimMatch: { issuer: "https://issuer.test", subject: `sub-${id}` } },
    relationshipType: 1,
    issuer: "https://issuer.test",
    subject: `sub-${id}`,
  };
}

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server);
  quiet = await seedWorld(server, "quiet");
  foreign = await seedWorld(server, "foreign");
  const { db } = server.database;

  const people = [
    ...Array.from({ length: 90 }, (_, i) => person(`pool ${i}`)),
    ...Array.from({ length: 20 }, (_, i) => person(`child ${i}`, world.other)),
  ];
  const admin = person("team admin");
  const dup = person("dup");
  const toggle = person("toggle");
  const twice = person("twice");
  const q = Array.from({ length: 3 }, (_, i) => person(`quiet ${i}`, quiet.team));
  const stranger = person("foreign person", foreign.team);
  uid.foreignPerson = stranger.uid;
  await db.insert(identities).values([...people, admin, dup, toggle, twice, ...q, stranger]);
  pool.push(...people.filter((p) => p.parentUid === null).map((p) => p.uid));
  childPool.push(...people.filter((p) => p.parentUid !== null).map((p) => p.uid));
  Object.assign(uid, { dupIdentity: dup.uid, toggleIdentity: toggle.uid });

  const role = (key: string, group: string, name: string, capabilities: Capability[]) => {
    uid[key] = newChildUid(group);
    return { uid: uid[key]!, parentUid: group, name, description: `${name} role`, capabilities };
  };
  await db.insert(roles).values([
    role("teamAdmin", world.team, "team-admin", [
      C.CAP_IAM_ROLE_BINDINGS_CREATE, C.CAP_IAM_ROLE_BINDINGS_UPDATE, C.CAP_IAM_ROLE_BINDINGS_LIST, C.CAP_IAM_ROLE_BINDINGS_DELETE,
      C.CAP_IAM_ROLES_LIST, C.CAP_REPO_LIST,
    ]),
    role("teamReader", world.team, "team-reader", [C.CAP_REPO_LIST]),
    role("orgReader", world.org, "org-reader", [C.CAP_REPO_LIST, C.CAP_IAM_ROLES_LIST]),
    role("foreignRole", foreign.org, "foreign", [C.CAP_REPO_LIST]),
  ]);

  const bind = (key: string, group: string, identityUid: string, roleUid: string) => {
    uid[key] = newChildUid(group);
    return { uid: uid[key]!, groupUid: group, identityUid, roleUid };
  };
  await db.insert(roleBindings).values([
    bind("teamAdminBinding", world.team, admin.uid, uid.teamAdmin!),
    bind("dup", world.team, dup.uid, viewerRole),
    bind("toggle", world.team, toggle.uid, viewerRole),
    bind("twiceViewer", world.team, twice.uid, viewerRole),
    bind("twiceEditor", world.team, twice.uid, editorRole),
    ...q.map((p, i) => bind(`q${i}`, quiet.team, p.uid, pullRole)),
  ]);
  teamAdminToken = await server.token(admin.uid);
  const all = await db.select({ group: roleBindings.groupUid }).from(roleBindings);
  QUIET_ALL = all.filter((b) => b.group === quiet.org || b.group.startsWith(`${quiet.org}/`)).length;
  QUIET_TEAM = all.filter((b) => b.group === quiet.team).length;
});
afterAll(async () => {
  await server?.close();
});

function expectHydrated(b: RoleBinding, want: { group: string; identity: string; role: string }) {
  expect(b.uid).toMatch(new RegExp(`^${want.group}/[0-9a-f]{16}$`));
  expect(b.identityUid).toBe(want.identity);
  expect(b.roleUid).toBe(want.role);
  expect(b.identity?.uid).toBe(want.identity);
  expect(b.group?.uid).toBe(want.group);
  expect(b.role?.uid).toBe(want.role);
  expect(b.createTime).toBeDefined();
  expect(b.updateTime).toBeDefined();
}

runContractCases("RoleBindingsService.CreateRoleBinding", () => server.baseUrl, [
  contractCase({
    name: "an owner binds an identity: the response is hydrated with the identity, group and role",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.team, roleBinding: { identityUid: fresh(), roleUid: viewerRole } }),
    headers: as(() => world, "owner"),
    response: (b) => {
      expect(b.uid).toMatch(new RegExp(`^${world.team}/[0-9a-f]{16}$`));
      expect(b.identity).toMatchObject({
        uid: b.identityUid,
        name: expect.stringMatching(/^pool \d+$/),
        description: expect.stringMatching(/^pool \d+ description$/),
        issuer: "https://issuer.test",
        subject: `sub-${b.identityUid}`,
        email: expect.stringMatching(/^pool\.\d+@example\.test$/),
      });
      expect(b.group).toMatchObject({ uid: world.team, name: "team", description: "" });
      expect(b.role).toMatchObject({ uid: viewerRole, name: "viewer", description: managedRole("viewer").description });
      expect(b.roleUid).toBe(viewerRole);
      expect(b.createTime).toBeDefined();
      expect(b.updateTime).toEqual(b.createTime);
    },
  }),
  contractCase({
    name: "a custom role of an ancestor group can be bound beneath it",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.team, roleBinding: { identityUid: fresh(), roleUid: uid.orgReader! } }),
    headers: as(() => world, "owner"),
    response: (b) => expect(b.role).toMatchObject({ uid: uid.orgReader, name: "org-reader", description: "org-reader role" }),
  }),
  contractCase({
    name: "an identity living in another group of the same organization can be bound",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.team, roleBinding: { identityUid: freshChild(), roleUid: pullRole } }),
    headers: as(() => world, "owner"),
    response: (b) => expect(b.identityUid.startsWith(`${world.other}/`)).toBe(true),
  }),
  contractCase({
    name: "no identity_uid: INVALID_ARGUMENT on role_binding.identity_uid",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.team, roleBinding: { roleUid: viewerRole } }),
    headers: as(() => world, "owner"),
    error: {
      code: Code.InvalidArgument,
      message: "Invalid argument: role_binding.identity_uid: is required",
      details: [violation("role_binding.identity_uid", "is required")],
    },
  }),
  contractCase({
    name: "no role_uid: INVALID_ARGUMENT on role_binding.role_uid",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.team, roleBinding: { identityUid: uid.dupIdentity! } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("role_binding.role_uid", "is required")] },
  }),
  contractCase({
    name: "no role_binding at all: both fields named",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.team }),
    headers: as(() => world, "owner"),
    error: {
      code: Code.InvalidArgument,
      details: [
        {
          schema: BadRequestSchema,
          value: { fieldViolations: [{ field: "role_binding.identity_uid" }, { field: "role_binding.role_uid" }] },
        },
      ],
    },
  }),
  contractCase({
    name: "an identity of another organization: the answer an unknown uid gets (NOT_FOUND naming the uid)",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.team, roleBinding: { identityUid: foreign.identity.confined, roleUid: viewerRole } }),
    headers: as(() => world, "owner"),
    error: { code: Code.NotFound, details: [identityNotFound()] },
  }),
  contractCase({
    name: "an identity of the organization outside the caller's scopes: the answer an unknown uid gets",
    method: RoleBindingsService.method.createRoleBinding,
    // `confined` is an owner of the organization confined to team: identities under other are not its to see.
    request: () => ({ parent: world.team, roleBinding: { identityUid: freshChild(), roleUid: pullRole } }),
    headers: as(() => world, "confined"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: IdentitySchema.typeName } }] },
  }),
  contractCase({
    name: "an identity that does not exist: NOT_FOUND naming the uid",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.team, roleBinding: { identityUid: "ffffffffffffffffffffffffffffffffffffffff", roleUid: viewerRole } }),
    headers: as(() => world, "owner"),
    error: { code: Code.NotFound, details: [identityNotFound("ffffffffffffffffffffffffffffffffffffffff")] },
  }),
  contractCase({
    name: "a custom role of a group beneath the parent: INVALID_ARGUMENT on role_binding.role_uid",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.org, roleBinding: { identityUid: uid.dupIdentity!, roleUid: uid.teamReader! } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("role_binding.role_uid", expect.stringMatching(/ancestors/))] },
  }),
  contractCase({
    name: "a custom role of another organization: INVALID_ARGUMENT on role_binding.role_uid",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.org, roleBinding: { identityUid: uid.dupIdentity!, roleUid: uid.foreignRole! } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("role_binding.role_uid")] },
  }),
  contractCase({
    name: "a role uid that names no role: INVALID_ARGUMENT on role_binding.role_uid",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.team, roleBinding: { identityUid: uid.dupIdentity!, roleUid: `${world.org}/0123456789abcdef` } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("role_binding.role_uid", "does not name an existing role")] },
  }),
  contractCase({
    name: "the same identity, role and group again: ALREADY_EXISTS naming the existing binding",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.team, roleBinding: { identityUid: uid.dupIdentity!, roleUid: viewerRole } }),
    headers: as(() => world, "owner"),
    error: {
      code: Code.AlreadyExists,
      reason: "ALREADY_EXISTS",
      details: [{ schema: ResourceInfoSchema, value: { resourceType: RoleBindingSchema.typeName, resourceName: expect.stringMatching(UID_IN_GROUP) } }],
    },
  }),
  contractCase({
    name: "a parent group that does not exist: NOT_FOUND naming it",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: `${world.org}/00000000000000ff`, roleBinding: { identityUid: uid.dupIdentity!, roleUid: viewerRole } }),
    headers: as(() => world, "owner"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: GroupSchema.typeName } }] },
  }),
  contractCase({
    name: "an editor (no CAP_IAM_ROLE_BINDINGS_CREATE): PERMISSION_DENIED",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.team, roleBinding: { identityUid: uid.dupIdentity!, roleUid: editorRole } }),
    headers: as(() => world, "editor"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
  }),
  contractCase({
    name: "a team admin binds a role whose capabilities it holds on its team",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.team, roleBinding: { identityUid: fresh(), roleUid: uid.teamReader! } }),
    headers: teamAdmin,
    response: (b) => expect(b.role?.name).toBe("team-reader"),
  }),
  contractCase({
    name: "escalation: a team admin granting the owner role: PERMISSION_DENIED naming what it lacks",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.team, roleBinding: { identityUid: uid.dupIdentity!, roleUid: ownerRole } }),
    headers: teamAdmin,
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED", message: /does not hold on .*: CAP_IAM_GROUPS_CREATE, / },
  }),
  contractCase({
    name: "escalation: a team admin granting viewer (it lacks the pull capabilities): PERMISSION_DENIED",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.team, roleBinding: { identityUid: uid.dupIdentity!, roleUid: viewerRole } }),
    headers: teamAdmin,
    error: { code: Code.PermissionDenied, message: /: CAP_IAM_GROUPS_LIST, .* and \d+ more$/ },
  }),
  contractCase({
    name: "a team admin binding on the organization above its team: PERMISSION_DENIED",
    method: RoleBindingsService.method.createRoleBinding,
    request: () => ({ parent: world.org, roleBinding: { identityUid: uid.dupIdentity!, roleUid: uid.orgReader! } }),
    headers: teamAdmin,
    error: { code: Code.PermissionDenied },
  }),
]);

const batchOf = (n: number) => () => ({
  parent: world.team,
  roleUid: viewerRole,
  requests: Array.from({ length: n }, () => ({ roleBinding: { identityUid: uid.dupIdentity! } })),
});

runContractCases("RoleBindingsService.BatchCreateRoleBindings", () => server.baseUrl, [
  contractCase({
    name: "several bindings at once, inner role_uid empty or equal to the outer one; hydrated, in request order",
    method: RoleBindingsService.method.batchCreateRoleBindings,
    request: () => ({
      parent: world.team,
      roleUid: pullRole,
      requests: [
        { roleBinding: { identityUid: fresh() } },
        { parent: world.team, roleBinding: { identityUid: fresh(), roleUid: pullRole } },
        { roleBinding: { identityUid: freshChild() } },
      ],
    }),
    headers: as(() => world, "owner"),
    response: (res) => {
      expect(res.roleBindings).toHaveLength(3);
      const [a, b, c] = res.roleBindings;
      expectHydrated(a!, { group: world.team, identity: a!.identityUid, role: pullRole });
      expectHydrated(b!, { group: world.team, identity: b!.identityUid, role: pullRole });
      expectHydrated(c!, { group: world.team, identity: c!.identityUid, role: pullRole });
      expect(a!.identity?.name).toMatch(/^pool /);
      expect(c!.identity?.name).toMatch(/^child /);
    },
  }),
  contractCase({
    name: "no outer role_uid: each item binds the role it names",
    method: RoleBindingsService.method.batchCreateRoleBindings,
    request: () => ({
      parent: world.team,
      requests: [{ roleBinding: { identityUid: fresh(), roleUid: pullRole } }, { roleBinding: { identityUid: fresh(), roleUid: uid.teamReader! } }],
    }),
    headers: as(() => world, "owner"),
    response: (res) => {
      const [a, b] = res.roleBindings;
      expectHydrated(a!, { group: world.team, identity: a!.identityUid, role: pullRole });
      expectHydrated(b!, { group: world.team, identity: b!.identityUid, role: uid.teamReader! });
      expect(b!.role?.name).toBe("team-reader");
    },
  }),
  contractCase({
    name: "an inner role_uid other than the outer one: INVALID_ARGUMENT naming every such item",
    method: RoleBindingsService.method.batchCreateRoleBindings,
    request: () => ({
      parent: world.team,
      roleUid: pullRole,
      requests: [
        { roleBinding: { identityUid: uid.toggleIdentity! } },
        { roleBinding: { identityUid: uid.dupIdentity!, roleUid: uid.teamReader! } },
        { roleBinding: { identityUid: uid.toggleIdentity!, roleUid: pullRole } },
        { roleBinding: { identityUid: uid.dupIdentity!, roleUid: viewerRole } },
      ],
    }),
    headers: as(() => world, "owner"),
    error: {
      code: Code.InvalidArgument,
      details: [
        {
          schema: BadRequestSchema,
          value: {
            fieldViolations: [
              { field: "requests[1].role_binding.role_uid", description: `must be empty or equal to role_uid ${JSON.stringify(pullRole)}` },
              { field: "requests[3].role_binding.role_uid", description: `must be empty or equal to role_uid ${JSON.stringify(pullRole)}` },
            ],
          },
        },
      ],
    },
  }),
  contractCase({
    name: "26 requests: INVALID_ARGUMENT on requests",
    method: RoleBindingsService.method.batchCreateRoleBindings,
    request: batchOf(26),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("requests", "at most 25 requests are allowed, got 26")] },
  }),
  contractCase({
    name: "no request: INVALID_ARGUMENT on requests",
    method: RoleBindingsService.method.batchCreateRoleBindings,
    request: batchOf(0),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("requests")] },
  }),
  contractCase({
    name: "an inner parent other than the outer one: INVALID_ARGUMENT naming the item",
    method: RoleBindingsService.method.batchCreateRoleBindings,
    request: () => ({
      parent: world.team,
      roleUid: viewerRole,
      requests: [{ roleBinding: { identityUid: uid.toggleIdentity! } }, { parent: world.org, roleBinding: { identityUid: uid.dupIdentity! } }],
    }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("requests[1].parent", "must be empty or equal to parent")] },
  }),
  contractCase({
    name: "one bad item among good ones: INVALID_ARGUMENT naming it (the whole batch is refused)",
    method: RoleBindingsService.method.batchCreateRoleBindings,
    request: () => ({
      parent: world.org,
      requests: [
        { roleBinding: { identityUid: uid.toggleIdentity!, roleUid: pullRole } },
        { roleBinding: { identityUid: uid.dupIdentity!, roleUid: pullRole } },
        { roleBinding: { identityUid: uid.dupIdentity!, roleUid: uid.teamReader! } },
        { roleBinding: { identityUid: uid.toggleIdentity!, roleUid: viewerRole } },
      ],
    }),
    headers: as(() => world, "owner"),
    error: {
      code: Code.InvalidArgument,
      message: /^Invalid argument: requests\[2\]\.role_binding\.role_uid: /,
      details: [violation("requests[2].role_binding.role_uid")],
    },
  }),
  contractCase({
    name: "no role anywhere: INVALID_ARGUMENT on the item's role_uid",
    method: RoleBindingsService.method.batchCreateRoleBindings,
    request: () => ({ parent: world.team, requests: [{ roleBinding: { identityUid: uid.dupIdentity! } }] }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("requests[0].role_binding.role_uid", "is required")] },
  }),
  contractCase({
    name: "the same identity and role twice: INVALID_ARGUMENT naming the repeat",
    method: RoleBindingsService.method.batchCreateRoleBindings,
    request: batchOf(2),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("requests[1].role_binding", "binds the same identity and role as requests[0].role_binding")] },
  }),
  contractCase({
    name: "an item that already exists: ALREADY_EXISTS",
    method: RoleBindingsService.method.batchCreateRoleBindings,
    request: batchOf(1),
    headers: as(() => world, "owner"),
    error: { code: Code.AlreadyExists },
  }),
  contractCase({
    name: "escalation in one item: PERMISSION_DENIED naming the item",
    method: RoleBindingsService.method.batchCreateRoleBindings,
    request: () => ({
      parent: world.team,
      requests: [{ roleBinding: { identityUid: uid.toggleIdentity!, roleUid: uid.teamReader! } }, { roleBinding: { identityUid: uid.dupIdentity!, roleUid: ownerRole } }],
    }),
    headers: teamAdmin,
    error: { code: Code.PermissionDenied, message: /requests\[1\]\.role_binding/ },
  }),
]);

// Binding a stranger: an identity of another organization is answered exactly as a uid naming nothing, on
// create and on update, and nothing of it (name, subject, issuer, email) appears in the answer.
describe.each(protocols)("RoleBindingsService: an identity of another organization cannot be told from an unknown one [%s]", (protocol) => {
  /** The whole answer as text, the identity uid it names and the request's id replaced, so two answers compare. */
  const answer = async (method: "create" | "update", identityUid: string): Promise<string> => {
    const out =
      method === "create"
        ? await call(protocol, server.baseUrl, RoleBindingsService.method.createRoleBinding, { parent: world.team, roleBinding: { identityUid, roleUid: viewerRole } }, world.auth("owner"))
        : await call(
            protocol,
            server.baseUrl,
            RoleBindingsService.method.updateRoleBinding,
            { roleBinding: { uid: uid.toggle!, identityUid }, updateMask: { paths: ["identity_uid"] } },
            world.auth("owner"),
          );
    expect(out.error, "refused").toBeDefined();
    const { code, message, details } = out.error!;
    return JSON.stringify({ code, message, details })
      .replaceAll(identityUid, "<uid>")
      .replace(/"requestId":"[^"]*"/g, '"requestId":"<id>"');
  };

  it.each(["create", "update"] as const)("%s", async (method) => {
    const stranger = uid.foreignPerson!;
    const unknownThere = `${foreign.team}/0123456789abcdef`;
    const unknownHere = `${world.team}/0123456789abcdef`;
    const got = await answer(method, stranger);
    expect(got).toBe(await answer(method, unknownThere));
    expect(got).toBe(await answer(method, unknownHere));
    expect(got).toMatch(/"code":5/);
    for (const secret of ["foreign person", "foreign.person@example.test", `sub-${stranger}`]) expect(got).not.toContain(secret);
  });
});

/** The bindings of an identity (as the organization's viewer sees them). */
async function bindingsOf(protocol: Protocol, identity: string): Promise<RoleBinding[]> {
  const out = await call(protocol, server.baseUrl, RoleBindingsService.method.listRoleBindings, { identity }, world.auth("viewer"));
  expect(out.error).toBeUndefined();
  return out.message!.roleBindings;
}

describe.each(protocols)("RoleBindingsService.BatchCreateRoleBindings is atomic [%s]", (protocol) => {
  it("one invalid item: none of the valid ones is created", async () => {
    const [a, b] = [fresh(), fresh()];
    const out = await call(
      protocol,
      server.baseUrl,
      RoleBindingsService.method.batchCreateRoleBindings,
      {
        parent: world.team,
        requests: [
          { roleBinding: { identityUid: a, roleUid: viewerRole } },
          { roleBinding: { identityUid: b, roleUid: viewerRole } },
          { roleBinding: { identityUid: fresh(), roleUid: uid.foreignRole! } },
        ],
      },
      world.auth("owner"),
    );
    expect(out.error?.code).toBe(Code.InvalidArgument);
    expect(await bindingsOf(protocol, a)).toEqual([]);
    expect(await bindingsOf(protocol, b)).toEqual([]);
  });

  it("one item naming a role other than the outer role_uid: nothing is created, not even that item with its role", async () => {
    const [a, b] = [fresh(), fresh()];
    const out = await call(
      protocol,
      server.baseUrl,
      RoleBindingsService.method.batchCreateRoleBindings,
      { parent: world.team, roleUid: viewerRole, requests: [{ roleBinding: { identityUid: a } }, { roleBinding: { identityUid: b, roleUid: pullRole } }] },
      world.auth("owner"),
    );
    expect(out.error?.code).toBe(Code.InvalidArgument);
    expect(await bindingsOf(protocol, a)).toEqual([]);
    expect(await bindingsOf(protocol, b)).toEqual([]);
  });

  it("the last item already exists: the ones inserted before it are rolled back", async () => {
    const [a, b] = [fresh(), fresh()];
    const out = await call(
      protocol,
      server.baseUrl,
      RoleBindingsService.method.batchCreateRoleBindings,
      {
        parent: world.team,
        roleUid: viewerRole,
        requests: [{ roleBinding: { identityUid: a } }, { roleBinding: { identityUid: b } }, { roleBinding: { identityUid: uid.dupIdentity! } }],
      },
      world.auth("owner"),
    );
    expect(out.error?.code).toBe(Code.AlreadyExists);
    expect(await bindingsOf(protocol, a)).toEqual([]);
    expect(await bindingsOf(protocol, b)).toEqual([]);
  });

  it("25 requests: all created", async () => {
    const ids = Array.from({ length: 25 }, () => newRootUid());
    await server.database.db.insert(identities).values(ids.map((id) => ({ ...person("batch"), uid: id })));
    const out = await call(
      protocol,
      server.baseUrl,
      RoleBindingsService.method.batchCreateRoleBindings,
      { parent: world.other, roleUid: pullRole, requests: ids.map((identityUid) => ({ roleBinding: { identityUid } })) },
      world.auth("owner"),
    );
    expect(out.error).toBeUndefined();
    expect(out.message!.roleBindings.map((b) => b.identityUid)).toEqual(ids);
  });
});

runContractCases("RoleBindingsService.GetRoleBinding", () => server.baseUrl, [
  contractCase({
    name: "a viewer of the group: the hydrated binding",
    method: RoleBindingsService.method.getRoleBinding,
    request: () => ({ uid: uid.teamAdminBinding! }),
    headers: as(() => world, "viewer"),
    response: (b) => {
      expect(b.uid).toBe(uid.teamAdminBinding);
      expect(b.identity).toMatchObject({ name: "team admin", email: "team.admin@example.test", issuer: "https://issuer.test" });
      expect(b.group).toMatchObject({ uid: world.team, name: "team" });
      expect(b.role).toMatchObject({ uid: uid.teamAdmin, name: "team-admin" });
    },
  }),
  contractCase({
    name: "a caller without CAP_IAM_ROLE_BINDINGS_LIST there: PERMISSION_DENIED",
    method: RoleBindingsService.method.getRoleBinding,
    request: () => ({ uid: uid.teamAdminBinding! }),
    headers: as(() => world, "otherViewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "a binding that does not exist, to a caller who could not see it: PERMISSION_DENIED",
    method: RoleBindingsService.method.getRoleBinding,
    request: () => ({ uid: `${world.team}/0123456789abcdef` }),
    headers: as(() => world, "stranger"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "a binding that does not exist, to a caller who could see it: NOT_FOUND with ResourceInfo",
    method: RoleBindingsService.method.getRoleBinding,
    request: () => ({ uid: `${world.team}/0123456789abcdef` }),
    headers: as(() => world, "viewer"),
    error: {
      code: Code.NotFound,
      details: [{ schema: ResourceInfoSchema, value: { resourceType: RoleBindingSchema.typeName, resourceName: expect.stringMatching(/\/0123456789abcdef$/) } }],
    },
  }),
]);

runContractCases("RoleBindingsService.UpdateRoleBinding", () => server.baseUrl, [
  contractCase({
    name: "an owner changes the role (update_mask role_uid): the response is hydrated with the new role",
    method: RoleBindingsService.method.updateRoleBinding,
    request: () => ({ roleBinding: { uid: uid.toggle!, roleUid: editorRole }, updateMask: { paths: ["role_uid"] } }),
    headers: as(() => world, "owner"),
    response: (b) => {
      expect(b.uid).toBe(uid.toggle);
      expect(b.roleUid).toBe(editorRole);
      expect(b.role).toMatchObject({ uid: editorRole, name: "editor" });
      expect(b.identityUid).toBe(uid.toggleIdentity);
    },
  }),
  contractCase({
    name: "escalation: a team admin changing a binding to the owner role: PERMISSION_DENIED",
    method: RoleBindingsService.method.updateRoleBinding,
    request: () => ({ roleBinding: { uid: uid.toggle!, roleUid: ownerRole } }),
    headers: teamAdmin,
    error: { code: Code.PermissionDenied, message: /CAP_IAM_GROUPS_CREATE/ },
  }),
  contractCase({
    name: "a role not usable on the binding's group: INVALID_ARGUMENT on role_binding.role_uid",
    method: RoleBindingsService.method.updateRoleBinding,
    request: () => ({ roleBinding: { uid: uid.toggle!, roleUid: uid.foreignRole! } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("role_binding.role_uid")] },
  }),
  contractCase({
    name: "into a combination that already exists: ALREADY_EXISTS",
    method: RoleBindingsService.method.updateRoleBinding,
    request: () => ({ roleBinding: { uid: uid.twiceViewer!, roleUid: editorRole } }),
    headers: as(() => world, "owner"),
    error: { code: Code.AlreadyExists, details: [{ schema: ResourceInfoSchema, value: { resourceType: RoleBindingSchema.typeName } }] },
  }),
  contractCase({
    name: "a binding that does not exist: NOT_FOUND",
    method: RoleBindingsService.method.updateRoleBinding,
    request: () => ({ roleBinding: { uid: `${world.team}/0123456789abcdef`, roleUid: editorRole } }),
    headers: as(() => world, "owner"),
    error: { code: Code.NotFound },
  }),
  contractCase({
    name: "a viewer (no CAP_IAM_ROLE_BINDINGS_UPDATE): PERMISSION_DENIED",
    method: RoleBindingsService.method.updateRoleBinding,
    request: () => ({ roleBinding: { uid: uid.toggle!, roleUid: viewerRole } }),
    headers: as(() => world, "viewer"),
    error: { code: Code.PermissionDenied },
  }),
]);

runContractCases("RoleBindingsService.DeleteRoleBinding", () => server.baseUrl, [
  contractCase({
    name: "a caller without CAP_IAM_ROLE_BINDINGS_DELETE: PERMISSION_DENIED",
    method: RoleBindingsService.method.deleteRoleBinding,
    request: () => ({ uid: uid.dup! }),
    headers: as(() => world, "viewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "a binding that does not exist: NOT_FOUND",
    method: RoleBindingsService.method.deleteRoleBinding,
    request: () => ({ uid: `${world.team}/0123456789abcdef` }),
    headers: as(() => world, "owner"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: RoleBindingSchema.typeName } }] },
  }),
]);

/** Retries `probe` until it holds (changes made outside this server reach it by database notification). */
async function eventually(probe: () => Promise<boolean>, timeoutMs = 5000): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.each(protocols)("grants changed in the database by someone else (another replica, an operator) reach this server [%s]", (protocol) => {
  it("a binding deleted in SQL ends the access; a role's capabilities changed in SQL take effect", async () => {
    const { db } = server.database;
    const identity = fresh();
    const token = { authorization: `Bearer ${await server.token(identity)}` };
    const readRole = () => call(protocol, server.baseUrl, RolesService.method.getRole, { uid: uid.orgReader! }, token);
    const bindingUid = newChildUid(world.org);
    await db.insert(roleBindings).values({ uid: bindingUid, groupUid: world.org, identityUid: identity, roleUid: uid.orgReader! });
    expect(await eventually(async () => (await readRole()).message?.name === "org-reader")).toBe(true);
    expect((await readRole()).message?.name).toBe("org-reader"); // and again: now possibly remembered

    await db.delete(roleBindings).where(eq(roleBindings.uid, bindingUid));
    expect(await eventually(async () => (await readRole()).error?.code === Code.PermissionDenied)).toBe(true);

    const roleUid = newChildUid(world.org);
    await db.insert(roles).values({ uid: roleUid, parentUid: world.org, name: `sql-${roleUid.slice(-6)}`, capabilities: [C.CAP_IAM_ROLES_LIST] });
    await db.insert(roleBindings).values({ uid: newChildUid(world.org), groupUid: world.org, identityUid: identity, roleUid });
    expect(await eventually(async () => (await readRole()).message?.name === "org-reader")).toBe(true);
    await db.update(roles).set({ capabilities: [C.CAP_REPO_LIST] }).where(eq(roles.uid, roleUid));
    expect(await eventually(async () => (await readRole()).error?.code === Code.PermissionDenied)).toBe(true);
  });
});

describe.each(protocols)("RoleBindingsService: a deleted binding's access ends at once [%s]", (protocol) => {
  it("the identity's very next request, with the same token, no longer has the role's capabilities", async () => {
    const identity = fresh();
    const token = { authorization: `Bearer ${await server.token(identity)}` };
    const readRole = () => call(protocol, server.baseUrl, RolesService.method.getRole, { uid: uid.orgReader! }, token);
    expect((await readRole()).error?.code).toBe(Code.PermissionDenied);

    const created = await call(protocol, server.baseUrl, RoleBindingsService.method.createRoleBinding, { parent: world.org, roleBinding: { identityUid: identity, roleUid: uid.orgReader! } }, world.auth("owner"));
    expect(created.error).toBeUndefined();
    expect((await readRole()).message?.name).toBe("org-reader");

    const deleted = await call(protocol, server.baseUrl, RoleBindingsService.method.deleteRoleBinding, { uid: created.message!.uid }, world.auth("owner"));
    expect(deleted.error).toBeUndefined();
    expect((await readRole()).error?.code).toBe(Code.PermissionDenied);

    const again = await call(protocol, server.baseUrl, RoleBindingsService.method.deleteRoleBinding, { uid: created.message!.uid }, world.auth("owner"));
    expect(again.error?.code).toBe(Code.NotFound);
  });
});


runContractCases("RoleBindingsService.ListRoleBindings", () => server.baseUrl, [
  contractCase({
    name: "a viewer of the organization sees all its bindings, hydrated; the total counts exactly those",
    method: RoleBindingsService.method.listRoleBindings,
    request: {},
    headers: as(() => quiet, "viewer"),
    response: (res) => {
      expect(QUIET_ALL).toBeGreaterThanOrEqual(9);
      expect(res.totalCount).toBe(BigInt(QUIET_ALL));
      expect(res.roleBindings).toHaveLength(QUIET_ALL);
      expect(res.roleBindings.every((b) => b.uid.startsWith(`${quiet.org}/`))).toBe(true);
      for (const b of res.roleBindings) {
        expect(b.identity?.uid).toBe(b.identityUid);
        expect(b.identity?.name).not.toBe("");
        expect(b.group?.name).not.toBe("");
        expect(b.role?.name).not.toBe("");
      }
    },
  }),
  contractCase({
    name: "a viewer of a team sees only the team's bindings",
    method: RoleBindingsService.method.listRoleBindings,
    request: {},
    headers: as(() => quiet, "teamViewer"),
    response: (res) => {
      expect(res.totalCount).toBe(BigInt(QUIET_TEAM));
      expect(res.roleBindings.every((b) => b.group?.uid === quiet.team)).toBe(true);
    },
  }),
  contractCase({
    name: "an identity confined to the team (owner on the organization) sees only the team's bindings",
    method: RoleBindingsService.method.listRoleBindings,
    request: {},
    headers: as(() => quiet, "confined"),
    response: (res) => expect(res.totalCount).toBe(BigInt(QUIET_TEAM)),
  }),
  contractCase({
    name: "a caller with no binding sees nothing, and a total of 0",
    method: RoleBindingsService.method.listRoleBindings,
    request: {},
    headers: as(() => quiet, "stranger"),
    response: (res) => {
      expect(res.roleBindings).toEqual([]);
      expect(res.totalCount).toBe(0n);
    },
  }),
  contractCase({
    name: "filter identity",
    method: RoleBindingsService.method.listRoleBindings,
    request: () => ({ identity: quiet.identity.editor }),
    headers: as(() => quiet, "viewer"),
    response: (res) => {
      expect(res.roleBindings.map((b) => [b.identityUid, b.role?.name])).toEqual([[quiet.identity.editor, "editor"]]);
      expect(res.totalCount).toBe(1n);
    },
  }),
  contractCase({
    name: "filter group (exact)",
    method: RoleBindingsService.method.listRoleBindings,
    request: () => ({ group: quiet.team }),
    headers: as(() => quiet, "viewer"),
    response: (res) => expect(res.totalCount).toBe(BigInt(QUIET_TEAM)),
  }),
  contractCase({
    name: "filter role",
    method: RoleBindingsService.method.listRoleBindings,
    request: { role: pullRole },
    headers: as(() => quiet, "viewer"),
    response: (res) => {
      expect(res.totalCount).toBe(3n);
      expect(res.roleBindings.every((b) => b.role?.name === "registry.pull")).toBe(true);
    },
  }),
  contractCase({
    name: "uidp.children_of a group: the bindings on that group",
    method: RoleBindingsService.method.listRoleBindings,
    request: () => ({ uidp: { childrenOf: quiet.other } }),
    headers: as(() => quiet, "viewer"),
    response: (res) => expect(res.roleBindings.map((b) => b.identityUid)).toEqual([quiet.identity.otherViewer]),
  }),
  contractCase({
    name: "uidp.descendants_of the organization, seen from a team: still only the team's",
    method: RoleBindingsService.method.listRoleBindings,
    request: () => ({ uidp: { descendantsOf: quiet.org } }),
    headers: as(() => quiet, "teamViewer"),
    response: (res) => expect(res.totalCount).toBe(BigInt(QUIET_TEAM)),
  }),
  contractCase({
    name: "order_by create_time desc, pages of 2: a token and the full total",
    method: RoleBindingsService.method.listRoleBindings,
    request: { orderBy: "create_time desc", pageSize: 2 },
    headers: as(() => quiet, "viewer"),
    response: (res) => {
      expect(res.roleBindings).toHaveLength(2);
      expect(res.nextPageToken).not.toBe("");
      expect(res.totalCount).toBe(BigInt(QUIET_ALL));
    },
  }),
  contractCase({
    name: "order_by a field that is not sortable: INVALID_ARGUMENT on order_by",
    method: RoleBindingsService.method.listRoleBindings,
    request: { orderBy: "role_uid" },
    headers: as(() => quiet, "viewer"),
    error: { code: Code.InvalidArgument, details: [violation("order_by")] },
  }),
  contractCase({
    name: "a malformed identity filter: INVALID_ARGUMENT on identity",
    method: RoleBindingsService.method.listRoleBindings,
    request: { identity: "Not A Uid" },
    headers: as(() => quiet, "viewer"),
    error: { code: Code.InvalidArgument, details: [violation("identity", "is not a valid uid")] },
  }),
]);

describe.each(protocols)("RoleBindingsService.ListRoleBindings paging [%s]", (protocol) => {
  it("walks every page by keyset: each visible binding once, the same total on every page", async () => {
    const seen: string[] = [];
    let pageToken = "";
    let pages = 0;
    do {
      const out = await call(protocol, server.baseUrl, RoleBindingsService.method.listRoleBindings, { pageSize: 2, orderBy: "update_time desc", pageToken }, quiet.auth("viewer"));
      expect(out.error).toBeUndefined();
      expect(out.message!.totalCount).toBe(BigInt(QUIET_ALL));
      seen.push(...out.message!.roleBindings.map((b) => b.uid));
      pageToken = out.message!.nextPageToken;
      pages++;
    } while (pageToken !== "" && pages < 20);
    expect(pages).toBe(Math.ceil(QUIET_ALL / 2));
    expect(new Set(seen).size).toBe(QUIET_ALL);
  });
});
