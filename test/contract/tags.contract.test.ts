// TagsService over every protocol: create (an upsert on (repo, name); name and digest validation), get,
// delete, and list (children of a repo; the hidden referrer/date/epoch kinds and their include flags; name,
// digest and updated_since filters; no deprecated filter; order; keyset pages over 120 tags; totals from the
// maintained counters, following creates and deletes; visibility).
import { Code } from "@connectrpc/connect";
import { and, eq, sql, type SQL } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TagsService, type Tag } from "../../gen/chainguard/platform/registry/v2/tags_pb.js";
import { BadRequestSchema, ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { repos, tagCounts, tags, TagKind } from "../../src/db/schema/index.js";
import { tagKindOf } from "../../src/registry/tag-kind.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { lazy, ms } from "../support/matchers.js";
import { seedWorld, type Caller, type World } from "../support/world.js";
import { call, contractCase, protocols, runContractCases, type Protocol } from "./harness.js";

const TAG = "chainguard.platform.registry.v2.Tag";
const REPO = "chainguard.platform.registry.v2.Repo";
const HEX16 = /^[0-9a-f]{16}$/;
const A = `sha256:${"a".repeat(64)}`;
const B = `sha256:${"b".repeat(64)}`;
const C = `sha256:${"c".repeat(64)}`;
const REFERRER = `sha256-${"c".repeat(64)}.sig`;
/** 2024-06-01T00:00:00.123456Z, the update_time of fixture tag 1.2.3 (microseconds). */
const JUNE = { seconds: BigInt(Date.UTC(2024, 5, 1) / 1000), nanos: 123_456_000 };

let server: TestServer;
/** Tags are created and deleted in this one. */
let world: World;
/** Nothing is ever created in this one: list results and totals are exact. */
let quiet: World;
const fx = {
  /** quiet.org: app (the kinds and filters), paged (120 tags); quiet.team: team-app. */
  app: "",
  paged: "",
  teamApp: "",
  /** world.org: repo (create and get), its tag "existing". */
  repo: "",
  existing: "",
};

let seq = 0;
const unique = (prefix: string) => `${prefix}-${++seq}`;
const base = () => server.baseUrl;
const names = (ts: Tag[]) => ts.map((t) => t.name);
/** Names in byte order: where "-" and "." meet, the database collation decides the list order, not the test. */
const sorted = (ts: Tag[]) => names(ts).sort();
const field = (name: string, description?: unknown) => ({
  schema: BadRequestSchema,
  value: { fieldViolations: [description === undefined ? { field: name } : { field: name, description }] },
});

async function insertRepo(group: string, name: string): Promise<string> {
  const uid = newChildUid(group);
  await server.database.db.insert(repos).values({ uid, groupUid: group, name });
  return uid;
}

type TagFixture = { name: string; digest: string; deprecated?: boolean; bundles?: string[]; createTime?: Date; updateTime?: Date | SQL };
/** Tag rows written straight to the database (kind computed as the service does). */
async function insertTags(repoUid: string, rows: TagFixture[]): Promise<string[]> {
  const values = rows.map((r) => ({ uid: newChildUid(repoUid), repoUid, kind: tagKindOf(r.name), ...r }));
  await server.database.db.insert(tags).values(values);
  return values.map((v) => v.uid);
}

beforeAll(async () => {
  server = await startTestServer();
  world = await seedWorld(server, "acme");
  quiet = await seedWorld(server, "quiet");

  fx.app = await insertRepo(quiet.org, "app");
  const old = (day: number) => new Date(Date.UTC(2020, 0, day));
  await insertTags(fx.app, [
    { name: "latest", digest: A, updateTime: old(1) },
    { name: "1.2", digest: B, deprecated: true, updateTime: old(2) },
    { name: "1.2.3", digest: B, updateTime: sql`'2024-06-01T00:00:00.123456Z'::timestamptz` },
    { name: REFERRER, digest: C, updateTime: old(3) },
    { name: "1.2-20240115", digest: A, updateTime: old(4) },
    { name: "1.2-r3", digest: A, updateTime: old(5) },
  ]);
  fx.teamApp = await insertRepo(quiet.team, "team-app");
  await insertTags(fx.teamApp, [{ name: "team-tag", digest: A }]);
  // 120 tags: t000..t119; update_time follows the name, create_time runs the other way; even ones point at A.
  fx.paged = await insertRepo(quiet.org, "paged");
  const t0 = Date.UTC(2023, 0, 1);
  await insertTags(
    fx.paged,
    Array.from({ length: 120 }, (_, i) => ({
      name: `t${String(i).padStart(3, "0")}`,
      digest: i % 2 === 0 ? A : B,
      updateTime: new Date(t0 + i * 1000),
      createTime: new Date(t0 - i * 1000),
    })),
  );

  fx.repo = await insertRepo(world.org, "repo");
  fx.existing = (await insertTags(fx.repo, [{ name: "existing", digest: A, bundles: ["b"] }]))[0]!;
});

afterAll(async () => {
  await server?.close();
});

// ---------------------------------------------------------------------------------------------------------
const DIGEST_RULE = "must be sha256: followed by 64 lowercase hexadecimal characters";
const INVALID_DIGEST = `Invalid argument: digest: ${DIGEST_RULE}`;
const INVALID_TAG_DIGEST = `Invalid argument: tag.digest: ${DIGEST_RULE}`;

runContractCases("CreateTag", base, [
  contractCase({
    name: "the owner creates a tag in a repo; fields round-trip, output-only ones are ignored",
    method: TagsService.method.createTag,
    request: () => ({
      parent: fx.repo,
      tag: { uid: "ignored", name: unique("v1.0"), digest: A, deprecated: true, bundles: ["base"], updateTime: { seconds: 1n }, createTime: { seconds: 1n } },
    }),
    headers: () => world.auth("owner"),
    response: (t) => {
      expect(t.uid.startsWith(fx.repo + "/")).toBe(true);
      expect(t.uid.slice(fx.repo.length + 1)).toMatch(HEX16);
      expect(t.name).toMatch(/^v1\.0-\d+$/);
      expect(t).toMatchObject({ digest: A, deprecated: true, bundles: ["base"] });
      expect(Math.abs(ms(t.createTime) - Date.now())).toBeLessThan(60_000);
      expect(t.updateTime).toEqual(t.createTime);
    },
  }),
  contractCase({
    name: "a tag name of 128 characters of the OCI grammar is accepted",
    method: TagsService.method.createTag,
    request: () => ({ parent: fx.repo, tag: { name: `_${"A1.-_".repeat(25)}xy`, digest: B } }),
    headers: () => world.auth("owner"),
    response: (t) => expect(t.name).toHaveLength(128),
  }),
  ...[
    ["upper-case hex", `sha256:${"A".repeat(64)}`],
    ["a short digest", `sha256:${"a".repeat(63)}`],
    ["another algorithm", `sha512:${"a".repeat(128)}`],
    ["no algorithm", "a".repeat(64)],
    ["a referrer-tag spelling", `sha256-${"a".repeat(64)}`],
  ].map(([what, digest]) =>
    contractCase({
      name: `${what}: INVALID_ARGUMENT with a BadRequest violation on tag.digest`,
      method: TagsService.method.createTag,
      request: () => ({ parent: fx.repo, tag: { name: "bad-digest", digest } }),
      headers: () => world.auth("owner"),
      error: { code: Code.InvalidArgument, reason: "INVALID_ARGUMENT", domain: "registry.platform.test", message: INVALID_TAG_DIGEST, details: [field("tag.digest")] },
    }),
  ),
  contractCase({
    name: "no digest: INVALID_ARGUMENT on tag.digest",
    method: TagsService.method.createTag,
    request: () => ({ parent: fx.repo, tag: { name: "no-digest" } }),
    headers: () => world.auth("owner"),
    error: { code: Code.InvalidArgument, message: /^Invalid argument: tag\.digest: is required/, details: [field("tag.digest")] },
  }),
  ...[".hidden", "-dash", "a".repeat(129), "with space", "colon:tag", "slash/tag", "ünïcode"].map((name) =>
    contractCase({
      name: `tag name ${JSON.stringify(name.slice(0, 20))}: INVALID_ARGUMENT on tag.name`,
      method: TagsService.method.createTag,
      request: () => ({ parent: fx.repo, tag: { name, digest: A } }),
      headers: () => world.auth("owner"),
      error: { code: Code.InvalidArgument, message: /^Invalid argument: tag\.name: must be an OCI tag/, details: [field("tag.name")] },
    }),
  ),
  contractCase({
    name: "no name and a bad digest: both reported",
    method: TagsService.method.createTag,
    request: () => ({ parent: fx.repo, tag: { digest: "nope" } }),
    headers: () => world.auth("owner"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "tag.name", description: "is required" }, { field: "tag.digest" }] } }] },
  }),
  contractCase({
    name: "a missing repo: NOT_FOUND with ResourceInfo naming the repo",
    method: TagsService.method.createTag,
    request: () => ({ parent: `${world.org}/ffffffffffffffff`, tag: { name: "x", digest: A } }),
    headers: () => world.auth("owner"),
    error: { code: Code.NotFound, reason: "NOT_FOUND", details: [{ schema: ResourceInfoSchema, value: { resourceType: REPO, resourceName: lazy(() => `${world.org}/ffffffffffffffff`) } }] },
  }),
  contractCase({
    name: "a group as parent (not a repo): NOT_FOUND naming it as a repo",
    method: TagsService.method.createTag,
    request: () => ({ parent: world.team, tag: { name: "x", digest: A } }),
    headers: () => world.auth("owner"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: REPO, resourceName: lazy(() => world.team) } }] },
  }),
  ...(["viewer", "editor", "otherViewer", "stranger"] as const).map((caller) =>
    contractCase({
      name: `${caller} (no TAG_CREATE on the repo's group): PERMISSION_DENIED`,
      method: TagsService.method.createTag,
      request: () => ({ parent: fx.repo, tag: { name: "denied", digest: A } }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
    }),
  ),
  contractCase({
    name: "a viewer with a bad digest: PERMISSION_DENIED comes first",
    method: TagsService.method.createTag,
    request: () => ({ parent: fx.repo, tag: { name: "denied", digest: "bad" } }),
    headers: () => world.auth("viewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "no credentials: UNAUTHENTICATED",
    method: TagsService.method.createTag,
    request: () => ({ parent: fx.repo, tag: { name: "x", digest: A } }),
    error: { code: Code.Unauthenticated },
  }),
]);

describe.each(protocols)("CreateTag is an upsert on (repo, name) [%s]", (protocol: Protocol) => {
  const put = (name: string, digest: string, deprecated = false) =>
    call(protocol, base(), TagsService.method.createTag, { parent: fx.repo, tag: { name, digest, deprecated } }, world.auth("owner"));
  const get = async (uid: string) => (await call(protocol, base(), TagsService.method.getTag, { uid }, world.auth("viewer"))).message!;

  it("creating an existing name moves it: same uid and create_time, new digest, update_time moves; an identical create changes nothing", async () => {
    const name = `stable-${protocol}`;
    const first = (await put(name, A)).message!;
    await new Promise((r) => setTimeout(r, 5));
    const moved = await put(name, B);
    expect(moved.error, moved.error?.message).toBeUndefined();
    expect(moved.message).toMatchObject({ uid: first.uid, name, digest: B });
    expect(moved.message!.createTime).toEqual(first.createTime);
    expect(ms(moved.message!.updateTime)).toBeGreaterThan(ms(first.updateTime));
    const same = await put(name, B);
    expect(same.message).toEqual(moved.message);
    expect(await get(first.uid)).toEqual(moved.message);
    const rows = await server.database.db.select().from(tags).where(and(eq(tags.repoUid, fx.repo), eq(tags.name, name)));
    expect(rows).toHaveLength(1);
  });

  it("deprecated round-trips both ways, and each change moves update_time", async () => {
    const name = `eol-${protocol}`;
    const created = (await put(name, A, true)).message!;
    expect(created.deprecated).toBe(true);
    expect((await get(created.uid)).deprecated).toBe(true);
    await new Promise((r) => setTimeout(r, 5));
    const revived = (await put(name, A, false)).message!;
    expect(revived.deprecated).toBe(false);
    expect((await get(created.uid)).deprecated).toBe(false);
    expect(ms(revived.updateTime)).toBeGreaterThan(ms(created.updateTime));
  });
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("GetTag", base, [
  contractCase({
    name: "a viewer reads a tag",
    method: TagsService.method.getTag,
    request: () => ({ uid: fx.existing }),
    headers: () => world.auth("viewer"),
    response: (t) => {
      expect(t).toMatchObject({ uid: fx.existing, name: "existing", digest: A, deprecated: false, bundles: ["b"] });
      expect(t.createTime).toBeDefined();
      expect(t.updateTime).toBeDefined();
    },
  }),
  contractCase({
    name: "a missing tag: NOT_FOUND with ResourceInfo",
    method: TagsService.method.getTag,
    request: () => ({ uid: `${fx.repo}/ffffffffffffffff` }),
    headers: () => world.auth("viewer"),
    error: { code: Code.NotFound, reason: "NOT_FOUND", details: [{ schema: ResourceInfoSchema, value: { resourceType: TAG, resourceName: lazy(() => `${fx.repo}/ffffffffffffffff`) } }] },
  }),
  ...(["teamViewer", "otherViewer", "stranger"] as const).flatMap((caller: Caller) => [
    contractCase({
      name: `${caller}: PERMISSION_DENIED on an existing tag`,
      method: TagsService.method.getTag,
      request: () => ({ uid: fx.existing }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
    }),
    contractCase({
      name: `${caller}: PERMISSION_DENIED on a missing tag too`,
      method: TagsService.method.getTag,
      request: () => ({ uid: `${fx.repo}/ffffffffffffffff` }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied },
    }),
  ]),
]);

// ---------------------------------------------------------------------------------------------------------
runContractCases("DeleteTag", base, [
  ...(["viewer", "editor", "otherViewer", "stranger"] as const).map((caller) =>
    contractCase({
      name: `${caller} (no TAG_DELETE): PERMISSION_DENIED`,
      method: TagsService.method.deleteTag,
      request: () => ({ uid: fx.existing }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied },
    }),
  ),
  contractCase({
    name: "a missing tag: NOT_FOUND with ResourceInfo",
    method: TagsService.method.deleteTag,
    request: () => ({ uid: `${fx.repo}/ffffffffffffffff` }),
    headers: () => world.auth("owner"),
    error: { code: Code.NotFound, details: [{ schema: ResourceInfoSchema, value: { resourceType: TAG } }] },
  }),
]);

describe.each(protocols)("DeleteTag and the total [%s]", (protocol: Protocol) => {
  it("creates and deletes move total_count (hidden kinds counted only when included); a deleted tag is NOT_FOUND", async () => {
    const repo = await insertRepo(world.org, `counted-${protocol}`);
    const auth = world.auth("owner");
    const total = async (includeEpochs = false) => {
      // page_size 1: the first page is not the whole result, so the total is counted, not read off the page.
      const out = await call(protocol, base(), TagsService.method.listTags, { uidp: { childrenOf: repo }, pageSize: 1, includeEpochs }, auth);
      expect(out.error, out.error?.message).toBeUndefined();
      return out.message!.totalCount;
    };
    expect(await total()).toBe(0n);
    const uids: string[] = [];
    for (const name of ["a", "b", "c", "c-r1"]) {
      const out = await call(protocol, base(), TagsService.method.createTag, { parent: repo, tag: { name, digest: A } }, auth);
      expect(out.error, out.error?.message).toBeUndefined();
      uids.push(out.message!.uid);
    }
    expect(await total()).toBe(3n);
    expect(await total(true)).toBe(4n);
    // An upsert of an existing name adds nothing.
    await call(protocol, base(), TagsService.method.createTag, { parent: repo, tag: { name: "a", digest: B } }, auth);
    expect(await total()).toBe(3n);

    const del = await call(protocol, base(), TagsService.method.deleteTag, { uid: uids[0]! }, auth);
    expect(del.error, del.error?.message).toBeUndefined();
    expect(del.message).toEqual(expect.objectContaining({ $typeName: "google.protobuf.Empty" }));
    await call(protocol, base(), TagsService.method.deleteTag, { uid: uids[3]! }, auth);
    expect(await total()).toBe(2n);
    expect(await total(true)).toBe(2n);

    const gone = [
      await call(protocol, base(), TagsService.method.getTag, { uid: uids[0]! }, auth),
      await call(protocol, base(), TagsService.method.deleteTag, { uid: uids[0]! }, auth),
    ];
    for (const out of gone) {
      expect(out.error?.code).toBe(Code.NotFound);
      expect(out.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject({ resourceType: TAG, resourceName: uids[0] });
    }
  });
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("ListTags", base, [
  contractCase({
    name: "children of a repo: regular tags only by default, in name order; the deprecated one included and marked",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app } }),
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(names(r.tags)).toEqual(["1.2", "1.2.3", "latest"]);
      expect(r.tags.map((t) => t.deprecated)).toEqual([true, false, false]);
      expect(r.totalCount).toBe(3n);
      expect(r.nextPageToken).toBe("");
    },
  }),
  contractCase({
    name: "include_referrers adds the sha256-<hex> tags",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, includeReferrers: true }),
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(names(r.tags)).toEqual(["1.2", "1.2.3", "latest", REFERRER]);
      expect(r.totalCount).toBe(4n);
    },
  }),
  contractCase({
    name: "include_dates adds the -20yymmdd tags",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, includeDates: true }),
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(sorted(r.tags)).toEqual(["1.2", "1.2-20240115", "1.2.3", "latest"]);
      expect(r.totalCount).toBe(4n);
    },
  }),
  contractCase({
    name: "include_epochs adds the -r<N> tags",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, includeEpochs: true }),
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(sorted(r.tags)).toEqual(["1.2", "1.2-r3", "1.2.3", "latest"]);
      expect(r.totalCount).toBe(4n);
    },
  }),
  contractCase({
    name: "all three flags: every tag",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, includeReferrers: true, includeDates: true, includeEpochs: true }),
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(sorted(r.tags)).toEqual(["1.2", "1.2-20240115", "1.2-r3", "1.2.3", "latest", REFERRER]);
      expect(r.totalCount).toBe(6n);
    },
  }),
  contractCase({
    name: "name: exact match",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, name: "1.2" }),
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(names(r.tags)).toEqual(["1.2"]);
      expect(r.totalCount).toBe(1n);
    },
  }),
  contractCase({
    name: "name of a hidden kind: found only with its include flag",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, name: "1.2-r3" }),
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(r.totalCount).toBe(0n),
  }),
  contractCase({
    name: "name of a hidden kind with its include flag",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, name: "1.2-r3", includeEpochs: true }),
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(names(r.tags)).toEqual(["1.2-r3"]),
  }),
  contractCase({
    name: "digest: the tags pointing at it",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, digest: B }),
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(names(r.tags)).toEqual(["1.2", "1.2.3"]);
      expect(r.totalCount).toBe(2n);
    },
  }),
  contractCase({
    name: "digest with every kind included",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, digest: A, includeReferrers: true, includeDates: true, includeEpochs: true }),
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(sorted(r.tags)).toEqual(["1.2-20240115", "1.2-r3", "latest"]),
  }),
  contractCase({
    name: "a malformed digest filter: INVALID_ARGUMENT on digest",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, digest: "sha256:XYZ" }),
    headers: () => quiet.auth("viewer"),
    error: { code: Code.InvalidArgument, message: INVALID_DIGEST, details: [field("digest")] },
  }),
  contractCase({
    name: "updated_since: update_time at or after it, to the microsecond",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, updatedSince: JUNE, includeReferrers: true, includeDates: true, includeEpochs: true }),
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(names(r.tags)).toEqual(["1.2.3"]);
      expect(r.totalCount).toBe(1n);
    },
  }),
  contractCase({
    name: "updated_since one microsecond later: nothing",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, updatedSince: { seconds: JUNE.seconds, nanos: JUNE.nanos + 1000 } }),
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(r.tags).toEqual([]);
      expect(r.totalCount).toBe(0n);
    },
  }),
  contractCase({
    name: "updated_since an older instant: the regular tags changed since",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, updatedSince: { seconds: BigInt(Date.UTC(2020, 0, 2) / 1000) } }),
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(names(r.tags)).toEqual(["1.2", "1.2.3"]),
  }),
  contractCase({
    name: "order_by update_time desc",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, orderBy: "update_time desc" }),
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(names(r.tags)).toEqual(["1.2.3", "1.2", "latest"]),
  }),
  contractCase({
    name: "an unknown order_by field (deprecated): INVALID_ARGUMENT on order_by",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, orderBy: "deprecated" }),
    headers: () => quiet.auth("viewer"),
    error: { code: Code.InvalidArgument, details: [field("order_by")] },
  }),
  contractCase({
    name: "a viewer of the team cannot see the organization's repo: nothing, and a total of 0",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app }, includeReferrers: true, includeDates: true, includeEpochs: true }),
    headers: () => quiet.auth("teamViewer"),
    response: (r) => {
      expect(r.tags).toEqual([]);
      expect(r.totalCount).toBe(0n);
    },
  }),
  contractCase({
    name: "a viewer of the team sees its own repo's tags",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.teamApp } }),
    headers: () => quiet.auth("teamViewer"),
    response: (r) => {
      expect(names(r.tags)).toEqual(["team-tag"]);
      expect(r.totalCount).toBe(1n);
    },
  }),
  ...(["otherViewer", "stranger"] as const).map((caller) =>
    contractCase({
      name: `${caller}: nothing, and a total of 0, even over many pages' worth`,
      method: TagsService.method.listTags,
      request: () => ({ uidp: { childrenOf: fx.paged }, pageSize: 10 }),
      headers: () => quiet.auth(caller),
      response: (r) => {
        expect(r.tags).toEqual([]);
        expect(r.totalCount).toBe(0n);
        expect(r.nextPageToken).toBe("");
      },
    }),
  ),
  contractCase({
    name: "no uidp: every visible tag (default kinds), counted",
    method: TagsService.method.listTags,
    request: {},
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(r.tags).toHaveLength(50);
      expect(r.totalCount).toBe(3n + 120n + 1n);
    },
  }),
  contractCase({
    name: "uidp.descendants_of the team: the team's tags only",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { descendantsOf: quiet.team } }),
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(names(r.tags)).toEqual(["team-tag"]),
  }),
  contractCase({
    name: "no credentials: UNAUTHENTICATED",
    method: TagsService.method.listTags,
    request: () => ({ uidp: { childrenOf: fx.app } }),
    error: { code: Code.Unauthenticated },
  }),
]);

describe("ListTags has no deprecated filter", () => {
  it("REST: a deprecated query parameter names no field, so it is ignored like any unknown one (nothing filtered)", async () => {
    const list = async (query: string) => {
      const res = await fetch(`${base()}/registry/v2/tags?uidp.children_of=${fx.app}${query}`, { headers: quiet.auth("viewer") });
      expect(res.status).toBe(200);
      return res.json();
    };
    expect(await list("&deprecated=true")).toEqual(await list(""));
  });

  it("the request message has no such field", () => {
    expect(TagsService.method.listTags.input.fields.map((f) => f.name)).not.toContain("deprecated");
  });
});

describe.each(protocols)("ListTags paging over 120 tags [%s]", (protocol: Protocol) => {
  const expectedNames = Array.from({ length: 120 }, (_, i) => `t${String(i).padStart(3, "0")}`);

  async function walk(request: { orderBy?: string; digest?: string }, pageSize: number) {
    const pages: string[][] = [];
    const totals: bigint[] = [];
    let pageToken = "";
    for (let i = 0; i < 20; i++) {
      const out = await call(protocol, base(), TagsService.method.listTags, { uidp: { childrenOf: fx.paged }, pageSize, pageToken, ...request }, quiet.auth("viewer"));
      expect(out.error, out.error?.message).toBeUndefined();
      pages.push(names(out.message!.tags));
      totals.push(out.message!.totalCount ?? -1n);
      pageToken = out.message!.nextPageToken;
      if (!pageToken) break;
    }
    return { pages, totals, all: pages.flat() };
  }

  it("page_size 50 by name: 50, 50, 20, in order, no repeats, total 120 on every page", async () => {
    const { pages, totals, all } = await walk({}, 50);
    expect(pages.map((p) => p.length)).toEqual([50, 50, 20]);
    expect(all).toEqual(expectedNames);
    expect(totals).toEqual([120n, 120n, 120n]);
  });

  it("the order is kept across pages for every sort", async () => {
    expect((await walk({ orderBy: "name desc" }, 50)).all).toEqual([...expectedNames].reverse());
    expect((await walk({ orderBy: "update_time" }, 50)).all).toEqual(expectedNames);
    expect((await walk({ orderBy: "create_time" }, 50)).all).toEqual([...expectedNames].reverse());
    expect((await walk({ orderBy: "updated_at desc" }, 50)).all).toEqual([...expectedNames].reverse());
    const byUid = await walk({ orderBy: "uid" }, 50);
    expect([...byUid.all].sort()).toEqual(expectedNames);
    expect(new Set(byUid.all).size).toBe(120);
  });

  it("a filtered walk (digest): 60 tags over 50 + 10, the total counted once and carried", async () => {
    const { pages, totals, all } = await walk({ digest: A }, 50);
    expect(pages.map((p) => p.length)).toEqual([50, 10]);
    expect(all).toEqual(expectedNames.filter((_, i) => i % 2 === 0));
    expect(totals).toEqual([60n, 60n]);
  });

  it("page_size above 200 is clamped; skip jumps ahead and is echoed", async () => {
    const big = await call(protocol, base(), TagsService.method.listTags, { uidp: { childrenOf: fx.paged }, pageSize: 500 }, quiet.auth("viewer"));
    expect(big.message!.tags).toHaveLength(120);
    expect(big.message!.totalCount).toBe(120n);
    const skipped = await call(protocol, base(), TagsService.method.listTags, { uidp: { childrenOf: fx.paged }, skip: 100, pageSize: 50 }, quiet.auth("viewer"));
    expect(names(skipped.message!.tags)).toEqual(expectedNames.slice(100));
    expect(skipped.message!.skipped).toBe(100);
    expect(skipped.message!.totalCount).toBe(120n);
  });
});

describe.each(protocols)("ListTags totals come from the maintained counters [%s]", (protocol: Protocol) => {
  // White-box: the per-(repo, kind) counter is set to a value no scan would give, to show which path
  // answered. The counter is correct in normal operation (the other tests compare it with the real rows).
  it("an unfiltered walk of a repo reads tag_counts; a filtered one counts the rows", async () => {
    const { db } = server.database;
    const repo = await insertRepo(world.org, `countered-${protocol}`);
    await insertTags(repo, Array.from({ length: 30 }, (_, i) => ({ name: `v${i}`, digest: i < 10 ? A : B })));
    await insertTags(repo, [{ name: "v1-r1", digest: A }]);
    const rows = await db.select().from(tagCounts).where(eq(tagCounts.repoUid, repo));
    expect(rows.map((r) => [r.kind, r.count]).sort()).toEqual([[TagKind.regular, 30n], [TagKind.epoch, 1n]].sort());

    await db.update(tagCounts).set({ count: 1000n }).where(and(eq(tagCounts.repoUid, repo), eq(tagCounts.kind, TagKind.regular)));
    const list = (extra: object) => call(protocol, base(), TagsService.method.listTags, { uidp: { childrenOf: repo }, pageSize: 10, ...extra }, world.auth("viewer"));
    expect((await list({})).message!.totalCount).toBe(1000n);
    expect((await list({ includeEpochs: true })).message!.totalCount).toBe(1001n);
    expect((await list({ digest: B })).message!.totalCount).toBe(20n);
  });
});
