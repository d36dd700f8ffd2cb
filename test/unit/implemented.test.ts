// No method of the contract answers UNIMPLEMENTED: every contract service is listed by a domain module
// (src/modules.ts; the composition root refuses a module that binds other services than it lists), with a
// full implementation (bindService checks the methods at compile time; bindPartial is for tests only), and
// the server's own apiserver.* services likewise.
import { describe, expect, it } from "vitest";
import { apiServices, servedServices } from "../../src/kernel/descriptors.js";
import { implementedServices } from "../support/domains.js";

describe("implemented services", () => {
  const implemented = new Set(implementedServices().map((s) => s.typeName));

  it("every service of the wire contract is implemented by a domain", () => {
    expect(apiServices.length).toBe(18); // the wire contract's services (wire-contract.test.ts checks they are the same)
    expect(apiServices.map((s) => s.typeName).filter((n) => !implemented.has(n))).toEqual([]);
  });

  it("and every service this server adds", () => {
    const own = servedServices.filter((s) => !apiServices.includes(s) && s.typeName.startsWith("apiserver."));
    expect(own.length).toBeGreaterThan(0);
    expect(own.map((s) => s.typeName).filter((n) => !implemented.has(n))).toEqual([]);
  });
});
