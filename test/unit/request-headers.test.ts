// callHeaders (kernel/request.ts): the call's Headers read from the request's own header object until
// something other than get/has is asked. Each read answers what the Headers copied up front would.
import { inspect } from "node:util";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { callHeaders } from "../../src/kernel/request.js";

/** The Headers as copied up front: the request's headers appended (pseudo and skipped ones left out), then `extra` set. */
function copied(raw: Record<string, string | string[] | undefined>, skip?: (name: string) => boolean, extra?: ReadonlyMap<string, string>): Headers {
  const out = new Headers();
  for (const name in raw) {
    if (name.startsWith(":") || skip?.(name)) continue;
    const value = raw[name];
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) out.append(name, v);
  }
  for (const [name, value] of extra ?? []) out.set(name, value);
  return out;
}

/** What a Headers call gives, or the error's kind. */
function outcome(f: () => unknown): unknown {
  try {
    return f();
  } catch (err) {
    return { threw: (err as Error).constructor.name };
  }
}

const skip = (name: string) => name === "content-type" || name === "te";
const extra = new Map([
  ["content-type", "application/json"],
  ["connect-protocol-version", "1"],
]);
const NAMES = ["authorization", "Authorization", "x-request-id", "content-type", "te", "grpc-timeout", ":path", "constructor", "__proto__", "toString", "bad name", "", "x-multi", "connect-protocol-version"];
const value = fc.oneof(fc.constantFrom("Bearer abc", " padded ", "a\tb", "", "x, y", "tab\t"), fc.string({ maxLength: 8 }));
const rawHeaders = fc.dictionary(fc.constantFrom(...NAMES.filter((n) => n !== "__proto__")).map((n) => n.toLowerCase()), fc.oneof(value, fc.array(value, { minLength: 1, maxLength: 3 })));

describe("callHeaders", () => {
  it("get and has answer what the Headers copied up front would, and iteration lists the same", () => {
    fc.assert(
      fc.property(rawHeaders, fc.boolean(), (raw, withExtra) => {
        // A request's header object may inherit names (node's is a plain object); these must not read as headers.
        const request = Object.assign({}, raw) as Record<string, string | string[] | undefined>;
        const lazy = callHeaders(request, withExtra ? skip : undefined, withExtra ? extra : undefined);
        const reference = outcome(() => copied(request, withExtra ? skip : undefined, withExtra ? extra : undefined));
        if (!(reference instanceof Headers)) {
          // A value the copy refuses: the lazy Headers refuses it too, once it is read or listed.
          expect(outcome(() => [...lazy])).toEqual(reference);
          return;
        }
        for (const name of NAMES) {
          expect(outcome(() => lazy.get(name))).toEqual(outcome(() => reference.get(name)));
          expect(outcome(() => lazy.has(name))).toEqual(outcome(() => reference.has(name)));
        }
        expect([...lazy]).toEqual([...reference]);
      }),
      { numRuns: 300 },
    );
  });

  it("names a plain object inherits are no headers", () => {
    const h = callHeaders({ authorization: "Bearer t" });
    for (const name of ["constructor", "toString", "hasOwnProperty", "__proto__"]) {
      expect(h.get(name)).toBeNull();
      expect(h.has(name)).toBe(false);
    }
    expect([...h]).toEqual([["authorization", "Bearer t"]]);
  });

  it("is a Headers: set, delete and iteration work on the copy, and get sees them", () => {
    const h = callHeaders({ authorization: "Bearer t", "grpc-timeout": "5S", ":path": "/x" });
    expect(h).toBeInstanceOf(Headers);
    expect(h.get("authorization")).toBe("Bearer t");
    h.delete("grpc-timeout");
    h.set("x-added", "1");
    expect(h.get("grpc-timeout")).toBeNull();
    expect(h.get("x-added")).toBe("1");
    expect([...h]).toEqual([
      ["authorization", "Bearer t"],
      ["x-added", "1"],
    ]);
    expect([...new Headers(h)]).toEqual([...h]);
  });

  it("overrides every method of Headers, so none reads the copy before it is made", () => {
    // A method this Node's Headers gains later would otherwise read the empty copy: this fails first.
    const own = Object.getPrototypeOf(callHeaders({})) as object;
    const methods = Reflect.ownKeys(Headers.prototype).filter((key) => key !== "constructor" && typeof Object.getOwnPropertyDescriptor(Headers.prototype, key)?.value === "function");
    expect(methods.length).toBeGreaterThanOrEqual(10);
    expect(methods.filter((key) => !Object.prototype.hasOwnProperty.call(own, key))).toEqual([]);
    // util.inspect among them: a logged Headers shows the request's headers, not an empty copy.
    expect(inspect(callHeaders({ authorization: "Bearer t", ":path": "/x" }))).toBe(inspect(new Headers({ authorization: "Bearer t" })));
  });
});
