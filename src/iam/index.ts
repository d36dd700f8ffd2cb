// The IAM domain's services.
import { ExternalGroupRoleMappingsService } from "../../gen/chainguard/platform/iam/v2/external_group_role_mappings_pb.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentitiesService } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { IdentityProvidersService } from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { RolesService } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import { GroupInviteAcceptanceService } from "../../gen/apiserver/iam/v1/group_invites_pb.js";
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
    // Terms, and the owners' list of group access requests (issue 12, parts 3 and 4).
    ...termsBindings(deps),
    ...groupAccessRequestsBindings(deps),
    ...groupInvitesBindings(deps),
    ...groupInviteAcceptanceBindings(deps),
  ];
}

/**
 * The services whose writes can change what a caller is granted (an identity's home group or existence, a
 * role's capabilities, role bindings, and the mappings whose deletion deletes the bindings they made;
 * deleting an identity provider deletes its mappings and so their bindings; accepting a group invite makes
 * an identity and a binding; creating an organization binds its founder as owner): after each, the server
 * forgets the grants it remembered, before it answers. Other servers hear of it by the database's
 * notification, which may come later: a service missing here lets this server's next call be answered from
 * the grants before the change (test/integration/grants-freshness.test.ts).
 */
export const grantServiceNames: readonly string[] = [
  // CreateGroup without a parent makes an organization and binds its founder as owner.
  GroupsService.typeName,
  IdentitiesService.typeName,
  RolesService.typeName,
  RoleBindingsService.typeName,
  ExternalGroupRoleMappingsService.typeName,
  IdentityProvidersService.typeName,
  // Accepting an invite creates an identity and a role binding.
  GroupInviteAcceptanceService.typeName,
];
