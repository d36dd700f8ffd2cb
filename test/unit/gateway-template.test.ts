import { describe, expect, it } from "vitest";
import { apiMethods, httpRuleOf } from "../../src/kernel/descriptors.js";
import { createRouteTable } from "../../src/gateway/router.js";
import { matchTemplate, parseTemplate, PathEncodingError, splitRequestPath, TemplateSyntaxError } from "../../src/gateway/template.js";

/** Every (verb, template, method name) binding of the API, additional bindings included. */
function contractBindings(): { verb: string; template: string; target: string }[] {
  const out: { verb: string; template: string; target: string }[] = [];
  for (const m of apiMethods) {
    const rule = httpRuleOf(m);
    if (!rule) continue;
    for (const r of [rule, ...rule.additionalBindings]) {
      if (r.pattern.case === undefined) continue;
      if (r.pattern.case === "custom") out.push({ verb: r.pattern.value.kind, template: r.pattern.value.path, target: m.name });
      else out.push({ verb: r.pattern.case, template: r.pattern.value, target: m.name });
    }
  }
  return out;
}

function match(template: string, path: string): Record<string, string> | undefined {
  const vars = matchTemplate(parseTemplate(template), splitRequestPath(path));
  return vars && Object.fromEntries(vars);
}

describe("parseTemplate", () => {
  it("parses every template of the contract", () => {
    const bindings = contractBindings();
    expect(bindings.length).toBeGreaterThan(80);
    for (const b of bindings) expect(() => parseTemplate(b.template), b.template).not.toThrow();
  });

  it.each([
    ["/registry/v2/repos", { literals: 3, vars: [], verb: undefined, deep: -1 }],
    ["/registry/v2/repos/{uid=**}", { literals: 3, vars: ["uid"], verb: undefined, deep: 3 }],
    ["/libraries/v2/artifacts/{artifact_id=*}/versions", { literals: 4, vars: ["artifact_id"], verb: undefined, deep: -1 }],
    ["/registry/v2/repos/{repo_uid=**}/digests/{digest}/architectures", { literals: 5, vars: ["repo_uid", "digest"], verb: undefined, deep: 3 }],
    ["/iam/v2/groups/{group.uid=**}", { literals: 3, vars: ["group.uid"], verb: undefined, deep: 3 }],
    ["/iam/v2/groups:lookupGroup", { literals: 4, vars: [], verb: "lookupGroup", deep: -1 }],
    ["/iam/v2/groups/{group_uid=**}:requestGroupAccess", { literals: 4, vars: ["group_uid"], verb: "requestGroupAccess", deep: 3 }],
    ["/v1/{name=projects/*/things/*}", { literals: 3, vars: ["name"], verb: undefined, deep: -1 }],
  ])("%s", (template, want) => {
    const t = parseTemplate(template);
    expect(t.literalCount).toBe(want.literals);
    expect(t.variables.map((v) => v.fieldPath.join("."))).toEqual(want.vars);
    expect(t.verb).toBe(want.verb);
    expect(t.deepIndex).toBe(want.deep);
  });

  it.each([
    ["registry/v2/repos", "must start with /"],
    ["/a/{b", "unbalanced {"],
    ["/a/b}", "unbalanced }"],
    ["/a/{b={c}}", "nested"],
    ["/a//b", "empty segment"],
    ["/a/**/b/**", "at most one **"],
    ["/a/{b.}", "invalid field path"],
    ["/a/{x}/{x}", "appears twice"],
    ["/a/b*c", "invalid literal"],
  ])("rejects %s", (template, reason) => {
    expect(() => parseTemplate(template)).toThrow(TemplateSyntaxError);
    expect(() => parseTemplate(template)).toThrow(reason);
  });
});

describe("matchTemplate", () => {
  it.each<[string, string, Record<string, string> | undefined]>([
    ["/registry/v2/repos", "/registry/v2/repos", {}],
    ["/registry/v2/repos", "/registry/v2/repos/x", undefined],
    ["/registry/v2/repos/{uid=**}", "/registry/v2/repos", undefined],
    ["/registry/v2/repos/{uid=**}", "/registry/v2/repos/", undefined],
    ["/registry/v2/repos/{uid=**}", "/registry/v2/repos/X", { uid: "X" }],
    ["/registry/v2/repos/{uid=**}", "/registry/v2/repos/X/Y/Z", { uid: "X/Y/Z" }],
    ["/registry/v2/repos/{uid=**}", "/registry/v2/repos/X//Z", undefined],
    ["/registry/v2/repos/{uid=**}/readme", "/registry/v2/repos/X/Y/readme", { uid: "X/Y" }],
    ["/registry/v2/repos/{uid=**}/readme", "/registry/v2/repos/readme", undefined],
    ["/registry/v2/repos/{repo_uid=**}/digests/{digest}/architectures", "/registry/v2/repos/O/R/digests/sha256:ab/architectures", { repo_uid: "O/R", digest: "sha256:ab" }],
    ["/registry/v2/repos/{repo_uid=**}/digests/{digest}/size", "/registry/v2/repos/O/R/digests/sha256:ab/architectures", undefined],
    ["/libraries/v2/artifacts/{artifact_id=*}/versions", "/libraries/v2/artifacts/a/versions", { artifact_id: "a" }],
    ["/libraries/v2/artifacts/{artifact_id=*}/versions", "/libraries/v2/artifacts/a/b/versions", undefined],
    ["/iam/v2/groups/{group.uid=**}", "/iam/v2/groups/G/C", { "group.uid": "G/C" }],
    ["/iam/v2/groups:lookupGroup", "/iam/v2/groups:lookupGroup", {}],
    ["/iam/v2/groups:lookupGroup", "/iam/v2/groups", undefined],
    ["/iam/v2/groups:lookupGroup", "/iam/v2/groups:checkEligibility", undefined],
    ["/iam/v2/groups/{group_uid=**}:requestGroupAccess", "/iam/v2/groups/G/C:requestGroupAccess", { group_uid: "G/C" }],
    ["/iam/v2/groups/{group_uid=**}:requestGroupAccess", "/iam/v2/groups:requestGroupAccess", undefined],
    ["/iam/v2/roleBindings:batchCreate", "/iam/v2/roleBindings:batchCreate", {}],
    // percent-decoding: literals and values fully; a multi-segment value takes an encoded %2F as "/" (what OpenAPI clients send)
    ["/libraries/v2/artifacts/{artifact_id=*}/versions", "/libraries/v2/%61rtifacts/a%2Fb%20c/versions", { artifact_id: "a/b c" }],
    ["/registry/v2/repos/{uid=**}", "/registry/v2/repos/X/a%20b%2Fc", { uid: "X/a b/c" }],
    ["/v1/{name=projects/*/things/*}", "/v1/projects/p/things/t", { name: "projects/p/things/t" }],
    ["/v1/{name=projects/*/things/*}", "/v1/projects/p/other/t", undefined],
  ])("%s matches %s", (template, path, want) => {
    expect(match(template, path)).toEqual(want);
  });

  it("rejects malformed percent-encoding", () => {
    expect(() => splitRequestPath("/registry/v2/repos/%zz")).toThrow(PathEncodingError);
  });
});

describe("route table over the contract", () => {
  const table = createRouteTable(contractBindings());
  const route = (verb: string, path: string) => {
    const r = table.match(verb, splitRequestPath(path));
    if (r.kind !== "match") return r.kind === "method-not-allowed" ? `405 ${r.allowed.join(",")}` : "404";
    return `${r.route.target} ${JSON.stringify(Object.fromEntries(r.variables))}`;
  };

  it.each([
    ["GET", "/registry/v2/repos", "ListRepos {}"],
    ["GET", "/registry/v2/repos/X", 'GetRepo {"uid":"X"}'],
    ["GET", "/registry/v2/repos/X/Y", 'GetRepo {"uid":"X/Y"}'],
    ["GET", "/registry/v2/repos/X/readme", 'GetRepoReadme {"uid":"X"}'],
    ["PATCH", "/registry/v2/repos/X/Y/readme", 'UpdateRepoReadme {"repo_readme.uid":"X/Y"}'],
    ["PATCH", "/registry/v2/repos/X/Y", 'UpdateRepo {"repo.uid":"X/Y"}'],
    ["POST", "/registry/v2/repos/X", 'CreateRepo {"parent":"X"}'],
    ["DELETE", "/registry/v2/repos/X/Y", 'DeleteRepo {"uid":"X/Y"}'],
    ["GET", "/registry/v2/repos/X/Y/digests/sha256:1/architectures", 'GetArchitectures {"repo_uid":"X/Y","digest":"sha256:1"}'],
    ["GET", "/registry/v2/repos/X/Y/digests/sha256:1/size", 'GetSize {"repo_uid":"X/Y","digest":"sha256:1"}'],
    ["GET", "/iam/v2/groups:lookupGroup", "LookupGroup {}"],
    ["GET", "/iam/v2/groups:checkEligibility", "CheckEligibility {}"],
    ["GET", "/iam/v2/groups", "ListGroups {}"],
    ["GET", "/iam/v2/groups/G", 'GetGroup {"uid":"G"}'],
    ["POST", "/iam/v2/groups/G/C:requestGroupAccess", 'RequestGroupAccess {"group_uid":"G/C"}'],
    ["POST", "/iam/v2/groups/G", 'CreateGroup {"parent":"G"}'],
    ["POST", "/iam/v2/roleBindings:batchCreate", "BatchCreateRoleBindings {}"],
    ["POST", "/iam/v2/roleBindings/G", 'CreateRoleBinding {"parent":"G"}'],
    ["PATCH", "/iam/v2/identities:updateIdentityMetadata", "UpdateIdentityMetadata {}"],
    ["PATCH", "/iam/v2/identities/G/I", 'UpdateIdentity {"identity.uid":"G/I"}'],
    ["POST", "/iam/v2/identityProviders/G/P:generateScimToken", 'GenerateScimToken {"identity_provider_uid":"G/P"}'],
    ["POST", "/iam/v2/externalGroupRoleMappings:batchDelete", "BatchDeleteExternalGroupRoleMappings {}"],
    ["GET", "/iam/v2/terms/G", 'ListTermsAcceptances {"group":"G"}'],
    ["POST", "/iam/v2/terms/G", 'AcceptTerms {"group":"G"}'],
    ["GET", "/libraries/v2/artifacts", "ListArtifacts {}"],
    ["GET", "/libraries/v2/artifacts/count", "GetArtifactCount {}"],
    ["GET", "/libraries/v2/artifacts/a/versions", 'ListArtifactVersions {"artifact_id":"a"}'],
    ["GET", "/sts/exchange", "Exchange {}"],
    ["POST", "/sts/exchange", "Exchange {}"],
    ["POST", "/sts/exchange_refresh_token", "ExchangeRefreshToken {}"],
    ["GET", "/ping/v2/ping", "Ping {}"],
    ["get", "/ping/v2/ping", "Ping {}"],
    // errors
    ["GET", "/nope", "404"],
    ["GET", "/registry/v3/repos", "404"],
    ["GET", "/registry/v2/repos/", "404"],
    ["DELETE", "/registry/v2/repos", "405 GET"],
    ["PUT", "/registry/v2/repos/X", "405 DELETE,GET,PATCH,POST"],
    ["DELETE", "/sts/exchange", "405 GET,POST"],
    ["POST", "/iam/v2/groups:lookupGroup", "405 GET"],
  ])("%s %s -> %s", (verb, path, want) => {
    expect(route(verb, path)).toBe(want);
  });

  it("rejects two methods on the same verb and template", () => {
    expect(() =>
      createRouteTable([
        { verb: "GET", template: "/a/{x}", target: 1 },
        { verb: "GET", template: "/a/{x}", target: 2 },
      ]),
    ).toThrow("two methods");
  });

  it("tries templates that start with a variable for every path", () => {
    const t = createRouteTable([
      { verb: "GET", template: "/{name=**}", target: "any" },
      { verb: "GET", template: "/a/b", target: "ab" },
    ]);
    const got = (p: string) => {
      const r = t.match("GET", splitRequestPath(p));
      return r.kind === "match" ? r.route.target : r.kind;
    };
    expect(got("/a/b")).toBe("ab");
    expect(got("/a/c")).toBe("any");
    expect(got("/z")).toBe("any");
  });
});
