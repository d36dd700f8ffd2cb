// The pure half of the list kernel: page size, skip, order_by (names, aliases, errors), page tokens (round
// trip, tampering, query binding, expiry with an injected clock, scope changes) and canonical filters.
import { createHash, createHmac } from "node:crypto";
import { create } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { ListReposRequestSchema, RepoSchema } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { UIDPFilterSchema } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import {
  DEFAULT_PAGE_SIZE,
  MAX_PAGE_SIZE,
  PAGE_TOKEN_LIFETIME_MS,
  canonicalJson,
  createListPlanner,
  decodePageToken,
  defineListSpec,
  digestOf,
  encodePageToken,
  orderText,
  parseListRequest,
  parseOrderBy,
  type ListContext,
  type ListRequestFields,
} from "../../src/kernel/list/index.js";
import { violationsOf } from "../support/violations.js";


const repos = defineListSpec({
  name: "registry.v2.ListRepos",
  message: RepoSchema,
  orderBy: ["create_time", "update_time", "name", "sync_config"],
  defaultOrder: "create_time desc",
});
const secret = new Uint8Array(32).fill(7);
const T0 = Date.UTC(2025, 0, 1);
const ctx = (over: Partial<ListContext> = {}): ListContext => ({ secret, now: () => T0, filters: { name: "alpine" }, ...over });
const parse = (req: ListRequestFields, over: Partial<ListContext> = {}) => parseListRequest(req, repos, ctx(over));

describe("page_size", () => {
  it.each([
    [undefined, DEFAULT_PAGE_SIZE],
    [0, 50],
    [1, 1],
    [50, 50],
    [199, 199],
    [200, 200],
    [201, MAX_PAGE_SIZE],
    [2 ** 31 - 1, 200],
  ])("%s -> %s", (size, limit) => expect(parse({ pageSize: size }).limit).toBe(limit));

  it.each([-1, -50, -(2 ** 31)])("%s -> INVALID_ARGUMENT on page_size", (size) => {
    expect(violationsOf(() => parse({ pageSize: size }))).toEqual([{ field: "page_size", description: "must not be negative" }]);
  });
});

describe("skip", () => {
  it.each([
    [undefined, 0],
    [0, 0],
    [7, 7],
    [100000, 100000],
  ])("%s -> %s", (skip, expected) => expect(parse({ skip }).skip).toBe(expected));

  it("negative -> INVALID_ARGUMENT on skip", () => {
    expect(violationsOf(() => parse({ skip: -1 }))).toEqual([{ field: "skip", description: "must not be negative" }]);
  });
});

describe("order_by", () => {
  const asc = (key: string) => ({ key, desc: false });
  const desc = (key: string) => ({ key, desc: true });
  it.each([
    ["", [desc("create_time"), desc("uid")]],
    ["   ", [desc("create_time"), desc("uid")]],
    ["name", [asc("name"), asc("uid")]],
    ["name desc", [desc("name"), desc("uid")]],
    ["name DESC", [desc("name"), desc("uid")]],
    ["  name   Desc  ", [desc("name"), desc("uid")]],
    ["name asc", [asc("name"), asc("uid")]],
    ["name ASC", [asc("name"), asc("uid")]],
    ["created_at", [asc("create_time"), asc("uid")]],
    ["created_at desc", [desc("create_time"), desc("uid")]],
    ["createTime", [asc("create_time"), asc("uid")]],
    ["create_time desc", [desc("create_time"), desc("uid")]],
    ["updated_at", [asc("update_time"), asc("uid")]],
    ["updateTime desc", [desc("update_time"), desc("uid")]],
    ["uid", [asc("uid")]],
    ["uid desc", [desc("uid")]],
    ["name, create_time desc", [asc("name"), desc("create_time"), desc("uid")]],
    ["name desc,uid asc", [desc("name"), asc("uid")]],
    ["sync_config", [asc("sync_config"), asc("uid")]], // its JSON name is customised to "sync_config"
  ])("%j", (text, terms) => expect(parseOrderBy(text, repos)).toEqual(terms));

  const allowed = 'allowed fields: create_time, name, sync_config, uid, update_time, each optionally followed by " desc"';
  it.each([
    ["foo", `unknown field "foo"; ${allowed}`],
    ["NAME", `unknown field "NAME"; ${allowed}`],
    ["description", `unknown field "description"; ${allowed}`],
    ["syncConfig", `unknown field "syncConfig"; ${allowed}`],
    ["name sideways", 'unknown direction "sideways" (use asc or desc)'],
    ["name desc extra", `expected "<field>" or "<field> desc", got "name desc extra"; ${allowed}`],
    ["-name", `expected "<field>" or "<field> desc", got "-name"; ${allowed}`],
    ["name,", `expected "<field>" or "<field> desc", got ""; ${allowed}`],
    [",", `expected "<field>" or "<field> desc", got ""; ${allowed}`],
    ["name, name desc", 'field "name" is named twice'],
    ["created_at, create_time", 'field "create_time" is named twice'],
    ["uid, name", "uid is unique, so no field may follow it"],
    ["name, create_time, update_time, uid", `at most 3 sort fields; ${allowed}`],
  ])("%j -> INVALID_ARGUMENT on order_by", (text, description) => {
    expect(violationsOf(() => parse({ orderBy: text }))).toEqual([{ field: "order_by", description }]);
  });

  it("orderText is canonical across spellings", () => {
    expect(orderText(parseOrderBy("created_at DESC", repos))).toBe(orderText(parseOrderBy("createTime desc", repos)));
    expect(orderText(parseOrderBy("name", repos))).toBe("name asc,uid asc");
  });

  it("defineListSpec defaults to uid and rejects bad specs", () => {
    expect(defineListSpec({ name: "x", orderBy: [] }).defaultOrder).toEqual([asc("uid")]);
    expect(defineListSpec({ name: "x", orderBy: ["name"], defaultOrder: " " }).defaultOrder).toEqual([asc("uid")]);
    expect(() => defineListSpec({ name: "x", orderBy: ["Bad"] })).toThrow(/not a proto field name/);
    expect(() => defineListSpec({ name: "x", orderBy: ["name"], defaultOrder: "nope" })).toThrow(ConnectError);
    expect(() => defineListSpec({ name: "", orderBy: [] })).toThrow(/name/);
  });
});

describe("plan", () => {
  it("a first page needs a count and has no cursor", () => {
    expect(parse({ pageSize: 10, orderBy: "name desc", skip: 3 })).toMatchObject({
      list: "registry.v2.ListRepos",
      limit: 10,
      order: [{ key: "name", desc: true }, { key: "uid", desc: true }],
      skip: 3,
      cursor: undefined,
      total: undefined,
      restarted: false,
    });
  });
});

describe("page token", () => {
  const keys = ["2025-01-01 00:00:00.123456+00", "0123456789abcdef0123456789abcdef01234567/aa"];
  const firstToken = (over: Partial<ListContext> = {}, req: ListRequestFields = {}) =>
    parse({ orderBy: "create_time", ...req }, over).tokens.mint(keys, 1234n);

  it("round trip: the next page continues after the keys, carrying the total", () => {
    const token = firstToken();
    expect(token).toMatch(/^[A-Za-z0-9_-]+$/);
    const plan = parse({ orderBy: "create_time", pageToken: token });
    expect(plan.cursor).toEqual(keys);
    expect(plan.total).toBe(1234n);
    expect(plan.restarted).toBe(false);
  });

  it("keeps nulls and odd text exactly", () => {
    const odd = [null, 'quote " and \\ and ünïcode and \u0000'];
    const token = parse({ orderBy: "name" }).tokens.mint(odd, 0n);
    expect(parse({ orderBy: "name", pageToken: token }).cursor).toEqual(odd);
  });

  it("page_size and skip may change between pages; order_by may be respelled", () => {
    const token = firstToken({}, { orderBy: "create_time", pageSize: 10 });
    const plan = parse({ orderBy: "createTime ASC", pageToken: token, pageSize: 200, skip: 5 });
    expect(plan).toMatchObject({ limit: 200, skip: 5, cursor: keys, total: 1234n });
  });

  it("filters in a different but equivalent form are the same query", () => {
    const uidp = (ids: string[]) => create(UIDPFilterSchema, { ids });
    const token = firstToken({ filters: { name: "alpine", uidp: uidp(["b", "a"]) } });
    const plan = parse({ orderBy: "create_time", pageToken: token }, { filters: { uidp: uidp(["a", "b", "a"]), name: "alpine", absent: undefined } });
    expect(plan.cursor).toEqual(keys);
  });

  it("the request message itself can be the filters: its paging fields are not bound", () => {
    const req = (over: { pageSize?: number; skip?: number; pageToken?: string; name?: string }) =>
      create(ListReposRequestSchema, { name: "alpine", uidp: { childrenOf: "g" }, orderBy: "name", ...over });
    const first = req({ pageSize: 5 });
    const token = parseListRequest(first, repos, ctx({ filters: first })).tokens.mint(["n", "u"], 9n);
    const second = req({ pageSize: 50, skip: 3, pageToken: token });
    expect(parseListRequest(second, repos, ctx({ filters: second })).cursor).toEqual(["n", "u"]);
    const other = req({ name: "wolfi", pageToken: token });
    expect(violationsOf(() => parseListRequest(other, repos, ctx({ filters: other })))[0]?.field).toBe("page_token");
  });

  const mismatched: { name: string; req?: ListRequestFields; ctx?: Partial<ListContext>; spec?: string }[] = [
    { name: "other filters", ctx: { filters: { name: "wolfi" } } },
    { name: "no filters", ctx: { filters: undefined } },
    { name: "other uidp", ctx: { filters: { name: "alpine", uidp: create(UIDPFilterSchema, { childrenOf: "x" }) } } },
    { name: "other order", req: { orderBy: "create_time desc" } },
    { name: "other order field", req: { orderBy: "name" } },
    { name: "default order", req: { orderBy: "" } },
    { name: "another list", spec: "registry.v2.ListTags" },
  ];
  it.each(mismatched)("used with $name -> INVALID_ARGUMENT on page_token", (c) => {
    const token = firstToken();
    const spec = c.spec ? defineListSpec({ name: c.spec, orderBy: ["create_time", "name"] }) : repos;
    const v = violationsOf(() => parseListRequest({ orderBy: "create_time", ...c.req, pageToken: token }, spec, ctx(c.ctx)));
    expect(v).toEqual([
      { field: "page_token", description: "the page token belongs to a different query: filters and order_by must stay the same across pages" },
    ]);
  });

  const tamper = (token: string, i: number) => token.slice(0, i) + (token[i] === "A" ? "B" : "A") + token.slice(i + 1);
  const bad: [string, (t: string) => string][] = [
    ["first character changed", (t) => tamper(t, 0)],
    ["a payload character changed", (t) => tamper(t, 20)],
    ["last character changed", (t) => tamper(t, t.length - 1)],
    ["truncated", (t) => t.slice(0, -4)],
    ["extended", (t) => t + "AAAA"],
    ["not base64url", (t) => t.slice(0, 10) + "+/=" + t.slice(13)],
    ["garbage", () => "hello"],
    ["a single character", () => "A"],
    ["huge", () => "A".repeat(10_000)],
    ["spaces", () => "   "],
    ["JSON", () => '{"q":"x"}'],
  ];
  it.each(bad)("%s -> INVALID_ARGUMENT on page_token", (_, mutate) => {
    const v = violationsOf(() => parse({ orderBy: "create_time", pageToken: mutate(firstToken()) }));
    expect(v).toEqual([{ field: "page_token", description: "malformed or tampered page token; omit it to start from the first page" }]);
  });

  it("a token signed with another secret is rejected; a retired secret is still accepted", () => {
    const other = new Uint8Array(32).fill(9);
    const token = firstToken({ secret: other });
    expect(violationsOf(() => parse({ orderBy: "create_time", pageToken: token }))[0]?.field).toBe("page_token");
    expect(parse({ orderBy: "create_time", pageToken: token }, { previousSecrets: [other] }).cursor).toEqual(keys);
  });

  it("short secrets are a programming error", () => {
    expect(() => firstToken({ secret: new Uint8Array(8) })).toThrow(/at least 16 bytes/);
  });

  it.each([
    [0, false],
    [PAGE_TOKEN_LIFETIME_MS - 1, false],
    [PAGE_TOKEN_LIFETIME_MS, false],
    [PAGE_TOKEN_LIFETIME_MS + 1, true],
    [30 * PAGE_TOKEN_LIFETIME_MS, true],
  ])("a valid token %s ms old restarts: %s", (age, restarted) => {
    const token = firstToken();
    const plan = parse({ orderBy: "create_time", pageToken: token }, { now: () => T0 + age });
    expect(plan.restarted).toBe(restarted);
    expect(plan.cursor).toEqual(restarted ? undefined : keys);
    expect(plan.total).toBe(restarted ? undefined : 1234n);
  });

  it("an expired token restarts even if the filters changed (no error)", () => {
    const token = firstToken();
    const plan = parse({ orderBy: "create_time", pageToken: token }, { now: () => T0 + PAGE_TOKEN_LIFETIME_MS + 1, filters: { name: "other" } });
    expect(plan).toMatchObject({ restarted: true, cursor: undefined });
  });

  it("a token carried to another scope keeps its position but recounts", () => {
    const token = firstToken({ scope: ["org-a"] });
    expect(parse({ orderBy: "create_time", pageToken: token }, { scope: ["org-a"] }).total).toBe(1234n);
    const plan = parse({ orderBy: "create_time", pageToken: token }, { scope: ["org-b"] });
    expect(plan.cursor).toEqual(keys);
    expect(plan.total).toBeUndefined();
  });

  it("the issue time is the minting time", () => {
    let now = T0;
    const plan = parse({ orderBy: "create_time" }, { now: () => now });
    now = T0 + 5000;
    const payload = decodePageToken(plan.tokens.mint(keys, 1n), [secret]);
    expect(payload.issuedAt).toBe(T0 + 5000);
  });

  it("encode/decode are inverse", () => {
    const payload = { query: "q", scope: "s", issuedAt: T0, total: 2n ** 62n, keys: ["a", null] };
    expect(decodePageToken(encodePageToken(payload, secret), [secret])).toEqual(payload);
  });

  it("the wire form: version, payload JSON, then HMAC-SHA256 over the label and both (tokens minted before stay valid)", () => {
    const payload = { query: "q", scope: "s", issuedAt: T0, total: 7n, keys: ["a", null] };
    // Secrets shorter than, equal to and longer than SHA-256's 64-byte block (a longer key is hashed first).
    for (const key of [secret, new Uint8Array(64).fill(9), new Uint8Array(100).map((_, i) => i)]) {
      const raw = Buffer.from(encodePageToken(payload, key), "base64url");
      const body = raw.subarray(0, raw.length - 32);
      expect(body[0]).toBe(1);
      expect(JSON.parse(body.subarray(1).toString("utf8"))).toEqual({ q: "q", s: "s", t: T0, n: "7", k: ["a", null] });
      const expected = createHmac("sha256", key).update("apiserver.page-token\0").update(body).digest();
      expect(raw.subarray(raw.length - 32).equals(expected)).toBe(true);
    }
  });
});

describe("canonicalJson", () => {
  it("ignores key order and undefined members", () => {
    expect(canonicalJson({ b: 1, a: [1, "x"], c: undefined })).toBe(canonicalJson({ a: [1, "x"], b: 1 }));
  });
  it("distinguishes types and values", () => {
    const forms = [1, "1", 1n, true, null, [1], { a: 1 }, new Uint8Array([1]), new Date(0), [1, 2], [2, 1]].map(canonicalJson);
    expect(new Set(forms).size).toBe(forms.length);
  });
  it("sets are unordered", () => expect(canonicalJson(new Set(["b", "a"]))).toBe(canonicalJson(new Set(["a", "b"]))));
  it("rejects functions", () => expect(() => canonicalJson({ f: () => 1 })).toThrow(TypeError));
  it("digests are the first 16 bytes of SHA-256 over the parts' JSON, base64url", () => {
    const parts = ["registry.v2.ListTags", canonicalJson({ name: "ü" }), "uid asc"];
    const expected = createHash("sha256").update(JSON.stringify(parts)).digest().subarray(0, 16).toString("base64url");
    expect(digestOf(...parts)).toBe(expected);
  });
});

describe("list planner: the token is bound to the whole request", () => {
  const planner = createListPlanner({ secret, now: () => T0 });
  const scopes = ["0123456789abcdef0123456789abcdef01234567"];
  const request = (init: Parameters<typeof create<typeof ListReposRequestSchema>>[1]) => create(ListReposRequestSchema, init);
  const first = request({ name: "alpine", uidp: { childrenOf: scopes[0] }, pageSize: 10 });
  const token = planner.plan(first, repos, scopes).tokens.mint(["2025-01-01 00:00:00+00", `${scopes[0]}/aa`], 3n);

  it("continues with the same filters, whatever the paging fields say", () => {
    const next = request({ name: "alpine", uidp: { childrenOf: scopes[0] }, pageToken: token, pageSize: 50, skip: 2 });
    expect(planner.plan(next, repos, scopes).cursor).toHaveLength(2);
  });

  it.each([
    ["another name", { name: "nginx", uidp: { childrenOf: scopes[0] } }],
    ["another uidp filter", { name: "alpine", uidp: { descendantsOf: scopes[0] } }],
    ["a filter dropped", { uidp: { childrenOf: scopes[0] } }],
  ])("refuses the token with %s (no handler has to name its filters)", (_what, init) => {
    const violations = violationsOf(() => planner.plan(request({ ...init, pageToken: token }), repos, scopes));
    expect(violations.map((v) => v.field)).toEqual(["page_token"]);
  });
});
