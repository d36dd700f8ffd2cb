// Matching a token's claims against an identity's ClaimMatch. Pure: no I/O, no clock.
//
// Exact fields compare strings exactly. Every *_pattern field and every claim_patterns value is a regular
// expression that users store, so it runs on re2js (linear time, no catastrophic backtracking) and is
// anchored: the whole value must match (the pattern "repo:acme/.*" does not match "xrepo:acme/x"). A
// pattern that does not compile matches nothing. Compiled patterns are cached.
import { RE2JS } from "re2js";
import type { Identity_ClaimMatch } from "../../../gen/chainguard/platform/iam/v2/identities_pb.js";

/** One constraint on a string claim: an exact value or an anchored pattern. */
export type StringMatcher = { kind: "exact"; value: string } | { kind: "pattern"; value: string };

/** The matching rules of an Identity.ClaimMatch, independent of the generated message type. */
export interface ClaimMatchSpec {
  issuer?: StringMatcher | undefined;
  subject?: StringMatcher | undefined;
  /** When absent, the token's audience is not constrained. */
  audience?: StringMatcher | undefined;
  /** Claim name -> exact value. */
  claims?: Readonly<Record<string, string>> | undefined;
  /** Claim name -> anchored pattern. */
  claimPatterns?: Readonly<Record<string, string>> | undefined;
}

/** The claims matching looks at (a JWT payload). */
export type TokenClaims = Readonly<Record<string, unknown>>;

/** Longest pattern accepted; longer ones match nothing. */
export const MAX_PATTERN_LENGTH = 4096;
const CACHE_LIMIT = 2048;
const compiled = new Map<string, RE2JS | null>();

/**
 * The pattern compiled anchored (^(?:pattern)$), or null when it does not compile. The raw pattern is
 * compiled on its own first, so one with unbalanced parentheses ("a)|(b") cannot escape the wrapping.
 */
export function compileAnchored(pattern: string): RE2JS | null {
  const hit = compiled.get(pattern);
  if (hit !== undefined) return hit;
  let re: RE2JS | null = null;
  if (pattern.length <= MAX_PATTERN_LENGTH) {
    try {
      RE2JS.compile(pattern);
      re = RE2JS.compile(`^(?:${pattern})$`);
    } catch {
      re = null;
    }
  }
  if (compiled.size >= CACHE_LIMIT) compiled.delete(compiled.keys().next().value as string);
  compiled.set(pattern, re);
  return re;
}

/** Whether the whole of `value` matches `pattern`. An invalid pattern matches nothing. */
export function patternMatches(pattern: string, value: string): boolean {
  const re = compileAnchored(pattern);
  return re !== null && re.matches(value);
}

export function stringMatches(m: StringMatcher, value: string | undefined): boolean {
  if (value === undefined) return false;
  return m.kind === "exact" ? m.value === value : patternMatches(m.value, value);
}

/** A claim as a string: strings as they are, numbers and booleans in their JSON form, anything else absent. */
export function claimString(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (typeof value === "number" || typeof value === "boolean") return String(value);
  return undefined;
}

/** The token's audiences (`aud` is a string or an array of strings). */
export function audiencesOf(claims: TokenClaims): string[] {
  const aud = claims.aud;
  if (typeof aud === "string") return [aud];
  if (Array.isArray(aud)) return aud.filter((a): a is string => typeof a === "string");
  return [];
}

/** Whether the spec accepts tokens of this issuer (decides whether the issuer may be contacted at all). */
export function issuerAccepted(spec: ClaimMatchSpec, issuer: string): boolean {
  return spec.issuer !== undefined && stringMatches(spec.issuer, issuer);
}

/**
 * Why the claims do not satisfy the spec, or undefined when they do. An issuer and a subject constraint
 * are required: a spec without one matches nothing.
 */
export function claimMismatch(spec: ClaimMatchSpec, claims: TokenClaims): string | undefined {
  if (!spec.issuer) return "the claim match names no issuer";
  if (!spec.subject) return "the claim match names no subject";
  if (!stringMatches(spec.issuer, claimString(claims.iss))) return "issuer does not match";
  if (!stringMatches(spec.subject, claimString(claims.sub))) return "subject does not match";
  if (spec.audience) {
    const m = spec.audience;
    if (!audiencesOf(claims).some((a) => stringMatches(m, a))) return "audience does not match";
  }
  for (const [name, want] of Object.entries(spec.claims ?? {})) {
    if (claimString(claims[name]) !== want) return `claim ${name} does not match`;
  }
  for (const [name, pattern] of Object.entries(spec.claimPatterns ?? {})) {
    if (!stringMatches({ kind: "pattern", value: pattern }, claimString(claims[name]))) return `claim ${name} does not match its pattern`;
  }
  return undefined;
}

export function claimsMatch(spec: ClaimMatchSpec, claims: TokenClaims): boolean {
  return claimMismatch(spec, claims) === undefined;
}

/** Whether the spec names an exact issuer and an exact subject (required to assume it directly on API calls). */
export function isExactIssuerAndSubject(spec: ClaimMatchSpec): boolean {
  return spec.issuer?.kind === "exact" && spec.subject?.kind === "exact";
}

/** The spec of a generated Identity.ClaimMatch. */
export function claimMatchSpecOf(cm: Identity_ClaimMatch): ClaimMatchSpec {
  const of = (o: { case: string | undefined; value?: string }, exact: string): StringMatcher | undefined =>
    o.case === undefined || o.value === undefined ? undefined : { kind: o.case === exact ? "exact" : "pattern", value: o.value };
  return {
    issuer: of(cm.iss, "issuer"),
    subject: of(cm.sub, "subject"),
    audience: of(cm.aud, "audience"),
    claims: cm.claims,
    claimPatterns: cm.claimPatterns,
  };
}
