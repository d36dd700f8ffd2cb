// Validation of identity providers as clients send them. Violation paths are proto field names relative to
// the provider (`name`, `oidc.issuer`); the service reports them under `identity_provider`. On update only
// the paths that changed are checked, so a value stored under older rules never blocks an unrelated change.
// What needs the database (the default role exists, is visible from the group, and grants nothing the
// caller lacks) is the service's. A client secret is never quoted in an error.
import {
  IdentityProvider_OIDC_CorrelationRuleSchema,
  type IdentityProvider,
} from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { checkIssuerUrl } from "../kernel/auth/external.js";
import type { FieldViolation } from "../kernel/errors/index.js";
import { hostRefusal, type OutboundPolicy } from "../kernel/outbound.js";
import { isRootUid, isValidUid, isWithin, parentOf } from "../kernel/uidp.js";
import { oidcOf, STORED_SECRET } from "./identity-providers.mapper.js";

export const MIN_NAME_LENGTH = 3;
export const MAX_NAME_LENGTH = 63;
export const MAX_DESCRIPTION_LENGTH = 4096;
export const MAX_ISSUER_LENGTH = 2048;
export const MAX_CLIENT_ID_LENGTH = 512;
export const MAX_CLIENT_SECRET_LENGTH = 1024;
export const MAX_SCOPES = 32;
export const MAX_SCOPE_LENGTH = 256;
export const MAX_GROUPS_CLAIM_LENGTH = 256;

// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
/** A scope token (RFC 6749, section 3.3): printable ASCII but space, '"' and '\'. */
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]+$/;

type Only = readonly string[] | undefined;
const checks = (only: Only, field: string) => only === undefined || only.some((p) => p === "*" || p === field || p.startsWith(field + ".") || field.startsWith(p + "."));

function text(field: string, value: string, max: number, required: boolean): FieldViolation[] {
  if (value === "") return required ? [{ field, description: "is required" }] : [];
  if (value.length > max) return [{ field, description: `must be at most ${max} characters long` }];
  if (CONTROL.test(value)) return [{ field, description: "must not contain control characters" }];
  return [];
}

/**
 * The provider's own fields (all on create; the changed ones on update). `issuers`: where an issuer may be
 * (plain http on loopback in development; in production, with publicOnly, a host resolving to public
 * addresses only, as for event sinks: an issuer on a private, loopback or link-local address is refused when
 * named, not only when the server first connects to it).
 */
export async function identityProviderViolations(p: IdentityProvider, issuers: OutboundPolicy, only?: Only): Promise<FieldViolation[]> {
  const out: FieldViolation[] = [];
  if (checks(only, "name")) {
    if (p.name === "") out.push({ field: "name", description: "is required" });
    else if (p.name.length < MIN_NAME_LENGTH || p.name.length > MAX_NAME_LENGTH) {
      out.push({ field: "name", description: `must be ${MIN_NAME_LENGTH} to ${MAX_NAME_LENGTH} characters long` });
    } else if (CONTROL.test(p.name) || p.name.trim() !== p.name) {
      out.push({ field: "name", description: "must not contain control characters, nor start or end with a space" });
    }
  }
  if (checks(only, "description")) out.push(...text("description", p.description, MAX_DESCRIPTION_LENGTH, false));
  if (checks(only, "default_role")) {
    if (p.defaultRole === "") out.push({ field: "default_role", description: "is required" });
    else if (!isValidUid(p.defaultRole)) out.push({ field: "default_role", description: "is not a valid uid" });
  }
  if (p.configuration.case !== "oidc") {
    if (checks(only, "oidc")) out.push({ field: "oidc", description: "is required: the provider's OpenID Connect configuration" });
    return out;
  }
  const oidc = oidcOf(p);
  if (checks(only, "oidc.issuer")) {
    const v = text("oidc.issuer", oidc.issuer, MAX_ISSUER_LENGTH, true);
    if (v.length === 0) {
      const checked = checkIssuerUrl(oidc.issuer, issuers.allowInsecureLoopback);
      if ("refused" in checked) {
        v.push({ field: "oidc.issuer", description: `must be an https URL (plain http only for a loopback host in development), no credentials, query or fragment: ${checked.refused}` });
      } else {
        const refusal = await hostRefusal(checked.url.hostname, issuers);
        if (refusal !== undefined) v.push({ field: "oidc.issuer", description: refusal });
      }
    }
    out.push(...v);
  }
  if (checks(only, "oidc.client_id")) out.push(...text("oidc.client_id", oidc.clientId, MAX_CLIENT_ID_LENGTH, true));
  if (checks(only, "oidc.client_secret") && oidc.clientSecret !== STORED_SECRET) {
    out.push(...text("oidc.client_secret", oidc.clientSecret, MAX_CLIENT_SECRET_LENGTH, false));
  }
  if ((checks(only, "oidc.client_secret") || checks(only, "oidc.pkce_enabled")) && oidc.clientSecret === "" && !oidc.pkceEnabled) {
    out.push({ field: "oidc.client_secret", description: "a client_secret is required unless pkce_enabled is set" });
  }
  if (checks(only, "oidc.additional_scopes")) {
    const scopes = oidc.additionalScopes;
    if (scopes.length > MAX_SCOPES) out.push({ field: "oidc.additional_scopes", description: `at most ${MAX_SCOPES} entries` });
    else {
      const bad = scopes.findIndex((s) => s.length > MAX_SCOPE_LENGTH || !SCOPE_TOKEN.test(s));
      if (bad >= 0) out.push({ field: `oidc.additional_scopes[${bad}]`, description: "must be an OAuth scope token (printable ASCII, no space, quote or backslash)" });
      else if (new Set(scopes).size !== scopes.length) out.push({ field: "oidc.additional_scopes", description: "must not repeat an entry" });
    }
  }
  if (checks(only, "oidc.groups_claim")) out.push(...text("oidc.groups_claim", oidc.groupsClaim, MAX_GROUPS_CLAIM_LENGTH, false));
  if (checks(only, "oidc.correlation_rule") && !IdentityProvider_OIDC_CorrelationRuleSchema.values.some((v) => v.number === oidc.correlationRule)) {
    out.push({ field: "oidc.correlation_rule", description: `${oidc.correlationRule} is not a CorrelationRule value` });
  }
  return out;
}

/**
 * Whether a role uid names a role that means something on `group`: a managed role (no '/'), or a custom
 * role defined on the group or one of its ancestors (as for role bindings).
 */
export function isRoleVisibleFrom(role: string, group: string): boolean {
  return isRootUid(role) || isWithin(group, parentOf(role)!);
}
