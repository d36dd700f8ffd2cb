// What a down-scoped token keeps of its identity's grants (kernel/auth/restriction.ts), and how the
// restriction travels in a token.
import { describe, expect, it } from "vitest";
import { Capability as C } from "../../gen/capabilities/capabilities_pb.js";
import { createAccess } from "../../src/kernel/auth/access.js";
import type { Binding } from "../../src/kernel/auth/types.js";
import { capabilityByName, restrictionClaims, restrictionOfClaims, type TokenRestriction } from "../../src/kernel/auth/restriction.js";
import type { Principal } from "../../src/kernel/auth/principal.js";

const org = "a".repeat(40);
const team = `${org}/${"1".repeat(16)}`;
const deep = `${team}/${"2".repeat(16)}`;
const other = `${org}/${"3".repeat(16)}`;

const viewerOnOrg: Binding = { groupUid: org, capabilities: [C.CAP_IAM_GROUPS_LIST, C.CAP_REPO_LIST] };
const ownerOnTeam: Binding = { groupUid: team, capabilities: [C.CAP_IAM_GROUPS_LIST, C.CAP_REPO_LIST, C.CAP_REPO_CREATE] };

function access(bindings: Binding[], restriction?: TokenRestriction, homeGroup?: string) {
  const principal: Principal = { identityUid: `${org}/ffffffffffffffff`, homeGroup, issuer: "https://issuer.test", subject: "s", restriction };
  return createAccess(principal, bindings);
}
const held = async (a: ReturnType<typeof access>, uid: string) => [...(await a.capabilitiesAt(uid))].sort((x, y) => x - y);

describe("restricted grants", () => {
  it.each([
    // [what, restriction, uid, capabilities held there]
    ["no restriction: everything", {}, deep, [C.CAP_IAM_GROUPS_LIST, C.CAP_REPO_CREATE, C.CAP_REPO_LIST]],
    ["scoped to team: its own and its ancestors' bindings, in its subtree", { scopes: [team] }, deep, [C.CAP_IAM_GROUPS_LIST, C.CAP_REPO_CREATE, C.CAP_REPO_LIST]],
    ["scoped to team: nothing at the organization", { scopes: [team] }, org, []],
    ["scoped to team: nothing in a sibling", { scopes: [team] }, other, []],
    ["scoped to org: a binding beneath it is left out", { scopes: [org] }, team, [C.CAP_IAM_GROUPS_LIST, C.CAP_REPO_LIST]],
    ["scoped to org and team: each keeps its own", { scopes: [org, team] }, team, [C.CAP_IAM_GROUPS_LIST, C.CAP_REPO_CREATE, C.CAP_REPO_LIST]],
    ["scoped to a group of another organization: nothing", { scopes: ["b".repeat(40)] }, team, []],
    ["cap: only the listed ones", { capabilities: [C.CAP_REPO_CREATE, C.CAP_IAM_ROLES_CREATE] }, team, [C.CAP_REPO_CREATE]],
    ["cap and scopes together", { scopes: [org], capabilities: [C.CAP_REPO_CREATE, C.CAP_REPO_LIST] }, team, [C.CAP_REPO_LIST]],
  ] as Array<[string, TokenRestriction, string, C[]]>)("%s", async (_what, restriction, uid, want) => {
    expect(await held(access([viewerOnOrg, ownerOnTeam], restriction), uid)).toEqual(want);
  });

  it("a confined identity's restriction never reaches past its home group", async () => {
    // Created under team, bound on org: reaches team only; restricted to org it still reaches team only.
    const a = access([viewerOnOrg], { scopes: [org] }, team);
    expect(await held(a, deep)).toEqual([C.CAP_IAM_GROUPS_LIST, C.CAP_REPO_LIST]);
    expect(await held(a, other)).toEqual([]);
    expect(await a.visibleScopes([C.CAP_REPO_LIST])).toEqual([team]);
  });

  it("visible scopes are the restricted ones", async () => {
    expect(await access([viewerOnOrg, ownerOnTeam], { scopes: [team, other] }).visibleScopes([C.CAP_REPO_LIST])).toEqual([team, other].sort());
    expect(await access([viewerOnOrg, ownerOnTeam], { capabilities: [C.CAP_REPO_CREATE] }).visibleScopes([C.CAP_REPO_LIST])).toEqual([]);
    expect(await access([viewerOnOrg, ownerOnTeam], { capabilities: [C.CAP_REPO_CREATE] }).visibleScopes([C.CAP_REPO_CREATE])).toEqual([team]);
  });
});

describe("capability names", () => {
  it.each([
    ["repo.list", C.CAP_REPO_LIST],
    ["CAP_REPO_LIST", C.CAP_REPO_LIST],
    ["groups.create", C.CAP_IAM_GROUPS_CREATE],
    ["manifest.metadata.list", C.CAP_MANIFEST_METADATA_LIST],
    ["subscriptions.list", C.CAP_EVENTS_SUBSCRIPTION_LIST],
    ["CAP_IAM_SCIM_MANAGE", C.CAP_IAM_SCIM_MANAGE],
    ["UNKNOWN", undefined],
    ["repos.list", undefined],
    ["", undefined],
  ] as Array<[string, C | undefined]>)("%s", (name, want) => {
    expect(capabilityByName(name)).toBe(want);
  });
});

describe("restriction claims", () => {
  it("round-trip, with capabilities by enum name", () => {
    const r: TokenRestriction = { scopes: [team], capabilities: [C.CAP_REPO_LIST] };
    const claims = restrictionClaims(r);
    expect(claims).toEqual({ scopes: [team], cap: ["CAP_REPO_LIST"] });
    expect(restrictionOfClaims(claims)).toEqual(r);
    expect(restrictionClaims(undefined)).toEqual({});
    expect(restrictionOfClaims({ sub: "x" })).toBeUndefined();
  });

  it("a malformed claim is an error, never read as no restriction; an unknown capability name grants nothing", () => {
    expect(() => restrictionOfClaims({ scopes: team })).toThrow();
    expect(() => restrictionOfClaims({ cap: [1605] })).toThrow();
    expect(restrictionOfClaims({ cap: ["CAP_SOMETHING_REMOVED"] })).toEqual({ capabilities: [] });
  });
});
