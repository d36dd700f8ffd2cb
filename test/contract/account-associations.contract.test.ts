// AccountAssociationsService over every protocol: create (one per group, its uid the group's; every provider
// block validated with the field path from the request root), get, list (visibility, uidp, name, order),
// update (the PATCH rules on the provider blocks), delete (and a group holding an association refused
// deletion), and CheckAccountAssociation (READY, NOT_CONFIGURED, INCOMPLETE, INVALID_CONFIGURATION).
import { Code } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  AccountAssociationsService,
  AccountProviderType,
  CheckStatus,
  type AccountAssociation,
  type CreateAccountAssociationRequestSchema,
  type UpdateAccountAssociationRequestSchema,
} from "../../gen/chainguard/platform/iam/v2/account_associations_pb.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { BadRequestSchema, PreconditionFailureSchema, ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { accountAssociations, groups } from "../../src/db/schema/index.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { lazy, ms } from "../support/matchers.js";
import { seedWorld, type Caller, type World } from "../support/world.js";
import { call, contractCase, protocols, runContractCases, type Protocol } from "./harness.js";
import { listVisibilityCases } from "./list-visibility.js";

const ASSOCIATION = "chainguard.platform.iam.v2.AccountAssociation";
const GROUP = "chainguard.platform.iam.v2.Group";
const TENANT = "0d9b2f6c-1d2e-4f3a-9b8c-7d6e5f4a3b2c";
const CLIENT = "5a4b3c2d-1e0f-4a9b-8c7d-6e5f4a3b2c1d";
const M = AccountAssociationsService.method;

let server: TestServer;
/** Associations are created, changed and deleted in this one. */
let world: World;
/** Nothing is created in this one: list results are exact. associations on org ("org-links"), team and other ("shared"). */
let quiet: World;
/** world.org's association: amazon only. */
let orgAssociation = "";

let seq = 0;
const unique = (prefix: string) => `${prefix}-${++seq}`;
const base = () => server.baseUrl;
const violations = (...fields: string[]) => ({ schema: BadRequestSchema, value: { fieldViolations: fields.map((field) => ({ field })) } });

async function insertGroup(parent: string, name = unique("g")): Promise<string> {
  const uid = newChildUid(parent);
  await server.database.db.insert(groups).values({ uid, parentUid: parent, name });
  return uid;
}

/** An association of `group`, written straight to the table (any stored value, valid or not). */
async function insertAssociation(group: string, fields: Partial<typeof accountAssociations.$inferInsert> = {}): Promise<string> {
  await server.database.db.insert(accountAssociations).values({ uid: group, name: "links", ...fields });
  return group;
}

/** A fully configured association body. */
const full = () => ({
  name: "all providers",
  description: "every block",
  amazon: { account: "123456789012" },
  google: { projectId: "my-project-1", projectNumber: "987654321098" },
  azure: { tenantId: TENANT, clientIds: { web: CLIENT, "batch jobs": CLIENT.toUpperCase() } },
  github: { appInstallations: { "42": { installations: [{ installationId: 7n, name: "acme" }, { installationId: 8n }] } } },
  chainguard: { serviceBindings: { INGESTER: "0123456789abcdef0123456789abcdef01234567" } },
});

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "assoc");
  quiet = await seedWorld(server, "assoc-quiet");
  orgAssociation = await insertAssociation(world.org, { name: "org-links", amazon: { account: "111122223333" } });
  const at = (i: number) => new Date(Date.UTC(2024, 0, 1) + i * 1000);
  await insertAssociation(quiet.org, { name: "org-links", createTime: at(0), updateTime: at(0) });
  await insertAssociation(quiet.team, { name: "shared", createTime: at(1), updateTime: at(1) });
  await insertAssociation(quiet.other, { name: "shared", createTime: at(2), updateTime: at(2) });
});

afterAll(async () => {
  await server?.close();
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("CreateAccountAssociation [%s]", (protocol: Protocol) => {
  const createIn = (request: MessageInitShape<typeof CreateAccountAssociationRequestSchema>, caller: Caller = "owner") =>
    call(protocol, base(), M.createAccountAssociation, request, world.auth(caller));

  it("the owner creates the group's association: its uid is the group's, every block round-trips, output-only fields ignored", async () => {
    const group = await insertGroup(world.org);
    const out = await createIn({ parent: group, accountAssociation: { ...full(), uid: "ignored", createTime: { seconds: 1n } } });
    expect(out.error, out.error?.message).toBeUndefined();
    const r = out.message!;
    expect(r).toMatchObject({ uid: group, name: "all providers", description: "every block" });
    expect(r.amazon?.account).toBe("123456789012");
    expect(r.google).toMatchObject({ projectId: "my-project-1", projectNumber: "987654321098" });
    expect(r.azure?.tenantId).toBe(TENANT);
    expect(r.azure?.clientIds).toEqual({ web: CLIENT, "batch jobs": CLIENT.toUpperCase() });
    expect(r.github?.appInstallations["42"]?.installations.map((i) => [i.installationId, i.name])).toEqual([
      [7n, "acme"],
      [8n, ""],
    ]);
    expect(r.chainguard?.serviceBindings).toEqual({ INGESTER: "0123456789abcdef0123456789abcdef01234567" });
    expect(Math.abs(ms(r.createTime) - Date.now())).toBeLessThan(60_000);
    expect(r.updateTime).toEqual(r.createTime);
    const got = await call(protocol, base(), M.getAccountAssociation, { uid: group }, world.auth("viewer"));
    expect(got.message).toEqual(r);
  });

  it("a name alone is enough: no block is set", async () => {
    const group = await insertGroup(world.team);
    const out = await createIn({ parent: group, accountAssociation: { name: "bare" } });
    expect(out.error, out.error?.message).toBeUndefined();
    const r = out.message!;
    expect(r).toMatchObject({ uid: group, name: "bare" });
    expect([r.amazon, r.google, r.azure, r.github, r.chainguard]).toEqual([undefined, undefined, undefined, undefined, undefined]);
  });

  it("a second association for the same group: ALREADY_EXISTS naming it, the first unchanged", async () => {
    const group = await insertGroup(world.org);
    expect((await createIn({ parent: group, accountAssociation: { name: "first" } })).error).toBeUndefined();
    const again = await createIn({ parent: group, accountAssociation: { name: "second" } });
    expect(again.error?.code).toBe(Code.AlreadyExists);
    expect(again.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject({ resourceType: ASSOCIATION, resourceName: group });
    expect((await call(protocol, base(), M.getAccountAssociation, { uid: group }, world.auth("viewer"))).message?.name).toBe("first");
  });

  it("the owner confined to team creates in team, not in its sibling", async () => {
    const inTeam = await insertGroup(world.team);
    expect((await createIn({ parent: inTeam, accountAssociation: { name: "x" } }, "confined")).error).toBeUndefined();
    const beside = await insertGroup(world.other);
    expect((await createIn({ parent: beside, accountAssociation: { name: "x" } }, "confined")).error?.code).toBe(Code.PermissionDenied);
  });
});

const bad = (accountAssociation: MessageInitShape<typeof CreateAccountAssociationRequestSchema>["accountAssociation"]) => () => ({
  parent: world.team,
  accountAssociation,
});

/** [case name, association body, the violation paths expected, in order] */
const invalid: [string, MessageInitShape<typeof CreateAccountAssociationRequestSchema>["accountAssociation"], string[]][] = [
  ["no name", { description: "nameless" }, ["name"]],
  ["a name of 257 characters", { name: "n".repeat(257) }, ["name"]],
  ["a name with a control character", { name: "a\u0007b" }, ["name"]],
  ["a description of 4097 characters", { name: "x", description: "d".repeat(4097) }, ["description"]],
  ["an empty amazon block", { name: "x", amazon: {} }, ["amazon.account"]],
  ...["12345678901", "1234567890123", "12345678901a", "1234-5678-9012"].map(
    (account) => [`amazon account ${account}`, { name: "x", amazon: { account } }, ["amazon.account"]] as [string, object, string[]],
  ),
  ...["abcde", "1project", "project-", "My-project", "a".repeat(31), "my_project"].map(
    (projectId) => [`google project_id ${projectId}`, { name: "x", google: { projectId, projectNumber: "1" } }, ["google.project_id"]] as [string, object, string[]],
  ),
  ["google without its project_number", { name: "x", google: { projectId: "my-project" } }, ["google.project_number"]],
  ["google project_number with a letter", { name: "x", google: { projectId: "my-project", projectNumber: "12a" } }, ["google.project_number"]],
  ["azure tenant_id not a UUID", { name: "x", azure: { tenantId: "acme.onmicrosoft.com", clientIds: { web: CLIENT } } }, ["azure.tenant_id"]],
  ["azure without client_ids", { name: "x", azure: { tenantId: TENANT } }, ["azure.client_ids"]],
  ["azure client id not a UUID", { name: "x", azure: { tenantId: TENANT, clientIds: { web: "nope" } } }, ['azure.client_ids["web"]']],
  ["azure client id under an empty key", { name: "x", azure: { tenantId: TENANT, clientIds: { "": CLIENT } } }, ['azure.client_ids[""]']],
  [
    "github installation without its id",
    { name: "x", github: { appInstallations: { "42": { installations: [{ installationId: 1n }, { name: "no id" }] } } } },
    ["github.app_installations[42].installations[1].installation_id"],
  ],
  [
    "github negative installation id",
    { name: "x", github: { appInstallations: { "42": { installations: [{ installationId: -5n }] } } } },
    ["github.app_installations[42].installations[0].installation_id"],
  ],
  [
    "github installation repeated within an app",
    { name: "x", github: { appInstallations: { "42": { installations: [{ installationId: 3n }, { installationId: 3n }] } } } },
    ["github.app_installations[42].installations[1].installation_id"],
  ],
  ["github app id 0", { name: "x", github: { appInstallations: { "0": { installations: [] } } } }, ["github.app_installations[0]"]],
  ["chainguard without service bindings", { name: "x", chainguard: {} }, ["chainguard.service_bindings"]],
  ["chainguard binding with an invalid service name", { name: "x", chainguard: { serviceBindings: { "1st service": "abcdef" } } }, ['chainguard.service_bindings["1st service"]']],
  ["chainguard binding with an empty value", { name: "x", chainguard: { serviceBindings: { INGESTER: "" } } }, ['chainguard.service_bindings["INGESTER"]']],
  ["chainguard binding to something not a uid", { name: "x", chainguard: { serviceBindings: { INGESTER: "Not A Uid" } } }, ['chainguard.service_bindings["INGESTER"]']],
  [
    "several blocks wrong at once: every violation reported",
    { amazon: { account: "1" }, google: { projectId: "x", projectNumber: "1" }, azure: { tenantId: "t", clientIds: { a: CLIENT } } },
    ["name", "amazon.account", "google.project_id", "azure.tenant_id"],
  ],
];

runContractCases("CreateAccountAssociation", base, [
  ...invalid.map(([name, body, fields]) =>
    contractCase({
      name: `${name}: INVALID_ARGUMENT on ${fields.map((f) => `account_association.${f}`).join(", ")}`,
      method: M.createAccountAssociation,
      request: bad(body),
      headers: () => world.auth("owner"),
      error: {
        code: Code.InvalidArgument,
        reason: "INVALID_ARGUMENT",
        message: new RegExp(`^Invalid argument: ${fields.map((f) => `account_association\\.${f.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: `).join(".*")}`),
        details: [violations(...fields.map((f) => `account_association.${f}`))],
      },
    }),
  ),
  contractCase({
    name: "an amazon account of 11 digits: the description says 12 digits",
    method: M.createAccountAssociation,
    request: bad({ name: "x", amazon: { account: "12345678901" } }),
    headers: () => world.auth("owner"),
    error: { code: Code.InvalidArgument, message: "Invalid argument: account_association.amazon.account: must be an AWS account id: exactly 12 digits" },
  }),
  contractCase({
    name: "a missing group: NOT_FOUND with ResourceInfo naming the group",
    method: M.createAccountAssociation,
    request: () => ({ parent: `${world.org}/ffffffffffffffff`, accountAssociation: { name: "orphan" } }),
    headers: () => world.auth("owner"),
    error: { code: Code.NotFound, reason: "NOT_FOUND", details: [{ schema: ResourceInfoSchema, value: { resourceType: GROUP, resourceName: lazy(() => `${world.org}/ffffffffffffffff`) } }] },
  }),
  contractCase({
    name: "the group already has one (world.org): ALREADY_EXISTS",
    method: M.createAccountAssociation,
    request: () => ({ parent: world.org, accountAssociation: { name: "again" } }),
    headers: () => world.auth("owner"),
    error: { code: Code.AlreadyExists, details: [{ schema: ResourceInfoSchema, value: { resourceType: ASSOCIATION, resourceName: lazy(() => world.org) } }] },
  }),
  contractCase({
    name: "an invalid parent uid: INVALID_ARGUMENT on parent",
    method: M.createAccountAssociation,
    request: { parent: "Not/A/Uid", accountAssociation: { name: "x" } },
    headers: () => world.auth("owner"),
    error: { code: Code.InvalidArgument, details: [violations("parent")] },
  }),
  ...(["editor", "viewer", "teamViewer", "otherViewer", "stranger"] as const).map((caller) =>
    contractCase({
      name: `${caller} (no IAM_ACCOUNT_ASSOCIATIONS_CREATE on the group): PERMISSION_DENIED`,
      method: M.createAccountAssociation,
      request: () => ({ parent: world.team, accountAssociation: { name: "denied" } }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
    }),
  ),
  contractCase({
    name: "no credentials: UNAUTHENTICATED",
    method: M.createAccountAssociation,
    request: () => ({ parent: world.team, accountAssociation: { name: "x" } }),
    error: { code: Code.Unauthenticated },
  }),
]);

// ---------------------------------------------------------------------------------------------------------
runContractCases("GetAccountAssociation", base, [
  contractCase({
    name: "a viewer of the organization reads its association",
    method: M.getAccountAssociation,
    request: () => ({ uid: orgAssociation }),
    headers: () => world.auth("viewer"),
    response: (r) => {
      expect(r).toMatchObject({ uid: world.org, name: "org-links", description: "" });
      expect(r.amazon?.account).toBe("111122223333");
      expect(r.google).toBeUndefined();
      expect(r.createTime).toBeDefined();
    },
  }),
  contractCase({
    name: "a group without one: NOT_FOUND with ResourceInfo naming the association",
    method: M.getAccountAssociation,
    request: () => ({ uid: world.other }),
    headers: () => world.auth("viewer"),
    error: { code: Code.NotFound, reason: "NOT_FOUND", details: [{ schema: ResourceInfoSchema, value: { resourceType: ASSOCIATION, resourceName: lazy(() => world.other) } }] },
  }),
  ...(["teamViewer", "otherViewer", "stranger"] as const).map((caller) =>
    contractCase({
      name: `${caller}: PERMISSION_DENIED on the organization's association`,
      method: M.getAccountAssociation,
      request: () => ({ uid: orgAssociation }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied },
    }),
  ),
]);

// ---------------------------------------------------------------------------------------------------------
const uids = (rs: AccountAssociation[]) => rs.map((r) => r.uid);

runContractCases("ListAccountAssociations", base, [
  contractCase({
    name: "a viewer on the organization sees every association at or beneath it, in name order, with the total",
    method: M.listAccountAssociations,
    request: {},
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(r.accountAssociations.map((a) => a.name)).toEqual(["org-links", "shared", "shared"]);
      expect(r.accountAssociations[0]!.uid).toBe(quiet.org);
      expect(r.totalCount).toBe(3n);
      expect(r.nextPageToken).toBe("");
    },
  }),
  ...listVisibilityCases({
    method: M.listAccountAssociations,
    noun: "associations",
    world: () => quiet,
    items: (r) => r.accountAssociations,
    teamViewer: () => [quiet.team],
  }),
  contractCase({
    name: "name: exact match",
    method: M.listAccountAssociations,
    request: { name: "shared" },
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(uids(r.accountAssociations).sort()).toEqual([quiet.team, quiet.other].sort());
      expect(r.totalCount).toBe(2n);
    },
  }),
  contractCase({
    name: "name: exact, not a prefix",
    method: M.listAccountAssociations,
    request: { name: "shar" },
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(r.accountAssociations).toEqual([]),
  }),
  contractCase({
    name: "uidp.children_of the organization: the associations of its sub-groups",
    method: M.listAccountAssociations,
    request: () => ({ uidp: { childrenOf: quiet.org } }),
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(uids(r.accountAssociations).sort()).toEqual([quiet.team, quiet.other].sort()),
  }),
  contractCase({
    name: "uidp.ids: exactly that one",
    method: M.listAccountAssociations,
    request: () => ({ uidp: { ids: [quiet.other] } }),
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(uids(r.accountAssociations)).toEqual([quiet.other]),
  }),
  contractCase({
    name: "uidp.in_root: the organization's",
    method: M.listAccountAssociations,
    request: { uidp: { inRoot: true } },
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(uids(r.accountAssociations)).toEqual([quiet.org]),
  }),
  contractCase({
    name: "order_by create_time desc, paged",
    method: M.listAccountAssociations,
    request: { orderBy: "create_time desc", pageSize: 2 },
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(uids(r.accountAssociations)).toEqual([quiet.other, quiet.team]);
      expect(r.totalCount).toBe(3n);
      expect(r.nextPageToken).not.toBe("");
    },
  }),
  contractCase({
    name: "an unknown order_by field: INVALID_ARGUMENT on order_by",
    method: M.listAccountAssociations,
    request: { orderBy: "amazon" },
    headers: () => quiet.auth("viewer"),
    error: { code: Code.InvalidArgument, details: [violations("order_by")] },
  }),
  contractCase({
    name: "no credentials: UNAUTHENTICATED",
    method: M.listAccountAssociations,
    request: {},
    error: { code: Code.Unauthenticated },
  }),
]);

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("UpdateAccountAssociation [%s]", (protocol: Protocol) => {
  const update = (request: MessageInitShape<typeof UpdateAccountAssociationRequestSchema>, caller: Caller = "owner") =>
    call(protocol, base(), M.updateAccountAssociation, request, world.auth(caller));
  const get = async (uid: string) => (await call(protocol, base(), M.getAccountAssociation, { uid }, world.auth("viewer"))).message!;
  /** An association with amazon and google set, a minute old. */
  const existing = async () =>
    insertAssociation(await insertGroup(world.org), {
      name: "before",
      description: "kept",
      amazon: { account: "123456789012" },
      google: { projectId: "old-project", projectNumber: "1111" },
      createTime: new Date(Date.now() - 60_000),
      updateTime: new Date(Date.now() - 60_000),
    });

  it("rule 1: only the fields named in the mask change; update_time moves", async () => {
    const uid = await existing();
    const before = await get(uid);
    const out = await update({
      accountAssociation: { uid, name: "ignored", description: "after", amazon: { account: "999999999999" }, azure: { tenantId: TENANT, clientIds: { web: CLIENT } } },
      updateMask: { paths: ["description", "azure"] },
    });
    expect(out.error, out.error?.message).toBeUndefined();
    const r = out.message!;
    expect(r).toMatchObject({ uid, name: "before", description: "after" });
    expect(r.amazon?.account).toBe("123456789012");
    expect(r.azure).toMatchObject({ tenantId: TENANT, clientIds: { web: CLIENT } });
    expect(r.createTime).toEqual(before.createTime);
    expect(ms(r.updateTime)).toBeGreaterThan(ms(before.updateTime));
    expect(await get(uid)).toEqual(r);
  });

  it("rule 1: a block named in the mask and absent from the body is cleared; a nested path changes one field of it", async () => {
    const uid = await existing();
    const out = await update({ accountAssociation: { uid, google: { projectNumber: "2222" } }, updateMask: { paths: ["amazon", "google.project_number"] } });
    expect(out.error, out.error?.message).toBeUndefined();
    expect(out.message!.amazon).toBeUndefined();
    expect(out.message!.google).toMatchObject({ projectId: "old-project", projectNumber: "2222" });
  });

  it("rule 2: without a mask only the fields present change, nested fields merged", async () => {
    const uid = await existing();
    const out = await update({ accountAssociation: { uid, google: { projectId: "new-project" }, chainguard: { serviceBindings: { REGISTRY: world.identity.owner } } } });
    expect(out.error, out.error?.message).toBeUndefined();
    const r = out.message!;
    expect(r).toMatchObject({ name: "before", description: "kept" });
    expect(r.google).toMatchObject({ projectId: "new-project", projectNumber: "1111" });
    expect(r.amazon?.account).toBe("123456789012");
    expect(r.chainguard?.serviceBindings).toEqual({ REGISTRY: world.identity.owner });
  });

  it("rule 3: * replaces every writable field; what the body leaves out is reset", async () => {
    const uid = await existing();
    const out = await update({ accountAssociation: { uid, name: "replaced", github: { appInstallations: { "9": { installations: [{ installationId: 1n }] } } } }, updateMask: { paths: ["*"] } });
    expect(out.error, out.error?.message).toBeUndefined();
    const r = out.message!;
    expect(r).toMatchObject({ uid, name: "replaced", description: "" });
    expect([r.amazon, r.google]).toEqual([undefined, undefined]);
    expect(Object.keys(r.github!.appInstallations)).toEqual(["9"]);
  });

  it("invalid values: INVALID_ARGUMENT on the path from the request root, nothing changed", async () => {
    const uid = await existing();
    const before = await get(uid);
    const cases: [object, string[]][] = [
      [{ accountAssociation: { uid, amazon: { account: "12" } } }, ["account_association.amazon.account"]],
      [{ accountAssociation: { uid }, updateMask: { paths: ["google.project_id"] } }, ["account_association.google.project_id"]],
      [{ accountAssociation: { uid, name: "" }, updateMask: { paths: ["name"] } }, ["account_association.name"]],
      // A block is checked whole when any of it changes: a new azure block needs its client ids too.
      [{ accountAssociation: { uid, azure: { tenantId: TENANT } } }, ["account_association.azure.client_ids"]],
      [{ accountAssociation: { uid, azure: { tenantId: "t" } } }, ["account_association.azure.tenant_id", "account_association.azure.client_ids"]],
    ];
    for (const [request, paths] of cases) {
      const out = await update(request as never);
      expect(out.error?.code, paths.join()).toBe(Code.InvalidArgument);
      expect(out.error!.details.find((d) => d.$typeName === BadRequestSchema.typeName)).toMatchObject({ fieldViolations: paths.map((field) => ({ field })) });
    }
    const unknown = await update({ accountAssociation: { uid, description: "x" }, updateMask: { paths: ["aws"] } });
    expect(unknown.error?.message).toMatch(/^Invalid argument: update_mask: /);
    expect(await get(uid)).toEqual(before);
  });

  it("a stored value under older rules does not block an unrelated change", async () => {
    const uid = await insertAssociation(await insertGroup(world.org), { name: "legacy", amazon: { account: "12" } });
    const out = await update({ accountAssociation: { uid, description: "still fine" } });
    expect(out.error, out.error?.message).toBeUndefined();
    expect(out.message!.amazon?.account).toBe("12");
  });

  it("a group without one: NOT_FOUND; the editor, a viewer and a stranger: PERMISSION_DENIED", async () => {
    const uid = await existing();
    const empty = await insertGroup(world.org);
    const nf = await update({ accountAssociation: { uid: empty, description: "x" } });
    expect(nf.error?.code).toBe(Code.NotFound);
    expect(nf.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject({ resourceType: ASSOCIATION, resourceName: empty });
    for (const caller of ["editor", "viewer", "otherViewer", "stranger"] as const) {
      expect((await update({ accountAssociation: { uid, description: "x" } }, caller)).error?.code, caller).toBe(Code.PermissionDenied);
    }
    expect((await get(uid)).description).toBe("kept");
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("DeleteAccountAssociation [%s]", (protocol: Protocol) => {
  const del = (uid: string, caller: Caller = "owner") => call(protocol, base(), M.deleteAccountAssociation, { uid }, world.auth(caller));

  it("deletes it; it then answers NOT_FOUND, and the group may have a new one", async () => {
    const uid = await insertAssociation(await insertGroup(world.org));
    const out = await del(uid);
    expect(out.error, out.error?.message).toBeUndefined();
    const got = await call(protocol, base(), M.getAccountAssociation, { uid }, world.auth("viewer"));
    expect(got.error?.code).toBe(Code.NotFound);
    const again = await del(uid);
    expect(again.error?.code).toBe(Code.NotFound);
    expect(again.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject({ resourceType: ASSOCIATION, resourceName: uid });
    if (protocol === "rest") expect(again.error!.httpStatus).toBe(404);
    const recreated = await call(protocol, base(), M.createAccountAssociation, { parent: uid, accountAssociation: { name: "new" } }, world.auth("owner"));
    expect(recreated.error, recreated.error?.message).toBeUndefined();
  });

  it("the editor, a viewer and a stranger: PERMISSION_DENIED, nothing deleted", async () => {
    const uid = await insertAssociation(await insertGroup(world.org));
    for (const caller of ["editor", "viewer", "otherViewer", "stranger"] as const) {
      expect((await del(uid, caller)).error?.code, caller).toBe(Code.PermissionDenied);
    }
    expect((await call(protocol, base(), M.getAccountAssociation, { uid }, world.auth("viewer"))).message?.uid).toBe(uid);
  });

  it("a group holding an association cannot be deleted: FAILED_PRECONDITION RESOURCE_NOT_EMPTY; once it is gone it can", async () => {
    const group = await insertAssociation(await insertGroup(world.org));
    const refused = await call(protocol, base(), GroupsService.method.deleteGroup, { uid: group }, world.auth("owner"));
    expect(refused.error?.code).toBe(Code.FailedPrecondition);
    expect(refused.error?.message).toMatch(/an account association/);
    const pf = refused.error!.details.find((d) => d.$typeName === PreconditionFailureSchema.typeName);
    expect(pf).toMatchObject({ violations: [{ type: "RESOURCE_NOT_EMPTY", subject: group }] });
    expect((await del(group)).error).toBeUndefined();
    const deleted = await call(protocol, base(), GroupsService.method.deleteGroup, { uid: group }, world.auth("owner"));
    expect(deleted.error, deleted.error?.message).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("CheckAccountAssociation [%s]", (protocol: Protocol) => {
  const check = (uid: string, providerType: AccountProviderType, caller: Caller = "viewer") =>
    call(protocol, base(), M.checkAccountAssociation, { uid, providerType }, world.auth(caller));

  it("READY for each provider whose block is complete and well-formed; NOT_CONFIGURED for one without a block", async () => {
    const group = await insertGroup(world.org);
    const created = await call(protocol, base(), M.createAccountAssociation, { parent: group, accountAssociation: full() }, world.auth("owner"));
    expect(created.error, created.error?.message).toBeUndefined();
    for (const type of [AccountProviderType.AMAZON, AccountProviderType.GOOGLE, AccountProviderType.AZURE]) {
      const out = await check(group, type);
      expect(out.error, out.error?.message).toBeUndefined();
      expect(out.message).toMatchObject({ status: CheckStatus.READY, reason: "CONFIGURED" });
      expect(out.message!.message).toMatch(/not verified/);
    }
    const amazonOnly = await check(orgAssociation, AccountProviderType.AMAZON);
    expect(amazonOnly.message).toMatchObject({ status: CheckStatus.READY });
    for (const [type, block] of [
      [AccountProviderType.GOOGLE, "google"],
      [AccountProviderType.AZURE, "azure"],
    ] as const) {
      const out = await check(orgAssociation, type);
      expect(out.message).toMatchObject({ status: CheckStatus.NOT_READY, reason: "NOT_CONFIGURED" });
      expect(out.message!.message).toContain(`account_association.${block}`);
    }
  });

  it("a stored block missing a required value: NOT_READY INCOMPLETE naming it; a malformed value: INVALID_CONFIGURATION", async () => {
    const uid = await insertAssociation(await insertGroup(world.org), {
      google: { projectId: "half-done" },
      azure: { tenantId: TENANT },
      amazon: { account: "not-an-account" },
    });
    const google = await check(uid, AccountProviderType.GOOGLE);
    expect(google.message).toMatchObject({ status: CheckStatus.NOT_READY, reason: "INCOMPLETE" });
    expect(google.message!.message).toContain("google.project_number: is required");
    const azure = await check(uid, AccountProviderType.AZURE);
    expect(azure.message).toMatchObject({ status: CheckStatus.NOT_READY, reason: "INCOMPLETE" });
    expect(azure.message!.message).toContain("azure.client_ids");
    const amazon = await check(uid, AccountProviderType.AMAZON);
    expect(amazon.message).toMatchObject({ status: CheckStatus.NOT_READY, reason: "INVALID_CONFIGURATION" });
    expect(amazon.message!.message).toContain("amazon.account: must be an AWS account id");
  });

  it("provider_type UNSPECIFIED or unknown: INVALID_ARGUMENT on provider_type, even for a group without one", async () => {
    for (const uid of [orgAssociation, world.other]) {
      for (const type of [AccountProviderType.UNSPECIFIED, 99 as AccountProviderType]) {
        const out = await check(uid, type);
        expect(out.error?.code).toBe(Code.InvalidArgument);
        expect(out.error!.details.find((d) => d.$typeName === BadRequestSchema.typeName)).toMatchObject({ fieldViolations: [{ field: "provider_type" }] });
      }
    }
  });

  it("a group without one: NOT_FOUND; a caller without IAM_ACCOUNT_ASSOCIATIONS_LIST there: PERMISSION_DENIED", async () => {
    const nf = await check(world.other, AccountProviderType.AMAZON);
    expect(nf.error?.code).toBe(Code.NotFound);
    expect(nf.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject({ resourceType: ASSOCIATION, resourceName: world.other });
    for (const caller of ["teamViewer", "otherViewer", "stranger"] as const) {
      expect((await check(orgAssociation, AccountProviderType.AMAZON, caller)).error?.code, caller).toBe(Code.PermissionDenied);
    }
    expect((await check(orgAssociation, AccountProviderType.AMAZON, "editor")).message?.status).toBe(CheckStatus.READY);
  });
});

describe("CreateAccountAssociation under concurrency", () => {
  it("concurrent creates for one group: exactly one succeeds, the others are ALREADY_EXISTS", async () => {
    const group = await insertGroup(world.org);
    const outs = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        call(protocols[i % protocols.length]!, base(), M.createAccountAssociation, { parent: group, accountAssociation: { name: `racer-${i}` } }, world.auth("owner")),
      ),
    );
    expect(outs.filter((o) => !o.error)).toHaveLength(1);
    expect(outs.filter((o) => o.error).map((o) => o.error!.code)).toEqual(Array(5).fill(Code.AlreadyExists));
  });
});
