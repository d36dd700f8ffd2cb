// Validation of IAM resources as clients send them: groups, identities (with their relationship) and identity
// metadata. Every check yields field violations (paths are proto field names relative to the resource, so an
// identity's bad name is reported on `name`, as the specification's error table shows); `throwIfAny` turns
// them into one INVALID_ARGUMENT ("Invalid argument: <field>: <description>; ...") with a BadRequest.
//
// Regular expressions that identities store (issuer/subject/audience patterns, claim patterns, AWS ARN and
// user id patterns) are matched later anchored, on the linear-time RE2 engine: they are compiled here in the
// same anchored form, so what is accepted now can be evaluated then.
import { RE2JS } from "re2js";
import { OrgKindSchema, type Group } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import {
  ServicePrincipal,
  ServicePrincipalSchema,
  type Identity,
  type Identity_AWSIdentity,
  type Identity_ClaimMatch,
  type Identity_StaticKeys,
  type IdentityMetadata,
} from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import type { FieldViolation } from "../kernel/errors/index.js";
import { UID_MAX_LENGTH } from "../kernel/uidp.js";

/** The identity name pattern of the specification. */
export const IDENTITY_NAME_PATTERN = "^[a-z0-9 ._-]{1,}$";
const IDENTITY_NAME = new RegExp(IDENTITY_NAME_PATTERN);

export const MAX_NAME_LENGTH = 256;
export const MAX_DESCRIPTION_LENGTH = 4096;
export const MAX_COMPANY_LENGTH = 256;
export const MAX_URL_LENGTH = 2048;
export const MAX_CLAIM_VALUE_LENGTH = 1024;
export const MAX_PATTERN_LENGTH = 1024;
export const MAX_CLAIMS = 32;
export const MAX_AUDIENCES = 32;
export const MAX_JWKS_LENGTH = 64 * 1024;
export const MAX_JWKS_KEYS = 32;
export const MAX_METADATA_VALUE_LENGTH = 2048;


// A control character (C0, DEL, C1): never in a display name.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

function lengthViolation(field: string, value: string, max: number): FieldViolation[] {
  return value.length > max ? [{ field, description: `must be at most ${max} characters long` }] : [];
}

// ---------------------------------------------------------------------------------------------------------
// Groups

/** Length of the suffix newChildUid adds: "/" and 16 hex characters. */
const CHILD_SUFFIX_LENGTH = 17;

/** A resource created under `parent` gets a uid longer than any uid accepted when the tree is too deep there. */
export function parentDepthViolations(parent: string): FieldViolation[] {
  return parent.length + CHILD_SUFFIX_LENGTH > UID_MAX_LENGTH
    ? [{ field: "parent", description: `the group tree is too deep here: a uid beneath it would exceed ${UID_MAX_LENGTH} characters` }]
    : [];
}

/** Which group fields to check: all of them (create) or the ones an update changed. */
type Only = readonly string[] | undefined;
const checks = (only: Only, field: string) => only === undefined || only.some((p) => p === field || p.startsWith(field + "."));

export function groupViolations(group: Group, only?: Only): FieldViolation[] {
  const out: FieldViolation[] = [];
  if (checks(only, "name")) {
    if (group.name.trim() === "") out.push({ field: "name", description: "is required" });
    else if (CONTROL.test(group.name)) out.push({ field: "name", description: "must not contain control characters" });
    else out.push(...lengthViolation("name", group.name, MAX_NAME_LENGTH));
  }
  if (checks(only, "description")) out.push(...lengthViolation("description", group.description, MAX_DESCRIPTION_LENGTH));
  if (checks(only, "kind") && !OrgKindSchema.values.some((v) => v.number === group.kind)) {
    out.push({ field: "kind", description: `${group.kind} is not an OrgKind value` });
  }
  // LookupGroup points people at the verified organization named after their email domain: only the
  // server's operator vouches for that (npm run bootstrap -- --verified). A caller may clear the mark.
  if (checks(only, "verified") && group.verified) {
    out.push({ field: "verified", description: "can be set only by the server's operator (npm run bootstrap -- --verified); it may be cleared" });
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------
// Identities

/** The fields of the relationship oneof, by proto name. */
export const RELATIONSHIP_FIELDS = ["claim_match", "static_keys", "aws_identity", "service_principal"] as const;

export function identityNameViolations(name: string): FieldViolation[] {
  if (name === "") return [{ field: "name", description: `is required and must match the pattern ${IDENTITY_NAME_PATTERN}` }];
  if (!IDENTITY_NAME.test(name)) return [{ field: "name", description: `must match the pattern ${IDENTITY_NAME_PATTERN}` }];
  return lengthViolation("name", name, MAX_NAME_LENGTH);
}

/** Checks an identity as it would be stored: every field (create), or only the paths an update changed. */
export function identityViolations(identity: Identity, only?: Only): FieldViolation[] {
  const out: FieldViolation[] = [];
  if (checks(only, "name")) out.push(...identityNameViolations(identity.name));
  if (checks(only, "description")) out.push(...lengthViolation("description", identity.description, MAX_DESCRIPTION_LENGTH));
  if (checks(only, "company")) out.push(...lengthViolation("company", identity.company, MAX_COMPANY_LENGTH));
  if (only === undefined || RELATIONSHIP_FIELDS.some((f) => checks(only, f))) out.push(...relationshipViolations(identity.relationship));
  return out;
}

export function relationshipViolations(relationship: Identity["relationship"]): FieldViolation[] {
  switch (relationship.case) {
    case "claimMatch":
      return claimMatchViolations(relationship.value, "claim_match");
    case "staticKeys":
      return staticKeysViolations(relationship.value, "static_keys");
    case "awsIdentity":
      return awsIdentityViolations(relationship.value, "aws_identity");
    case "servicePrincipal":
      return servicePrincipalViolations(relationship.value, "service_principal");
    default:
      return [{ field: "relationship", description: `exactly one of ${RELATIONSHIP_FIELDS.join(", ")} is required` }];
  }
}

/** Loopback hosts, for which a plain http issuer is accepted (local development). */
function isLoopback(hostname: string): boolean {
  return hostname === "localhost" || hostname === "[::1]" || /^127(?:\.\d{1,3}){3}$/.test(hostname);
}

/** An OIDC issuer: an https URL (http only for a loopback host), no credentials, query or fragment. */
export function issuerViolations(field: string, value: string): FieldViolation[] {
  if (value === "") return [{ field, description: "is required" }];
  if (value.length > MAX_URL_LENGTH) return [{ field, description: `must be at most ${MAX_URL_LENGTH} characters long` }];
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return [{ field, description: "must be an https URL" }];
  }
  if (url.protocol !== "https:" && !(url.protocol === "http:" && isLoopback(url.hostname))) {
    return [{ field, description: "must be an https URL (plain http only for a loopback host)" }];
  }
  if (url.username || url.password || url.search || url.hash || value.includes("#") || value.includes("?")) {
    return [{ field, description: "must not carry credentials, a query or a fragment" }];
  }
  return [];
}

/** A pattern that compiles on RE2 in the anchored form it is matched with. */
export function patternViolations(field: string, pattern: string): FieldViolation[] {
  if (pattern === "") return [{ field, description: "must not be empty" }];
  if (pattern.length > MAX_PATTERN_LENGTH) return [{ field, description: `must be at most ${MAX_PATTERN_LENGTH} characters long` }];
  try {
    // On its own first, so a pattern with unbalanced parentheses ("a)|(b") cannot escape the anchoring.
    RE2JS.compile(pattern);
    RE2JS.compile(`^(?:${pattern})$`);
  } catch (err) {
    const why = err instanceof Error ? err.message : "invalid";
    return [{ field, description: `is not a valid RE2 regular expression (${why.slice(0, 200)})` }];
  }
  return [];
}

function valueViolations(field: string, value: string): FieldViolation[] {
  if (value === "") return [{ field, description: "must not be empty" }];
  return lengthViolation(field, value, MAX_CLAIM_VALUE_LENGTH);
}

function claimMatchViolations(m: Identity_ClaimMatch, at: string): FieldViolation[] {
  const out: FieldViolation[] = [];
  if (m.iss.case === "issuer") out.push(...issuerViolations(`${at}.issuer`, m.iss.value));
  else if (m.iss.case === "issuerPattern") out.push(...patternViolations(`${at}.issuer_pattern`, m.iss.value));
  else out.push({ field: `${at}.issuer`, description: "issuer or issuer_pattern is required" });

  if (m.sub.case === "subject") out.push(...valueViolations(`${at}.subject`, m.sub.value));
  else if (m.sub.case === "subjectPattern") out.push(...patternViolations(`${at}.subject_pattern`, m.sub.value));
  else out.push({ field: `${at}.subject`, description: "subject or subject_pattern is required" });

  if (m.aud.case === "audience") out.push(...valueViolations(`${at}.audience`, m.aud.value));
  else if (m.aud.case === "audiencePattern") out.push(...patternViolations(`${at}.audience_pattern`, m.aud.value));

  const claims = Object.entries(m.claims);
  const patterns = Object.entries(m.claimPatterns);
  if (claims.length > MAX_CLAIMS) out.push({ field: `${at}.claims`, description: `at most ${MAX_CLAIMS} claims` });
  if (patterns.length > MAX_CLAIMS) out.push({ field: `${at}.claim_patterns`, description: `at most ${MAX_CLAIMS} claim patterns` });
  for (const [k, v] of claims.slice(0, MAX_CLAIMS)) {
    if (k === "") out.push({ field: `${at}.claims`, description: "claim names must not be empty" });
    else out.push(...lengthViolation(`${at}.claims[${JSON.stringify(k.slice(0, 64))}]`, v, MAX_CLAIM_VALUE_LENGTH));
  }
  for (const [k, v] of patterns.slice(0, MAX_CLAIMS)) {
    if (k === "") out.push({ field: `${at}.claim_patterns`, description: "claim names must not be empty" });
    else out.push(...patternViolations(`${at}.claim_patterns[${JSON.stringify(k.slice(0, 64))}]`, v));
  }
  return out;
}

/** Members that only private (or symmetric) JSON Web Keys have. */
const PRIVATE_MEMBERS = ["d", "p", "q", "dp", "dq", "qi", "oth", "k"];
const PUBLIC_MEMBERS: Readonly<Record<string, readonly string[]>> = { RSA: ["n", "e"], EC: ["crv", "x", "y"], OKP: ["crv", "x"] };

/** Why `text` is not a JSON Web Key Set of public keys, or undefined when it is one. */
export function jwksProblem(text: string): string | undefined {
  if (text === "") return "is required: a JSON Web Key Set holding the issuer's public keys";
  if (text.length > MAX_JWKS_LENGTH) return `must be at most ${MAX_JWKS_LENGTH} characters long`;
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return "must be a JSON Web Key Set (JSON)";
  }
  const keys = (parsed as { keys?: unknown } | null)?.keys;
  if (typeof parsed !== "object" || parsed === null || !Array.isArray(keys)) return 'must be a JSON Web Key Set: an object with a "keys" array';
  if (keys.length === 0) return "must hold at least one public key";
  if (keys.length > MAX_JWKS_KEYS) return `must hold at most ${MAX_JWKS_KEYS} keys`;
  for (const [i, key] of keys.entries()) {
    if (typeof key !== "object" || key === null || Array.isArray(key)) return `key ${i} is not a JSON object`;
    const jwk = key as Record<string, unknown>;
    if (PRIVATE_MEMBERS.some((m) => m in jwk)) return `key ${i} holds private or symmetric key material: give public keys only`;
    const required = typeof jwk.kty === "string" ? PUBLIC_MEMBERS[jwk.kty] : undefined;
    if (!required) return `key ${i} must have kty RSA, EC or OKP`;
    const missing = required.find((m) => typeof jwk[m] !== "string" || jwk[m] === "");
    if (missing) return `key ${i} (${String(jwk.kty)}) lacks its "${missing}" member`;
  }
  return undefined;
}

function staticKeysViolations(k: Identity_StaticKeys, at: string): FieldViolation[] {
  const out: FieldViolation[] = [...issuerViolations(`${at}.issuer`, k.issuer)];
  if (k.subject === "") out.push({ field: `${at}.subject`, description: "is required" });
  else out.push(...lengthViolation(`${at}.subject`, k.subject, MAX_CLAIM_VALUE_LENGTH));
  const problem = jwksProblem(k.issuerKeys);
  if (problem) out.push({ field: `${at}.issuer_keys`, description: problem });
  if (k.audiences.length > MAX_AUDIENCES) out.push({ field: `${at}.audiences`, description: `at most ${MAX_AUDIENCES} audiences` });
  else if (k.audiences.some((a) => a === "" || a.length > MAX_CLAIM_VALUE_LENGTH)) {
    out.push({ field: `${at}.audiences`, description: `each audience must be 1 to ${MAX_CLAIM_VALUE_LENGTH} characters long` });
  }
  return out;
}

function awsIdentityViolations(a: Identity_AWSIdentity, at: string): FieldViolation[] {
  const out: FieldViolation[] = [];
  if (!/^[0-9]{12}$/.test(a.awsAccount)) out.push({ field: `${at}.aws_account`, description: "must be a 12-digit AWS account id" });
  if (a.awsArn.case === "arn") out.push(...valueViolations(`${at}.arn`, a.awsArn.value));
  else if (a.awsArn.case === "arnPattern") out.push(...patternViolations(`${at}.arn_pattern`, a.awsArn.value));
  if (a.awsUserId.case === "userId") out.push(...valueViolations(`${at}.user_id`, a.awsUserId.value));
  else if (a.awsUserId.case === "userIdPattern") out.push(...patternViolations(`${at}.user_id_pattern`, a.awsUserId.value));
  return out;
}

function servicePrincipalViolations(p: ServicePrincipal, at: string): FieldViolation[] {
  if (p === ServicePrincipal.UNSPECIFIED) return [{ field: at, description: "must name a service principal (not SERVICE_PRINCIPAL_UNSPECIFIED)" }];
  if (!ServicePrincipalSchema.values.some((v) => v.number === p)) return [{ field: at, description: `${p} is not a ServicePrincipal value` }];
  return [];
}

// ---------------------------------------------------------------------------------------------------------
// Identity metadata

/** Length limits on the metadata a caller maintains about itself (checked on the fields an update changed). */
export function identityMetadataViolations(metadata: IdentityMetadata, changed: readonly string[]): FieldViolation[] {
  const out: FieldViolation[] = [];
  const record = metadata as unknown as Record<string, unknown>;
  for (const path of changed) {
    const local = path.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());
    const value = record[local];
    if (typeof value !== "string") continue;
    out.push(...lengthViolation(path, value, path === "company" ? MAX_COMPANY_LENGTH : MAX_METADATA_VALUE_LENGTH));
  }
  return out;
}
