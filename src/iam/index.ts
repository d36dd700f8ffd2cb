// The IAM domain's services.
import { servedServices } from "../kernel/descriptors.js";
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";
import { accountAssociationsBindings } from "./account-associations.service.js";
import { externalGroupRoleMappingsBindings } from "./external-group-role-mappings.service.js";
import { groupAccessRequestsBindings } from "./group-access.service.js";
import { groupsBindings } from "./groups.service.js";
import { groupInviteAcceptanceBindings } from "./group-invites.accept.js";
import { groupInvitesBindings } from "./group-invites.service.js";
import { identitiesBindings } from "./identities.service.js";
import { identityProvidersBindings } from "./identity-providers.service.js";
import { roleBindingsBindings } from "./role-bindings.service.js";
import { rolesBindings } from "./roles.service.js";
import { termsBindings } from "./terms.service.js";

export function iamBindings(deps: DomainDeps): ServiceBinding[] {
  return [
    ...groupsBindings(deps),
    ...identitiesBindings(deps),
    ...rolesBindings(deps),
    ...roleBindingsBindings(deps),
    ...externalGroupRoleMappingsBindings(deps),
    ...identityProvidersBindings(deps),
    ...accountAssociationsBindings(deps),
    // Terms, and the owners' list of group access requests: IAM's because both stand before work in a group
    // (an organization accepts the operator's terms; a person asks to be let in).
    ...termsBindings(deps),
    ...groupAccessRequestsBindings(deps),
    ...groupInvitesBindings(deps),
    ...groupInviteAcceptanceBindings(deps),
  ];
}

/** The packages of the IAM domain's services (the contract's and this server's own). */
const IAM_PACKAGES = new Set(["chainguard.platform.iam.v2", "apiserver.iam.v1"]);

/**
 * The services whose writes can change what a caller is granted: every service of the IAM domain. Grants
 * hang on identities (their home group, their existence), roles (their capabilities) and role bindings, and
 * many IAM writes reach them indirectly (creating an organization binds its founder as owner; deleting an
 * identity provider deletes its mappings and so the bindings they made; accepting an invite makes an identity
 * and a binding). After each such write the server forgets the grants it remembered, before it answers;
 * other servers hear of it by the database's notification, which may come later. Every IAM service rather
 * than a chosen few, so a write path added later cannot be missed (CreateGroup was, once:
 * test/integration/grants-freshness.test.ts). IAM writes are rare; forgetting costs the next call of each
 * caller one read.
 */
export const grantServiceNames: readonly string[] = servedServices.filter((s) => IAM_PACKAGES.has(s.file.proto.package ?? "")).map((s) => s.typeName);
