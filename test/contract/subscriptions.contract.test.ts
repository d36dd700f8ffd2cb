// SubscriptionsService over every protocol: create (the sink's rules, uniqueness per group, output-only fields
// ignored, a missing group), get, list (visibility, uidp filters, order, paging, total), delete (NOT_FOUND
// afterwards), authorization, and a group holding a subscription refused deletion. A second server runs the
// production sink policy with a fake resolver: loopback, private, link-local and metadata addresses are refused,
// as literals and behind names, and a name resolving to a public address is accepted. Sinks of the development
// server are under .invalid (RFC 2606: never resolves), so nothing a test subscribes can reach a real host.
import { Code } from "@connectrpc/connect";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SubscriptionsService, type Subscription } from "../../gen/chainguard/platform/events/v2/subscriptions_pb.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { BadRequestSchema, PreconditionFailureSchema, ResourceInfoSchema } from "../../gen/google/rpc/error_details_pb.js";
import { groups, subscriptions } from "../../src/db/schema/index.js";
import { sinkPolicyFor } from "../../src/events/sinks.js";
import type { Resolver } from "../../src/kernel/outbound.js";
import { newChildUid } from "../../src/kernel/uidp.js";
import { startTestServer, type TestServer } from "../support/server.js";
import { lazy, ms } from "../support/matchers.js";
import { seedWorld, type Caller, type World } from "../support/world.js";
import { call, contractCase, protocols, runContractCases, type Protocol } from "./harness.js";
import { listVisibilityCases } from "./list-visibility.js";

const SUBSCRIPTION = "chainguard.platform.events.v2.Subscription";
const GROUP = "chainguard.platform.iam.v2.Group";
const HEX16 = /^[0-9a-f]{16}$/;

/** Development policy (the test server's default): plain http to loopback hosts, any address. */
let server: TestServer;
/** Subscriptions are created and deleted in this one. */
let world: World;
/** Nothing is ever created in this one: list results and totals are exact. */
let quiet: World;
/** Production policy, names resolved by `resolver` below. */
let prod: TestServer;
let prodWorld: World;

const fx = {
  /** world.org: a subscription whose sink is taken; one in team. */
  taken: "",
  takenSink: "https://hooks.invalid/taken",
  teamSub: "",
  /** quiet: org a, b, c; team d; other e (created in that order, a second apart). */
  q: {} as Record<string, string>,
};

/** The fake DNS of the production server. */
const zone: Record<string, string[]> = {
  "hooks.public.test": ["93.184.215.14"],
  "dual.public.test": ["2606:4700::1111", "93.184.215.14"],
  "internal.corp.test": ["10.0.0.5"],
  "metadata.corp.test": ["169.254.169.254"],
  "half.corp.test": ["93.184.215.14", "192.168.1.20"],
  localhost: ["127.0.0.1", "::1"],
};
const resolver: Resolver = async (hostname) => {
  const addresses = zone[hostname];
  if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
  return addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
};

let seq = 0;
const unique = (prefix: string) => `${prefix}-${++seq}`;
const base = () => server.baseUrl;
const prodBase = () => prod.baseUrl;
const sinkViolation = (description?: unknown) => ({
  schema: BadRequestSchema,
  value: { fieldViolations: [description === undefined ? { field: "subscription.sink" } : { field: "subscription.sink", description }] },
});

async function insertSubscription(group: string, sink: string, extra: Partial<typeof subscriptions.$inferInsert> = {}): Promise<string> {
  const uid = newChildUid(group);
  await server.database.db.insert(subscriptions).values({ uid, groupUid: group, sink, ...extra });
  return uid;
}

async function insertGroup(parent: string, name: string): Promise<string> {
  const uid = newChildUid(parent);
  await server.database.db.insert(groups).values({ uid, parentUid: parent, name });
  return uid;
}

beforeAll(async () => {
  [server, prod] = await Promise.all([startTestServer(), startTestServer({ sinks: sinkPolicyFor("production", resolver) })]);
  world = await seedWorld(server, "acme");
  quiet = await seedWorld(server, "quiet");
  prodWorld = await seedWorld(prod, "prod");

  fx.taken = await insertSubscription(world.org, fx.takenSink);
  fx.teamSub = await insertSubscription(world.team, "https://hooks.invalid/team");
  for (const [key, group] of [
    ["a", quiet.org],
    ["b", quiet.org],
    ["c", quiet.org],
    ["d", quiet.team],
    ["e", quiet.other],
  ] as const) {
    // Distinct, increasing creation times; update times in the reverse order: both orders are exact.
    const i = Object.keys(fx.q).length;
    fx.q[key] = await insertSubscription(group, `https://hooks.invalid/${key}`, {
      createTime: new Date(Date.UTC(2024, 0, 1) + i * 1000),
      updateTime: new Date(Date.UTC(2024, 5, 1) - i * 1000),
    });
  }
});

afterAll(async () => {
  await Promise.all([server?.close(), prod?.close()]);
});

// ---------------------------------------------------------------------------------------------------------
/** The error of a subscription to the sink another subscription of the group already has. */
const sinkTaken = {
  code: Code.AlreadyExists,
  reason: "ALREADY_EXISTS",
  domain: "events.platform.test",
  details: [{ schema: ResourceInfoSchema, value: { resourceType: SUBSCRIPTION, resourceName: lazy(() => fx.taken) } }],
};

runContractCases("CreateSubscription", base, [
  contractCase({
    name: "an editor subscribes an https sink; output-only fields sent are ignored",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({
      parent: world.org,
      subscription: { uid: "ignored", sink: `https://hooks.invalid/${unique("in")}?key=v`, createTime: { seconds: 1n }, updateTime: { seconds: 2n } },
    }),
    headers: () => world.auth("editor"),
    response: (r) => {
      expect(r.uid.startsWith(world.org + "/")).toBe(true);
      expect(r.uid.slice(world.org.length + 1)).toMatch(HEX16);
      expect(r.sink).toMatch(/^https:\/\/hooks\.invalid\/in-\d+\?key=v$/);
      expect(Math.abs(ms(r.createTime) - Date.now())).toBeLessThan(60_000);
      expect(r.updateTime).toEqual(r.createTime);
    },
  }),
  ...["http://127.0.0.1:8080/hook", "http://localhost:9999/events", "http://[::1]:8080/"].map((sink) =>
    contractCase({
      name: `in development, plain http to a loopback host (${sink}) is accepted, in a group beneath`,
      method: SubscriptionsService.method.createSubscription,
      request: () => ({ parent: world.team, subscription: { sink: `${sink}${sink.endsWith("/") ? "" : "/"}${unique("dev")}` } }),
      headers: () => world.auth("editor"),
      response: (r) => {
        expect(r.uid.startsWith(world.team + "/")).toBe(true);
        expect(r.sink.startsWith(sink)).toBe(true);
      },
    }),
  ),
  contractCase({
    name: "a sink of 2,048 characters is accepted",
    method: SubscriptionsService.method.createSubscription,
    request: () => {
      const prefix = `https://hooks.invalid/${unique("long")}/`;
      return { parent: world.org, subscription: { sink: prefix + "a".repeat(2048 - prefix.length) } };
    },
    headers: () => world.auth("editor"),
    response: (r) => expect(r.sink.length).toBe(2048),
  }),
  contractCase({
    name: "no subscription: INVALID_ARGUMENT, subscription.sink is required",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: world.org }),
    headers: () => world.auth("editor"),
    error: {
      code: Code.InvalidArgument,
      reason: "INVALID_ARGUMENT",
      domain: "events.platform.test",
      message: "Invalid argument: subscription.sink: is required",
      details: [sinkViolation("is required")],
    },
  }),
  contractCase({
    name: "an empty sink: INVALID_ARGUMENT, subscription.sink is required",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: world.org, subscription: { sink: "" } }),
    headers: () => world.auth("editor"),
    error: { code: Code.InvalidArgument, message: "Invalid argument: subscription.sink: is required", details: [sinkViolation("is required")] },
  }),
  ...(
    [
      ["plain http to a public host", "http://hooks.invalid/x", "must be an https URL: plain http is allowed for loopback hosts only"],
      ["plain http to a private address", "http://10.0.0.1/x", "must be an https URL: plain http is allowed for loopback hosts only"],
      ["another scheme", "ftp://hooks.invalid/x", "must be an https URL: scheme ftp: is not allowed"],
      ["a relative URL", "/hooks/x", "must be an https URL: not an absolute URL"],
      ["no scheme", "hooks.invalid/x", "must be an https URL: not an absolute URL"],
      ["credentials", "https://user:secret@hooks.invalid/x", "must be an https URL: credentials in the URL"],
      ["a user name only", "https://user@hooks.invalid/x", "must be an https URL: credentials in the URL"],
      ["a fragment", "https://hooks.invalid/x#part", "must not have a fragment"],
      ["an empty fragment", "https://hooks.invalid/x#", "must not have a fragment"],
      ["a space", "https://hooks.invalid/a b", "must not contain whitespace or control characters (percent-encode them)"],
      ["a leading space", " https://hooks.invalid/x", "must not contain whitespace or control characters (percent-encode them)"],
      ["a line break", "https://hooks.invalid/x\r\nHost: evil", "must not contain whitespace or control characters (percent-encode them)"],
      ["a NUL character", "https://hooks.invalid/a\u0000b", "must not contain whitespace or control characters (percent-encode them)"],
      ["more than 2,048 characters", `https://hooks.invalid/${"a".repeat(2048)}`, "must be at most 2048 characters"],
    ] as const
  ).map(([what, sink, description]) =>
    contractCase({
      name: `${what}: INVALID_ARGUMENT on subscription.sink`,
      method: SubscriptionsService.method.createSubscription,
      request: () => ({ parent: world.org, subscription: { sink } }),
      headers: () => world.auth("editor"),
      error: { code: Code.InvalidArgument, reason: "INVALID_ARGUMENT", message: `Invalid argument: subscription.sink: ${description}`, details: [sinkViolation(description)] },
    }),
  ),
  contractCase({
    name: "a sink already subscribed in the group: ALREADY_EXISTS naming the subscription that has it",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: world.org, subscription: { sink: fx.takenSink } }),
    headers: () => world.auth("editor"),
    error: sinkTaken,
  }),
  contractCase({
    name: "another spelling of a subscribed sink (scheme and host case, default port) is the same sink: ALREADY_EXISTS",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: world.org, subscription: { sink: "HTTPS://Hooks.INVALID:443/taken" } }),
    headers: () => world.auth("editor"),
    error: sinkTaken,
  }),
  contractCase({
    name: "a sink is stored as the URL parser writes it (host lowercased, an empty path made /)",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: world.other, subscription: { sink: "https://Spelled.INVALID" } }),
    headers: () => world.auth("editor"),
    only: ["grpc"],
    response: (r) => expect(r.sink).toBe("https://spelled.invalid/"),
  }),
  contractCase({
    name: "the same sink in another group is fine",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: world.other, subscription: { sink: fx.takenSink } }),
    headers: () => world.auth("editor"),
    only: ["grpc"],
    response: (r) => {
      expect(r.sink).toBe(fx.takenSink);
      expect(r.uid.startsWith(world.other + "/")).toBe(true);
    },
  }),
  contractCase({
    name: "a missing group: NOT_FOUND with ResourceInfo naming the group",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: `${world.org}/ffffffffffffffff`, subscription: { sink: "https://hooks.invalid/orphan" } }),
    headers: () => world.auth("editor"),
    error: {
      code: Code.NotFound,
      reason: "NOT_FOUND",
      details: [{ schema: ResourceInfoSchema, value: { resourceType: GROUP, resourceName: lazy(() => `${world.org}/ffffffffffffffff`) } }],
    },
  }),
  contractCase({
    name: "an invalid parent uid: INVALID_ARGUMENT on parent",
    method: SubscriptionsService.method.createSubscription,
    request: { parent: "Not/A/Uid", subscription: { sink: "https://hooks.invalid/x" } },
    headers: () => world.auth("editor"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "parent" }] } }] },
  }),
  ...(["viewer", "otherViewer", "teamViewer", "stranger"] as const).map((caller) =>
    contractCase({
      name: `${caller} (no EVENTS_SUBSCRIPTION_CREATE on the group): PERMISSION_DENIED`,
      method: SubscriptionsService.method.createSubscription,
      request: () => ({ parent: world.org, subscription: { sink: `https://hooks.invalid/${unique("denied")}` } }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
    }),
  ),
  contractCase({
    name: "a viewer with an invalid sink: PERMISSION_DENIED (authorization comes first)",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: world.org, subscription: { sink: "http://hooks.invalid/x" } }),
    headers: () => world.auth("viewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "a viewer under a missing group: PERMISSION_DENIED, not NOT_FOUND",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: `${world.org}/ffffffffffffffff`, subscription: { sink: "https://hooks.invalid/x" } }),
    headers: () => world.auth("viewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "an owner confined to team cannot subscribe beside it",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: world.other, subscription: { sink: `https://hooks.invalid/${unique("breakout")}` } }),
    headers: () => world.auth("confined"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "an owner confined to team subscribes in team",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: world.team, subscription: { sink: `https://hooks.invalid/${unique("confined")}` } }),
    headers: () => world.auth("confined"),
    response: (r) => expect(r.uid.startsWith(world.team + "/")).toBe(true),
  }),
  contractCase({
    name: "no credentials: UNAUTHENTICATED",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: world.org, subscription: { sink: "https://hooks.invalid/x" } }),
    error: { code: Code.Unauthenticated },
  }),
]);

describe.each(protocols)("CreateSubscription, read back and raced [%s]", (protocol: Protocol) => {
  it("what was created reads back the same", async () => {
    const created = await call(protocol, base(), SubscriptionsService.method.createSubscription, { parent: world.team, subscription: { sink: `https://hooks.invalid/${unique(protocol)}` } }, world.auth("editor"));
    expect(created.error, created.error?.message).toBeUndefined();
    const got = await call(protocol, base(), SubscriptionsService.method.getSubscription, { uid: created.message!.uid }, world.auth("teamViewer"));
    expect(got.error, got.error?.message).toBeUndefined();
    expect(got.message).toEqual(created.message);
  });

  it("concurrent creates of one sink in a group: one subscription, the others ALREADY_EXISTS naming it", async () => {
    const sink = `https://hooks.invalid/${unique(`race-${protocol}`)}`;
    const outs = await Promise.all(
      Array.from({ length: 6 }, () => call(protocol, base(), SubscriptionsService.method.createSubscription, { parent: world.team, subscription: { sink } }, world.auth("editor"))),
    );
    const created = outs.filter((o) => !o.error);
    expect(created).toHaveLength(1);
    for (const o of outs.filter((x) => x.error)) {
      expect(o.error!.code, o.error!.message).toBe(Code.AlreadyExists);
      expect(o.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject({ resourceType: SUBSCRIPTION, resourceName: created[0]!.message!.uid });
    }
    const listed = await call(protocol, base(), SubscriptionsService.method.listSubscriptions, { uidp: { childrenOf: world.team }, pageSize: 200 }, world.auth("editor"));
    expect(listed.message!.subscriptions.filter((s) => s.sink === sink)).toHaveLength(1);
  });
});

// ---------------------------------------------------------------------------------------------------------
runContractCases("GetSubscription", base, [
  contractCase({
    name: "a viewer reads a subscription of the organization",
    method: SubscriptionsService.method.getSubscription,
    request: () => ({ uid: fx.taken }),
    headers: () => world.auth("viewer"),
    response: (r) => {
      expect(r).toMatchObject({ uid: fx.taken, sink: fx.takenSink });
      expect(r.createTime).toBeDefined();
      expect(r.updateTime).toBeDefined();
    },
  }),
  contractCase({
    name: "a viewer bound on team reads the team's subscription",
    method: SubscriptionsService.method.getSubscription,
    request: () => ({ uid: fx.teamSub }),
    headers: () => world.auth("teamViewer"),
    response: (r) => expect(r.uid).toBe(fx.teamSub),
  }),
  contractCase({
    name: "a viewer bound on team cannot read the organization's subscription",
    method: SubscriptionsService.method.getSubscription,
    request: () => ({ uid: fx.taken }),
    headers: () => world.auth("teamViewer"),
    error: { code: Code.PermissionDenied },
  }),
  contractCase({
    name: "a missing subscription: NOT_FOUND with ResourceInfo",
    method: SubscriptionsService.method.getSubscription,
    request: () => ({ uid: `${world.org}/ffffffffffffffff` }),
    headers: () => world.auth("viewer"),
    error: {
      code: Code.NotFound,
      reason: "NOT_FOUND",
      domain: "events.platform.test",
      details: [{ schema: ResourceInfoSchema, value: { resourceType: SUBSCRIPTION, resourceName: lazy(() => `${world.org}/ffffffffffffffff`) } }],
    },
  }),
  contractCase({
    name: "an invalid uid: INVALID_ARGUMENT on uid",
    method: SubscriptionsService.method.getSubscription,
    request: { uid: "Not A Uid" },
    headers: () => world.auth("viewer"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "uid" }] } }] },
  }),
  ...(["otherViewer", "stranger"] as const).flatMap((caller) => [
    contractCase({
      name: `${caller}: PERMISSION_DENIED on an existing subscription`,
      method: SubscriptionsService.method.getSubscription,
      request: () => ({ uid: fx.taken }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied, reason: "PERMISSION_DENIED" },
    }),
    contractCase({
      name: `${caller}: PERMISSION_DENIED on a missing subscription too`,
      method: SubscriptionsService.method.getSubscription,
      request: () => ({ uid: `${world.org}/ffffffffffffffff` }),
      headers: () => world.auth(caller),
      error: { code: Code.PermissionDenied },
    }),
  ]),
  contractCase({
    name: "no credentials: UNAUTHENTICATED",
    method: SubscriptionsService.method.getSubscription,
    request: () => ({ uid: fx.taken }),
    error: { code: Code.Unauthenticated },
  }),
]);

// ---------------------------------------------------------------------------------------------------------
/** The quiet world's fixture keys of the listed subscriptions. */
const keys = (subs: Subscription[]) => subs.map((s) => Object.entries(fx.q).find(([, uid]) => uid === s.uid)?.[0] ?? s.uid);

runContractCases("ListSubscriptions", base, [
  contractCase({
    name: "a viewer on the organization sees every subscription beneath it in create_time order, with the total",
    method: SubscriptionsService.method.listSubscriptions,
    request: {},
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(keys(r.subscriptions)).toEqual(["a", "b", "c", "d", "e"]);
      expect(r.subscriptions[0]).toMatchObject({ uid: fx.q.a, sink: "https://hooks.invalid/a" });
      expect(r.subscriptions[0]!.createTime).toEqual({ $typeName: "google.protobuf.Timestamp", seconds: BigInt(Date.UTC(2024, 0, 1) / 1000), nanos: 0 });
      expect(r.totalCount).toBe(5n);
      expect(r.nextPageToken).toBe("");
      expect(r.skipped).toBe(0);
    },
  }),
  ...listVisibilityCases({
    method: SubscriptionsService.method.listSubscriptions,
    noun: "subscriptions",
    world: () => quiet,
    items: (r) => r.subscriptions,
    teamViewer: () => [fx.q.d!],
    outside: { request: () => ({ uidp: { descendantsOf: quiet.org } }), uids: () => [fx.q.e!] },
  }),
  contractCase({
    name: "uidp.children_of the organization: its own subscriptions, not its sub-groups'",
    method: SubscriptionsService.method.listSubscriptions,
    request: () => ({ uidp: { childrenOf: quiet.org } }),
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(keys(r.subscriptions)).toEqual(["a", "b", "c"]);
      expect(r.totalCount).toBe(3n);
    },
  }),
  contractCase({
    name: "uidp.descendants_of team: the team's",
    method: SubscriptionsService.method.listSubscriptions,
    request: () => ({ uidp: { descendantsOf: quiet.team } }),
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(keys(r.subscriptions)).toEqual(["d"]),
  }),
  contractCase({
    name: "uidp.ids: exactly those subscriptions",
    method: SubscriptionsService.method.listSubscriptions,
    request: () => ({ uidp: { ids: [fx.q.b!, fx.q.e!] } }),
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(keys(r.subscriptions)).toEqual(["b", "e"]);
      expect(r.totalCount).toBe(2n);
    },
  }),
  contractCase({
    name: "order_by create_time desc",
    method: SubscriptionsService.method.listSubscriptions,
    request: { orderBy: "create_time desc" },
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(keys(r.subscriptions)).toEqual(["e", "d", "c", "b", "a"]),
  }),
  contractCase({
    name: "order_by update_time (updated_at alias): the reverse of creation here",
    method: SubscriptionsService.method.listSubscriptions,
    request: { orderBy: "updated_at" },
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(keys(r.subscriptions)).toEqual(["e", "d", "c", "b", "a"]),
  }),
  contractCase({
    name: "order_by updateTime desc (JSON name)",
    method: SubscriptionsService.method.listSubscriptions,
    request: { orderBy: "updateTime desc" },
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(keys(r.subscriptions)).toEqual(["a", "b", "c", "d", "e"]),
  }),
  contractCase({
    name: "order_by uid",
    method: SubscriptionsService.method.listSubscriptions,
    request: { orderBy: "uid" },
    headers: () => quiet.auth("viewer"),
    response: (r) => expect(r.subscriptions.map((s) => s.uid)).toEqual(Object.values(fx.q).sort()),
  }),
  contractCase({
    name: "skip with page_size: the page after the skipped rows, skipped echoed, total unchanged",
    method: SubscriptionsService.method.listSubscriptions,
    request: { skip: 2, pageSize: 2 },
    headers: () => quiet.auth("viewer"),
    response: (r) => {
      expect(keys(r.subscriptions)).toEqual(["c", "d"]);
      expect(r.skipped).toBe(2);
      expect(r.totalCount).toBe(5n);
      expect(r.nextPageToken).not.toBe("");
    },
  }),
  contractCase({
    name: "order_by sink (not an order field): INVALID_ARGUMENT on order_by",
    method: SubscriptionsService.method.listSubscriptions,
    request: { orderBy: "sink" },
    headers: () => quiet.auth("viewer"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "order_by" }] } }] },
  }),
  contractCase({
    name: "an invalid uidp uid: INVALID_ARGUMENT on uidp.children_of",
    method: SubscriptionsService.method.listSubscriptions,
    request: { uidp: { childrenOf: "Bad Uid" } },
    headers: () => quiet.auth("viewer"),
    error: { code: Code.InvalidArgument, details: [{ schema: BadRequestSchema, value: { fieldViolations: [{ field: "uidp.children_of" }] } }] },
  }),
  contractCase({
    name: "a negative page_size: INVALID_ARGUMENT",
    method: SubscriptionsService.method.listSubscriptions,
    request: { pageSize: -1 },
    headers: () => quiet.auth("viewer"),
    error: { code: Code.InvalidArgument },
  }),
  contractCase({
    name: "no credentials: UNAUTHENTICATED",
    method: SubscriptionsService.method.listSubscriptions,
    request: {},
    error: { code: Code.Unauthenticated },
  }),
]);

describe.each(protocols)("ListSubscriptions paging and totals [%s]", (protocol: Protocol) => {
  it("walks every visible subscription a page at a time, in order, with the total on every page", async () => {
    for (const orderBy of ["create_time", "create_time desc", "update_time", "uid desc"]) {
      const seen: string[] = [];
      let pageToken = "";
      for (let i = 0; i < 10; i++) {
        const out = await call(protocol, base(), SubscriptionsService.method.listSubscriptions, { pageSize: 2, pageToken, orderBy }, quiet.auth("viewer"));
        expect(out.error, out.error?.message).toBeUndefined();
        expect(out.message!.totalCount).toBe(5n);
        expect(out.message!.subscriptions.length).toBeLessThanOrEqual(2);
        seen.push(...out.message!.subscriptions.map((s) => s.uid));
        pageToken = out.message!.nextPageToken;
        if (!pageToken) break;
      }
      const all = await call(protocol, base(), SubscriptionsService.method.listSubscriptions, { orderBy }, quiet.auth("viewer"));
      expect(seen).toEqual(all.message!.subscriptions.map((s) => s.uid));
      expect(new Set(seen).size).toBe(5);
    }
  });

  it("a page token used with another filter: INVALID_ARGUMENT on page_token", async () => {
    const first = await call(protocol, base(), SubscriptionsService.method.listSubscriptions, { pageSize: 2 }, quiet.auth("viewer"));
    const out = await call(
      protocol,
      base(),
      SubscriptionsService.method.listSubscriptions,
      { pageSize: 2, pageToken: first.message!.nextPageToken, uidp: { childrenOf: quiet.org } },
      quiet.auth("viewer"),
    );
    expect(out.error?.code).toBe(Code.InvalidArgument);
    expect(out.error?.message).toMatch(/^Invalid argument: page_token: /);
  });

  it("the list and its total follow creates and deletes", async () => {
    const group = await insertGroup(world.org, `count-${protocol}`);
    const list = async () => {
      const out = await call(protocol, base(), SubscriptionsService.method.listSubscriptions, { uidp: { childrenOf: group } }, world.auth("editor"));
      expect(out.error, out.error?.message).toBeUndefined();
      return out.message!;
    };
    expect((await list()).totalCount).toBe(0n);
    const created: string[] = [];
    for (const path of ["one", "two", "three"]) {
      const out = await call(protocol, base(), SubscriptionsService.method.createSubscription, { parent: group, subscription: { sink: `https://hooks.invalid/${path}` } }, world.auth("editor"));
      expect(out.error, out.error?.message).toBeUndefined();
      created.push(out.message!.uid);
    }
    const three = await list();
    expect(three.totalCount).toBe(3n);
    expect(three.subscriptions.map((s) => s.uid).sort()).toEqual([...created].sort());
    expect((await call(protocol, base(), SubscriptionsService.method.deleteSubscription, { uid: created[1]! }, world.auth("editor"))).error).toBeUndefined();
    const two = await list();
    expect(two.totalCount).toBe(2n);
    expect(two.subscriptions.map((s) => s.uid).sort()).toEqual([created[0]!, created[2]!].sort());
  });
});

// ---------------------------------------------------------------------------------------------------------
describe.each(protocols)("DeleteSubscription [%s]", (protocol: Protocol) => {
  const del = (uid: string, caller: Caller = "editor") => call(protocol, base(), SubscriptionsService.method.deleteSubscription, { uid }, world.auth(caller));
  const notFound = (uid: string) => ({ resourceType: SUBSCRIPTION, resourceName: uid });

  it("deletes a subscription; it then answers NOT_FOUND with ResourceInfo, and its sink may be subscribed again", async () => {
    const sink = `https://hooks.invalid/${unique(`doomed-${protocol}`)}`;
    const uid = await insertSubscription(world.org, sink);

    const out = await del(uid);
    expect(out.error, out.error?.message).toBeUndefined();
    expect(out.message).toEqual(expect.objectContaining({ $typeName: "google.protobuf.Empty" }));

    const got = await call(protocol, base(), SubscriptionsService.method.getSubscription, { uid }, world.auth("viewer"));
    expect(got.error?.code).toBe(Code.NotFound);
    expect(got.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject(notFound(uid));
    const again = await del(uid);
    expect(again.error?.code).toBe(Code.NotFound);
    expect(again.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject(notFound(uid));
    if (protocol === "rest") expect(again.error!.httpStatus).toBe(404);

    const recreated = await call(protocol, base(), SubscriptionsService.method.createSubscription, { parent: world.org, subscription: { sink } }, world.auth("editor"));
    expect(recreated.error, recreated.error?.message).toBeUndefined();
    expect(recreated.message!.uid).not.toBe(uid);
  });

  it("a missing subscription: NOT_FOUND with ResourceInfo", async () => {
    const missing = `${world.org}/ffffffffffffffff`;
    const out = await del(missing);
    expect(out.error?.code).toBe(Code.NotFound);
    expect(out.error!.details.find((d) => d.$typeName === ResourceInfoSchema.typeName)).toMatchObject(notFound(missing));
  });

  it("a viewer, a team viewer, a sibling viewer and a stranger: PERMISSION_DENIED, nothing deleted", async () => {
    const uid = await insertSubscription(world.org, `https://hooks.invalid/${unique(`kept-${protocol}`)}`);
    for (const caller of ["viewer", "teamViewer", "otherViewer", "stranger"] as const) {
      expect((await del(uid, caller)).error?.code, caller).toBe(Code.PermissionDenied);
    }
    expect((await call(protocol, base(), SubscriptionsService.method.getSubscription, { uid }, world.auth("viewer"))).message?.uid).toBe(uid);
  });

  it("no credentials: UNAUTHENTICATED", async () => {
    const out = await call(protocol, base(), SubscriptionsService.method.deleteSubscription, { uid: fx.taken });
    expect(out.error?.code).toBe(Code.Unauthenticated);
  });

  it("a group holding a subscription cannot be deleted: FAILED_PRECONDITION RESOURCE_NOT_EMPTY; once it is gone it can", async () => {
    const group = await insertGroup(world.org, `holder-${protocol}`);
    const sub = await insertSubscription(group, "https://hooks.invalid/held");
    const refused = await call(protocol, base(), GroupsService.method.deleteGroup, { uid: group }, world.auth("owner"));
    expect(refused.error?.code).toBe(Code.FailedPrecondition);
    expect(refused.error?.message).toMatch(/^Precondition failed: /);
    const pf = refused.error!.details.find((d) => d.$typeName === PreconditionFailureSchema.typeName);
    expect(pf).toMatchObject({ violations: [{ type: "RESOURCE_NOT_EMPTY", subject: group, description: expect.stringContaining("event subscriptions") }] });
    expect((await call(protocol, base(), SubscriptionsService.method.getSubscription, { uid: sub }, world.auth("viewer"))).message?.uid).toBe(sub);

    expect((await del(sub)).error).toBeUndefined();
    const deleted = await call(protocol, base(), GroupsService.method.deleteGroup, { uid: group }, world.auth("owner"));
    expect(deleted.error, deleted.error?.message).toBeUndefined();
  });
});

// ---------------------------------------------------------------------------------------------------------
// Production policy: https only, and the sink's host must resolve to public addresses only.
runContractCases("CreateSubscription in production", prodBase, [
  ...(
    [
      ["a literal loopback address", "https://127.0.0.1/hook", "127.0.0.1 is a loopback address"],
      ["a literal loopback address in another spelling", "https://2130706433/hook", "127.0.0.1 is a loopback address"],
      ["a literal private address", "https://10.0.0.1/hook", "10.0.0.1 is a private address"],
      ["the metadata address", "https://169.254.169.254/latest/meta-data", "169.254.169.254 is a linkLocal address"],
      ["the IPv6 loopback", "https://[::1]/hook", "::1 is a loopback address"],
      ["an IPv4-mapped loopback", "https://[::ffff:127.0.0.1]/hook", "is a loopback address"],
      // IPv4-compatible IPv6 (::/96) carries an IPv4 address (the metadata one, loopback, private): refused.
      ["an IPv4-compatible metadata address", "https://[::a9fe:a9fe]/hook", "::a9fe:a9fe is a ipv4Compatible address"],
      ["an IPv4-compatible loopback", "https://[::7f00:1]/hook", "::7f00:1 is a ipv4Compatible address"],
      ["an IPv4-compatible loopback, dotted", "https://[::127.0.0.1]/hook", "::7f00:1 is a ipv4Compatible address"],
      ["an IPv4-compatible private address", "https://[::10.0.0.1]/hook", "::a00:1 is a ipv4Compatible address"],
      ["the metadata address through NAT64", "https://[64:ff9b::a9fe:a9fe]/hook", "is a linkLocal (NAT64 of 169.254.169.254) address"],
      ["a private address through 6to4", "https://[2002:a00:1::1]/hook", "2002:a00:1::1 is a 6to4 address"],
      ["a Teredo address", "https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook", "is a teredo address"],
      ["the unspecified address", "https://0.0.0.0/hook", "0.0.0.0 is a unspecified address"],
      ["a name resolving to a private address", "https://internal.corp.test/hook", "internal.corp.test resolves to 10.0.0.5, a private address"],
      ["a name resolving to the metadata address", "https://metadata.corp.test/hook", "metadata.corp.test resolves to 169.254.169.254, a linkLocal address"],
      ["a name resolving to one public and one private address", "https://half.corp.test/hook", "half.corp.test resolves to 192.168.1.20, a private address"],
      ["localhost", "https://localhost:8443/hook", "localhost resolves to 127.0.0.1, a loopback address"],
    ] as const
  ).map(([what, sink, reason]) =>
    contractCase({
      name: `${what} (${sink}): INVALID_ARGUMENT on subscription.sink, must reach a public address`,
      method: SubscriptionsService.method.createSubscription,
      request: () => ({ parent: prodWorld.org, subscription: { sink } }),
      headers: () => prodWorld.auth("editor"),
      error: {
        code: Code.InvalidArgument,
        message: new RegExp(`^Invalid argument: subscription\\.sink: must reach a public address: .*${reason.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`),
        details: [sinkViolation(expect.stringContaining(reason))],
      },
    }),
  ),
  contractCase({
    name: "plain http, even to a loopback host: INVALID_ARGUMENT, http is for development only",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: prodWorld.org, subscription: { sink: "http://127.0.0.1:8080/hook" } }),
    headers: () => prodWorld.auth("editor"),
    error: { code: Code.InvalidArgument, details: [sinkViolation("must be an https URL: plain http is allowed only in development")] },
  }),
  contractCase({
    name: "a name that does not resolve: INVALID_ARGUMENT on subscription.sink",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: prodWorld.org, subscription: { sink: "https://nowhere.test/hook" } }),
    headers: () => prodWorld.auth("editor"),
    error: { code: Code.InvalidArgument, details: [sinkViolation("host nowhere.test does not resolve (ENOTFOUND)")] },
  }),
  contractCase({
    name: "a name resolving to a public address is accepted",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: prodWorld.org, subscription: { sink: `https://hooks.public.test/${unique("prod")}` } }),
    headers: () => prodWorld.auth("editor"),
    response: (r) => {
      expect(r.uid.startsWith(prodWorld.org + "/")).toBe(true);
      expect(r.sink).toMatch(/^https:\/\/hooks\.public\.test\/prod-\d+$/);
    },
  }),
  contractCase({
    name: "a name resolving to public IPv6 and IPv4 addresses is accepted",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: prodWorld.team, subscription: { sink: `https://dual.public.test:8443/${unique("prod")}` } }),
    headers: () => prodWorld.auth("editor"),
    response: (r) => expect(r.uid.startsWith(prodWorld.team + "/")).toBe(true),
  }),
  contractCase({
    name: "a public address literal is accepted",
    method: SubscriptionsService.method.createSubscription,
    request: () => ({ parent: prodWorld.other, subscription: { sink: `https://93.184.215.14/${unique("prod")}` } }),
    headers: () => prodWorld.auth("editor"),
    response: (r) => expect(r.sink).toMatch(/^https:\/\/93\.184\.215\.14\/prod-\d+$/),
  }),
]);
