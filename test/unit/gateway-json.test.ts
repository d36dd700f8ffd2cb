// The REST gateway's compiled JSON writer answers exactly what protobuf-es's toJson (alwaysEmitImplicit)
// answers, and throws where it throws.
import { create, toJson, type DescMessage, type Message } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { RepoSchema, type CatalogTier } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { ListTagsResponseSchema, TagSchema } from "../../gen/chainguard/platform/registry/v2/tags_pb.js";
import { ListRoleBindingsResponseSchema } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { RawTokenSchema, TokenPairSchema } from "../../gen/platform/oidc/v1/oidc.platform_pb.js";
import { createJsonWriter } from "../../src/gateway/json.js";
import { registry, servedMethods } from "../../src/kernel/descriptors.js";
import { timestampOf } from "../../src/kernel/timestamp.js";

const writeJson = createJsonWriter(registry);
/** The text the gateway wrote before: toJson's object, stringified. */
const expected = (desc: DescMessage, message: Message) => JSON.stringify(toJson(desc, message, { registry, alwaysEmitImplicit: true }));

describe("the compiled REST JSON writer", () => {
  it("writes every served method's empty response as toJson does", () => {
    for (const m of servedMethods) {
      const message = create(m.output);
      expect(writeJson(m.output, message), m.output.typeName).toBe(expected(m.output, message));
    }
  });

  it("writes a page of tags, with timestamps of every precision and before 1970, as toJson does", () => {
    const instants = [0, -1500, 1_700_000_000_123, 1_700_000_000_000, 253402300799000, -62135596800000];
    const tags = instants.map((ms, i) =>
      create(TagSchema, { uid: `a/b/${i}`, name: `v${i}`, digest: "sha256:x", deprecated: i % 2 === 0, bundles: i % 3 ? [] : ["b"], createTime: timestampOf(new Date(ms)), updateTime: { seconds: BigInt(i), nanos: i * 1001 } }),
    );
    const page = create(ListTagsResponseSchema, { tags, nextPageToken: "t", totalCount: 12n, skipped: 3 });
    expect((writeJson(ListTagsResponseSchema, page))).toBe((expected(ListTagsResponseSchema, page)));
    const unset = create(ListTagsResponseSchema, { tags: [] });
    expect((writeJson(ListTagsResponseSchema, unset))).toBe((expected(ListTagsResponseSchema, unset)));
  });

  it("writes timestamps across the whole range (years 1 to 9999, leap days, every precision) as toJson does", () => {
    const min = -62135596800; // 0001-01-01T00:00:00Z
    const max = 253402300799; // 9999-12-31T23:59:59Z
    const fixed = [min, max, 0, -1, 951782400, 951868800, 4107456000, 1709164800, -2203891200];
    let seed = 42;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    const seconds = [...fixed, ...Array.from({ length: 3000 }, () => Math.floor(min + random() * (max - min)))];
    const tags = seconds.map((s, i) => create(TagSchema, { uid: `t${i}`, createTime: { seconds: BigInt(s), nanos: [0, 1, 120_000_000, 123_456_000, 999_999_999][i % 5]! } }));
    const page = create(ListTagsResponseSchema, { tags });
    expect((writeJson(ListTagsResponseSchema, page))).toBe((expected(ListTagsResponseSchema, page)));
  });

  it("writes nested messages, enums and json_name fields as toJson does", () => {
    const repo = create(RepoSchema, { uid: "u", name: "n", catalogTier: 2, aliases: ["x"], syncConfig: { source: "s", uniqueTags: true, expirationTime: timestampOf(new Date(5)) } });
    expect((writeJson(RepoSchema, repo))).toBe((expected(RepoSchema, repo)));
    const bindings = create(ListRoleBindingsResponseSchema, { items: [{ uid: "b", identity: { uid: "i" }, role: { uid: "r", capabilities: [1, 2] } }] } as never);
    expect((writeJson(ListRoleBindingsResponseSchema, bindings))).toBe((expected(ListRoleBindingsResponseSchema, bindings)));
  });

  it("writes messages whose leading fields may be absent as toJson does (each subset of TokenPair's two)", () => {
    const raw = (token: string) => create(RawTokenSchema, { token });
    for (const pair of [{}, { token: raw("a") }, { refreshToken: raw("r") }, { token: raw("a"), refreshToken: raw("r") }]) {
      const message = create(TokenPairSchema, pair);
      expect(writeJson(TokenPairSchema, message)).toBe(expected(TokenPairSchema, message));
    }
  });

  it("writes an enum number the enum does not define as toJson does (the number)", () => {
    const repo = create(RepoSchema, { uid: "u", catalogTier: 99 as CatalogTier });
    expect(writeJson(RepoSchema, repo)).toBe(expected(RepoSchema, repo));
    expect((JSON.parse(writeJson(RepoSchema, repo)) as { catalogTier: unknown }).catalogTier).toBe(99);
  });

  it("escapes strings as JSON.stringify does: quotes, backslashes, controls, lone surrogates; keeps pairs and U+2028", () => {
    const odd = ['a"b', "a\\b", "tab\there", "nul\u0000", "\u001f", "lone \ud800 high", "lone \udc00 low", "pair \ud83d\ude00", "line \u2028 sep", "ünïcödé", "", "a".repeat(300) + '"'];
    const tags = odd.map((name, i) => create(TagSchema, { uid: `u${i}`, name, bundles: [name, "plain"] }));
    const page = create(ListTagsResponseSchema, { tags, nextPageToken: odd[0]! });
    expect(writeJson(ListTagsResponseSchema, page)).toBe(expected(ListTagsResponseSchema, page));
  });

  it("writes 64-bit integers as strings and 32-bit ones as numbers, at their limits", () => {
    const page = create(ListTagsResponseSchema, { tags: [], totalCount: 2n ** 63n - 1n, skipped: 2 ** 31 - 1 });
    expect(writeJson(ListTagsResponseSchema, page)).toBe(expected(ListTagsResponseSchema, page));
  });

  it("throws where toJson throws: a timestamp out of range", () => {
    const tag = create(TagSchema, { uid: "t", createTime: { seconds: 253402300800n, nanos: 0 } });
    expect(() => writeJson(TagSchema, tag)).toThrow(/9999-12-31/);
  });
});
