// The IAM domain's services.
import { IdentitiesService } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { IdentityProvidersService } from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { RolesService } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";
import { groupsBindings } from "./groups.service.js";
import { identitiesBindings } from "./identities.service.js";
import { identityProvidersBindings } from "./identity-providers.service.js";
import { roleBindingsBindings } from "./role-bindings.service.js";
import { rolesBindings } from "./roles.service.js";

export function iamBindings(deps: DomainDeps): ServiceBinding[] {
  return [
    ...groupsBindings(deps),
    ...identitiesBindings(deps),
    ...rolesBindings(deps),
    ...roleBindingsBindings(deps),
    ...identityProvidersBindings(deps),
  ];
}

/**
 * The services whose writes can change what a caller is granted (an identity's home group or existence, a
 * role's capabilities, role bindings; deleting an identity provider deletes the bindings its mappings
 * made): after each, the server forgets the grants it remembered.
 */
export const grantServiceNames: readonly string[] = [
  IdentitiesService.typeName,
  RolesService.typeName,
  RoleBindingsService.typeName,
  IdentityProvidersService.typeName,
];
