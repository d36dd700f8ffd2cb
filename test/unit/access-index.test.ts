// The indexed Access (grants looked up per ancestor of a uid, visible scopes in linear time) answers exactly
// as the definition does, written here as a brute-force scan over every grant: random uid trees (with
// segments that are prefixes of each other: "a", "ab", "a-b", "a.b"), random bindings, home groups and
// down-scoping restrictions.
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { createAccess, effectiveScope, outermost } from "../../src/kernel/auth/access.js";
import type { Principal } from "../../src/kernel/auth/principal.js";
import type { TokenRestriction } from "../../src/kernel/auth/restriction.js";
import type { Binding } from "../../src/kernel/auth/types.js";

const within = (uid: string, scope: string) => uid === scope || uid.startsWith(scope + "/");
const CAPS = [Capability.CAP_REPO_LIST, Capability.CAP_IAM_GROUPS_LIST, Capability.CAP_IAM_IDENTITY_LIST] as const;

/** The definition: every grant scanned, for every question. */
function reference(principal: Principal, bindings: readonly Binding[]) {
  let grants = bindings.flatMap((b) => {
    const scope = effectiveScope(b.groupUid, principal.homeGroup);
    return scope ? [{ scope, bindingGroup: b.groupUid, capabilities: new Set(b.capabilities) }] : [];
  });
  const r = principal.restriction;
  if (r && (r.scopes !== undefined || r.capabilities !== undefined)) {
    grants = grants.flatMap((g) => {
      const capabilities = r.capabilities === undefined ? g.capabilities : new Set([...g.capabilities].filter((c) => r.capabilities!.includes(c)));
      if (capabilities.size === 0) return [];
      if (r.scopes === undefined) return [{ ...g, capabilities }];
      return r.scopes.flatMap((s) => {
        if (!within(s, g.bindingGroup)) return [];
        const reach = within(s, g.scope) ? s : within(g.scope, s) ? g.scope : undefined;
        return reach === undefined ? [] : [{ ...g, scope: reach, capabilities }];
      });
    });
  }
  const capabilitiesAt = (uid: string) => new Set(grants.filter((g) => within(uid, g.scope)).flatMap((g) => [...g.capabilities]));
  const holds = (uid: string, caps: readonly number[]) => caps.every((c) => grants.some((g) => g.capabilities.has(c) && within(uid, g.scope)));
  const visibleScopes = (caps: readonly number[]) => {
    const visible = [...new Set(grants.map((g) => g.scope))].filter((s) => holds(s, caps));
    return visible.filter((s) => !visible.some((o) => o !== s && within(s, o))).sort();
  };
  return { capabilitiesAt, holds, visibleScopes };
}

const segment = fc.constantFrom("a", "ab", "a-b", "a.b", "b", "0");
const uid = fc.array(segment, { minLength: 1, maxLength: 4 }).map((s) => s.join("/"));
const caps = fc.subarray([...CAPS]);

const world = fc.record({
  bindings: fc.array(fc.record({ groupUid: uid, capabilities: caps }), { maxLength: 12 }),
  homeGroup: fc.option(uid, { nil: undefined }),
  restriction: fc.option(
    fc.record({ scopes: fc.option(fc.array(uid, { maxLength: 3 }), { nil: undefined }), capabilities: fc.option(caps, { nil: undefined }) }),
    { nil: undefined },
  ),
  probes: fc.array(fc.oneof(uid, uid.map((u) => `${u}/res`)), { minLength: 1, maxLength: 10 }),
  asks: fc.array(caps, { minLength: 1, maxLength: 4 }),
});

describe("indexed access", () => {
  it("answers capabilitiesAt, holds and visibleScopes as a scan of every grant does", async () => {
    await fc.assert(
      fc.asyncProperty(world, async (w) => {
        const principal: Principal = {
          identityUid: "someone",
          homeGroup: w.homeGroup,
          issuer: "i",
          subject: "s",
          restriction: w.restriction as TokenRestriction | undefined,
        };
        const bindings: Binding[] = w.bindings.map((b) => ({ groupUid: b.groupUid, capabilities: [...b.capabilities] }));
        const access = createAccess(principal, bindings);
        const ref = reference(principal, bindings);
        for (const p of w.probes) {
          expect(new Set(await access.capabilitiesAt(p))).toEqual(ref.capabilitiesAt(p));
          for (const a of w.asks) expect(await access.holds(p, a)).toBe(ref.holds(p, a));
        }
        for (const a of [...w.asks, []]) {
          expect([...(await access.visibleScopes(a))]).toEqual(ref.visibleScopes(a));
          // Asked again (remembered per set of capabilities, in any order): the same.
          expect([...(await access.visibleScopes([...a].reverse()))]).toEqual(ref.visibleScopes(a));
        }
      }),
      { numRuns: 500 },
    );
  });

  it("outermost keeps the scopes no other one contains, sorted, whatever the order and duplicates", () => {
    expect(outermost(["a/b", "a-b", "a", "a/b/c", "ab", "a-b/x", "a"])).toEqual(["a", "a-b", "ab"]);
    fc.assert(
      fc.property(fc.array(uid, { maxLength: 30 }), (scopes) => {
        const expected = [...new Set(scopes)].filter((s) => !scopes.some((o) => o !== s && within(s, o))).sort();
        expect(outermost(scopes)).toEqual(expected);
      }),
    );
  });

  it("looks up a caller bound in 10,000 groups per ancestor: the same answers as one bound in one", async () => {
    const root = "0".repeat(40);
    const groups = Array.from({ length: 10_000 }, (_, i) => `${root}/${i.toString(16).padStart(16, "0")}`);
    const bindings: Binding[] = groups.map((g) => ({ groupUid: g, capabilities: [Capability.CAP_REPO_LIST] }));
    const principal: Principal = { identityUid: "x", homeGroup: undefined, issuer: "i", subject: "s" };
    const access = createAccess(principal, bindings);
    expect(await access.holds(`${groups[9_999]}/repo`, [Capability.CAP_REPO_LIST])).toBe(true);
    expect(await access.holds(`${root}/ffffffffffffffff/repo`, [Capability.CAP_REPO_LIST])).toBe(false);
    expect(await access.visibleScopes([Capability.CAP_REPO_LIST])).toEqual([...groups].sort());
    const restricted = createAccess({ ...principal, restriction: { scopes: [groups[7]!, `${groups[8]}/deeper`] } }, bindings);
    expect(await restricted.visibleScopes([Capability.CAP_REPO_LIST])).toEqual([groups[7], `${groups[8]}/deeper`]);
  });
});
