// Uid helpers and the UIDP filter: validation, hierarchy helpers, the SQL each criterion renders to, the
// in-memory matcher, and the canonical form used in page tokens.
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { ConnectError } from "@connectrpc/connect";
import { type SQL } from "drizzle-orm";
import { PgDialect, pgTable, text } from "drizzle-orm/pg-core";
import { describe, expect, it } from "vitest";
import { UIDPFilterSchema } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import {
  ancestorsOf,
  escapeLike,
  isRootUid,
  isValidUid,
  isWithin,
  matchesUidp,
  parentOf,
  scopesOverChildren,
  uidpCanonical,
  uidpPredicate,
  UIDP_MAX_IDS,
} from "../../src/kernel/uidp.js";
import { violationsOf } from "../support/violations.js";

const ROOT = "0123456789abcdef0123456789abcdef01234567";
const CHILD = `${ROOT}/0011223344556677`;
const GRANDCHILD = `${CHILD}/8899aabbccddeeff`;

const filter = (init: MessageInitShape<typeof UIDPFilterSchema>) => create(UIDPFilterSchema, init);
const dialect = new PgDialect();
const items = pgTable("items", { uid: text("uid").primaryKey(), parent: text("parent") });
const render = (s: SQL | undefined) => (s ? dialect.sqlToQuery(s) : undefined);


describe("isValidUid", () => {
  it.each([
    [ROOT, true],
    [CHILD, true],
    [GRANDCHILD, true],
    [`${ROOT}/my-repo_1.x`, true],
    ["viewer", true],
    ["", false],
    ["/", false],
    [`${ROOT}/`, false],
    [`/${ROOT}`, false],
    [`${ROOT}//x`, false],
    ["ABC", false],
    ["a b", false],
    ["a%b", false],
    ["a\\b", false],
    ["a/b\n", false],
    ["é", false],
    ["a".repeat(1024), true],
    ["a".repeat(1025), false],
  ])("%j -> %s", (uid, ok) => expect(isValidUid(uid)).toBe(ok));
});

describe("hierarchy helpers", () => {
  it.each([
    [ROOT, undefined, []],
    [CHILD, ROOT, [ROOT]],
    [GRANDCHILD, CHILD, [ROOT, CHILD]],
    ["a/b/c/d", "a/b/c", ["a", "a/b", "a/b/c"]],
  ])("parentOf / ancestorsOf(%s) (outermost first)", (uid, parent, ancestors) => {
    expect(parentOf(uid)).toBe(parent);
    expect(ancestorsOf(uid)).toEqual(ancestors);
    expect(isRootUid(uid)).toBe(parent === undefined);
  });

  it.each([
    [CHILD, ROOT, true],
    [GRANDCHILD, ROOT, true],
    [ROOT, ROOT, true],
    [ROOT, CHILD, false],
    [`${ROOT}x/1`, ROOT, false],
    [`${ROOT}0`, ROOT, false],
  ])("isWithin(%s, %s) = %s", (uid, scope, within) => expect(isWithin(uid, scope)).toBe(within));

  it.each([
    ["the parent is a scope", CHILD, [CHILD], undefined],
    ["the parent lies beneath a scope", GRANDCHILD, ["f".repeat(40), ROOT], undefined],
    ["no scope holds the parent", CHILD, ["f".repeat(40), `${ROOT}/1111111111111111`], []],
    ["a scope lies beneath the parent", ROOT, [GRANDCHILD, "f".repeat(40), CHILD], [GRANDCHILD, CHILD]],
    ["a sibling sharing a prefix", CHILD, [`${CHILD}0`, `${CHILD}x/1`], []],
  ])("scopesOverChildren: %s", (_, parent, scopes, expected) => expect(scopesOverChildren(parent, scopes)).toEqual(expected));

  it("escapeLike escapes %, _ and the backslash", () => expect(escapeLike("a_b%c\\d")).toBe("a\\_b\\%c\\\\d"));
});

describe("uidpPredicate", () => {
  const cases: { name: string; filter: MessageInitShape<typeof UIDPFilterSchema> | undefined; parent?: boolean; sql: string | undefined; params: unknown[] }[] = [
    { name: "absent filter", filter: undefined, sql: undefined, params: [] },
    { name: "empty filter", filter: {}, sql: undefined, params: [] },
    { name: "descendants_of", filter: { descendantsOf: ROOT }, sql: `"items"."uid" LIKE $1 ESCAPE '\\'`, params: [`${ROOT}/%`] },
    { name: "descendants_of escapes _", filter: { descendantsOf: "a_b" }, sql: `"items"."uid" LIKE $1 ESCAPE '\\'`, params: ["a\\_b/%"] },
    {
      name: "children_of without a parent column",
      filter: { childrenOf: CHILD },
      sql: `("items"."uid" LIKE $1 ESCAPE '\\' AND "items"."uid" NOT LIKE $2 ESCAPE '\\')`,
      params: [`${CHILD}/%`, `${CHILD}/%/%`],
    },
    { name: "children_of with a parent column", filter: { childrenOf: CHILD }, parent: true, sql: `"items"."parent" = $1`, params: [CHILD] },
    { name: "ancestors_of", filter: { ancestorsOf: GRANDCHILD }, sql: `"items"."uid" IN ($1, $2)`, params: [ROOT, CHILD] },
    { name: "ancestors_of a root: nothing", filter: { ancestorsOf: ROOT }, sql: "false", params: [] },
    { name: "in_root", filter: { inRoot: true }, sql: `"items"."uid" NOT LIKE '%/%'`, params: [] },
    { name: "ids (de-duplicated)", filter: { ids: [CHILD, ROOT, CHILD] }, sql: `"items"."uid" IN ($1, $2)`, params: [CHILD, ROOT] },
    {
      name: "several criteria: AND",
      filter: { descendantsOf: ROOT, ids: [CHILD] },
      sql: `("items"."uid" LIKE $1 ESCAPE '\\' and "items"."uid" IN ($2))`,
      params: [`${ROOT}/%`, CHILD],
    },
  ];
  it.each(cases)("$name", (c) => {
    const q = render(uidpPredicate(c.filter ? filter(c.filter) : undefined, { uid: items.uid, ...(c.parent ? { parent: items.parent } : {}) }));
    expect(q?.sql).toBe(c.sql);
    expect(q?.params ?? []).toEqual(c.params);
  });

  const invalid: { filter: MessageInitShape<typeof UIDPFilterSchema>; fields: string[] }[] = [
    { filter: { descendantsOf: "Not Valid" }, fields: ["uidp.descendants_of"] },
    { filter: { childrenOf: "a//b" }, fields: ["uidp.children_of"] },
    { filter: { ancestorsOf: "a/" }, fields: ["uidp.ancestors_of"] },
    { filter: { ids: [ROOT, "x%"] }, fields: ["uidp.ids"] },
    { filter: { ids: Array.from({ length: UIDP_MAX_IDS + 1 }, (_, i) => `a${i}`) }, fields: ["uidp.ids"] },
    { filter: { descendantsOf: "A", childrenOf: "B" }, fields: ["uidp.descendants_of", "uidp.children_of"] },
  ];
  it.each(invalid)("invalid $fields -> INVALID_ARGUMENT", (c) => {
    const v = violationsOf(() => uidpPredicate(filter(c.filter), { uid: items.uid }));
    expect(v.map((x) => x.field)).toEqual(c.fields);
  });

  it("message names the field and the value", () => {
    const err = (() => {
      try {
        uidpPredicate(filter({ childrenOf: "BAD" }), { uid: items.uid });
      } catch (e) {
        return ConnectError.from(e);
      }
    })();
    expect(err?.rawMessage).toBe('Invalid argument: uidp.children_of: "BAD" is not a valid uid');
  });
});

describe("matchesUidp", () => {
  const uids = [ROOT, CHILD, GRANDCHILD, `${ROOT}/aa`, "viewer", "0123456789abcdef0123456789abcdef01234568/x"];
  it.each([
    [{ descendantsOf: ROOT }, [CHILD, GRANDCHILD, `${ROOT}/aa`]],
    [{ childrenOf: ROOT }, [CHILD, `${ROOT}/aa`]],
    [{ ancestorsOf: GRANDCHILD }, [ROOT, CHILD]],
    [{ inRoot: true }, [ROOT, "viewer"]],
    [{ ids: ["viewer", CHILD] }, [CHILD, "viewer"]],
    [{ descendantsOf: ROOT, childrenOf: CHILD }, [GRANDCHILD]],
    [{}, uids],
  ])("%j", (f, expected) => expect(uids.filter((u) => matchesUidp(filter(f), u))).toEqual(expected));
});

describe("uidpCanonical", () => {
  it("is the same for filters that mean the same", () => {
    expect(uidpCanonical(undefined)).toBe("");
    expect(uidpCanonical(filter({}))).toBe("");
    expect(uidpCanonical(filter({ ids: ["b", "a", "b"] }))).toBe(uidpCanonical(filter({ ids: ["a", "b"] })));
  });
  it("differs for filters that differ", () => {
    const forms = [
      filter({ descendantsOf: ROOT }),
      filter({ childrenOf: ROOT }),
      filter({ ancestorsOf: ROOT }),
      filter({ ids: [ROOT] }),
      filter({ inRoot: true }),
      filter({ inRoot: true, descendantsOf: ROOT }),
      filter({ descendantsOf: CHILD }),
    ].map(uidpCanonical);
    expect(new Set(forms).size).toBe(forms.length);
  });
});
