// ReposService over every protocol: create (name rules, uniqueness, output-only fields ignored), get, list
// (visibility, filters, order, paging, total), update (the three PATCH rules), delete (NOT_FOUND afterwards,
// tags and manifests gone), the readme pair (size limit, internal capability), and a group holding repos
// refused deletion.
import { Code } from "@connectrpc/connect";
import type { MessageInitShape } from "@bufbuild/protobuf";
import { count, eq } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { CatalogTier, ReposService, type Repo, type UpdateRepoRequestSchema } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { BadRequestSchema, PreconditionFailureSchema, ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { groups, identities, manifests, repos, roleBindings, roles, tagCounts, tags } from "../../src/db/schema/index.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { lazy, ms } from "../support/matchers.js";
import { seedWorld, type Caller, type World } from "../support/world.js";
import { call, contractCase, protocols, runContractCases, type Protocol } from "./harness.js";
import { listVisibilityCases } from "./list-visibility.js";

const REPO = "chainguard.platform.registry.v2.Repo";
const GROUP = "chainguard.platform.iam.v2.Group";
const HEX16 = /^[0-9a-f]{16}$/;
const DIGEST = `sha256:${"a".repeat(64)}`;

let server: TestServer;
/** Repos are created, changed and deleted in this one. */
let world: World;
/** Nothing is ever created in this one: list results and totals are exact. */
let quiet: World;
/** A caller holding CAP_REPO_INTERNAL_ADMIN (with REPO_UPDATE and REPO_LIST) on world.org, through a custom role. */
let readmeAdmin: Record<string, string>;
const fx = {
  /** world.org: a repo whose name is taken, one in team, one with a readme. */
  taken: "",
  teamRepo: "",
  withReadme: "",
  /** quiet: org/alpha, org/beta, org/gamma, org/shared, team/shared, team/team-app, other/other-app */
  q: {} as Record<string, string>,
};

let seq = 0;
const unique = (prefix: string) => `${prefix}-${++seq}`;
const base = () => server.baseUrl;
const field = (name: string, description?: unknown) => ({
  schema: BadRequestSchema,
  value: { fieldViolations: [description === undefined ? { field: name } : { field: name, description }] },
});

async function insertRepo(group: string, name: string, extra: Partial<typeof repos.$inferInsert> = {}): Promise<string> {
  const uid = newChildUid(group);
  await server.database.db.insert(repos).values({ uid, groupUid: group, name, ...extra });
  return uid;
}

async function insertGroup(parent: string, name: string): Promise<string> {
  const uid = newChildUid(parent);
  await server.database.db.insert(groups).values({ uid, parentUid: parent, name });
  return uid;
}

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "acme");
  quiet = await seedWorld(server, "quiet");
  const { db } = server.database;

  fx.taken = await insertRepo(world.org, "taken");
  fx.teamRepo = await insertRepo(world.team, "team-repo");
  fx.withReadme = await insertRepo(world.org, "with-readme", { readme: "# Hello\n\nA readme." });
  for (const [key, group, name] of [
    ["alpha", quiet.org, "alpha"],
    ["beta", quiet.org, "beta"],
    ["gamma", quiet.org, "gamma"],
    ["orgShared", quiet.org, "shared"],
    ["teamShared", quiet.team, "shared"],
    ["teamApp", quiet.team, "team-app"],
    ["otherApp", quiet.other, "other-app"],
  ] as const) {
    // Distinct, increasing times: create_time and update_time orders are exact.
    const at = new Date(Date.UTC(2024, 0, 1) + Object.keys(fx.q).length * 1000);
    fx.q[key] = await insertRepo(group, name, { createTime: at, updateTime: at });
  }

  // A custom role holding the internal capability, bound directly (no managed role has it).
  const role = newChildUid(world.org);
  await db.insert(roles).values({
    uid: role,
    parentUid: world.org,
    name: "repo-internal-admin",
    capabilities: [Capability.CAP_REPO_LIST, Capability.CAP_REPO_UPDATE, Capability.CAP_REPO_INTERNAL_ADMIN],
  });
  const admin = newRootUid();
  await db.insert(identities).values({
    uid: admin,
    name: "readme admin",
    relationship: { claimMatch: { issuer: "https://issuer.test", subject: admin } },
    relationshipType: 1,
    issuer: "https://issuer.test",
    subject: admin,
  });
  await db.insert(roleBindings).values({ uid: newChildUid(world.org), groupUid: world.org, identityUid: admin, roleUid: role });
  readmeAdmin = { authorization: `Bearer ${await server.token(admin)}` };
});

afterAll(async () => {
  await server?.close();
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("CreateRepo", base, [
  contractCase({
    name: "an editor creates a repo; every writable field round-trips, output-only fields are ignored",
    method: ReposService.method.createRepo,
    request: () => ({
      parent: world.org,
      repo: {
        uid: "ignored",
        name: unique("nginx"),
        description: "web server",
        catalogTier: CatalogTier.APPLICATION,
        bundles: ["base", "fips"],
        aliases: ["nginx-alias"],
        activeTags: ["latest", "1.25"],
        syncConfig: { source: "cgr.dev/chainguard/nginx", google: "us-docker.pkg.dev/x/y", uniqueTags: true, apkoOverlay: "ignored" },
        customOverlay: { environment: { TZ: "UTC" }, accounts: { runAs: "nonroot", users: [{ username: "nonroot", uid: 65532 }] } },
        createTime: { seconds: 1n },
      },
    }),
    headers: () => world.auth("editor"),
    response: (r) => {
      expect(r.uid.startsWith(world.org + "/")).toBe(true);
      expect(r.uid.slice(world.org.length + 1)).toMatch(HEX16);
      expect(r.name).toMatch(/^nginx-\d+$/);
      expect(r).toMatchObject({
        description: "web server",
        catalogTier: CatalogTier.APPLICATION,
        bundles: ["base", "fips"],
        aliases: ["nginx-alias"],
        activeTags: ["latest", "1.25"],
      });
      expect(r.syncConfig).toMatchObject({ source: "cgr.dev/chainguard/nginx", google: "us-docker.pkg.dev/x/y", uniqueTags: false, apkoOverlay: "" });
      expect(r.customOverlay?.environment).toEqual({ TZ: "UTC" });
      expect(r.customOverlay?.accounts).toMatchObject({ runAs: "nonroot", users: [{ username: "nonroot", uid: 65532 }] });
      expect(Math.abs(ms(r.createTime) - Date.now())).toBeLessThan(60_000);
      expect(r.updateTime).toEqual(r.createTime);
    },
  }),
  contractCase({
    name: "a name with path components (tools/nginx-fips) is a valid repo name",
    method: ReposService.method.createRepo,
    request: () => ({ parent: world.team, repo: { name: unique("tools/nginx-fips") } }),
    headers: () => world.auth("editor"),
    response: (r) => {
      expect(r.name).toMatch(/^tools\/nginx-fips-\d+$/);
      expect(r.uid.startsWith(world.team + "/")).toBe(true);
      expect(r.syncConfig).toBeUndefined();
      expect(r.customOverlay).toBeUndefined();
    },
  }),
  contractCase({
    name: "a name already used in the group: ALREADY_EXISTS naming the repo that has it",
    method: ReposService.method.createRepo,
    request: () => ({ parent: world.org, repo: { name: "taken" } }),
    headers: () => world.auth("editor"),
    error: {
      code: Code.AlreadyExists,
      reason: "ALREADY_EXISTS",
      domain: "registry.platform.test",
      details: [{ schema: ResourceInfoSchema, value: { resourceType: REPO, resourceName: lazy(() => fx.taken) } }],
    },
  }),
  contractCase({
    name: "the same name in another group is fine",
    method: ReposService.method.createRepo,
    request: () => ({ parent: world.other, repo: { name: "taken" } }),
    headers: () => world.auth("editor"),
    only: ["grpc"],
    response: (r) => expect(r.name).toBe("taken"),
  }),
  contractCase({
    name: "no name: INVALID_ARGUMENT on repo.name",
    method: ReposService.method.createRepo,
    request: () => ({ parent: world.org, repo: { description: "nameless" } }),
    headers: () => world.auth("editor"),
    error: {
      code: Code.InvalidArgument,
      reason: "INVALID_ARGUMENT",
      message: "Invalid argument: repo.name: is required",
      details: [field("repo.name", "is required")],
    },
  }),
  ...["Nginx", "-nginx", "nginx-", "a..b", "a//b", "tools/", "/tools", "a b", "a:b"].map((name) =>
    contractCase({
      name: `name ${JSON.stringify(name)}: INVALID_ARGUMENT on repo.name, saying what a repo name is`,
      method: ReposService.method.createRepo,
      request: () => ({ parent: world.org, repo: { name } }),
      headers: () => world.auth("editor"),
      error: {
        code: Code.InvalidArgument,
        message: /^Invalid argument: repo\.name: must be a registry repository name: lowercase letters and digits/,
        details: [field("repo.name")],
      },
    }),
  ),
  contractCase({
    name: "a name longer than 255 characters: INVALID_ARGUMENT on repo.name",
    method: ReposService.method.createRepo,
    request: () => ({ parent: world.org, repo: { name: "a".repeat(256) } }),
    headers: () => world.auth("editor"),
    error: { code: Code.InvalidArgument, details: [field("repo.name", "must be at most 255 characters long")] },
  }),
  contractCase({
    name: "an unknown catalog tier and an invalid active tag: INVALID_ARGUMENT on both",
    method: ReposService.method.createRepo,
    request: () => ({ parent: world.org, repo: { name: unique("bad"), catalogTier: 99 as CatalogTier, activeTags: ["ok", ".bad"] } }),
    headers: () => world.auth("editor"),
    error: {
      code: Code.InvalidArgument,
      details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "repo.catalog_tier" }, { field: "repo.active_tags[1]" }] } }],
    },
  }),
  contractCase({
    name: "sync_config without its required source: INVALID_ARGUMENT on repo.sync_config.source",
    method: ReposService.method.createRepo,
    request: () => ({ parent: world.org, repo: { name: unique("sync"), syncConfig: { google: "x" } } }),
    headers: () => world.auth("editor"),
    error: { code: Code.InvalidArgument, message: "Invalid argument: repo.sync_config.source: is required", details: [field("repo.sync_config.source")] },
  }),
  contractCase({
    name: "a custom overlay user without its required username: INVALID_ARGUMENT naming the path",
    method: ReposService.method.createRepo,
    request: () => ({ parent: world.org, repo: { name: unique("overlay"), customOverlay: { accounts: { users: [{ username: "a" }, { uid: 1 }] } } } }),
    headers: () => world.auth("editor"),
    error: { code: Code.InvalidArgument, details: [field("repo.custom_overlay.accounts.users[1].username", "is required")] },
  }),
  contractCase({
    name: "a missing group: NOT_FOUND with ResourceInfo naming the group",
    method: ReposService.method.createRepo,
    request: () => ({ parent: `${world.org}/ffffffffffffffff`, repo: { name: "orphan" } }),
    headers: () => world.auth("editor"),
    error: { code: Code.NotFound, reason: "NOT_FOUND", details: [{ schema: ResourceInfoSchema, value: { resourceType: GROUP, resourceName: lazy(() => `${world.org}/ffffffffffffffff`) } }] },
  }),
  contractCase({
    name: "an invalid parent uid: INVALID_ARGUMENT on parent",
    method: ReposService.method.createRepo,
    request: { parent: "Not/A/Uid", repo: { name: "x" } },
    headers: () => world.auth("editor"),
    error: { code: Code.InvalidArgument, details: [field("parent")] },
  }),
  ...(["viewer", "otherViewer", "stranger", "teamViewer"] as const).map((caller) =>
    contractCase({
      name: `${caller} (no REPO_CREATE on the group): PERMISSION_DENIED`,
      method: ReposService.method.createRepo,
      request: () => ({ parent: world.org, repo: { name: unique("denied") } }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
    }),
  ),
  contractCase({
    name: "a viewer under a missing group: PERMISSION_DENIED, not NOT_FOUND",
    method: ReposService.method.createRepo,
    request: () => ({ parent: `${world.org}/ffffffffffffffff`, repo: { name: "x" } }),
    headers: () => world.auth("viewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "an owner confined to team creates in team but not beside it",
    method: ReposService.method.createRepo,
    request: () => ({ parent: world.other, repo: { name: unique("breakout") } }),
    headers: () => world.auth("confined"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "an owner confined to team creates in team",
    method: ReposService.method.createRepo,
    request: () => ({ parent: world.team, repo: { name: unique("confined") } }),
    headers: () => world.auth("confined"),
    response: (r) => expect(r.uid.startsWith(world.team + "/")).toBe(true),
  }),
  contractCase({
    name: "no credentials: UNAUTHENTICATED",
    method: ReposService.method.createRepo,
    request: () => ({ parent: world.org, repo: { name: "x" } }),
    error: { code: Code.Unauthenticated },
  }),
]);

// ---------------------------------------------------------------------------------------------------------
runContractCases("GetRepo", base, [
  contractCase({
    name: "a viewer reads a repo of the organization",
    method: ReposService.method.getRepo,
    request: () => ({ uid: fx.taken }),
    headers: () => world.auth("viewer"),
    response: (r) => {
      expect(r).toMatchObject({ uid: fx.taken, name: "taken", description: "", catalogTier: CatalogTier.UNSPECIFIED, bundles: [] });
      expect(r.createTime).toBeDefined();
      expect(r.updateTime).toBeDefined();
    },
  }),
  contractCase({
    name: "a viewer bound on team reads the team's repo",
    method: ReposService.method.getRepo,
    request: () => ({ uid: fx.teamRepo }),
    headers: () => world.auth("teamViewer"),
    response: (r) => expect(r.name).toBe("team-repo"),
  }),
  contractCase({
    name: "a viewer bound on team cannot read the organization's repo",
    method: ReposService.method.getRepo,
    request: () => ({ uid: fx.taken }),
    headers: () => world.auth("teamViewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "a missing repo: NOT_FOUND with ResourceInfo",
    method: ReposService.method.getRepo,
    request: () => ({ uid: `${world.org}/ffffffffffffffff` }),
    headers: () => world.auth("viewer"),
    error: {
      code: Code.NotFound,
      reason: "NOT_FOUND",
      domain: "registry.platform.test",
      details: [{ schema: ResourceInfoSchema, value: { resourceType: REPO, resourceName: lazy(() => `${world.org}/ffffffffffffffff`) } }],
    },
  }),
  ...(["otherViewer", "stranger"] as const).flatMap((caller) => [
    contractCase({
      name: `${caller}: PERMISSION_DENIED on an existing repo`,
      method: ReposService.method.getRepo,
      request: () => ({ uid: fx.taken }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
    }),
    contractCase({
      name: `${caller}: PERMISSION_DENIED on a missing repo too`,
      method: ReposService.method.getRepo,
      request: () => ({ uid: `${world.org}/ffffffffffffffff` }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied },
    }),
  ]),
]);

// ---------------------------------------------------------------------------------------------------------
const names = (rs: Repo[]) => rs.map((r) => r.name);

runContractCases("ListRepos", base, [
  contractCase({
    name: "a viewer on the organization sees every repo beneath it in name order, with the total",
    method: ReposService.method.listRepos,
    request: {},
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(names(r.repos)).toEqual(["alpha", "beta", "gamma", "other-app", "shared", "shared", "team-app"]);
      expect(r.totalCount).toBe(7n);
      expect(r.nextPageToken).toBe("");
      expect(r.skipped).toBe(0);
    },
  }),
  ...listVisibilityCases({
    method: ReposService.method.listRepos,
    noun: "repos",
    world: () => quiet,
    items: (r) => r.repos,
    teamViewer: () => [fx.q.teamShared!, fx.q.teamApp!],
    outside: { request: () => ({ uidp: { descendantsOf: quiet.org } }), uids: () => [fx.q.otherApp!] },
  }),
  contractCase({
    name: "uidp.children_of the organization: its own repos, not its sub-groups'",
    method: ReposService.method.listRepos,
    request: () => ({ uidp: { childrenOf: quiet.org } }),
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(names(r.repos)).toEqual(["alpha", "beta", "gamma", "shared"]);
      expect(r.totalCount).toBe(4n);
    },
  }),
  contractCase({
    name: "uidp.ids: exactly those repos",
    method: ReposService.method.listRepos,
    request: () => ({ uidp: { ids: [fx.q.beta!, fx.q.teamApp!] } }),
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(names(r.repos)).toEqual(["beta", "team-app"]),
  }),
  contractCase({
    name: "name: exact match, across groups",
    method: ReposService.method.listRepos,
    request: { name: "shared" },
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(r.repos.map((x) => x.uid).sort()).toEqual([fx.q.orgShared, fx.q.teamShared].sort());
      expect(r.totalCount).toBe(2n);
    },
  }),
  contractCase({
    name: "name: exact, not a prefix",
    method: ReposService.method.listRepos,
    request: { name: "shar" },
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(r.repos).toEqual([]);
      expect(r.totalCount).toBe(0n);
    },
  }),
  contractCase({
    name: "name with a scope: the team viewer's one repo named shared",
    method: ReposService.method.listRepos,
    request: { name: "shared" },
    headers: () => quiet.auth("teamViewer"),
    response: (r) => expect(r.repos.map((x) => x.uid)).toEqual([fx.q.teamShared]),
  }),
  contractCase({
    name: "order_by name desc",
    method: ReposService.method.listRepos,
    request: () => ({ uidp: { childrenOf: quiet.org }, orderBy: "name desc" }),
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(names(r.repos)).toEqual(["shared", "gamma", "beta", "alpha"]),
  }),
  contractCase({
    name: "order_by create_time (insertion order), created_at alias, and uid",
    method: ReposService.method.listRepos,
    request: () => ({ uidp: { childrenOf: quiet.org }, orderBy: "created_at" }),
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(names(r.repos)).toEqual(["alpha", "beta", "gamma", "shared"]),
  }),
  contractCase({
    name: "order_by uid",
    method: ReposService.method.listRepos,
    request: () => ({ uidp: { childrenOf: quiet.org }, orderBy: "uid" }),
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(r.repos.map((x) => x.uid)).toEqual([fx.q.alpha, fx.q.beta, fx.q.gamma, fx.q.orgShared].sort()),
  }),
  contractCase({
    name: "order_by updateTime desc (JSON name)",
    method: ReposService.method.listRepos,
    request: () => ({ uidp: { childrenOf: quiet.org }, orderBy: "updateTime desc" }),
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(names(r.repos)).toEqual(["shared", "gamma", "beta", "alpha"]),
  }),
  contractCase({
    name: "skip with page_size: the page after the skipped rows, skipped echoed, total unchanged",
    method: ReposService.method.listRepos,
    request: { skip: 2, pageSize: 2 },
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(names(r.repos)).toEqual(["gamma", "other-app"]);
      expect(r.skipped).toBe(2);
      expect(r.totalCount).toBe(7n);
      expect(r.nextPageToken).not.toBe("");
    },
  }),
  contractCase({
    name: "an unknown order_by field: INVALID_ARGUMENT on order_by",
    method: ReposService.method.listRepos,
    request: { orderBy: "readme" },
    headers: () => quiet.auth("viewer"),
    error: { code: Code.InvalidArgument, details: [field("order_by")] },
  }),
  contractCase({
    name: "an invalid uidp uid: INVALID_ARGUMENT on uidp.children_of",
    method: ReposService.method.listRepos,
    request: { uidp: { childrenOf: "Bad Uid" } },
    headers: () => quiet.auth("viewer"),
    error: { code: Code.InvalidArgument, details: [field("uidp.children_of")] },
  }),
  contractCase({
    name: "no credentials: UNAUTHENTICATED",
    method: ReposService.method.listRepos,
    request: {},
    error: { code: Code.Unauthenticated },
  }),
]);

describe.each(protocols)("ListRepos paging and totals [%s]", (protocol: Protocol) => {
  it("walks every visible repo a page at a time, in order, with the total on every page", async () => {
    for (const orderBy of ["name", "name desc", "create_time", "uid desc"]) {
      const seen: string[] = [];
      let pageToken = "";
      for (let i = 0; i < 10; i++) {
        const out = await call(protocol, base(), ReposService.method.listRepos, { pageSize: 2, pageToken, orderBy }, quiet.auth("viewer"));
        expect(out.error, out.error?.message).toBeUndefined();
        expect(out.message!.totalCount).toBe(7n);
        seen.push(...out.message!.repos.map((r) => r.uid));
        pageToken = out.message!.nextPageToken;
        if (!pageToken) break;
      }
      const all = await call(protocol, base(), ReposService.method.listRepos, { orderBy }, quiet.auth("viewer"));
      expect(seen).toEqual(all.message!.repos.map((r) => r.uid));
      expect(new Set(seen).size).toBe(7);
    }
  });

  it("a page token used with other filters: INVALID_ARGUMENT on page_token", async () => {
    const first = await call(protocol, base(), ReposService.method.listRepos, { pageSize: 2 }, quiet.auth("viewer"));
    const out = await call(protocol, base(), ReposService.method.listRepos, { pageSize: 2, pageToken: first.message!.nextPageToken, name: "beta" }, quiet.auth("viewer"));
    expect(out.error?.code).toBe(Code.InvalidArgument);
    expect(out.error?.message).toMatch(/^Invalid argument: page_token: /);
  });

  it("the total follows creates and deletes", async () => {
    const group = await insertGroup(world.org, `count-${protocol}`);
    const list = async () => {
      const out = await call(protocol, base(), ReposService.method.listRepos, { uidp: { childrenOf: group }, pageSize: 1 }, world.auth("editor"));
      expect(out.error, out.error?.message).toBeUndefined();
      return out.message!;
    };
    expect((await list()).totalCount).toBe(0n);
    const created: string[] = [];
    for (const name of ["one", "two", "three"]) {
      const out = await call(protocol, base(), ReposService.method.createRepo, { parent: group, repo: { name } }, world.auth("editor"));
      expect(out.error, out.error?.message).toBeUndefined();
      created.push(out.message!.uid);
    }
    const after = await list();
    expect(after.totalCount).toBe(3n);
    expect(names(after.repos)).toEqual(["one"]);
    expect((await call(protocol, base(), ReposService.method.deleteRepo, { uid: created[0]! }, world.auth("editor"))).error).toBeUndefined();
    const fewer = await list();
    expect(fewer.totalCount).toBe(2n);
    expect(names(fewer.repos)).toEqual(["three"]);
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("UpdateRepo [%s]", (protocol: Protocol) => {
  const update = (request: MessageInitShape<typeof UpdateRepoRequestSchema>, caller: Caller = "editor") =>
    call(protocol, base(), ReposService.method.updateRepo, request, world.auth(caller));
  const get = async (uid: string) => (await call(protocol, base(), ReposService.method.getRepo, { uid }, world.auth("viewer"))).message!;
  /** A repo with every field set. */
  const fullRepo = async () =>
    insertRepo(world.org, unique(`patch-${protocol}`), {
      description: "before",
      catalogTier: CatalogTier.BASE,
      bundles: ["b1"],
      aliases: ["a1"],
      activeTags: ["latest"],
      syncConfig: { source: "cgr.dev/chainguard/x", google: "g1", uniqueTags: true },
      customOverlay: { environment: { A: "1" } },
      createTime: new Date(Date.now() - 60_000),
      updateTime: new Date(Date.now() - 60_000),
    });

  it("rule 1: only the fields named in the mask change; other body fields are ignored; update_time moves", async () => {
    const uid = await fullRepo();
    const before = await get(uid);
    const out = await update({
      repo: { uid, name: "ignored-name", description: "after", bundles: ["ignored"], catalogTier: CatalogTier.FIPS },
      updateMask: { paths: ["description", "catalog_tier"] },
    });
    expect(out.error, out.error?.message).toBeUndefined();
    expect(out.message).toMatchObject({ uid, name: before.name, description: "after", catalogTier: CatalogTier.FIPS, bundles: ["b1"], aliases: ["a1"] });
    expect(out.message!.syncConfig).toEqual(before.syncConfig);
    expect(out.message!.createTime).toEqual(before.createTime);
    expect(ms(out.message!.updateTime)).toBeGreaterThan(ms(before.updateTime));
    expect(await get(uid)).toEqual(out.message);
  });

  it("public (anonymous pulls over /v2/): set and cleared with the mask; a repo is private until its owner says so", async () => {
    const uid = await fullRepo();
    expect((await get(uid)).public).toBe(false);
    const made = await update({ repo: { uid, public: true }, updateMask: { paths: ["public"] } });
    expect(made.error, made.error?.message).toBeUndefined();
    expect(made.message).toMatchObject({ uid, public: true, description: "before" });
    expect((await get(uid)).public).toBe(true);
    const cleared = await update({ repo: { uid }, updateMask: { paths: ["public"] } });
    expect(cleared.error, cleared.error?.message).toBeUndefined();
    expect((await get(uid)).public).toBe(false);
  });

  it("rule 1: a named field absent from the body is cleared", async () => {
    const uid = await fullRepo();
    const out = await update({ repo: { uid }, updateMask: { paths: ["bundles", "sync_config"] } });
    expect(out.error, out.error?.message).toBeUndefined();
    expect(out.message!.bundles).toEqual([]);
    expect(out.message!.syncConfig).toBeUndefined();
    expect(out.message!.aliases).toEqual(["a1"]);
  });

  it("rule 2: without a mask only the fields present change, nested fields merged; others keep their values", async () => {
    const uid = await fullRepo();
    const before = await get(uid);
    const out = await update({ repo: { uid, aliases: ["a2", "a3"], syncConfig: { source: "", google: "g2" } } });
    expect(out.error, out.error?.message).toBeUndefined();
    const r = out.message!;
    expect(r).toMatchObject({ name: before.name, description: "before", catalogTier: CatalogTier.BASE, bundles: ["b1"], aliases: ["a2", "a3"], activeTags: ["latest"] });
    // source (empty in the body: not present) and the output-only unique_tags keep their values.
    expect(r.syncConfig).toMatchObject({ source: "cgr.dev/chainguard/x", google: "g2", uniqueTags: true });
    expect(r.customOverlay?.environment).toEqual({ A: "1" });
    expect(ms(r.updateTime)).toBeGreaterThan(ms(before.updateTime));
  });

  it("rule 3: * replaces every writable field; what the body leaves out is reset", async () => {
    const uid = await fullRepo();
    const before = await get(uid);
    const out = await update({ repo: { uid, name: before.name, description: "replaced", activeTags: ["stable"] }, updateMask: { paths: ["*"] } });
    expect(out.error, out.error?.message).toBeUndefined();
    const r = out.message!;
    expect(r).toMatchObject({ uid, name: before.name, description: "replaced", catalogTier: CatalogTier.UNSPECIFIED, bundles: [], aliases: [], activeTags: ["stable"] });
    expect(r.syncConfig).toBeUndefined();
    expect(r.customOverlay).toBeUndefined();
    expect(r.createTime).toEqual(before.createTime);
  });

  it("rule 3: * without a name: INVALID_ARGUMENT on repo.name, nothing changed", async () => {
    const uid = await fullRepo();
    const before = await get(uid);
    const out = await update({ repo: { uid, description: "all new" }, updateMask: { paths: ["*"] } });
    expect(out.error?.code).toBe(Code.InvalidArgument);
    expect(out.error?.message).toBe("Invalid argument: repo.name: is required");
    expect(await get(uid)).toEqual(before);
  });

  it("output-only fields are never changed: named in a mask, present in the body, or nested; nothing moves", async () => {
    const uid = await fullRepo();
    const before = await get(uid);
    const named = await update({
      repo: { uid, createTime: { seconds: 5n }, updateTime: { seconds: 5n }, syncConfig: { source: "x", uniqueTags: false, gracePeriod: true } },
      updateMask: { paths: ["uid", "create_time", "update_time", "sync_config.unique_tags", "sync_config.grace_period"] },
    });
    expect(named.error, named.error?.message).toBeUndefined();
    expect(named.message).toEqual(before);
    const present = await update({ repo: { uid, createTime: { seconds: 5n }, updateTime: { seconds: 5n }, syncConfig: { google: "g1", gracePeriod: true } } });
    expect(present.message).toEqual(before);
  });

  it("a rename keeps the uid; a rename to a name taken in the group: ALREADY_EXISTS, nothing changed", async () => {
    const uid = await fullRepo();
    const renamed = unique(`renamed-${protocol}`);
    const out = await update({ repo: { uid, name: renamed }, updateMask: { paths: ["name"] } });
    expect(out.message).toMatchObject({ uid, name: renamed });
    const clash = await update({ repo: { uid, name: "taken" } });
    expect(clash.error?.code).toBe(Code.AlreadyExists);
    expect(clash.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject({ resourceType: REPO, resourceName: fx.taken });
    expect((await get(uid)).name).toBe(renamed);
  });

  it("invalid values: INVALID_ARGUMENT on the field; an unknown mask path: on update_mask", async () => {
    const uid = await fullRepo();
    const badName = await update({ repo: { uid, name: "Bad Name" } });
    expect(badName.error?.message).toMatch(/^Invalid argument: repo\.name: must be a registry repository name/);
    const badTier = await update({ repo: { uid, catalogTier: 42 as CatalogTier } });
    expect(badTier.error?.message).toMatch(/^Invalid argument: repo\.catalog_tier: /);
    const unknown = await update({ repo: { uid, description: "x" }, updateMask: { paths: ["colour"] } });
    expect(unknown.error?.code).toBe(Code.InvalidArgument);
    expect(unknown.error?.message).toMatch(/^Invalid argument: update_mask: /);
  });

  it("a missing repo: NOT_FOUND; a viewer, a sibling viewer and a stranger: PERMISSION_DENIED whether or not it exists", async () => {
    const uid = await fullRepo();
    const missing = `${world.org}/ffffffffffffffff`;
    const nf = await update({ repo: { uid: missing, description: "x" } });
    expect(nf.error?.code).toBe(Code.NotFound);
    expect(nf.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject({ resourceType: REPO, resourceName: missing });
    for (const caller of ["viewer", "otherViewer", "stranger"] as const) {
      for (const target of [uid, missing]) {
        expect((await update({ repo: { uid: target, description: "x" } }, caller)).error?.code).toBe(Code.PermissionDenied);
      }
    }
    expect((await get(uid)).description).toBe("before");
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("DeleteRepo [%s]", (protocol: Protocol) => {
  const del = (uid: string, caller: Caller = "editor") => call(protocol, base(), ReposService.method.deleteRepo, { uid }, world.auth(caller));

  it("deletes a repo with its tags and manifests; the repo then answers NOT_FOUND with ResourceInfo", async () => {
    const { db } = server.database;
    const uid = await insertRepo(world.org, unique(`doomed-${protocol}`));
    await db.insert(tags).values([
      { uid: newChildUid(uid), repoUid: uid, name: "latest", digest: DIGEST },
      { uid: newChildUid(uid), repoUid: uid, name: "1.0", digest: DIGEST },
    ]);
    await db.insert(manifests).values({ repoUid: uid, digest: DIGEST, mediaType: "application/vnd.oci.image.manifest.v1+json", isIndex: false, platform: "linux/amd64", size: 10n });

    const out = await del(uid);
    expect(out.error, out.error?.message).toBeUndefined();
    expect(out.message).toEqual(expect.objectContaining({ $typeName: "google.protobuf.Empty" }));

    const notFound = { resourceType: REPO, resourceName: uid };
    const got = await call(protocol, base(), ReposService.method.getRepo, { uid }, world.auth("viewer"));
    expect(got.error?.code).toBe(Code.NotFound);
    expect(got.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject(notFound);
    const again = await del(uid);
    expect(again.error?.code).toBe(Code.NotFound);
    expect(again.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject(notFound);
    if (protocol === "rest") expect(again.error!.httpStatus).toBe(404);

    const [t] = await db.select({ n: count() }).from(tags).where(eq(tags.repoUid, uid));
    const [m] = await db.select({ n: count() }).from(manifests).where(eq(manifests.repoUid, uid));
    const [c] = await db.select({ n: count() }).from(tagCounts).where(eq(tagCounts.repoUid, uid));
    expect([t!.n, m!.n, c!.n]).toEqual([0, 0, 0]);
  });

  it("a viewer, a sibling viewer and a stranger: PERMISSION_DENIED, nothing deleted", async () => {
    const uid = await insertRepo(world.org, unique(`kept-${protocol}`));
    for (const caller of ["viewer", "otherViewer", "stranger"] as const) {
      expect((await del(uid, caller)).error?.code).toBe(Code.PermissionDenied);
    }
    expect((await call(protocol, base(), ReposService.method.getRepo, { uid }, world.auth("viewer"))).message?.uid).toBe(uid);
  });

  it("a group holding a repo cannot be deleted: FAILED_PRECONDITION RESOURCE_NOT_EMPTY; once the repo is gone it can", async () => {
    const group = await insertGroup(world.org, `holder-${protocol}`);
    const repo = await insertRepo(group, "held");
    const refused = await call(protocol, base(), GroupsService.method.deleteGroup, { uid: group }, world.auth("owner"));
    expect(refused.error?.code).toBe(Code.FailedPrecondition);
    expect(refused.error?.message).toMatch(/^Precondition failed: /);
    const pf = refused.error!.details.find((d) => d.$typeName === PreconditionFailureSchema.typeName);
    expect(pf).toMatchObject({ violations: [{ type: "RESOURCE_NOT_EMPTY", subject: group }] });
    expect((await call(protocol, base(), ReposService.method.getRepo, { uid: repo }, world.auth("viewer"))).message?.uid).toBe(repo);

    expect((await del(repo)).error).toBeUndefined();
    const deleted = await call(protocol, base(), GroupsService.method.deleteGroup, { uid: group }, world.auth("owner"));
    expect(deleted.error, deleted.error?.message).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("GetRepoReadme", base, [
  contractCase({
    name: "a viewer reads the readme (Markdown content)",
    method: ReposService.method.getRepoReadme,
    request: () => ({ uid: fx.withReadme }),
    headers: () => world.auth("viewer"),
    response: (r) => expect(r).toMatchObject({ uid: fx.withReadme, content: "# Hello\n\nA readme." }),
  }),
  contractCase({
    name: "a repo without a readme: empty content",
    method: ReposService.method.getRepoReadme,
    request: () => ({ uid: fx.taken }),
    headers: () => world.auth("viewer"),
    response: (r) => expect(r).toMatchObject({ uid: fx.taken, content: "" }),
  }),
  contractCase({
    name: "a missing repo: NOT_FOUND with ResourceInfo",
    method: ReposService.method.getRepoReadme,
    request: () => ({ uid: `${world.org}/ffffffffffffffff` }),
    headers: () => world.auth("viewer"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: REPO, resourceName: lazy(() => `${world.org}/ffffffffffffffff`) } }] },
  }),
  ...(["otherViewer", "stranger"] as const).map((caller) =>
    contractCase({
      name: `${caller}: PERMISSION_DENIED`,
      method: ReposService.method.getRepoReadme,
      request: () => ({ uid: fx.withReadme }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied },
    }),
  ),
]);

describe.each(protocols)("UpdateRepoReadme [%s]", (protocol: Protocol) => {
  const put = (uid: string, content: string, auth: Record<string, string>, paths?: string[]) =>
    call(protocol, base(), ReposService.method.updateRepoReadme, { repoReadme: { uid, content }, ...(paths ? { updateMask: { paths } } : {}) }, auth);
  const readme = async (uid: string) => (await call(protocol, base(), ReposService.method.getRepoReadme, { uid }, world.auth("viewer"))).message!.content;
  const repo = async (uid: string) => (await call(protocol, base(), ReposService.method.getRepo, { uid }, world.auth("viewer"))).message!;

  it("a caller with REPO_UPDATE and REPO_INTERNAL_ADMIN replaces the readme; the repo's update_time moves", async () => {
    const uid = await insertRepo(world.org, unique(`readme-${protocol}`), { readme: "old", updateTime: new Date(Date.now() - 60_000) });
    const before = await repo(uid);
    const content = `# ${protocol}\n\n* émoji ✓\n\n\`\`\`sh\ndocker pull x\n\`\`\`\n`;
    const out = await put(uid, content, readmeAdmin);
    expect(out.error, out.error?.message).toBeUndefined();
    expect(out.message).toMatchObject({ uid, content });
    expect(await readme(uid)).toBe(content);
    const after = await repo(uid);
    expect(ms(after.updateTime)).toBeGreaterThan(ms(before.updateTime));
    expect(after.description).toBe(before.description);
  });

  it("PATCH rules: no mask and empty content changes nothing; mask content (or *) with empty content clears it", async () => {
    const uid = await insertRepo(world.org, unique(`readme-clear-${protocol}`), { readme: "keep me" });
    expect((await put(uid, "", readmeAdmin)).message?.content).toBe("keep me");
    expect(await readme(uid)).toBe("keep me");
    expect((await put(uid, "", readmeAdmin, ["content"])).message?.content).toBe("");
    expect(await readme(uid)).toBe("");
    await put(uid, "again", readmeAdmin);
    expect((await put(uid, "", readmeAdmin, ["*"])).message?.content).toBe("");
  });

  it("1 MiB of UTF-8 is accepted; one byte more is INVALID_ARGUMENT on repo_readme.content (bytes, not characters), nothing changed", async () => {
    const uid = await insertRepo(world.org, unique(`readme-big-${protocol}`), { readme: "small" });
    const limit = 1024 * 1024;
    const ok = await put(uid, "x".repeat(limit), readmeAdmin);
    expect(ok.error, ok.error?.message).toBeUndefined();
    expect(ok.message!.content.length).toBe(limit);
    await put(uid, "small", readmeAdmin);
    for (const content of ["x".repeat(limit + 1), "é".repeat(limit / 2 + 1)]) {
      const out = await put(uid, content, readmeAdmin);
      expect(out.error?.code).toBe(Code.InvalidArgument);
      expect(out.error?.message).toMatch(/^Invalid argument: repo_readme\.content: must be at most 1048576 bytes/);
      expect(out.error!.details.find((d) => d.$typeName === BadRequestSchema.typeName)).toMatchObject({ fieldViolations: [{ field: "repo_readme.content" }] });
    }
    expect(await readme(uid)).toBe("small");
  });

  it("the owner and the editor (no REPO_INTERNAL_ADMIN) and a viewer: PERMISSION_DENIED, nothing changed", async () => {
    const uid = await insertRepo(world.org, unique(`readme-denied-${protocol}`), { readme: "original" });
    for (const caller of ["owner", "editor", "viewer", "stranger"] as const) {
      const out = await put(uid, "hijacked", world.auth(caller));
      expect(out.error?.code, caller).toBe(Code.PermissionDenied);
    }
    expect(await readme(uid)).toBe("original");
  });

  it("a missing repo: NOT_FOUND with ResourceInfo", async () => {
    const missing = `${world.org}/ffffffffffffffff`;
    const out = await put(missing, "x", readmeAdmin);
    expect(out.error?.code).toBe(Code.NotFound);
    expect(out.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject({ resourceType: REPO, resourceName: missing });
  });
});
