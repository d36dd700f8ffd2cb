// The compiled binary encoder (kernel/binary.ts) writes exactly protobuf-es's toBinary bytes, for every
// served response type and the edge cases of each kind it compiles, falls back to toBinary for what it does
// not compile, and throws where toBinary throws.
import { create, toBinary, type DescMessage, type Message } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { RepoSchema, type CatalogTier } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { ListTagsResponseSchema, TagSchema } from "../../gen/chainguard/platform/registry/v2/tags_pb.js";
import { ListRoleBindingsResponseSchema } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { AdvisorySchema, EventTypeFilter } from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { createBinaryEncoder } from "../../src/kernel/binary.js";
import { servedMethods } from "../../src/kernel/descriptors.js";
import { timestampOf } from "../../src/kernel/timestamp.js";

const encoder = createBinaryEncoder();
function same(desc: DescMessage, message: Message) {
  expect(encoder.compiles(desc), desc.typeName).toBe(true);
  expect(Buffer.from(encoder.encode(desc, message)).toString("hex"), desc.typeName).toBe(Buffer.from(toBinary(desc, message)).toString("hex"));
}

describe("the compiled binary encoder", () => {
  it("encodes every served method's empty response as toBinary does", () => {
    for (const m of servedMethods) {
      const message = create(m.output);
      expect(Buffer.from(encoder.encode(m.output, message)).toString("hex"), m.output.typeName).toBe(Buffer.from(toBinary(m.output, message)).toString("hex"));
    }
  });

  it("compiles the response types of the hot reads", () => {
    for (const desc of [ListTagsResponseSchema, RepoSchema, ListRoleBindingsResponseSchema, AdvisorySchema]) expect(encoder.compiles(desc), desc.typeName).toBe(true);
  });

  it("encodes a page of tags: timestamps before 1970 and of every precision, multi-byte strings, lists", () => {
    const instants = [0, -1500, 1_700_000_000_123, 253402300799000, -62135596800000];
    const tags = instants.map((ms, i) =>
      create(TagSchema, {
        uid: `a/b/${i}`,
        name: i === 1 ? "ünïcödé ✓ 𝄞" : `v${i}`,
        digest: i === 2 ? "" : "sha256:x",
        deprecated: i % 2 === 0,
        bundles: i % 3 ? [] : ["b", "", "ç".repeat(200)],
        createTime: timestampOf(new Date(ms)),
        updateTime: i === 3 ? undefined : { seconds: BigInt(i), nanos: i * 1001 },
      }),
    );
    same(ListTagsResponseSchema, create(ListTagsResponseSchema, { tags, nextPageToken: "t".repeat(300), totalCount: 12n, skipped: 3 }));
    // Explicit presence: a total of 0 is written, an absent one is not.
    same(ListTagsResponseSchema, create(ListTagsResponseSchema, { tags: [], totalCount: 0n }));
    same(ListTagsResponseSchema, create(ListTagsResponseSchema, { tags: [] }));
    // Large and 64-bit extreme values.
    same(ListTagsResponseSchema, create(ListTagsResponseSchema, { totalCount: (1n << 63n) - 1n, skipped: 0x7fffffff }));
    same(ListTagsResponseSchema, create(ListTagsResponseSchema, { totalCount: -(1n << 63n), skipped: -1 }));
  });

  it("encodes nested messages, enums (negative and unknown ones too) and packed enum lists", () => {
    same(RepoSchema, create(RepoSchema, { uid: "u", name: "n", catalogTier: 2, aliases: ["x"], syncConfig: { source: "s", uniqueTags: true, expirationTime: timestampOf(new Date(5)) } }));
    same(RepoSchema, create(RepoSchema, { uid: "u", catalogTier: 99 as CatalogTier }));
    same(RepoSchema, create(RepoSchema, { uid: "u", catalogTier: -3 as CatalogTier }));
    // Maps (string to string): entries in key order, empty keys and values written too.
    same(RepoSchema, create(RepoSchema, { uid: "u", customOverlay: { environment: { B: "2", A: "", "": "x", "10": "ten", "2": "two", ü: "✓" }, annotations: {} } } as never));
    const bindings = create(ListRoleBindingsResponseSchema, { items: [{ uid: "b", identity: { uid: "i" }, role: { uid: "r", capabilities: [1, 2, 300, 70000] } }] } as never);
    same(ListRoleBindingsResponseSchema, bindings);
  });

  it("encodes oneofs (every case, nested ones, an empty message) and bytes as toBinary does", () => {
    const at = timestampOf(new Date(1_700_000_000_000));
    const advisory = create(AdvisorySchema, {
      uid: "p:a",
      aliases: ["CVE-1", "GHSA-2"],
      events: [
        { uid: "p:a/0", createTime: at, type: { case: "detection", value: { type: { case: "scanv1", value: { scanner: "grype", component: "c", componentVersion: "1" } } } } },
        { uid: "p:a/1", type: { case: "detection", value: { type: { case: "manual", value: {} } } } },
        { uid: "p:a/2", type: { case: "fixed", value: { fixedVersion: "1.2" } }, findings: new Uint8Array([0, 1, 255]) },
        { uid: "p:a/3", type: { case: "falsePositiveDetermination", value: { type: 2, note: "ü" } } },
        { uid: "p:a/4", type: { case: undefined } },
      ],
      severities: [{ type: 1, score: "x" }],
    });
    expect(EventTypeFilter.FIXED).toBeGreaterThan(0);
    same(AdvisorySchema, advisory);
  });

  it("falls back to toBinary for unknown fields", () => {
    const withUnknown = create(TagSchema, { uid: "t" });
    (withUnknown as unknown as { $unknown: unknown[] }).$unknown = [{ no: 99, wireType: 0, data: new Uint8Array([1]) }];
    same(TagSchema, withUnknown);
  });

  it("reserves room in front (the gRPC envelope) without changing the bytes", () => {
    const tag = create(TagSchema, { uid: "t", name: "n" });
    const buf = encoder.encode(TagSchema, tag, 5);
    expect(Buffer.from(buf.subarray(5)).toString("hex")).toBe(Buffer.from(toBinary(TagSchema, tag)).toString("hex"));
  });

  it("answers as toBinary for values of the wrong type: the same bytes, or the same error", () => {
    const coerced = create(TagSchema, { uid: "t" });
    (coerced as unknown as { name: unknown }).name = 42; // toBinary writes it as the string "42"
    same(TagSchema, coerced);
    const outOfRange = create(ListTagsResponseSchema, {});
    (outOfRange as unknown as { skipped: number }).skipped = 2 ** 40;
    expect(() => toBinary(ListTagsResponseSchema, outOfRange)).toThrow(/int32/);
    expect(() => encoder.encode(ListTagsResponseSchema, outOfRange)).toThrow(/int32/);
  });
});
