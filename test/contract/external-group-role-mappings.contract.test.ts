// ExternalGroupRoleMappingsService over every protocol: create under an identity provider (external group id
// rules, the role bindable on the provider's organization, scope = that organization, no escalation there,
// uniqueness, NOT_FOUND naming the provider), get, delete (the bindings the mapping made go with it, and their
// access at once; hand-made bindings stay), batch delete (atomic, unknown names skipped, names of another
// provider refused), and list (visible scopes, the identity_provider_uid and uidp filters, order, paging).
// Identity providers are inserted straight into their table.
import { Code } from "@connectrpc/connect";
import { timestampDate } from "@bufbuild/protobuf/wkt";
import { eq, inArray } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { ExternalGroupRoleMappingSchema, ExternalGroupRoleMappingsService } from "../../gen/chainguard/platform/iam/v2/external_group_role_mappings_pb.js";
import { IdentityProviderSchema } from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { RolesService } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import { BadRequestSchema, ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { externalGroupRoleMappings, identities, identityProviders, roleBindings, roles } from "../../src/db/schema/index.js";
import { MAX_BATCH_DELETE, MAX_EXTERNAL_GROUP_ID } from "../../src/iam/external-group-role-mappings.service.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { seedWorld, type Caller, type World } from "../support/world.js";
import { call, contractCase, detail, protocols, runContractCases } from "./harness.js";

const C = Capability;
const S = ExternalGroupRoleMappingsService.method;
const MAPPING = ExternalGroupRoleMappingSchema.typeName;
const PROVIDER = IdentityProviderSchema.typeName;
const viewerRole = managedRole("viewer").uid;
const editorRole = managedRole("editor").uid;
const pullRole = managedRole("registry.pull").uid;
const HEX16 = "[0-9a-f]{16}";

let server: TestServer;
/** Mappings are created and deleted here. */
let world: World;
/** Nothing changes here: list results and totals are exact. */
let quiet: World;
/** Another organization. */
let foreign: World;
const uid: Record<string, string> = {};
/** quiet's mappings, in create_time order, per provider key. */
const q: Record<"org" | "orgB" | "team" | "other", string[]> = { org: [], orgB: [], team: [], other: [] };
let teamAdminToken = "";

let seq = 0;
const unique = (prefix: string) => `${prefix}-${++seq}`;
const as = (w: () => World, caller: Caller) => () => w().auth(caller);
const teamAdmin = () => ({ authorization: `Bearer ${teamAdminToken}` });
const violation = (field: string, description?: unknown) => ({
  schema: BadRequestSchema,
  value: { fieldViolations: [description === undefined ? { field } : { field, description }] },
});
const resource = (resourceType: string, resourceName?: () => string) => ({
  schema: ResourceInfoSchema,
  value: { resourceType, ...(resourceName ? { resourceName: lazy(resourceName) } : {}) },
});
/** Matches the value `get()` returns when the test runs (case tables are built before beforeAll). */
const lazy = (get: () => unknown) => ({
  asymmetricMatch: (actual: unknown) => actual === get(),
  toString: () => "lazy value",
  toAsymmetricMatcher: () => `lazy(${String(get())})`,
});

async function insertProvider(group: string, name: string): Promise<string> {
  const id = newChildUid(group);
  await server.database.db.insert(identityProviders).values({
    uid: id,
    groupUid: group,
    name,
    defaultRoleUid: viewerRole,
    oidcIssuer: "https://idp.example.test",
    oidcClientId: `client-${name}`,
  });
  return id;
}

async function insertMapping(provider: string, externalGroupId: string, roleUid: string, scope: string, createTime?: Date): Promise<string> {
  const id = newChildUid(provider);
  await server.database.db
    .insert(externalGroupRoleMappings)
    .values({ uid: id, identityProviderUid: provider, externalGroupId, roleUid, scope, ...(createTime ? { createTime } : {}) });
  return id;
}

async function insertPerson(name: string): Promise<string> {
  const id = newRootUid();
  await server.database.db.insert(identities).values({
    uid: id,
    name,
    relationship: { claimMatch: { issuer: "https://issuer.test", subject: `sub-${id}` } },
    relationshipType: 1,
    issuer: "https://issuer.test",
    subject: `sub-${id}`,
  });
  return id;
}

/** The mappings that exist, of `uids`. */
async function existing(uids: readonly string[]): Promise<string[]> {
  const rows = await server.database.db.select({ uid: externalGroupRoleMappings.uid }).from(externalGroupRoleMappings).where(inArray(externalGroupRoleMappings.uid, [...uids]));
  return rows.map((r) => r.uid).sort();
}

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "acme");
  quiet = await seedWorld(server, "quiet");
  foreign = await seedWorld(server, "foreign");
  const { db } = server.database;

  const role = (key: string, group: string, name: string, capabilities: Capability[]) => {
    uid[key] = newChildUid(group);
    return { uid: uid[key]!, parentUid: group, name, description: `${name} role`, capabilities };
  };
  await db.insert(roles).values([
    role("orgReader", world.org, "org-reader", [C.CAP_REPO_LIST, C.CAP_IAM_ROLES_LIST]),
    role("teamReader", world.team, "team-reader", [C.CAP_REPO_LIST]),
    // No managed role grants CAP_REPO_INTERNAL_ADMIN: the owner does not hold it.
    role("internalAdmin", world.org, "internal-admin", [C.CAP_REPO_LIST, C.CAP_REPO_INTERNAL_ADMIN]),
    role("teamAdmin", world.team, "team-admin", [
      C.CAP_IAM_IDENTITY_PROVIDERS_CREATE, C.CAP_IAM_IDENTITY_PROVIDERS_LIST, C.CAP_IAM_IDENTITY_PROVIDERS_DELETE,
      C.CAP_IAM_ROLE_BINDINGS_CREATE, C.CAP_REPO_LIST,
    ]),
    role("foreignRole", foreign.org, "foreign", [C.CAP_REPO_LIST]),
  ]);

  uid.provider = await insertProvider(world.org, "okta");
  uid.otherProvider = await insertProvider(world.org, "entra");
  uid.teamProvider = await insertProvider(world.team, "keycloak");
  uid.foreignProvider = await insertProvider(foreign.org, "foreign");
  uid.taken = await insertMapping(uid.provider, "taken-group", viewerRole, world.org);
  uid.toGet = await insertMapping(uid.provider, "to-get", uid.orgReader!, world.org);
  uid.foreignMapping = await insertMapping(uid.foreignProvider, "foreign-group", viewerRole, foreign.org);

  const admin = await insertPerson("team admin");
  await db.insert(roleBindings).values({ uid: newChildUid(world.team), groupUid: world.team, identityUid: admin, roleUid: uid.teamAdmin! });
  teamAdminToken = await server.token(admin);

  // quiet: two providers on the organization, one on team, one on other; distinct increasing create times.
  uid.qOrg = await insertProvider(quiet.org, "q-org");
  uid.qOrgB = await insertProvider(quiet.org, "q-org-b");
  uid.qTeam = await insertProvider(quiet.team, "q-team");
  uid.qOther = await insertProvider(quiet.other, "q-other");
  let t = Date.UTC(2024, 0, 1);
  const seedQuiet = async (key: keyof typeof q, provider: string, groups: string[]) => {
    for (const g of groups) q[key].push(await insertMapping(provider, g, viewerRole, quiet.org, new Date((t += 1000))));
  };
  await seedQuiet("org", uid.qOrg, ["admins", "developers", "auditors"]);
  await seedQuiet("team", uid.qTeam, ["team-a", "team-b"]);
  await seedQuiet("orgB", uid.qOrgB, ["b-admins"]);
  await seedQuiet("other", uid.qOther, ["other-a"]);
});

afterAll(async () => {
  await server?.close();
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("ExternalGroupRoleMappingsService.CreateExternalGroupRoleMapping", () => server.baseUrl, [
  contractCase({
    name: "an owner maps an external group to a managed role: scope is the organization, output-only fields are ignored",
    method: S.createExternalGroupRoleMapping,
    request: () => ({
      parent: uid.provider!,
      externalGroupRoleMapping: { uid: "ignored", identityProviderUid: "ignored", externalGroupId: unique("00g1okta"), roleUid: viewerRole, createTime: { seconds: 1n } },
    }),
    headers: as(() => world, "owner"),
    response: (m) => {
      expect(m.uid).toMatch(new RegExp(`^${uid.provider}/${HEX16}$`));
      expect(m.identityProviderUid).toBe(uid.provider);
      expect(m.externalGroupId).toMatch(/^00g1okta-\d+$/);
      expect(m.roleUid).toBe(viewerRole);
      expect(m.scope).toBe(world.org);
      expect(Math.abs(timestampDate(m.createTime!).getTime() - Date.now())).toBeLessThan(60_000);
    },
  }),
  contractCase({
    name: "scope given as the provider's organization is accepted",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: unique("g"), roleUid: editorRole, scope: world.org } }),
    headers: as(() => world, "owner"),
    response: (m) => expect(m.scope).toBe(world.org),
  }),
  contractCase({
    name: "a provider of a sub-group: the scope is still its organization",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.teamProvider!, externalGroupRoleMapping: { externalGroupId: unique("g"), roleUid: viewerRole } }),
    headers: as(() => world, "owner"),
    response: (m) => {
      expect(m.uid).toMatch(new RegExp(`^${uid.teamProvider}/${HEX16}$`));
      expect(m.scope).toBe(world.org);
    },
  }),
  contractCase({
    name: "a custom role of the organization can be mapped",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: unique("readers"), roleUid: uid.orgReader! } }),
    headers: as(() => world, "owner"),
    response: (m) => expect(m.roleUid).toBe(uid.orgReader),
  }),
  contractCase({
    name: `an external group id of ${MAX_EXTERNAL_GROUP_ID} characters (not bytes), with spaces and slashes inside`,
    method: S.createExternalGroupRoleMapping,
    request: () => {
      const id = `/Eng Group/${unique("é")}/`;
      return { parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: id + "é".repeat(MAX_EXTERNAL_GROUP_ID - id.length), roleUid: viewerRole } };
    },
    headers: as(() => world, "owner"),
    response: (m) => expect([...m.externalGroupId]).toHaveLength(MAX_EXTERNAL_GROUP_ID),
  }),
  contractCase({
    name: "no external_group_id: INVALID_ARGUMENT on external_group_role_mapping.external_group_id",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.provider!, externalGroupRoleMapping: { roleUid: viewerRole } }),
    headers: as(() => world, "owner"),
    error: {
      code: Code.InvalidArgument,
      reason: "INVALID_ARGUMENT",
      message: "Invalid argument: external_group_role_mapping.external_group_id: is required",
      details: [violation("external_group_role_mapping.external_group_id", "is required")],
    },
  }),
  contractCase({
    name: "no mapping at all: external_group_id and role_uid both named",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.provider! }),
    headers: as(() => world, "owner"),
    error: {
      code: Code.InvalidArgument,
      details: [
        {
          schema: BadRequestSchema,
          value: {
            fieldViolations: [
              { field: "external_group_role_mapping.external_group_id", description: "is required" },
              { field: "external_group_role_mapping.role_uid", description: "is required" },
            ],
          },
        },
      ],
    },
  }),
  contractCase({
    name: `an external group id longer than ${MAX_EXTERNAL_GROUP_ID} characters: INVALID_ARGUMENT`,
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: "g".repeat(MAX_EXTERNAL_GROUP_ID + 1), roleUid: viewerRole } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("external_group_role_mapping.external_group_id", `must be at most ${MAX_EXTERNAL_GROUP_ID} characters long`)] },
  }),
  ...["a\nb", "tab\there", "nul\u0000", "del\u007f", "line\u2028sep"].map((id) =>
    contractCase({
      name: `external group id ${JSON.stringify(id)}: INVALID_ARGUMENT, no control characters`,
      method: S.createExternalGroupRoleMapping,
      request: () => ({ parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: id, roleUid: viewerRole } }),
      headers: as(() => world, "owner"),
      error: { code: Code.InvalidArgument, details: [violation("external_group_role_mapping.external_group_id", "must not contain control characters")] },
    }),
  ),
  ...[" admins", "admins ", "\u00a0admins"].map((id) =>
    contractCase({
      name: `external group id ${JSON.stringify(id)}: INVALID_ARGUMENT, no white space around it`,
      method: S.createExternalGroupRoleMapping,
      request: () => ({ parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: id, roleUid: viewerRole } }),
      headers: as(() => world, "owner"),
      error: { code: Code.InvalidArgument, details: [violation("external_group_role_mapping.external_group_id", "must not begin or end with white space")] },
    }),
  ),
  contractCase({
    name: "no role_uid: INVALID_ARGUMENT on external_group_role_mapping.role_uid",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: "g" } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("external_group_role_mapping.role_uid", "is required")] },
  }),
  contractCase({
    name: "a malformed role_uid: INVALID_ARGUMENT",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: "g", roleUid: "Not A Uid" } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("external_group_role_mapping.role_uid", "is not a valid uid")] },
  }),
  contractCase({
    name: "a custom role of a sub-group (even the provider's own): INVALID_ARGUMENT, it means nothing on the organization",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.teamProvider!, externalGroupRoleMapping: { externalGroupId: "g", roleUid: uid.teamReader! } }),
    headers: as(() => world, "owner"),
    error: {
      code: Code.InvalidArgument,
      details: [violation("external_group_role_mapping.role_uid", lazy(() => `must name a managed role or a custom role defined on ${JSON.stringify(world.org)} or one of its ancestors`))],
    },
  }),
  contractCase({
    name: "a role of another organization: the same INVALID_ARGUMENT, nothing said of the role",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: "g", roleUid: uid.foreignRole! } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("external_group_role_mapping.role_uid", expect.stringMatching(/^must name a managed role/))] },
  }),
  contractCase({
    name: "a role of the organization that does not exist: INVALID_ARGUMENT",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: "g", roleUid: `${world.org}/ffffffffffffffff` } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("external_group_role_mapping.role_uid", "does not name an existing role")] },
  }),
  contractCase({
    name: "an unknown managed-looking role: INVALID_ARGUMENT",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: "g", roleUid: "f".repeat(40) } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("external_group_role_mapping.role_uid", "does not name an existing role")] },
  }),
  contractCase({
    name: "a scope other than the organization (a sub-group): INVALID_ARGUMENT on scope",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.teamProvider!, externalGroupRoleMapping: { externalGroupId: "g", roleUid: viewerRole, scope: world.team } }),
    headers: as(() => world, "owner"),
    error: {
      code: Code.InvalidArgument,
      details: [violation("external_group_role_mapping.scope", lazy(() => `must be empty or the identity provider's organization ${JSON.stringify(world.org)}`))],
    },
  }),
  contractCase({
    name: "a scope in another organization: INVALID_ARGUMENT on scope",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: "g", roleUid: viewerRole, scope: foreign.org } }),
    headers: as(() => world, "owner"),
    error: { code: Code.InvalidArgument, details: [violation("external_group_role_mapping.scope")] },
  }),
  contractCase({
    name: "the same (provider, group, role, scope) again: ALREADY_EXISTS naming the existing mapping",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: "taken-group", roleUid: viewerRole } }),
    headers: as(() => world, "owner"),
    error: { code: Code.AlreadyExists, reason: "ALREADY_EXISTS", details: [resource(MAPPING, () => uid.taken!)] },
  }),
  contractCase({
    name: "an unknown provider: NOT_FOUND naming it as an IdentityProvider",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: `${world.org}/ffffffffffffffff`, externalGroupRoleMapping: { externalGroupId: "g", roleUid: viewerRole } }),
    headers: as(() => world, "owner"),
    error: { code: Code.NotFound, reason: "NOT_FOUND", details: [resource(PROVIDER, () => `${world.org}/ffffffffffffffff`)] },
  }),
  contractCase({
    name: "a group named as the parent: NOT_FOUND naming it as an IdentityProvider",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: world.team, externalGroupRoleMapping: { externalGroupId: "g", roleUid: viewerRole } }),
    headers: as(() => world, "owner"),
    error: { code: Code.NotFound, details: [resource(PROVIDER, () => world.team)] },
  }),
  contractCase({
    name: "no parent: INVALID_ARGUMENT on parent",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ externalGroupRoleMapping: { externalGroupId: "g", roleUid: viewerRole } }),
    headers: as(() => world, "owner"),
    only: ["grpc", "connect-json", "grpc-web", "connect-binary-h2"],
    error: { code: Code.InvalidArgument, details: [violation("parent", "is required")] },
  }),
  contractCase({
    name: "escalation: mapping a role with a capability the owner lacks: PERMISSION_DENIED naming it",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: unique("g"), roleUid: uid.internalAdmin! } }),
    headers: as(() => world, "owner"),
    error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED", message: /would grant capabilities the caller does not hold on "[0-9a-f]{40}": CAP_REPO_INTERNAL_ADMIN$/ },
  }),
  contractCase({
    name: "escalation: a team admin maps, on its team's provider, a role it holds only on the team: PERMISSION_DENIED (the bindings are made on the organization)",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.teamProvider!, externalGroupRoleMapping: { externalGroupId: unique("g"), roleUid: uid.orgReader! } }),
    headers: teamAdmin,
    error: { code: Code.PermissionDenied, message: /CAP_REPO_LIST/ },
  }),
  contractCase({
    name: "an owner confined to the team, on the team's provider: PERMISSION_DENIED (it holds nothing on the organization)",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.teamProvider!, externalGroupRoleMapping: { externalGroupId: unique("g"), roleUid: viewerRole } }),
    headers: as(() => world, "confined"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "an editor (no CAP_IAM_IDENTITY_PROVIDERS_CREATE): PERMISSION_DENIED, before anything is read",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: `${world.org}/ffffffffffffffff`, externalGroupRoleMapping: { externalGroupId: "g", roleUid: viewerRole } }),
    headers: as(() => world, "editor"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "the owner of another organization, on this one's provider: PERMISSION_DENIED",
    method: S.createExternalGroupRoleMapping,
    request: () => ({ parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: "g", roleUid: viewerRole } }),
    headers: as(() => foreign, "owner"),
    error: { code: Code.PermissionDenied },
  }),
]);

describe.each(protocols)("ExternalGroupRoleMappingsService.CreateExternalGroupRoleMapping uniqueness [%s]", (protocol) => {
  it("the same group may map to another role, and the same group and role under another provider", async () => {
    const owner = world.auth("owner");
    const group = unique("shared");
    const create = (parent: string, roleUid: string) =>
      call(protocol, server.baseUrl, S.createExternalGroupRoleMapping, { parent, externalGroupRoleMapping: { externalGroupId: group, roleUid } }, owner);
    const first = await create(uid.provider!, viewerRole);
    expect(first.error).toBeUndefined();
    expect((await create(uid.provider!, editorRole)).error).toBeUndefined();
    expect((await create(uid.otherProvider!, viewerRole)).error).toBeUndefined();
    const again = await create(uid.provider!, viewerRole);
    expect(again.error?.code).toBe(Code.AlreadyExists);
    expect(again.error?.details).toContainEqual(expect.objectContaining({ resourceType: MAPPING, resourceName: first.message!.uid }));
    // External group ids are matched exactly: another case is another group.
    const upper = await call(protocol, server.baseUrl, S.createExternalGroupRoleMapping, { parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: group.toUpperCase(), roleUid: viewerRole } }, owner);
    expect(upper.error).toBeUndefined();
  });
});

describe.each(protocols)("ExternalGroupRoleMappingsService.CreateExternalGroupRoleMapping under concurrency [%s]", (protocol) => {
  it("concurrent creates of one mapping: one mapping, the others ALREADY_EXISTS naming it", async () => {
    const group = unique(`race-${protocol}`);
    const outs = await Promise.all(
      Array.from({ length: 6 }, () =>
        call(protocol, server.baseUrl, S.createExternalGroupRoleMapping, { parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: group, roleUid: viewerRole } }, world.auth("owner")),
      ),
    );
    const created = outs.filter((o) => !o.error);
    expect(created).toHaveLength(1);
    for (const o of outs.filter((x) => x.error)) {
      expect(o.error!.code, o.error!.message).toBe(Code.AlreadyExists);
      expect(o.error!.details).toContainEqual(expect.objectContaining({ resourceType: MAPPING, resourceName: created[0]!.message!.uid }));
    }
    const rows = await server.database.db.select().from(externalGroupRoleMappings).where(eq(externalGroupRoleMappings.externalGroupId, group));
    expect(rows).toHaveLength(1);
  });
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("ExternalGroupRoleMappingsService.GetExternalGroupRoleMapping", () => server.baseUrl, [
  contractCase({
    name: "a viewer of the organization reads a mapping",
    method: S.getExternalGroupRoleMapping,
    request: () => ({ uid: uid.toGet! }),
    headers: as(() => world, "viewer"),
    response: (m) => {
      expect(m).toMatchObject({ uid: uid.toGet, identityProviderUid: uid.provider, externalGroupId: "to-get", roleUid: uid.orgReader, scope: world.org });
      expect(m.createTime).toBeDefined();
    },
  }),
  contractCase({
    name: "an unknown mapping: NOT_FOUND naming it",
    method: S.getExternalGroupRoleMapping,
    request: () => ({ uid: `${uid.provider}/ffffffffffffffff` }),
    headers: as(() => world, "viewer"),
    error: { code: Code.NotFound, reason: "NOT_FOUND", details: [resource(MAPPING, () => `${uid.provider}/ffffffffffffffff`)] },
  }),
  contractCase({
    name: "a viewer of a sibling group: PERMISSION_DENIED",
    method: S.getExternalGroupRoleMapping,
    request: () => ({ uid: uid.toGet! }),
    headers: as(() => world, "otherViewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "another organization's mapping: PERMISSION_DENIED",
    method: S.getExternalGroupRoleMapping,
    request: () => ({ uid: uid.foreignMapping! }),
    headers: as(() => world, "owner"),
    error: { code: Code.PermissionDenied },
  }),
]);

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("ExternalGroupRoleMappingsService.DeleteExternalGroupRoleMapping [%s]", (protocol) => {
  it("deletes the mapping and the bindings it made, whose access ends at once; bindings made by hand stay", async () => {
    const { db } = server.database;
    const owner = world.auth("owner");
    const created = await call(protocol, server.baseUrl, S.createExternalGroupRoleMapping, { parent: uid.provider!, externalGroupRoleMapping: { externalGroupId: unique("readers"), roleUid: uid.orgReader! } }, owner);
    expect(created.error).toBeUndefined();
    const mapping = created.message!.uid;
    // What a login would have made from the mapping, and a binding made by hand beside it.
    const person = await insertPerson(unique("member"));
    const mapped = newChildUid(world.org);
    const byHand = newChildUid(world.org);
    await db.insert(roleBindings).values([
      { uid: mapped, groupUid: world.org, identityUid: person, roleUid: uid.orgReader!, mappingUid: mapping },
      { uid: byHand, groupUid: world.org, identityUid: person, roleUid: pullRole },
    ]);
    const token = { authorization: `Bearer ${await server.token(person)}` };
    const readRole = () => call(protocol, server.baseUrl, RolesService.method.getRole, { uid: uid.orgReader! }, token);
    expect((await readRole()).message?.name).toBe("org-reader");

    const deleted = await call(protocol, server.baseUrl, S.deleteExternalGroupRoleMapping, { uid: mapping }, owner);
    expect(deleted.error).toBeUndefined();
    const left = await db.select({ uid: roleBindings.uid }).from(roleBindings).where(inArray(roleBindings.uid, [mapped, byHand]));
    expect(left.map((r) => r.uid)).toEqual([byHand]);
    // The registry.pull binding made by hand does not grant CAP_IAM_ROLES_LIST: the mapped one did.
    expect((await readRole()).error?.code).toBe(Code.PermissionDenied);

    expect((await call(protocol, server.baseUrl, S.getExternalGroupRoleMapping, { uid: mapping }, owner)).error?.code).toBe(Code.NotFound);
    const again = await call(protocol, server.baseUrl, S.deleteExternalGroupRoleMapping, { uid: mapping }, owner);
    expect(again.error?.code).toBe(Code.NotFound);
    expect(again.error?.details).toContainEqual(expect.objectContaining({ resourceType: MAPPING, resourceName: mapping }));
  });

  it("refuses an editor (no CAP_IAM_IDENTITY_PROVIDERS_DELETE) and leaves the mapping", async () => {
    const mapping = await insertMapping(uid.provider!, unique("kept"), viewerRole, world.org);
    const out = await call(protocol, server.baseUrl, S.deleteExternalGroupRoleMapping, { uid: mapping }, world.auth("editor"));
    expect(out.error?.code).toBe(Code.PermissionDenied);
    expect(await existing([mapping])).toEqual([mapping]);
  });
});

describe("a deleted identity provider takes its mappings, and their bindings, with it", () => {
  it("cascades from the provider to the mappings to the bindings", async () => {
    const { db } = server.database;
    const provider = await insertProvider(world.org, unique("gone"));
    const mapping = await insertMapping(provider, "g", viewerRole, world.org);
    const person = await insertPerson(unique("member"));
    const binding = newChildUid(world.org);
    await db.insert(roleBindings).values({ uid: binding, groupUid: world.org, identityUid: person, roleUid: viewerRole, mappingUid: mapping });
    await db.delete(identityProviders).where(eq(identityProviders.uid, provider));
    expect(await existing([mapping])).toEqual([]);
    expect(await db.select().from(roleBindings).where(eq(roleBindings.uid, binding))).toEqual([]);
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("ExternalGroupRoleMappingsService.BatchDeleteExternalGroupRoleMappings [%s]", (protocol) => {
  const batch = (parent: string, names: string[], caller: Caller = "owner") =>
    call(protocol, server.baseUrl, S.batchDeleteExternalGroupRoleMappings, { parent, names }, world.auth(caller));

  it("deletes the named mappings and their bindings, skips unknown names, returns the deleted in request order, each once", async () => {
    const { db } = server.database;
    const a = await insertMapping(uid.provider!, unique("a"), viewerRole, world.org);
    const b = await insertMapping(uid.provider!, unique("b"), editorRole, world.org);
    const kept = await insertMapping(uid.provider!, unique("kept"), viewerRole, world.org);
    const person = await insertPerson(unique("member"));
    const binding = newChildUid(world.org);
    await db.insert(roleBindings).values({ uid: binding, groupUid: world.org, identityUid: person, roleUid: editorRole, mappingUid: b });
    const unknown = `${uid.provider}/ffffffffffffffff`;

    const out = await batch(uid.provider!, [b, unknown, a, b]);
    expect(out.error).toBeUndefined();
    expect(out.message!.parent).toBe(uid.provider);
    expect(out.message!.externalGroupRoleMappings.map((m) => m.uid)).toEqual([b, a]);
    expect(out.message!.externalGroupRoleMappings[0]).toMatchObject({ identityProviderUid: uid.provider, roleUid: editorRole, scope: world.org });
    expect(await existing([a, b, kept])).toEqual([kept]);
    expect(await db.select().from(roleBindings).where(eq(roleBindings.uid, binding))).toEqual([]);
  });

  it("only unknown names: nothing deleted, an empty answer", async () => {
    const out = await batch(uid.provider!, [`${uid.provider}/fffffffffffffffe`]);
    expect(out.error).toBeUndefined();
    expect(out.message!.externalGroupRoleMappings).toEqual([]);
  });

  it("names under another provider: INVALID_ARGUMENT naming each, and nothing is deleted", async () => {
    const mine = await insertMapping(uid.provider!, unique("mine"), viewerRole, world.org);
    const theirs = await insertMapping(uid.otherProvider!, unique("theirs"), viewerRole, world.org);
    const out = await batch(uid.provider!, [mine, theirs, uid.foreignMapping!, "Not A Uid"]);
    expect(out.error?.code).toBe(Code.InvalidArgument);
    const bad = detail(out.error!, BadRequestSchema)!.fieldViolations.map((v) => ({ field: v.field, description: v.description }));
    expect(bad).toEqual([
      { field: "names[1]", description: `${theirs} is not a mapping of identity provider ${uid.provider}` },
      { field: "names[2]", description: `${uid.foreignMapping} is not a mapping of identity provider ${uid.provider}` },
      { field: "names[3]", description: '"Not A Uid" is not a valid uid' },
    ]);
    expect(await existing([mine, theirs, uid.foreignMapping!])).toEqual([mine, theirs, uid.foreignMapping!].sort());
  });

  it("the provider itself named among the names: INVALID_ARGUMENT", async () => {
    const out = await batch(uid.provider!, [uid.provider!]);
    expect(out.error?.code).toBe(Code.InvalidArgument);
  });

  it(`no names, or more than ${MAX_BATCH_DELETE}: INVALID_ARGUMENT on names`, async () => {
    const none = await batch(uid.provider!, []);
    expect(none.error?.code).toBe(Code.InvalidArgument);
    expect(none.error?.details).toContainEqual(expect.objectContaining({ fieldViolations: [expect.objectContaining({ field: "names", description: "at least one name is required" })] }));
    const many = await batch(uid.provider!, Array.from({ length: MAX_BATCH_DELETE + 1 }, (_, i) => `${uid.provider}/${i.toString(16).padStart(16, "0")}`));
    expect(many.error?.code).toBe(Code.InvalidArgument);
    expect(many.error?.message).toMatch(/at most 100 names/);
  });

  it("an unknown provider: NOT_FOUND naming it", async () => {
    const parent = `${world.org}/ffffffffffffffff`;
    const out = await batch(parent, [`${parent}/0000000000000001`]);
    expect(out.error?.code).toBe(Code.NotFound);
    expect(out.error?.details).toContainEqual(expect.objectContaining({ resourceType: PROVIDER, resourceName: parent }));
  });

  it("a viewer (no CAP_IAM_IDENTITY_PROVIDERS_DELETE): PERMISSION_DENIED, nothing deleted", async () => {
    const mapping = await insertMapping(uid.provider!, unique("kept"), viewerRole, world.org);
    const out = await batch(uid.provider!, [mapping], "viewer");
    expect(out.error?.code).toBe(Code.PermissionDenied);
    expect(await existing([mapping])).toEqual([mapping]);
  });
});

// ---------------------------------------------------------------------------------------------------------
const all = () => [...q.org, ...q.team, ...q.orgB, ...q.other];
runContractCases("ExternalGroupRoleMappingsService.ListExternalGroupRoleMappings", () => server.baseUrl, [
  contractCase({
    name: "a viewer of the organization sees every mapping of every provider in it, in create_time order; the total counts exactly those",
    method: S.listExternalGroupRoleMappings,
    request: {},
    headers: as(() => quiet, "viewer"),
    response: (res) => {
      expect(res.externalGroupRoleMappings.map((m) => m.uid)).toEqual(all());
      expect(res.totalCount).toBe(7n);
      expect(res.nextPageToken).toBe("");
      expect(res.externalGroupRoleMappings[0]).toMatchObject({ identityProviderUid: uid.qOrg, externalGroupId: "admins", roleUid: viewerRole, scope: quiet.org });
    },
  }),
  contractCase({
    name: "a viewer of a team sees only the mappings of the team's providers",
    method: S.listExternalGroupRoleMappings,
    request: {},
    headers: as(() => quiet, "teamViewer"),
    response: (res) => {
      expect(res.externalGroupRoleMappings.map((m) => m.uid)).toEqual(q.team);
      expect(res.totalCount).toBe(2n);
    },
  }),
  contractCase({
    name: "an identity confined to the team (owner on the organization) sees only the team's",
    method: S.listExternalGroupRoleMappings,
    request: {},
    headers: as(() => quiet, "confined"),
    response: (res) => expect(res.externalGroupRoleMappings.map((m) => m.uid)).toEqual(q.team),
  }),
  contractCase({
    name: "a caller with no binding sees nothing, and a total of 0",
    method: S.listExternalGroupRoleMappings,
    request: {},
    headers: as(() => quiet, "stranger"),
    response: (res) => {
      expect(res.externalGroupRoleMappings).toEqual([]);
      expect(res.totalCount).toBe(0n);
    },
  }),
  contractCase({
    name: "filter identity_provider_uid: that provider's mappings only",
    method: S.listExternalGroupRoleMappings,
    request: () => ({ identityProviderUid: uid.qOrg! }),
    headers: as(() => quiet, "viewer"),
    response: (res) => {
      expect(res.externalGroupRoleMappings.map((m) => m.externalGroupId)).toEqual(["admins", "developers", "auditors"]);
      expect(res.totalCount).toBe(3n);
    },
  }),
  contractCase({
    name: "filter identity_provider_uid of a provider outside the caller's sight: nothing",
    method: S.listExternalGroupRoleMappings,
    request: () => ({ identityProviderUid: uid.qOther! }),
    headers: as(() => quiet, "teamViewer"),
    response: (res) => expect(res.totalCount).toBe(0n),
  }),
  contractCase({
    name: "filter identity_provider_uid naming another organization's provider: nothing",
    method: S.listExternalGroupRoleMappings,
    request: () => ({ identityProviderUid: uid.foreignProvider! }),
    headers: as(() => quiet, "viewer"),
    response: (res) => expect(res.externalGroupRoleMappings).toEqual([]),
  }),
  contractCase({
    name: "a malformed identity_provider_uid: INVALID_ARGUMENT on identity_provider_uid",
    method: S.listExternalGroupRoleMappings,
    request: { identityProviderUid: "Not A Uid" },
    headers: as(() => quiet, "viewer"),
    error: { code: Code.InvalidArgument, details: [violation("identity_provider_uid", "is not a valid uid")] },
  }),
  contractCase({
    name: "uidp.children_of a provider: its mappings",
    method: S.listExternalGroupRoleMappings,
    request: () => ({ uidp: { childrenOf: uid.qOrgB! } }),
    headers: as(() => quiet, "viewer"),
    response: (res) => expect(res.externalGroupRoleMappings.map((m) => m.uid)).toEqual(q.orgB),
  }),
  contractCase({
    name: "uidp.descendants_of a sub-group: the mappings of its providers",
    method: S.listExternalGroupRoleMappings,
    request: () => ({ uidp: { descendantsOf: quiet.other } }),
    headers: as(() => quiet, "viewer"),
    response: (res) => expect(res.externalGroupRoleMappings.map((m) => m.uid)).toEqual(q.other),
  }),
  contractCase({
    name: "order_by create_time desc, pages of 2: a token and the full total",
    method: S.listExternalGroupRoleMappings,
    request: { orderBy: "create_time desc", pageSize: 2 },
    headers: as(() => quiet, "viewer"),
    response: (res) => {
      expect(res.externalGroupRoleMappings.map((m) => m.uid)).toEqual(all().reverse().slice(0, 2));
      expect(res.nextPageToken).not.toBe("");
      expect(res.totalCount).toBe(7n);
    },
  }),
  contractCase({
    name: "order_by a field that is not sortable: INVALID_ARGUMENT on order_by",
    method: S.listExternalGroupRoleMappings,
    request: { orderBy: "external_group_id" },
    headers: as(() => quiet, "viewer"),
    error: { code: Code.InvalidArgument, details: [violation("order_by")] },
  }),
]);

describe.each(protocols)("ExternalGroupRoleMappingsService.ListExternalGroupRoleMappings paging [%s]", (protocol) => {
  it("walks every page by keyset: each visible mapping once, the same total on every page", async () => {
    const seen: string[] = [];
    let pageToken = "";
    let pages = 0;
    do {
      const out = await call(protocol, server.baseUrl, S.listExternalGroupRoleMappings, { pageSize: 3, orderBy: "uid", pageToken }, quiet.auth("viewer"));
      expect(out.error).toBeUndefined();
      expect(out.message!.totalCount).toBe(7n);
      seen.push(...out.message!.externalGroupRoleMappings.map((m) => m.uid));
      pageToken = out.message!.nextPageToken;
      pages++;
    } while (pageToken !== "" && pages < 10);
    expect(pages).toBe(3);
    expect(seen).toEqual([...all()].sort());
  });
});
