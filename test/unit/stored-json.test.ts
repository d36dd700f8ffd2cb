// What the database cannot hold, found before a query (kernel/stored-json.ts): NUL characters and lone
// surrogates in strings and member names, and nesting deeper than the limit; without recursion.
import { describe, expect, it } from "vitest";
import { unstorableJson, unstorableText } from "../../src/kernel/stored-json.js";

describe("unstorableText", () => {
  it.each([
    ["plain", undefined],
    ["zoë 😀 \u{1F600}", undefined],
    ["a\u0000b", "a NUL character (U+0000)"],
    ["\ud800", "a lone surrogate (not a Unicode character)"],
    ["x\udc00", "a lone surrogate (not a Unicode character)"],
    ["\udc00\ud800", "a lone surrogate (not a Unicode character)"],
  ])("%j", (text, want) => {
    expect(unstorableText(text)).toBe(want);
  });
});

describe("unstorableJson", () => {
  const nested = (depth: number): unknown => {
    let v: unknown = 1;
    for (let i = 0; i < depth; i++) v = i % 2 ? { k: v } : [v];
    return v;
  };
  it.each([
    ["a SCIM user", { userName: "a", name: { givenName: "Zoë" }, emails: [{ value: "a@b", primary: true }] }, undefined],
    ["a NUL in a nested value", { a: [{ b: "x\u0000" }] }, "a string holds a NUL character (U+0000)"],
    ["a lone surrogate in a member name", { a: { "\ud800": 1 } }, "a member name holds a lone surrogate (not a Unicode character)"],
    ["100 levels", nested(100), undefined],
    ["101 levels", nested(101), "it is nested more than 100 levels deep"],
    ["5,000 levels", nested(5000), "it is nested more than 100 levels deep"],
    ["scalars", null, undefined],
  ])("%s", (_what, value, want) => {
    expect(unstorableJson(value)).toBe(want);
  });
});
