// Identity provider rows <-> chainguard.platform.iam.v2.IdentityProvider. The OIDC client secret is
// write-only: a response always carries it empty. The SCIM block is computed from the stored credential
// state at the time of the read.
import { create } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  IdentityProvider_OIDC_CorrelationRule as CorrelationRule,
  IdentityProvider_OIDCSchema,
  IdentityProvider_SCIM_CredentialState as CredentialState,
  IdentityProvider_SCIMSchema,
  IdentityProviderSchema,
  type IdentityProvider,
  type IdentityProvider_SCIM,
} from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import type { IdentityProviderRow } from "../db/schema/index.js";

/**
 * Stands for "the stored client secret" in the message an update is applied to, so the PATCH rules can
 * tell a secret left alone (kept) from one the mask names (replaced, or cleared when empty). It holds
 * control characters, which a client's secret may not (identity-providers.validate.ts): it can never
 * come from a request, and it never leaves the server (responses are built from rows).
 */
export const STORED_SECRET = "\u0000stored client secret\u0000";

/** The SCIM columns of a provider. */
export type ScimFields = Pick<
  IdentityProviderRow,
  "scimEnabled" | "scimEtag" | "scimTokenHash" | "scimTokenExpireTime" | "scimPreviousTokenHash" | "scimPreviousTokenExpireTime" | "scimRevokeTime"
>;

/** Where a provider's SCIM service lives (agreed with the SCIM endpoint): `<issuer>/scim/v2/<provider uid>`. */
export function scimEndpointUrl(issuerUrl: string, uid: string): string {
  return `${issuerUrl.replace(/\/+$/, "")}/scim/v2/${uid}`;
}

/** Whether a token with this expire time (null: never) is still valid at `now`. */
const unexpired = (expire: Date | null, now: Date) => expire === null || expire.getTime() > now.getTime();

/**
 * The state of the credential at `now`: NOT_ISSUED (never, and not revoked), REVOKED (revoked, nothing
 * issued since), EXPIRED (the current token's time has passed), ROTATING (a regeneration's previous token
 * still valid beside the new one), else LIVE.
 */
export function credentialStateOf(row: ScimFields, now: Date): CredentialState {
  if (row.scimTokenHash === null) return row.scimRevokeTime !== null ? CredentialState.REVOKED : CredentialState.NOT_ISSUED;
  if (!unexpired(row.scimTokenExpireTime, now)) return CredentialState.EXPIRED;
  if (row.scimPreviousTokenHash !== null && row.scimPreviousTokenExpireTime !== null && unexpired(row.scimPreviousTokenExpireTime, now)) {
    return CredentialState.ROTATING;
  }
  return CredentialState.LIVE;
}

/** Whether a token is valid now: a new one may not be generated over it. */
export function hasLiveToken(row: ScimFields, now: Date): boolean {
  const state = credentialStateOf(row, now);
  return state === CredentialState.LIVE || state === CredentialState.ROTATING;
}

export function toScim(row: IdentityProviderRow, issuerUrl: string, now = new Date()): IdentityProvider_SCIM {
  const rotating = row.scimPreviousTokenHash !== null && row.scimPreviousTokenExpireTime !== null;
  return create(IdentityProvider_SCIMSchema, {
    enabled: row.scimEnabled,
    endpointUrl: scimEndpointUrl(issuerUrl, row.uid),
    tokenExpireTime: row.scimTokenHash !== null && row.scimTokenExpireTime ? timestampFromDate(row.scimTokenExpireTime) : undefined,
    previousTokenExpireTime: rotating ? timestampFromDate(row.scimPreviousTokenExpireTime!) : undefined,
    credentialState: credentialStateOf(row, now),
    etag: row.scimEtag,
  });
}

/** The provider as a response carries it: the client secret left empty. */
export function toIdentityProvider(row: IdentityProviderRow, issuerUrl: string): IdentityProvider {
  return create(IdentityProviderSchema, {
    uid: row.uid,
    name: row.name,
    description: row.description,
    defaultRole: row.defaultRoleUid,
    configuration: {
      case: "oidc",
      value: create(IdentityProvider_OIDCSchema, {
        issuer: row.oidcIssuer,
        clientId: row.oidcClientId,
        additionalScopes: row.oidcAdditionalScopes,
        groupsClaim: row.oidcGroupsClaim,
        correlationRule: row.oidcCorrelationRule as CorrelationRule,
        pkceEnabled: row.oidcPkceEnabled,
      }),
    },
    scim: toScim(row, issuerUrl),
    createTime: timestampFromDate(row.createTime),
    updateTime: timestampFromDate(row.updateTime),
  });
}

/** The provider as an update starts from: a stored client secret stands as STORED_SECRET. */
export function toUpdatable(row: IdentityProviderRow): IdentityProvider {
  const p = toIdentityProvider(row, "");
  if (p.configuration.case === "oidc" && row.oidcClientSecret !== null) p.configuration.value.clientSecret = STORED_SECRET;
  p.scim = undefined;
  return p;
}

/** The OIDC block of a provider message, or an empty one. */
export function oidcOf(p: IdentityProvider) {
  return p.configuration.case === "oidc" ? p.configuration.value : create(IdentityProvider_OIDCSchema);
}

/**
 * The client-writable columns of a provider message, but the secret: the service seals it (or keeps the
 * stored one). An unspecified correlation rule is stored as the default, sub.
 */
export function identityProviderFields(p: IdentityProvider) {
  const oidc = oidcOf(p);
  return {
    name: p.name,
    description: p.description,
    defaultRoleUid: p.defaultRole,
    oidcIssuer: oidc.issuer,
    oidcClientId: oidc.clientId,
    oidcAdditionalScopes: oidc.additionalScopes,
    oidcGroupsClaim: oidc.groupsClaim,
    oidcCorrelationRule: oidc.correlationRule === CorrelationRule.UNSPECIFIED ? CorrelationRule.SUB_EQUALS_EXTERNAL_ID : oidc.correlationRule,
    oidcPkceEnabled: oidc.pkceEnabled,
  };
}
