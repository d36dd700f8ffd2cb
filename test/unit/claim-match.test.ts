// Claim matching against an identity's ClaimMatch: exact fields, anchored re2 patterns, audiences, claims.
import { create } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { Identity_ClaimMatchSchema } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import {
  claimMatchSpecOf,
  claimMismatch,
  claimsMatch,
  compileAnchored,
  isExactIssuerAndSubject,
  issuerAccepted,
  patternMatches,
  type ClaimMatchSpec,
} from "../../src/kernel/auth/claim-match.js";

const GH = "https://token.actions.githubusercontent.com";

describe("patternMatches: anchored, linear-time", () => {
  const table: Array<[pattern: string, value: string, want: boolean]> = [
    ["repo:acme/.*", "repo:acme/x", true],
    ["repo:acme/.*", "xrepo:acme/x", false], // anchored at the start
    ["repo:acme/[a-z]+", "repo:acme/abc:ref", false], // anchored at the end
    ["repo:acme/[a-z]+", "repo:acme/abc", true],
    ["a|b", "a", true],
    ["a|b", "xb", false], // alternation stays inside the anchors
    ["a|b", "ax", false],
    ["abc", "abc\n", false], // $ is end of text, not end of line
    ["(?m)abc", "abc\nzzz", false],
    ["", "", true],
    ["", "x", false],
    ["https://issuer\\.example/.*", "https://issuer.example/tenant", true],
    ["https://issuer.example", "https://issuerXexample", true], // an unescaped dot is a wildcard, as written
    ["(a+)+$", "a".repeat(5000) + "!", false], // no catastrophic backtracking
    ["a)|(b", "b", false], // invalid: cannot escape the anchoring group
    ["(", "(", false], // invalid pattern matches nothing
    ["\\", "\\", false],
    ["(?P<x>a)\\1", "aa", false], // backreferences are not re2: invalid
  ];
  it.each(table)("%j against %j -> %s", (pattern, value, want) => {
    expect(patternMatches(pattern, value)).toBe(want);
  });

  it("compiles each pattern once", () => {
    expect(compileAnchored("cached-[0-9]+")).toBe(compileAnchored("cached-[0-9]+"));
    expect(compileAnchored("(")).toBeNull();
  });

  it("runs a pathological pattern in linear time", () => {
    const start = performance.now();
    expect(patternMatches("(x+x+)+y", "x".repeat(20_000))).toBe(false);
    expect(performance.now() - start).toBeLessThan(5_000);
  });
});

describe("claimMismatch", () => {
  const base: ClaimMatchSpec = { issuer: { kind: "exact", value: GH }, subject: { kind: "exact", value: "repo:acme/app:ref:refs/heads/main" } };
  const token = { iss: GH, sub: "repo:acme/app:ref:refs/heads/main", aud: ["sts.example", "other"], repository: "acme/app", run_attempt: 2, ok: true, nested: { a: "b" } };
  const table: Array<[name: string, spec: ClaimMatchSpec, claims: Record<string, unknown>, want: string | undefined]> = [
    ["exact issuer and subject", base, token, undefined],
    ["issuer differs", base, { ...token, iss: GH + "/" }, "issuer does not match"],
    ["subject differs", base, { ...token, sub: "repo:acme/app" }, "subject does not match"],
    ["no subject in the token", base, { iss: GH }, "subject does not match"],
    ["non-string subject", base, { ...token, sub: 1 }, "subject does not match"],
    ["issuer pattern", { ...base, issuer: { kind: "pattern", value: "https://token\\.actions\\..*" } }, token, undefined],
    ["issuer pattern is anchored", { ...base, issuer: { kind: "pattern", value: "token\\.actions.*" } }, token, "issuer does not match"],
    ["subject pattern", { ...base, subject: { kind: "pattern", value: "repo:acme/.*" } }, token, undefined],
    ["subject pattern is anchored", { ...base, subject: { kind: "pattern", value: "repo:acme/.*" } }, { ...token, sub: "xrepo:acme/x" }, "subject does not match"],
    ["audience: any of the token's", { ...base, audience: { kind: "exact", value: "other" } }, token, undefined],
    ["audience: string aud", { ...base, audience: { kind: "exact", value: "sts.example" } }, { ...token, aud: "sts.example" }, undefined],
    ["audience missing", { ...base, audience: { kind: "exact", value: "mine" } }, token, "audience does not match"],
    ["audience absent from token", { ...base, audience: { kind: "exact", value: "mine" } }, { iss: GH, sub: token.sub }, "audience does not match"],
    ["audience pattern", { ...base, audience: { kind: "pattern", value: "sts\\..*" } }, token, undefined],
    ["audience pattern anchored", { ...base, audience: { kind: "pattern", value: "example" } }, token, "audience does not match"],
    ["no audience constraint", base, { iss: GH, sub: token.sub }, undefined],
    ["claims exact", { ...base, claims: { repository: "acme/app" } }, token, undefined],
    ["claims differ", { ...base, claims: { repository: "acme/ap" } }, token, "claim repository does not match"],
    ["claims missing", { ...base, claims: { workflow: "ci" } }, token, "claim workflow does not match"],
    ["claims: number as its JSON text", { ...base, claims: { run_attempt: "2" } }, token, undefined],
    ["claims: boolean as its JSON text", { ...base, claims: { ok: "true" } }, token, undefined],
    ["claims: objects never match", { ...base, claims: { nested: "[object Object]" } }, token, "claim nested does not match"],
    ["claim patterns", { ...base, claimPatterns: { repository: "acme/.*" } }, token, undefined],
    ["claim patterns anchored", { ...base, claimPatterns: { repository: "cme/.*" } }, token, "claim repository does not match its pattern"],
    ["claim patterns on a missing claim", { ...base, claimPatterns: { workflow: ".*" } }, token, "claim workflow does not match its pattern"],
    ["invalid claim pattern matches nothing", { ...base, claimPatterns: { repository: "(" } }, token, "claim repository does not match its pattern"],
    ["no issuer constraint matches nothing", { subject: base.subject }, token, "the claim match names no issuer"],
    ["no subject constraint matches nothing", { issuer: base.issuer }, token, "the claim match names no subject"],
  ];
  it.each(table)("%s", (_name, spec, claims, want) => {
    expect(claimMismatch(spec, claims)).toBe(want);
    expect(claimsMatch(spec, claims)).toBe(want === undefined);
  });
});

describe("issuerAccepted (decides whether an issuer may be contacted)", () => {
  const table: Array<[spec: ClaimMatchSpec, iss: string, want: boolean]> = [
    [{ issuer: { kind: "exact", value: GH } }, GH, true],
    [{ issuer: { kind: "exact", value: GH } }, "https://evil.example", false],
    [{ issuer: { kind: "pattern", value: "https://[a-z]+\\.example" } }, "https://idp.example", true],
    [{ issuer: { kind: "pattern", value: "https://[a-z]+\\.example" } }, "https://idp.example.evil", false],
    [{}, GH, false],
  ];
  it.each(table)("%j accepts %j: %s", (spec, iss, want) => expect(issuerAccepted(spec, iss)).toBe(want));
});

describe("claimMatchSpecOf the generated message", () => {
  it("maps the oneofs and maps", () => {
    const cm = create(Identity_ClaimMatchSchema, {
      iss: { case: "issuer", value: GH },
      sub: { case: "subjectPattern", value: "repo:.*" },
      aud: { case: "audiencePattern", value: "sts.*" },
      claims: { a: "b" },
      claimPatterns: { c: "d.*" },
    });
    const spec = claimMatchSpecOf(cm);
    expect(spec).toEqual({
      issuer: { kind: "exact", value: GH },
      subject: { kind: "pattern", value: "repo:.*" },
      audience: { kind: "pattern", value: "sts.*" },
      claims: { a: "b" },
      claimPatterns: { c: "d.*" },
    });
    expect(isExactIssuerAndSubject(spec)).toBe(false);
    expect(isExactIssuerAndSubject(claimMatchSpecOf(create(Identity_ClaimMatchSchema, { iss: { case: "issuer", value: GH }, sub: { case: "subject", value: "s" } })))).toBe(true);
    expect(claimMatchSpecOf(create(Identity_ClaimMatchSchema, {})).audience).toBeUndefined();
  });
});
