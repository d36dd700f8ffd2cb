// The PATCH rules (specification, "Update rules for PATCH") on real generated messages: Repo (OUTPUT_ONLY
// uid and timestamps, a message field with OUTPUT_ONLY sub-fields), Group (an OUTPUT_ONLY map) and
// IdentityProvider (a oneof whose message has an IMMUTABLE field).
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { FieldMaskSchema, timestampFromMs } from "@bufbuild/protobuf/wkt";
import { ConnectError } from "@connectrpc/connect";
import { describe, expect, it } from "vitest";
import { GroupSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import {
  IdentityProvider_OIDC_CorrelationRule as Correlation,
  IdentityProviderSchema,
  type IdentityProvider,
} from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { CatalogTier, RepoSchema, type Repo } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { applyUpdate, impliedPaths, validateUpdateMask } from "../../src/kernel/field-mask.js";
import { violationsOf } from "../support/violations.js";


const mask = (...paths: string[]) => create(FieldMaskSchema, { paths });
// Plain object initialisers (not messages), so they can be spread.
type RepoInit = Exclude<MessageInitShape<typeof RepoSchema>, Repo>;
type IdpInit = Exclude<MessageInitShape<typeof IdentityProviderSchema>, IdentityProvider>;

const repoInit: RepoInit = {
  uid: "0123456789abcdef0123456789abcdef01234567/aaaa",
  name: "alpine",
  description: "old",
  catalogTier: CatalogTier.BASE,
  bundles: ["b1"],
  aliases: ["x"],
  syncConfig: { source: "src", uniqueTags: true, google: "g1", amazon: "a1" },
  createTime: timestampFromMs(1_700_000_000_000),
  updateTime: timestampFromMs(1_700_000_100_000),
};
const repo = () => create(RepoSchema, repoInit);
const repoPatch = (init: RepoInit) => create(RepoSchema, init);

describe("applyUpdate on Repo", () => {
  const cases: {
    name: string;
    patch: RepoInit;
    mask?: string[];
    expect: RepoInit;
    changed: string[];
  }[] = [
    { name: "named field changes, other patch fields ignored", patch: { description: "new", name: "other" }, mask: ["description"], expect: { description: "new" }, changed: ["description"] },
    { name: "named field absent from the patch is reset", patch: {}, mask: ["description"], expect: { description: "" }, changed: ["description"] },
    { name: "named repeated field replaced whole", patch: { bundles: ["b2", "b3"] }, mask: ["bundles"], expect: { bundles: ["b2", "b3"] }, changed: ["bundles"] },
    { name: "named repeated field cleared", patch: {}, mask: ["aliases"], expect: { aliases: [] }, changed: ["aliases"] },
    { name: "JSON name accepted, proto name reported", patch: { catalogTier: CatalogTier.FIPS }, mask: ["catalogTier"], expect: { catalogTier: CatalogTier.FIPS }, changed: ["catalog_tier"] },
    { name: "same value: no change reported", patch: { description: "old" }, mask: ["description"], expect: {}, changed: [] },
    { name: "duplicate paths applied once", patch: { description: "new" }, mask: ["description", "description"], expect: { description: "new" }, changed: ["description"] },
    { name: "no mask: present fields only", patch: { description: "new" }, expect: { description: "new" }, changed: ["description"] },
    { name: "no mask: default scalars are absent", patch: { name: "", description: "new", catalogTier: CatalogTier.UNSPECIFIED }, expect: { description: "new" }, changed: ["description"] },
    { name: "empty mask = no mask", patch: { aliases: ["y"] }, mask: [], expect: { aliases: ["y"] }, changed: ["aliases"] },
    {
      name: "no mask: output-only fields in the patch are ignored",
      patch: { uid: "other/uid", createTime: timestampFromMs(0), updateTime: timestampFromMs(0), description: "d" },
      expect: { description: "d" },
      changed: ["description"],
    },
    { name: "output-only field named: ignored", patch: { uid: "x/y", createTime: timestampFromMs(5) }, mask: ["uid", "create_time", "update_time"], expect: {}, changed: [] },
    {
      name: "no mask: nested present fields only",
      patch: { syncConfig: { google: "g2" } },
      expect: { syncConfig: { source: "src", uniqueTags: true, google: "g2", amazon: "a1" } },
      changed: ["sync_config.google"],
    },
    {
      name: "nested path changes one sub-field",
      patch: { syncConfig: { google: "g2", source: "ignored" } },
      mask: ["sync_config.google"],
      expect: { syncConfig: { source: "src", uniqueTags: true, google: "g2", amazon: "a1" } },
      changed: ["sync_config.google"],
    },
    {
      name: "nested path absent from the patch resets the sub-field",
      patch: {},
      mask: ["sync_config.amazon"],
      expect: { syncConfig: { source: "src", uniqueTags: true, google: "g1", amazon: "" } },
      changed: ["sync_config.amazon"],
    },
    { name: "nested output-only path ignored", patch: { syncConfig: { uniqueTags: false, gracePeriod: true } }, mask: ["sync_config.unique_tags", "sync_config.grace_period"], expect: {}, changed: [] },
    {
      name: "message field named: replaced, output-only sub-fields kept",
      patch: { syncConfig: { source: "s2", uniqueTags: false, apkoOverlay: "ignored" } },
      mask: ["sync_config"],
      expect: { syncConfig: { source: "s2", uniqueTags: true } },
      changed: ["sync_config"],
    },
    { name: "message field named, absent from the patch: cleared", patch: {}, mask: ["sync_config"], expect: { syncConfig: undefined }, changed: ["sync_config"] },
    {
      name: "wildcard: full replacement of writable fields",
      patch: { name: "n2", uid: "ignored", bundles: ["z"] },
      mask: ["*"],
      expect: { name: "n2", description: "", catalogTier: CatalogTier.UNSPECIFIED, bundles: ["z"], aliases: [], syncConfig: undefined },
      changed: ["name", "description", "catalog_tier", "bundles", "aliases", "sync_config"],
    },
    {
      name: "wildcard keeps output-only sub-fields of a replaced message",
      patch: { ...repoInit, syncConfig: { source: "s3" }, uid: "x", createTime: timestampFromMs(1) },
      mask: ["*"],
      expect: { syncConfig: { source: "s3", uniqueTags: true } },
      changed: ["sync_config"],
    },
    { name: "wildcard with the same resource: no change", patch: repoInit, mask: ["*"], expect: {}, changed: [] },
  ];

  it.each(cases)("$name", (c) => {
    const current = repo();
    const before = repo();
    const { message, changed } = applyUpdate(RepoSchema, current, repoPatch(c.patch), c.mask ? mask(...c.mask) : undefined);
    expect(message).toEqual(create(RepoSchema, { ...repoInit, ...c.expect }));
    expect(changed).toEqual(c.changed);
    expect(current).toEqual(before); // inputs untouched
  });

  it("sets a sub-field into an absent message only when the patch has it", () => {
    const current = create(RepoSchema, { name: "r" });
    const none = applyUpdate(RepoSchema, current, repoPatch({}), mask("sync_config.google"));
    expect(none.message.syncConfig).toBeUndefined();
    expect(none.changed).toEqual([]);
    const some = applyUpdate(RepoSchema, current, repoPatch({ syncConfig: { google: "g" } }), mask("sync_config.google"));
    expect(some.message.syncConfig).toEqual(create(RepoSchema, { syncConfig: { google: "g" } }).syncConfig);
    expect(some.changed).toEqual(["sync_config.google"]);
  });

  it("no mask: an empty but present message field is set", () => {
    const current = create(RepoSchema, { name: "r" });
    const { message, changed } = applyUpdate(RepoSchema, current, repoPatch({ customOverlay: {} }), undefined);
    expect(message.customOverlay).toBeDefined();
    expect(changed).toEqual(["custom_overlay"]);
  });

  it("no mask: a message whose only set fields are output-only changes nothing", () => {
    const current = create(RepoSchema, { name: "r", syncConfig: { source: "src", google: "g" } });
    const { message, changed } = applyUpdate(RepoSchema, current, repoPatch({ syncConfig: { gracePeriod: true, uniqueTags: true } }), undefined);
    expect(changed).toEqual([]);
    expect(message.syncConfig).toEqual(current.syncConfig);
  });

  it("the result does not alias the patch", () => {
    const patch = repoPatch({ bundles: ["p"], syncConfig: { source: "s" } });
    const { message } = applyUpdate(RepoSchema, repo(), patch, mask("bundles", "sync_config"));
    patch.bundles.push("mutated");
    patch.syncConfig!.source = "mutated";
    expect(message.bundles).toEqual(["p"]);
    expect(message.syncConfig?.source).toBe("s");
  });

  const errors: { mask: string[]; description: RegExp }[] = [
    { mask: ["nope"], description: /unknown field path "nope"/ },
    { mask: ["description", "sync_config.nope"], description: /unknown field path "sync_config.nope"/ },
    { mask: ["description.length"], description: /unknown field path "description.length": "description" is not a message field/ },
    { mask: ["bundles.x"], description: /"bundles" is not a message field/ },
    { mask: ["create_time.seconds"], description: /"create_time" is not a message field/ },
    { mask: [""], description: /unknown field path ""/ },
    { mask: ["sync_config."], description: /unknown field path "sync_config\."/ },
    { mask: ["*", "name"], description: /"\*" must be the only path/ },
    { mask: ["sync_config.*"], description: /unknown field path/ },
  ];
  it.each(errors)("mask $mask is INVALID_ARGUMENT on update_mask", (c) => {
    const v = violationsOf(() => applyUpdate(RepoSchema, repo(), repoPatch({}), mask(...c.mask)));
    expect(v).toHaveLength(1);
    expect(v[0]!.field).toBe("update_mask");
    expect(v[0]!.description).toMatch(c.description);
    expect(() => validateUpdateMask(RepoSchema, mask(...c.mask))).toThrow(ConnectError);
  });

  it("the message names the field", () => {
    const err = (() => {
      try {
        applyUpdate(RepoSchema, repo(), repoPatch({}), mask("nope"));
      } catch (e) {
        return ConnectError.from(e);
      }
    })();
    expect(err?.rawMessage).toBe('Invalid argument: update_mask: unknown field path "nope"');
  });
});

describe("applyUpdate on Group", () => {
  const current = () =>
    create(GroupSchema, { uid: "0123456789abcdef0123456789abcdef01234567", name: "g", verified: false, resourceLimits: { repos: 5 } });

  it("an output-only map is never changed", () => {
    const patch = create(GroupSchema, { resourceLimits: { repos: 500 }, verified: true });
    for (const m of [undefined, mask("resource_limits", "verified"), mask("*")]) {
      const { message, changed } = applyUpdate(GroupSchema, current(), patch, m);
      expect(message.resourceLimits).toEqual({ repos: 5 });
      expect(message.verified).toBe(true);
      expect(changed).toContain("verified");
      expect(changed).not.toContain("resource_limits");
    }
  });

  it("a boolean can be cleared only through the mask", () => {
    const on = create(GroupSchema, { ...current(), verified: true });
    expect(applyUpdate(GroupSchema, on, create(GroupSchema, {}), undefined).message.verified).toBe(true);
    expect(applyUpdate(GroupSchema, on, create(GroupSchema, {}), mask("verified")).message.verified).toBe(false);
  });
});

describe("applyUpdate on IdentityProvider (oneof, immutable)", () => {
  const oidc = { issuer: "https://issuer", clientId: "c1", correlationRule: Correlation.SUB_EQUALS_EXTERNAL_ID };
  const current = () =>
    create(IdentityProviderSchema, {
      uid: "0123456789abcdef0123456789abcdef01234567/0011223344556677",
      name: "idp",
      defaultRole: "viewer",
      configuration: { case: "oidc", value: oidc },
      scim: { enabled: true, endpointUrl: "https://scim" },
    });
  const patch = (o: Partial<typeof oidc> | undefined, rest: IdpInit = {}) =>
    create(IdentityProviderSchema, { ...rest, ...(o ? { configuration: { case: "oidc" as const, value: o } } : {}) });
  const oidcOf = (m: ReturnType<typeof current>) => (m.configuration.case === "oidc" ? m.configuration.value : undefined);

  const immutableErrors: { name: string; mask?: string[]; patch: ReturnType<typeof patch> }[] = [
    { name: "named immutable field changed", mask: ["oidc.correlation_rule"], patch: patch({ correlationRule: Correlation.OID_EQUALS_EXTERNAL_ID }) },
    { name: "named immutable field reset", mask: ["oidc.correlation_rule"], patch: patch(undefined) },
    { name: "immutable field changed inside a replaced message", mask: ["oidc"], patch: patch({ ...oidc, correlationRule: Correlation.OID_EQUALS_EXTERNAL_ID }) },
    { name: "immutable field changed under *", mask: ["*"], patch: patch({ ...oidc, correlationRule: Correlation.OID_EQUALS_EXTERNAL_ID }, { name: "idp" }) },
    { name: "immutable field changed without a mask", patch: patch({ correlationRule: Correlation.OID_EQUALS_EXTERNAL_ID }) },
  ];
  it.each(immutableErrors)("$name: INVALID_ARGUMENT on update_mask", (c) => {
    const v = violationsOf(() => applyUpdate(IdentityProviderSchema, current(), c.patch, c.mask ? mask(...c.mask) : undefined));
    expect(v).toEqual([{ field: "update_mask", description: 'field "oidc.correlation_rule" is immutable and cannot be changed' }]);
  });

  it("an immutable field named with its current value is not an error", () => {
    const { message, changed } = applyUpdate(IdentityProviderSchema, current(), patch(oidc), mask("oidc.correlation_rule"));
    expect(message).toEqual(current());
    expect(changed).toEqual([]);
  });

  it("replacing the message keeps an immutable field the patch leaves unset", () => {
    const { message, changed } = applyUpdate(IdentityProviderSchema, current(), patch({ issuer: "https://other", clientId: "c2" }), mask("oidc"));
    expect(oidcOf(message)).toEqual({ ...oidcOf(current()), issuer: "https://other", clientId: "c2" });
    expect(changed).toEqual(["oidc"]);
  });

  it("* keeps output-only and unset immutable fields, resets the rest", () => {
    const { message, changed } = applyUpdate(IdentityProviderSchema, current(), patch({ issuer: "https://i2" }, { name: "n2", scim: {} }), mask("*"));
    expect(message.name).toBe("n2");
    expect(message.defaultRole).toBe("");
    expect(message.scim).toEqual(current().scim);
    expect(oidcOf(message)).toEqual({ ...oidcOf(current()), issuer: "https://i2", clientId: "" });
    expect(changed).toEqual(["name", "default_role", "oidc"]);
  });

  it("sets a oneof member into a resource that has none", () => {
    const bare = create(IdentityProviderSchema, { name: "idp" });
    const { message, changed } = applyUpdate(IdentityProviderSchema, bare, patch({ issuer: "https://i" }), undefined);
    expect(message.configuration.case).toBe("oidc");
    expect(oidcOf(message)?.issuer).toBe("https://i");
    expect(changed).toEqual(["oidc.issuer"]);
  });

  it("clears a oneof member named in the mask and absent from the patch", () => {
    const { message, changed } = applyUpdate(IdentityProviderSchema, current(), patch(undefined), mask("oidc"));
    expect(message.configuration.case).toBeUndefined();
    expect(changed).toEqual(["oidc"]);
  });
});

describe("impliedPaths", () => {
  it("lists present fields, following messages, skipping output-only ones", () => {
    expect(impliedPaths(RepoSchema, repo())).toEqual(["name", "description", "catalog_tier", "bundles", "aliases", "sync_config.source", "sync_config.google", "sync_config.amazon"]);
    expect(impliedPaths(RepoSchema, create(RepoSchema))).toEqual([]);
  });
});
