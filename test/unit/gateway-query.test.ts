import { describe, expect, it } from "vitest";
import { create, createFileRegistry, createRegistry, toJson, type DescMessage, type JsonValue, type Message } from "@bufbuild/protobuf";
import {
  FieldDescriptorProto_Label as Label,
  FieldDescriptorProto_Type as Type,
  FileDescriptorProtoSchema,
  file_google_protobuf_duration,
  file_google_protobuf_field_mask,
  file_google_protobuf_struct,
  file_google_protobuf_timestamp,
  file_google_protobuf_wrappers,
} from "@bufbuild/protobuf/wkt";
import { Code, ConnectError } from "@connectrpc/connect";
import { applyQuery, type BoundFields } from "../../src/gateway/query.js";
import { BadRequestSchema } from "../../gen/google/rpc/error_details_pb.js";

// A test message with every kind of field a query parameter can (or cannot) set.
const wkt = {
  "google/protobuf/timestamp.proto": file_google_protobuf_timestamp,
  "google/protobuf/duration.proto": file_google_protobuf_duration,
  "google/protobuf/field_mask.proto": file_google_protobuf_field_mask,
  "google/protobuf/wrappers.proto": file_google_protobuf_wrappers,
  "google/protobuf/struct.proto": file_google_protobuf_struct,
};
const opt = Label.OPTIONAL;
const rep = Label.REPEATED;
// protoc fills json_name; a hand-written descriptor must too.
const f = (name: string, number: number, type: Type, label = opt, typeName?: string, oneofIndex?: number) => ({
  name,
  jsonName: name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase()),
  number,
  type,
  label,
  ...(typeName ? { typeName } : {}),
  ...(oneofIndex === undefined ? {} : { oneofIndex }),
});
const fileProto = create(FileDescriptorProtoSchema, {
  name: "gateway_query_test.proto",
  package: "gwtest",
  syntax: "proto3",
  dependency: Object.keys(wkt),
  enumType: [{ name: "Color", value: [{ name: "COLOR_UNSPECIFIED", number: 0 }, { name: "COLOR_RED", number: 1 }, { name: "COLOR_BLUE", number: 2 }] }],
  messageType: [
    {
      name: "Inner",
      field: [
        f("name", 1, Type.STRING),
        f("descendants_of", 2, Type.STRING),
        f("deep", 3, Type.MESSAGE, opt, ".gwtest.Inner"),
        f("count", 4, Type.INT32),
      ],
    },
    {
      name: "AllTypes",
      oneofDecl: [{ name: "choice" }],
      nestedType: [{ name: "LabelsEntry", options: { mapEntry: true }, field: [f("key", 1, Type.STRING), f("value", 2, Type.STRING)] }],
      field: [
        f("s", 1, Type.STRING),
        f("b", 2, Type.BOOL),
        f("i32", 3, Type.INT32),
        f("i64", 4, Type.INT64),
        f("u32", 5, Type.UINT32),
        f("u64", 6, Type.UINT64),
        f("fl", 7, Type.FLOAT),
        f("d", 8, Type.DOUBLE),
        f("by", 9, Type.BYTES),
        f("color", 10, Type.ENUM, opt, ".gwtest.Color"),
        f("ts", 11, Type.MESSAGE, opt, ".google.protobuf.Timestamp"),
        f("dur", 12, Type.MESSAGE, opt, ".google.protobuf.Duration"),
        f("update_mask", 13, Type.MESSAGE, opt, ".google.protobuf.FieldMask"),
        f("wrapped_int", 14, Type.MESSAGE, opt, ".google.protobuf.Int32Value"),
        f("wrapped_bool", 15, Type.MESSAGE, opt, ".google.protobuf.BoolValue"),
        f("strs", 16, Type.STRING, rep),
        f("colors", 17, Type.ENUM, rep, ".gwtest.Color"),
        f("inner", 18, Type.MESSAGE, opt, ".gwtest.Inner"),
        f("inners", 19, Type.MESSAGE, rep, ".gwtest.Inner"),
        f("labels", 20, Type.MESSAGE, rep, ".gwtest.AllTypes.LabelsEntry"),
        f("st", 21, Type.MESSAGE, opt, ".google.protobuf.Struct"),
        f("choice_a", 22, Type.STRING, opt, undefined, 0),
        f("choice_b", 23, Type.INT32, opt, undefined, 0),
        f("sint", 24, Type.SINT64),
        f("times", 25, Type.MESSAGE, rep, ".google.protobuf.Timestamp"),
        f("page_size", 26, Type.INT32),
      ],
    },
  ],
});
const fileRegistry = createFileRegistry(fileProto, (name) => wkt[name as keyof typeof wkt]);
const AllTypes: DescMessage = fileRegistry.getMessage("gwtest.AllTypes")!;
const registry = createRegistry(fileRegistry);

const free: BoundFields = { path: [], body: undefined };

function parse(query: string, bound: BoundFields = free): JsonValue {
  const msg = create(AllTypes) as Message;
  applyQuery(AllTypes, msg, new URLSearchParams(query), bound, registry);
  return toJson(AllTypes, msg, { registry });
}

function violations(query: string, bound: BoundFields = free): { field: string; description: string }[] {
  try {
    parse(query, bound);
  } catch (err) {
    expect(err).toBeInstanceOf(ConnectError);
    const e = err as ConnectError;
    expect(e.code).toBe(Code.InvalidArgument);
    const [bad] = e.findDetails(BadRequestSchema);
    expect(bad).toBeDefined();
    const list = bad!.fieldViolations.map((v) => ({ field: v.field, description: v.description }));
    expect(e.rawMessage).toBe("Invalid argument: " + list.map((v) => `${v.field}: ${v.description}`).join("; "));
    return list;
  }
  throw new Error(`expected ${query} to be rejected`);
}

describe("applyQuery: values of every type", () => {
  it.each<[string, JsonValue]>([
    ["", {}],
    ["s=hello", { s: "hello" }],
    ["s=a+b%20c%2Fd", { s: "a b c/d" }],
    ["s=", {}],
    ["b=true", { b: true }],
    ["b=false", {}],
    ["i32=42", { i32: 42 }],
    ["i32=-7", { i32: -7 }],
    ["i64=9007199254740993", { i64: "9007199254740993" }],
    ["i64=-9223372036854775808", { i64: "-9223372036854775808" }],
    ["u32=4294967295", { u32: 4294967295 }],
    ["u64=18446744073709551615", { u64: "18446744073709551615" }],
    ["sint=-5", { sint: "-5" }],
    ["fl=1.5", { fl: 1.5 }],
    ["d=1e3", { d: 1000 }],
    ["d=NaN", { d: "NaN" }],
    ["d=-Infinity", { d: "-Infinity" }],
    ["by=aGk%3D", { by: "aGk=" }],
    ["by=aGk", { by: "aGk=" }],
    ["by=-_8", { by: "+/8=" }],
    ["color=COLOR_RED", { color: "COLOR_RED" }],
    ["color=2", { color: "COLOR_BLUE" }],
    ["ts=2024-01-02T03:04:05Z", { ts: "2024-01-02T03:04:05Z" }],
    ["ts=2024-01-02T03:04:05.5%2B01:00", { ts: "2024-01-02T02:04:05.500Z" }],
    ["dur=1.5s", { dur: "1.500s" }],
    ["updateMask=description,name", { updateMask: "description,name" }],
    ["update_mask=create_time,inner.descendants_of", { updateMask: "createTime,inner.descendantsOf" }],
    ["wrappedInt=7", { wrappedInt: 7 }],
    ["wrapped_int=0", { wrappedInt: 0 }],
    ["wrappedBool=false", { wrappedBool: false }],
    ["strs=a&strs=b&strs=a", { strs: ["a", "b", "a"] }],
    ["colors=COLOR_RED&colors=2", { colors: ["COLOR_RED", "COLOR_BLUE"] }],
    ["times=2024-01-01T00:00:00Z&times=2025-01-01T00:00:00Z", { times: ["2024-01-01T00:00:00Z", "2025-01-01T00:00:00Z"] }],
    ["inner.name=x&inner.descendantsOf=y", { inner: { name: "x", descendantsOf: "y" } }],
    ["inner.descendants_of=y&inner.deep.count=3", { inner: { descendantsOf: "y", deep: { count: 3 } } }],
    ["pageSize=10", { pageSize: 10 }],
    ["page_size=10", { pageSize: 10 }],
    ["choiceB=4", { choiceB: 4 }],
    // keys naming no field are ignored, as unknown JSON fields are
    ["nope=1", {}],
    ["nope=1&s=x", { s: "x" }],
    ["inner.nope=1&inner.name=x", { inner: { name: "x" } }],
    ["Page_Size=3", {}],
  ])("%s", (query, want) => {
    expect(parse(query)).toEqual(want);
  });
});

describe("applyQuery: rejected parameters name the field", () => {
  it.each<[string, string, RegExp]>([
    ["s.x=1", "s.x", /^names no field: s is not a message$/],
    ["inner.deep.count.x=1", "inner.deep.count.x", /inner\.deep\.count is not a message/],
    ["inners.name=1", "inners.name", /inners is a repeated field/],
    ["labels.a=1", "labels.a", /labels is a map/],
    ["ts.seconds=1", "ts.seconds", /ts is a google.protobuf.Timestamp, set as one value/],
    ["inner.descendantsOf.x=1", "inner.descendants_of.x", /inner\.descendants_of is not a message/], // proto names, whatever the key used
    ["inner=x", "inner", /^is a message \(gwtest.Inner\): the value must be its proto3 JSON object; got text that is not JSON$/],
    ["st=x", "st", /^is a google.protobuf.Struct, which query parameters cannot set$/],
    ["inners=x", "inners[0]", /is a message \(gwtest.Inner\).*not JSON/],
    ["labels=x", "labels", /map fields cannot be set/],
    ["b=yes", "b", /expected bool/],
    ["b=1", "b", /expected bool/],
    ["i32=abc", "i32", /expected number \(int32\), got "abc"/],
    ["pageSize=abc", "page_size", /expected number \(int32\)/],
    ["i32=1.5", "i32", /int32/],
    ["i32=", "i32", /int32/],
    ["i32=99999999999", "i32", /out of range/],
    ["u32=-1", "u32", /out of range/],
    ["i64=1e3x", "i64", /int64/],
    ["d=abc", "d", /float64/],
    ["by=!!!", "by", /base64/],
    ["color=NOPE", "color", /invalid value "NOPE"/],
    ["colors=COLOR_RED&colors=NOPE", "colors", /NOPE/],
    ["ts=yesterday", "ts", /RFC 3339/],
    ["dur=1.5", "dur", /invalid value "1.5"/],
    ["wrappedInt=x", "wrapped_int", /int32/],
    ["s=a&s=b", "s", /must not be repeated/],
    ["inner.count=1&inner.count=2", "inner.count", /must not be repeated/],
    ["pageSize=1&page_size=2", "page_size", /set twice \(as pageSize and page_size\)/],
    ["choiceA=x&choiceB=1", "choice_b", /only one of choice_a and choice_b/],
  ])("%s -> %s", (query, field, description) => {
    const v = violations(query);
    expect(v).toHaveLength(1);
    expect(v[0]!.field).toBe(field);
    expect(v[0]!.description).toMatch(description);
  });

  it("reports every offending parameter at once", () => {
    expect(violations("s.x=1&nope=1&labels=x&other=2").map((v) => v.field)).toEqual(["s.x", "labels"]);
    expect(violations("i32=abc&d=x&s=ok").map((v) => v.field)).toEqual(["i32", "d"]);
  });

  it("rejects parameters bound by the URL path, on, inside or above the variable", () => {
    const bound: BoundFields = { path: [["s"], ["inner", "name"]], body: undefined };
    expect(violations("s=x", bound)).toEqual([{ field: "s", description: "is bound by the URL path" }]);
    expect(violations("inner.name=x", bound)).toEqual([{ field: "inner.name", description: "is bound by the URL path" }]);
    expect(parse("inner.count=3&i32=1", bound)).toEqual({ inner: { count: 3 }, i32: 1 });
  });

  it("rejects parameters carried by the body", () => {
    const field: BoundFields = { path: [], body: ["inner"] };
    expect(violations("inner.count=1", field)).toEqual([{ field: "inner.count", description: "is carried by the request body" }]);
    expect(parse("i32=1", field)).toEqual({ i32: 1 });
    const whole: BoundFields = { path: [], body: [] };
    expect(violations("i32=1", whole)[0]!.description).toMatch(/body carries the whole request/);
  });

  it("returns the proto paths it set", () => {
    expect([...applyQuery(AllTypes, create(AllTypes) as Message, new URLSearchParams(`inners=${q({})}&inner=${q({})}`), free, registry)]).toEqual(["inners", "inner"]);
    const msg = create(AllTypes) as Message;
    const set = applyQuery(AllTypes, msg, new URLSearchParams("updateMask=name&inner.descendantsOf=x"), free, registry);
    expect([...set]).toEqual(["update_mask", "inner.descendants_of"]);
  });
});

/** A JSON value as a URL-encoded query value. */
function q(value: unknown): string {
  return encodeURIComponent(JSON.stringify(value));
}

describe("applyQuery: message fields as JSON objects", () => {
  it.each<[string, string, JsonValue]>([
    ["one element", `inners=${q({ name: "a", count: 2 })}`, { inners: [{ name: "a", count: 2 }] }],
    ["elements in order", `inners=${q({ name: "a" })}&inners=${q({ descendantsOf: "x", deep: { count: 1 } })}&inners=${q({})}`, { inners: [{ name: "a" }, { descendantsOf: "x", deep: { count: 1 } }, {}] }],
    ["proto names inside and as the key", `inners=${q({ descendants_of: "x" })}&inner=${q({ descendants_of: "y" })}`, { inners: [{ descendantsOf: "x" }], inner: { descendantsOf: "y" } }],
    ["a singular message", `inner=${q({ name: "n", deep: { deep: { name: "d" } } })}`, { inner: { name: "n", deep: { deep: { name: "d" } } } }],
    ["an empty singular message is set", `inner=${q({})}`, { inner: {} }],
    ["a message inside a nested message", `inner.deep=${q({ count: 3 })}&inner.name=x`, { inner: { deep: { count: 3 }, name: "x" } }],
    ["with other parameters", `inners=${q({ name: "a" })}&ts=2024-01-02T03:04:05Z&strs=s`, { inners: [{ name: "a" }], ts: "2024-01-02T03:04:05Z", strs: ["s"] }],
    ["unknown keys ignored, at any depth", `inners=${q({ name: "a", colour: "red", deep: { shade: 1, count: 2 } })}`, { inners: [{ name: "a", deep: { count: 2 } }] }],
    ["int64 as a string or a number, as in a body", `inner=${q({ count: "5" })}`, { inner: { count: 5 } }],
  ])("%s", (_, query, want) => {
    expect(parse(query)).toEqual(want);
  });

  it.each<[string, string, string, RegExp]>([
    ["not JSON", `inners=${q({ name: "a" })}&inners=${encodeURIComponent("{name:'b'}")}`, "inners[1]", /^is a message \(gwtest.Inner\): the value must be its proto3 JSON object; got text that is not JSON$/],
    ["an array", `inners=${q([{ name: "a" }])}`, "inners[0]", /got an array$/],
    ["a string", `inner=${q("a")}`, "inner", /got a string$/],
    ["a number", `inners=1`, "inners[0]", /got a number$/],
    ["null", `inner=null`, "inner", /got null$/],
    ["empty", `inner=`, "inner", /not JSON/],
    ["a field of the wrong type", `inners=${q({ name: "a" })}&inners=${q({ count: "many" })}`, "inners[1].count", /int32/],
    ["a wrong type deeper in", `inners=${q({ deep: { deep: { count: true } } })}`, "inners[0].deep.deep.count", /int32/],
    ["a singular message's field", `inner=${q({ name: 7 })}`, "inner.name", /string/],
    ["a singular message given twice", `inner=${q({})}&inner=${q({})}`, "inner", /must not be repeated/],
    ["a message set whole and by a field", `inner=${q({ name: "a" })}&inner.count=1`, "inner.count", /^set both as a whole \(as inner\) and by its fields \(as inner.count\)$/],
    ["... in either order, at any depth", `inner.deep.count=1&inner=${q({})}`, "inner.deep.count", /set both as a whole \(as inner\)/],
    ["a later element that is not JSON", `inners=${q({})}&inners=${q({})}&inners=x`, "inners[2]", /not JSON/],
  ])("%s -> %s", (_, query, field, description) => {
    const v = violations(query);
    expect(v).toHaveLength(1);
    expect(v[0]!.field).toBe(field);
    expect(v[0]!.description).toMatch(description);
  });

  it("names every offending parameter at once, JSON or not", () => {
    // Values that are no message object at all are found first; values that do not parse, after.
    expect(violations(`inner=[]&s=x&inners=${q({})}&inners=x&nope=1`).map((v) => v.field)).toEqual(["inner", "inners[1]"]);
    expect(violations(`inners=${q({ count: "x" })}&i32=abc&inner=${q({ name: 1 })}`).map((v) => v.field)).toEqual(["inners[0].count", "i32", "inner.name"]);
  });

  it("refuses a value nested deeper than the limit, and takes one just within it", () => {
    const nested = (levels: number): JsonValue => {
      let v: JsonValue = {};
      for (let i = 1; i < levels; i++) v = { deep: v };
      return v;
    };
    expect(violations(`inner=${q(nested(101))}`)).toEqual([{ field: "inner", description: "is nested more than 100 levels deep" }]);
    expect(parse(`inner=${q(nested(50))}`)).toEqual({ inner: nested(50) });
    // Within the limit but past the parser's own (100 messages from the request): still a violation.
    expect(violations(`inner=${q(nested(100))}`)).toEqual([{ field: "inner", description: "maximum recursion depth of 100 reached" }]);
    // Deep arrays count as well, and never reach the parser's recursion.
    const arrays = "[".repeat(20_000) + "]".repeat(20_000);
    expect(violations(`inners=${encodeURIComponent(`{"name":${arrays}}`)}`)[0]!.description).toMatch(/nested more than 100/);
  });

  it("rejects the whole-message form where the URL path or the body binds a field inside it", () => {
    expect(violations(`inner=${q({ count: 1 })}`, { path: [["inner", "name"]], body: undefined })).toEqual([{ field: "inner", description: "is bound by the URL path" }]);
    expect(violations(`inners=${q({})}`, { path: [], body: ["inners"] })).toEqual([{ field: "inners", description: "is carried by the request body" }]);
  });
});
