import { describe, expect, it } from "vitest";
import { GroupInviteAcceptanceService } from "../../gen/apiserver/iam/v1/group_invites_pb.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { PingService } from "../../gen/chainguard/platform/ping/v2/ping_pb.js";
import { RolesService } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import { createContextValues, createHandlerContext } from "@connectrpc/connect";
import { Code, ConnectError } from "@connectrpc/connect";
import {
  accessKey,
  bearerToken,
  readAuthorization,
  createCandidateAccess,
  effectiveScope,
  listScopesOf,
  outermost,
  ruleCapabilitiesKey,
  ruleOf,
  type Access,
  type Authenticated,
} from "../../src/kernel/auth/index.js";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { bearerChallenge, bearerTokenOf } from "../../src/kernel/authorization-header.js";
import { AdvisoriesService } from "../../gen/chainguard/platform/vulnerabilities/v2/advisories_pb.js";
import { apiServices, authRuleOf, isGlobalData } from "../../src/kernel/descriptors.js";

describe("effectiveScope: a binding's reach for an identity confined to its home group", () => {
  it.each([
    // binding group, home group, reach
    ["org", undefined, "org"],
    ["org", "org", "org"],
    ["org", "org/team", "org/team"], // bound above home: only home's subtree
    ["org/team", "org", "org/team"], // bound beneath home
    ["org/team/x", "org/team", "org/team/x"],
    ["org/other", "org/team", undefined], // sibling: never
    ["acme", "org/team", undefined], // another organization: never
  ])("binding on %s, home %s -> %s", (binding, home, reach) => {
    expect(effectiveScope(binding, home)).toBe(reach);
  });
});

describe("outermost", () => {
  it.each([
    [[], []],
    [["org/team", "org"], ["org"]],
    [["org/team", "org/other"], ["org/other", "org/team"]],
    [["org/team", "org/team", "org/teamx"], ["org/team", "org/teamx"]],
  ])("%j -> %j", (input, out) => expect(outermost(input)).toEqual(out));
});

describe("bearerToken", () => {
  it.each([
    ["Bearer abc.def.ghi", "abc.def.ghi"],
    ["bearer abc", "abc"],
    ["  BEARER   abc  ", "abc"],
    ["", undefined],
  ])("%j -> %j", (value, token) => {
    const h = new Headers();
    if (value) h.set("authorization", value);
    expect(bearerToken(h)).toBe(token);
  });
  it.each([
    ["Basic abc", /is not a bearer token/],
    ["Bearer", /has no token after "Bearer"/],
    ["Bearer a b", /more than one word after "Bearer"/],
    ["Bearer Bearer abc", /says "Bearer" twice/],
    ["bearer  BEARER abc", /says "Bearer" twice/],
    ["abc.def.ghi", /has no scheme before the token/],
  ])("%j is refused as malformed, saying why and never repeating the header", (value, why) => {
    const h = new Headers({ authorization: value });
    const auth = readAuthorization(h);
    expect(auth.kind).toBe("malformed");
    if (auth.kind !== "malformed") return;
    expect(auth.error.code).toBe(Code.Unauthenticated);
    expect(auth.error.rawMessage).toMatch(why);
    expect(auth.error.rawMessage).not.toMatch(/abc/);
    expect(() => bearerToken(h)).toThrow(why);
  });
});

describe("bearerChallenge: invalid_token only where a bearer token was presented", () => {
  it.each([
    [undefined, "Bearer"],
    ["", "Bearer"],
    ["Basic abc", "Bearer"],
    ["Bearer", "Bearer"],
    ["Bearer abc", 'Bearer error="invalid_token"'],
    ["bearer  abc", 'Bearer error="invalid_token"'],
    ["Bearer a b", 'Bearer error="invalid_token"'],
    ["Bearer Bearer abc", 'Bearer error="invalid_token"'],
  ])("%j -> %s", (value, challenge) => {
    expect(bearerChallenge(value)).toBe(challenge);
    expect(bearerTokenOf(value)).toBe(value === "Bearer abc" || value === "bearer  abc" ? "abc" : undefined);
  });
});

describe("ruleOf reads the method options", () => {
  it("disabled", () => expect(ruleOf(PingService.method.ping)).toEqual({ kind: "disabled" }));
  it("scoped, with the scope path into the request", () => {
    const rule = ruleOf(GroupsService.method.updateGroup);
    expect(rule.kind).toBe("scoped");
    if (rule.kind !== "scoped") return;
    expect(rule.capabilities).toEqual([Capability.CAP_IAM_GROUPS_UPDATE]);
    expect(rule.scopePath.map((f) => f.name)).toEqual(["group", "uid"]);
  });
  it("unscoped", () =>
    expect(ruleOf(RolesService.method.listRoles)).toEqual({ kind: "unscoped", capabilities: [Capability.CAP_IAM_ROLES_LIST], identityOptional: false }));
  it("a scoped rule of a service marked global_data is read as unscoped; only the two global-data services are marked", () => {
    expect(authRuleOf(AdvisoriesService.method.getAdvisory)?.mode.value).toMatchObject({ unscoped: false });
    expect(ruleOf(AdvisoriesService.method.getAdvisory)).toEqual({ kind: "unscoped", capabilities: [Capability.CAP_ADVISORIES_LIST], identityOptional: false });
    expect(apiServices.filter(isGlobalData).map((s) => s.typeName)).toEqual(["chainguard.platform.libraries.v2.ArtifactsService", "chainguard.platform.vulnerabilities.v2.AdvisoriesService"]);
  });
  it("unscoped, identity optional", () =>
    expect(ruleOf(GroupInviteAcceptanceService.method.acceptGroupInvite)).toEqual({ kind: "unscoped", capabilities: [], identityOptional: true }));
});

describe("listScopesOf: the scopes an unscoped List shows, by the capabilities its auth rule names", () => {
  const contextFor = (method: (typeof GroupsService.methods)[number], capabilities: readonly Capability[] | undefined) => {
    const values = createContextValues();
    const asked: (readonly Capability[])[] = [];
    values.set(accessKey, { visibleScopes: async (c: readonly Capability[]) => (asked.push(c), ["org"]) } as unknown as Access);
    if (capabilities) values.set(ruleCapabilitiesKey, capabilities);
    const ctx = createHandlerContext({ service: GroupsService, method, protocolName: "connect", requestMethod: "POST", url: "http://x/", contextValues: values });
    return { ctx, asked };
  };

  it("asks for the rule's capabilities", async () => {
    const { ctx, asked } = contextFor(GroupsService.method.listGroups, [Capability.CAP_IAM_GROUPS_LIST]);
    expect(await listScopesOf(ctx)).toEqual(["org"]);
    expect(asked).toEqual([[Capability.CAP_IAM_GROUPS_LIST]]);
  });

  it("refuses a method whose rule names none (it would otherwise show every scope the caller has)", () => {
    const { ctx, asked } = contextFor(GroupsService.method.lookupGroup, undefined);
    expect(() => listScopesOf(ctx)).toThrow(/names no capability/);
    expect(asked).toEqual([]);
  });
});

describe("createCandidateAccess: a token several identities share acts as one of them on each call", () => {
  const { CAP_IAM_GROUPS_LIST: LIST, CAP_IAM_GROUPS_UPDATE: UPDATE, CAP_IAM_ROLE_BINDINGS_CREATE: BIND, CAP_IAM_IDENTITY_LIST: READ_IDENTITIES } = Capability;
  const candidate = (identityUid: string, homeGroup: string | undefined, bindings: Array<[string, Capability[]]>): Authenticated => ({
    principal: { identityUid, homeGroup, issuer: "https://idp.test", subject: "s" },
    bindings: bindings.map(([groupUid, capabilities]) => ({ groupUid, capabilities })),
  });
  // "acme/x" is an identity organization acme gave the token, "globex/y" one that globex gave it.
  const acme = () => candidate("acme/x", "acme", [["acme", [LIST, UPDATE]]]);
  const globex = () => candidate("globex/y", "globex", [["globex", [LIST]], ["acme", [BIND]]]);
  const ambiguous = (f: () => unknown) => {
    const err = (() => {
      try {
        f();
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.FailedPrecondition);
    return (err as ConnectError).message;
  };

  it("acts as the first identity whose grants cover the scope, and keeps it for the call", async () => {
    const access = createCandidateAccess([globex(), acme()]);
    await access.require("acme/team", [UPDATE]);
    expect(access.principal.identityUid).toBe("acme/x");
    expect([...(await access.capabilitiesAt("acme"))].sort()).toEqual([LIST, UPDATE].sort());
    expect(await access.visibleScopes([LIST])).toEqual(["acme"]);
  });

  it("never combines the grants of two identities", async () => {
    // Both reach acme: acme/x with UPDATE, a person (root-level, bound in acme) with BIND.
    const access = createCandidateAccess([acme(), candidate("p", undefined, [["acme", [BIND]]])]);
    expect(await access.holds("acme", [UPDATE, BIND])).toBe(false);
    await expect(access.require("acme", [UPDATE, BIND])).rejects.toMatchObject({ code: Code.PermissionDenied });
  });

  it("lists what any one identity may list, before a scope is chosen", async () => {
    expect(await createCandidateAccess([acme(), globex()]).visibleScopes([LIST])).toEqual(["acme", "globex"]);
  });

  it("asks which identity when the call needs the caller but names no scope, unless one is a root-level person", () => {
    const readable = (c: Authenticated) => ({ ...c, bindings: [...c.bindings, { groupUid: c.principal.homeGroup!, capabilities: [READ_IDENTITIES] }] });
    expect(ambiguous(() => createCandidateAccess([readable(acme()), readable(globex())]).principal)).toMatch(/acme\/x.*globex\/y/);
    const person = candidate("p", undefined, []);
    expect(createCandidateAccess([person, acme(), globex()]).principal.identityUid).toBe("p");
    expect(createCandidateAccess([acme()]).principal.identityUid).toBe("acme/x");
  });

  it("names only the identities the token's holder could read, and takes the only one", () => {
    // Identities nobody among the candidates may read (another organization's, made for the same subject).
    const squatters = [candidate("squat/1", "squat", []), candidate("squat/2", "squat", [])];
    const message = ambiguous(() => createCandidateAccess([...squatters, acme()]).principal);
    expect(message).not.toMatch(/squat|acme\/x/);
    const readable = candidate("acme/x", "acme", [["acme", [LIST, READ_IDENTITIES]]]);
    expect(createCandidateAccess([...squatters, readable]).principal.identityUid).toBe("acme/x");
  });

  it("looks for the identities that can act on a uid when none of those read covers it", async () => {
    const squatters = Array.from({ length: 3 }, (_, i) => candidate(`squat/${i}`, "squat", [["squat", [LIST]]]));
    const asked: string[] = [];
    const within = async (uid: string) => {
      asked.push(uid);
      return [squatters[0]!, acme()];
    };
    const access = createCandidateAccess(Object.assign([...squatters], { within }));
    await access.require("acme/team", [UPDATE]);
    expect(access.principal.identityUid).toBe("acme/x");
    expect(asked).toEqual(["acme/team"]);
    // Covered by one already read: nothing more is looked for.
    const again = createCandidateAccess(Object.assign([...squatters], { within }));
    expect(await again.holds("squat", [LIST])).toBe(true);
    expect(asked).toEqual(["acme/team"]);
    // Covered by none: PERMISSION_DENIED, as before.
    const none = createCandidateAccess(Object.assign([...squatters], { within }));
    await expect(none.require("elsewhere", [LIST])).rejects.toMatchObject({ code: Code.PermissionDenied });
  });
});
