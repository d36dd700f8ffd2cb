// The compiled descriptors (what the server serves at run time) against the published wire contract: every
// fact of the contract must hold. Extras are allowed only where the design permits them, and are reported.
import { describe, expect, it } from "vitest";
import { apiFiles } from "../../src/kernel/descriptors.js";
import {
  compareWireContract,
  formatReport,
  loadContract,
  summaryLine,
  type ContractMethod,
  type WireContract,
} from "../support/contract-json.js";

const contract = loadContract();

/** A contract method by file, service and name; throws when the fixture does not have it. */
function methodOf(c: WireContract, file: string, service: string, method: string): ContractMethod {
  const m = c.files[file]?.services?.[service]?.[method];
  if (!m) throw new Error(`contract has no ${service}.${method}`);
  return m;
}

describe("wire contract", () => {
  const result = compareWireContract(contract, apiFiles);

  it("every fact of the contract holds for the compiled descriptors", () => {
    console.log(formatReport(result));
    expect(result.total).toBeGreaterThan(5000);
    expect(result.mismatches.slice(0, 50)).toEqual([]);
    expect(result.matched).toBe(result.total);
  });

  it("reports the permitted extras: late fields above the contract numbers, and STS auth", () => {
    const paths = result.extras.map((e) => e.path);
    for (const expected of [
      "message chainguard.platform.registry.v2.Tag > field create_time",
      "message chainguard.platform.iam.v2.RoleBinding > field update_time",
      "message chainguard.platform.events.v2.Subscription > field create_time",
      "message chainguard.platform.events.v2.Subscription > field update_time",
      "service chainguard.platform.oidc.SecurityTokenService > rpc Exchange > auth",
      "service chainguard.platform.oidc.SecurityTokenService > rpc ExchangeRefreshToken > auth",
      "service chainguard.platform.iam.v2.GroupsService > rpc RequestGroupAccess > event",
    ]) {
      expect(paths.some((p) => p.endsWith(expected)), expected).toBe(true);
    }
  });

  describe("comparison", () => {
    const mutate = (edit: (c: WireContract) => void): WireContract => {
      const copy = structuredClone(contract);
      edit(copy);
      return copy;
    };

    it("matches the unmodified contract in full", () => {
      expect(summaryLine(result)).toMatch(/^wire contract: (\d+)\/\1 facts match \(100\.00%\)$/);
    });

    it("reports a changed field number, a renamed enum value and a changed HTTP path", () => {
      const modified = mutate((c) => {
        const groups = c.files["chainguard/platform/iam/v2/groups.proto"]!;
        const name = groups.messages!["chainguard.platform.iam.v2.Group"]!.fields.find((f) => f.name === "name")!;
        name.number = 42;
        groups.enums!["chainguard.platform.iam.v2.OrgKind"]![0]!.name = "ORG_KIND_RENAMED";
        methodOf(c, "chainguard/platform/iam/v2/groups.proto", "chainguard.platform.iam.v2.GroupsService", "GetGroup").http = {
          get: "/iam/v2/groupz/{uid=**}",
        };
      });
      const r = compareWireContract(modified, apiFiles);
      const byPath = new Map(r.mismatches.map((m) => [m.path, m]));

      expect(byPath.get("chainguard/platform/iam/v2/groups.proto > message chainguard.platform.iam.v2.Group > field name > number"))
        .toEqual({ path: expect.any(String), expected: 42, actual: 2 });
      // the renamed value is missing, the descriptor's real value is an extra
      expect(byPath.get("chainguard/platform/iam/v2/groups.proto > enum chainguard.platform.iam.v2.OrgKind > value ORG_KIND_RENAMED"))
        .toMatchObject({ expected: "present", actual: "<missing>" });
      expect(
        [...byPath.keys()].some((p) => p.startsWith("chainguard/platform/iam/v2/groups.proto > enum chainguard.platform.iam.v2.OrgKind > value ORG_KIND_UNSPECIFIED")),
      ).toBe(true);
      expect(byPath.get("chainguard/platform/iam/v2/groups.proto > service chainguard.platform.iam.v2.GroupsService > rpc GetGroup > http > pattern"))
        .toMatchObject({ expected: "GET /iam/v2/groupz/{uid=**}" });
      // same facts counted; unmatched: the number, the renamed value (presence and number), the path; plus the
      // descriptor's value the contract no longer names, an extra that fails
      expect(r.total).toBe(result.total);
      expect(r.matched).toBe(r.total - 4);
      expect(r.mismatches).toHaveLength(4);
      expect(summaryLine(r)).not.toContain("100.00%");
    });

    it("reports changed types, labels, oneofs, behaviours, scope flags, reserved names and json names", () => {
      const modified = mutate((c) => {
        const fields = c.files["chainguard/platform/iam/v2/groups.proto"]!.messages!["chainguard.platform.iam.v2.Group"]!.fields;
        const f = (n: string) => fields.find((x) => x.name === n)!;
        f("uid").type = "int64";
        f("uid").iamScope = false;
        f("name").repeated = true;
        f("name").behavior = ["OUTPUT_ONLY"];
        f("description").oneof = "choice";
        f("description").jsonName = "desc";
        f("verified").optional = true;
        c.files["chainguard/platform/iam/v2/groups.proto"]!.messages!["chainguard.platform.iam.v2.Group"]!.reservedNames = ["old"];
      });
      const r = compareWireContract(modified, apiFiles);
      const facts = r.mismatches.map((m) => m.path.replace(/^.* > message chainguard\.platform\.iam\.v2\.Group > /, ""));
      expect(facts.sort()).toEqual(
        [
          "field uid > type",
          "field uid > iamScope",
          "field name > repeated",
          "field name > behavior",
          "field description > oneof",
          "field description > jsonName",
          "field verified > optional",
          "reservedNames",
        ].sort(),
      );
    });

    it("reports auth, event, input/output and additional binding differences", () => {
      const file = "chainguard/platform/iam/v2/groups.proto";
      const svc = "chainguard.platform.iam.v2.GroupsService";
      const modified = mutate((c) => {
        const create = methodOf(c, file, svc, "CreateGroup");
        create.auth = { enabled: { capabilities: ["CAP_IAM_GROUPS_LIST"], unscoped: false } };
        create.event = { type: "dev.example.other.v1", extensions: ["group", "x"], audience: "INTERNAL" };
        create.output = "chainguard.platform.iam.v2.Other";
        methodOf(c, file, svc, "GetGroup").auth = { disabled: {} };
        methodOf(c, file, svc, "GetGroup").event = { type: "dev.example.read.v1" };
        const exchange = methodOf(c, "platform/oidc/v1/oidc.platform.proto", "chainguard.platform.oidc.SecurityTokenService", "Exchange");
        exchange.http = { post: "/sts/exchange", additionalBindings: [{ get: "/sts/exchange" }, { get: "/sts/other" }] };
      });
      const r = compareWireContract(modified, apiFiles);
      const facts = r.mismatches.map((m) => m.path.replace(/^.* > rpc /, ""));
      expect(facts.sort()).toEqual(
        [
          "CreateGroup > output",
          "CreateGroup > auth.capabilities",
          "CreateGroup > auth.unscoped",
          "CreateGroup > event.type",
          "CreateGroup > event.extensions",
          "CreateGroup > event.audience",
          "GetGroup > auth",
          "GetGroup > event",
          "GetGroup > event.type",
          "GetGroup > event.audience",
          "Exchange > http > additional_bindings.length",
          "Exchange > http > additional_bindings[1]",
        ].sort(),
      );
    });

    it("permits an event on a mutation the contract gives none (reported), and still compares every other fact", () => {
      const modified = mutate((c) => {
        delete methodOf(c, "chainguard/platform/iam/v2/groups.proto", "chainguard.platform.iam.v2.GroupsService", "UpdateGroup").event;
      });
      const r = compareWireContract(modified, apiFiles);
      expect(r.mismatches).toEqual([]);
      expect(r.extras.map((e) => e.path)).toContain(
        "chainguard/platform/iam/v2/groups.proto > service chainguard.platform.iam.v2.GroupsService > rpc UpdateGroup > event",
      );
    });

    it("fails extras the design does not permit, and missing elements", () => {
      const modified = mutate((c) => {
        const groups = c.files["chainguard/platform/iam/v2/groups.proto"]!;
        // drop a message, an enum value, a method and a field with the highest number: they become extras
        delete groups.messages!["chainguard.platform.iam.v2.CheckEligibilityResponse"];
        groups.enums!["chainguard.platform.iam.v2.OrgKind"]!.pop();
        delete groups.services!["chainguard.platform.iam.v2.GroupsService"]!["CheckEligibility"];
        const group = groups.messages!["chainguard.platform.iam.v2.Group"]!;
        group.fields = group.fields.filter((f) => f.name !== "description");
        // and add what the descriptors lack
        groups.messages!["chainguard.platform.iam.v2.Ghost"] = { fields: [] };
        delete c.files["platform/common/v1/uidp.platform.proto"];
        c.files["chainguard/platform/iam/v2/ghost.proto"] = { package: "chainguard.platform.iam.v2" };
      });
      const r = compareWireContract(modified, apiFiles);
      const paths = r.mismatches.map((m) => m.path);
      expect(paths).toEqual(
        expect.arrayContaining([
          "platform/common/v1/uidp.platform.proto",
          "chainguard/platform/iam/v2/ghost.proto",
          "chainguard/platform/iam/v2/groups.proto > message chainguard.platform.iam.v2.Ghost",
          "chainguard/platform/iam/v2/groups.proto > message chainguard.platform.iam.v2.CheckEligibilityResponse",
          "chainguard/platform/iam/v2/groups.proto > message chainguard.platform.iam.v2.Group > field description",
          "chainguard/platform/iam/v2/groups.proto > service chainguard.platform.iam.v2.GroupsService > rpc CheckEligibility",
        ]),
      );
      expect(paths.some((p) => p.startsWith("chainguard/platform/iam/v2/groups.proto > enum chainguard.platform.iam.v2.OrgKind > value "))).toBe(true);
      expect(r.mismatches).toHaveLength(7);
    });
  });
});
