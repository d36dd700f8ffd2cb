// The statements the hot calls send, held against the distribution of the schema (src/db/schema/
// distribution.ts, docs/sharding.md) with the statement checker (test/support/shard-check.ts): a real server
// on a test database, every statement its Drizzle sends captured by a logger, each call's statements judged.
// The test fails when one joins rows of different organizations (other than over a crossing the
// distribution declares), names a table the distribution does not classify, or when the migrated database
// holds a table it does not classify (a table a hand-written migration made).
import { createHash } from "node:crypto";
import { sql } from "drizzle-orm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { DISTRIBUTION } from "../../src/db/schema/distribution.js";
import { createDbBlobReferences } from "../../src/registry/oci/blob-references.js";
import { imageOf, OCI_MANIFEST } from "../support/oci-layout.js";
import { checkStatement, type Verdict } from "../support/shard-check.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { startSink, type TestSink } from "../support/sink.js";
import { seedWorld, type World } from "../support/world.js";

const FAST = { retryBaseMs: 50, retryMaxMs: 200, pollMs: 50, timeoutMs: 2_000 };

let server: TestServer;
let world: World;
let receiver: TestSink;
/** The call whose statements are being captured; undefined: not captured (setup, background between calls). */
let capturing: string | undefined;
const captured = new Map<string, string[]>();
const logger = {
  logQuery(query: string) {
    if (capturing !== undefined) captured.set(capturing, [...(captured.get(capturing) ?? []), query]);
  },
};

async function call(method: string, path: string, body?: unknown, caller: "owner" | "viewer" = "owner"): Promise<Record<string, unknown>> {
  const res = await fetch(`${server.baseUrl}${path}`, {
    method,
    headers: { ...world.auth(caller), "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? (JSON.parse(text) as Record<string, unknown>) : {};
}

async function oci(method: string, path: string, body?: Buffer, contentType = "application/octet-stream") {
  const res = await fetch(`${server.baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${world.token.owner}`, ...(body ? { "content-type": contentType } : {}) },
    body,
  });
  await res.arrayBuffer();
  if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status}`);
}

/** Runs `fn` with every statement sent meanwhile recorded under `name`. */
async function hot<T>(name: string, fn: () => Promise<T>): Promise<T> {
  capturing = name;
  try {
    return await fn();
  } finally {
    capturing = undefined;
  }
}

const sha256 = (b: Buffer) => `sha256:${createHash("sha256").update(b).digest("hex")}`;
const verdicts = new Map<string, Verdict[]>();

beforeAll(async () => {
  server = await startTestServer({ databaseLogger: logger, delivery: FAST });
  world = await seedWorld(server);
  receiver = await startSink();

  // The grants lookup: the viewer's first call (nothing of it cached yet).
  await hot("grants lookup", () => call("GET", `/registry/v2/repos?uidp.children_of=${world.org}`, undefined, "viewer"));
  await hot("CreateSubscription", () => call("POST", `/events/v2/subscriptions/${world.org}`, { sink: receiver.url }));
  const repo = await hot("CreateRepo (outbox write)", () => call("POST", `/registry/v2/repos/${world.org}`, { name: "shard-check" }));
  const repoUid = String(repo.uid);
  await hot("GetRepo", () => call("GET", `/registry/v2/repos/${repoUid}`));
  await hot("ListRepos", () => call("GET", `/registry/v2/repos?uidp.children_of=${world.org}`));
  await hot("ListRepos (every visible scope)", () => call("GET", `/registry/v2/repos`));
  const digest = `sha256:${"ab".repeat(32)}`;
  await hot("CreateTag", () => call("POST", `/registry/v2/tags/${repoUid}`, { name: "v1", digest }));
  await hot("ListTags", () => call("GET", `/registry/v2/tags?uidp.children_of=${repoUid}`));
  await hot("ListRoleBindings (hydration)", () => call("GET", `/iam/v2/roleBindings?uidp.children_of=${world.org}`));
  await hot("ListGroups", () => call("GET", `/iam/v2/groups?uidp.descendants_of=${world.org}`));

  // The registry's data plane: a blob, a manifest pushed and pulled, the tags list, and what GC asks.
  const name = `${world.org}/shard-check`;
  const layer = Buffer.from(`layer ${Math.random()}`);
  const { config, manifest } = imageOf([layer]);
  await hot("registry blob push", async () => {
    await oci("POST", `/v2/${name}/blobs/uploads/?digest=${sha256(config)}`, config);
    await oci("POST", `/v2/${name}/blobs/uploads/?digest=${sha256(layer)}`, layer);
  });
  await hot("registry manifest push", () => oci("PUT", `/v2/${name}/manifests/latest`, manifest, OCI_MANIFEST));
  await hot("registry manifest and blob pull", async () => {
    await oci("GET", `/v2/${name}/manifests/latest`);
    await oci("GET", `/v2/${name}/blobs/${sha256(layer)}`);
  });
  await hot("registry tags list", () => oci("GET", `/v2/${name}/tags/list`));
  await hot("registry cross-repository mount", () => oci("POST", `/v2/${world.org}/shard-check-mounted/blobs/uploads/?mount=${sha256(layer)}&from=${name}`));
  await hot("registry GC (blob references)", () => createDbBlobReferences(server.database.db).referenced([sha256(layer), sha256(config)]));

  // Event delivery: the events so far delivered (not captured), then one more mutation captured from its
  // write through the worker's expansion and claim to the sink's acknowledgement.
  await receiver.waitFor(2, 20_000);
  const before = receiver.received.length;
  await hot("event fan-out and delivery", async () => {
    await call("PATCH", `/registry/v2/repos/${repoUid}`, { uid: repoUid, name: "shard-check", description: "delivered" });
    await receiver.waitFor(before + 1, 20_000);
  });

  for (const [name, statements] of captured) verdicts.set(name, await Promise.all(statements.map((s) => checkStatement(s))));
}, 120_000);

afterAll(async () => {
  await receiver?.close();
  await server?.close();
});

/** The verdicts of a call's statements that touch `table`. */
function touching(call: string, table: string): Verdict[] {
  return (verdicts.get(call) ?? []).filter((v) => v.tables.includes(table));
}

describe("the hot statements on a distributed database", () => {
  it("were all captured", () => {
    for (const [name, list] of verdicts) expect(list.length, name).toBeGreaterThan(0);
    expect(verdicts.size).toBe(17);
  });

  it("join no rows of different organizations and name only classified tables", () => {
    const bad = [...verdicts].flatMap(([name, list]) => list.filter((v) => v.problems.length > 0).map((v) => ({ call: name, problems: v.problems, sql: v.sql })));
    expect(bad).toEqual([]);
  });

  it("read one organization's rows on one shard for the per-organization reads", () => {
    for (const v of touching("GetRepo", "repos")) expect(v.shards, v.sql).toBe("router");
    for (const v of touching("ListRepos", "repos")) expect(v.shards, v.sql).toBe("router");
    for (const v of touching("ListTags", "tags")) expect(v.shards, v.sql).toBe("router");
    for (const v of touching("registry manifest push", "manifests")) expect(v.shards, v.sql).toBe("router");
    for (const v of touching("registry tags list", "tags")) expect(v.shards, v.sql).toBe("router");
    // A mount within one organization: the source's link locked and the target's inserted on its shard.
    const mount = touching("registry cross-repository mount", "repo_blobs");
    expect(mount.some((v) => v.locks)).toBe(true);
    for (const v of mount) expect(v.shards, v.sql).toBe("router");
    expect(touching("ListTags", "tags").length).toBeGreaterThan(0);
    expect(touching("registry manifest push", "manifests").length).toBeGreaterThan(0);
  });

  it("cross shards where docs/sharding.md says they do today: a person's grants, and the registry's GC", () => {
    const grants = touching("grants lookup", "role_bindings");
    expect(grants.length).toBeGreaterThan(0);
    expect(grants.some((v) => v.shards === "cross-shard" && v.crossings.includes("role_bindings.identity_uid"))).toBe(true);
    expect(touching("registry GC (blob references)", "repo_blobs").map((v) => v.shards)).toEqual(["multi-shard"]);
    // No other crossing: a hot statement that starts joining over another declared crossing shows here first.
    const all = [...verdicts.values()].flat();
    expect([...new Set(all.flatMap((v) => v.crossings))]).toEqual(["role_bindings.identity_uid"]);
  });

  it("lock rows across shards only in event delivery (what docs/sharding.md says must become per shard)", () => {
    const all = [...verdicts.values()].flat();
    const lockingEverywhere = all.filter((v) => v.locks && v.shards !== "router");
    expect(lockingEverywhere.length).toBeGreaterThan(0);
    for (const v of lockingEverywhere) expect(v.tables, v.sql).toContain("event_deliveries");
  });

  it("every table of the migrated database is classified", async () => {
    const rows = (await server.database.db.execute(
      sql`select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE' order by table_name`,
    )) as unknown as { rows?: { table_name: string }[] } & { table_name: string }[];
    const names = (rows.rows ?? rows).map((r) => r.table_name);
    expect(names.length).toBeGreaterThan(20);
    expect(names.filter((n) => DISTRIBUTION[n] === undefined)).toEqual([]);
  });
});

// What the report in docs/sharding.md was made from: SHARD_REPORT=1 prints each call's statements and verdicts.
if (process.env.SHARD_REPORT) {
  afterAll(() => {
    for (const [name, list] of verdicts) {
      console.log(`\n## ${name}`);
      for (const v of list) console.log(`- ${v.shards}${v.crossings.length ? ` (${v.crossings.join(", ")})` : ""}${v.locks ? " [locks]" : ""} ${v.tables.join(", ")}: ${v.sql.replace(/\s+/g, " ").slice(0, 220)}`);
    }
  });
}
