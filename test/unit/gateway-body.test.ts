import { Readable } from "node:stream";
import { describe, expect, it } from "vitest";
import { create, toJson, type JsonObject, type JsonValue } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import { applyBody, deriveUpdateMask } from "../../src/gateway/body.js";
import { BodyAbortedError, BodyTooLargeError, parseJsonBody, readBody } from "../../src/kernel/http-body.js";
import { registry } from "../../src/kernel/descriptors.js";
import { BadRequestSchema } from "../../gen/google/rpc/error_details_pb.js";
import { RepoSchema, UpdateRepoRequestSchema } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { GroupSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";

function violation(fn: () => unknown): { field: string; description: string; message: string } {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    const e = err as ConnectError;
    expect(e.code).toBe(Code.InvalidArgument);
    const v = e.findDetails(BadRequestSchema)[0]!.fieldViolations[0]!;
    return { field: v.field, description: v.description, message: e.rawMessage };
  }
  throw new Error("expected an INVALID_ARGUMENT");
}

const bodyField = UpdateRepoRequestSchema.field.repo!;

function applyRepo(json: JsonValue, mode: "*" | "field" = "field"): JsonValue {
  const msg = create(UpdateRepoRequestSchema);
  applyBody(UpdateRepoRequestSchema, msg, mode === "*" ? "*" : bodyField, json, registry);
  return toJson(UpdateRepoRequestSchema, msg, { registry });
}

describe("parseJsonBody", () => {
  it.each([
    ["", undefined],
    ["  \n", undefined],
    ["{}", {}],
    ['{"a":1}', { a: 1 }],
    ["null", null],
  ])("%j", (text, want) => {
    expect(parseJsonBody(Buffer.from(text))).toEqual(want);
  });

  it.each(["{", "{'a':1}", "[1,]", "nope"])("rejects malformed JSON %j on field body", (text) => {
    const v = violation(() => parseJsonBody(Buffer.from(text)));
    expect(v.field).toBe("body");
    expect(v.description).toMatch(/^malformed JSON/);
    expect(v.message).toMatch(/^Invalid argument: body: malformed JSON/);
  });

  it("rejects invalid UTF-8", () => {
    expect(violation(() => parseJsonBody(Uint8Array.of(0x7b, 0xff, 0x7d))).field).toBe("body");
  });
});

describe("applyBody", () => {
  it("reads one field from the body", () => {
    expect(applyRepo({ name: "n", catalog_tier: "CATALOG_TIER_FIPS", bundles: ["a"] })).toEqual({
      repo: { name: "n", catalogTier: "CATALOG_TIER_FIPS", bundles: ["a"] },
    });
  });

  it("reads the whole request from the body with *", () => {
    expect(applyRepo({ repo: { name: "n" }, updateMask: "name" }, "*")).toEqual({ repo: { name: "n" }, updateMask: "name" });
  });

  it.each<[string, JsonValue, "*" | "field", string, RegExp]>([
    ["wrong scalar type", { name: 1 }, "field", "repo.name", /expected string, got 1/],
    ["bad enum", { catalogTier: "NOPE" }, "field", "repo.catalog_tier", /invalid value "NOPE"/],
    ["bad enum beside an unknown key", { nope: 1, catalogTier: true }, "field", "repo.catalog_tier", /invalid value true/],
    ["bad list", { bundles: "x" }, "field", "repo.bundles", /expected Array/],
    ["bad list item", { bundles: ["a", 2] }, "field", "repo.bundles", /list item/],
    ["bad timestamp", { createTime: "yesterday" }, "field", "repo.create_time", /RFC 3339/],
    ["nested", { customOverlay: { contents: { packages: "x" } } }, "field", "repo.custom_overlay.contents.packages", /expected Array/],
    [
      "item of a repeated message",
      { customOverlay: { accounts: { users: [{ username: "a" }, { username: "b", uid: "x" }] } } },
      "field",
      "repo.custom_overlay.accounts.users[1].uid",
      /int32/,
    ],
    ["map value", { customOverlay: { environment: { A: 1 } } }, "field", "repo.custom_overlay.environment", /map entry "A"/],
    ["not an object", [1], "field", "repo", /invalid value Array\(1\)/],
    ["whole body not an object", [1], "*", "body", /invalid value Array\(1\)/],
    ["whole body nested", { repo: { name: true } }, "*", "repo.name", /expected string/],
    ["whole body nested, by JSON names", { repo: { catalogTier: 1.5 } }, "*", "repo.catalog_tier", /1.5/],
  ])("%s -> %s", (_, json, mode, field, description) => {
    const v = violation(() => applyRepo(json, mode));
    expect(v.field).toBe(field);
    expect(v.description).toMatch(description);
    expect(v.message).toBe(`Invalid argument: ${field}: ${v.description}`);
  });
});

describe("applyBody: keys naming no field are ignored", () => {
  it.each<[string, JsonValue, "*" | "field", JsonValue]>([
    ["at the root of the body field", { nope: 1, name: "n" }, "field", { repo: { name: "n" } }],
    ["in a nested message", { customOverlay: { nope: {}, contents: { packages: ["p"], nope: [] } } }, "field", { repo: { customOverlay: { contents: { packages: ["p"] } } } }],
    [
      "in the items of a repeated message",
      { customOverlay: { accounts: { users: [{ username: "a", nope: 1 }, { username: "b" }] } } },
      "field",
      { repo: { customOverlay: { accounts: { users: [{ username: "a" }, { username: "b" }] } } } },
    ],
    ["at the root of a whole-request body", { repo: { name: "n" }, x: 1 }, "*", { repo: { name: "n" } }],
    ["a JSON name that is not the field's (sync_config has json_name sync_config)", { syncConfig: { a: 1 }, name: "n" }, "field", { repo: { name: "n" } }],
  ])("%s", (_, json, mode, want) => {
    expect(applyRepo(json, mode)).toEqual(want);
  });
});

describe("deriveUpdateMask", () => {
  it.each<[string, JsonObject, string[], string[]]>([
    ["top-level keys, proto names", { name: "n", catalogTier: "CATALOG_TIER_AI", description: "" }, [], ["name", "catalog_tier", "description"]],
    ["nested messages give dotted paths", { customOverlay: { contents: { packages: [] }, accounts: { runAs: "x" } } }, [], ["custom_overlay.contents.packages", "custom_overlay.accounts.run_as"]],
    ["maps are leaves", { customOverlay: { environment: { A: "1" } } }, [], ["custom_overlay.environment"]],
    ["well-known types are leaves", { createTime: "2024-01-01T00:00:00Z" }, [], ["create_time"]],
    ["empty objects and nulls are leaves", { sync_config: {}, customOverlay: null }, [], ["sync_config", "custom_overlay"]],
    ["lists are leaves", { bundles: ["a"], aliases: [] }, [], ["bundles", "aliases"]],
    ["path-bound fields are left out", { uid: "o/r", name: "n" }, ["uid"], ["name"]],
    ["unknown keys are ignored", { nope: 1, name: "n" }, [], ["name"]],
  ])("%s", (_, json, exclude, want) => {
    expect(deriveUpdateMask(RepoSchema, json, exclude)).toEqual(want);
  });

  it("treats a map of a resource as a leaf", () => {
    expect(deriveUpdateMask(GroupSchema, { resourceLimits: { repos: 3 }, description: "d" })).toEqual(["resource_limits", "description"]);
  });
});

describe("readBody", () => {
  const stream = (chunks: string[], headers: Record<string, string> = {}) => Object.assign(Readable.from(chunks.map((c) => Buffer.from(c))), { headers });

  it("reads every chunk", async () => {
    expect((await readBody(stream(["ab", "cd"]), 10)).toString()).toBe("abcd");
    expect((await readBody(stream([]), 10)).length).toBe(0);
  });

  it("stops at the limit", async () => {
    await expect(readBody(stream(["12345", "678901"]), 10)).rejects.toBeInstanceOf(BodyTooLargeError);
  });

  it("reports a client that resets the request as aborted", async () => {
    const s = Object.assign(new Readable({ read() {} }), { headers: {} });
    const reading = readBody(s, 10);
    s.push("ab");
    s.destroy(new Error("aborted"));
    await expect(reading).rejects.toBeInstanceOf(BodyAbortedError);
  });

  it("refuses a declared length over the limit without reading", async () => {
    const s = stream(["x"], { "content-length": "11" });
    await expect(readBody(s, 10)).rejects.toBeInstanceOf(BodyTooLargeError);
  });
});
