// The IAM domain: groups, identities, roles and their bindings, single sign-on (identity providers, SCIM),
// terms, group access requests and invites; and what the kernel needs of identities (its hooks).
import { AccountAssociationsService } from "../../gen/chainguard/platform/iam/v2/account_associations_pb.js";
import { ExternalGroupRoleMappingsService } from "../../gen/chainguard/platform/iam/v2/external_group_role_mappings_pb.js";
import { GroupAccessRequestsService } from "../../gen/apiserver/iam/v1/group_access_requests_pb.js";
import { GroupInviteAcceptanceService } from "../../gen/apiserver/iam/v1/group_invites_pb.js";
import { GroupInvitesService } from "../../gen/chainguard/platform/iam/v2/group_invites_pb.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentitiesService } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { IdentityProvidersService } from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { RolesService } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import { TermsService } from "../../gen/chainguard/platform/iam/v2/terms_pb.js";
import { servedServices } from "../kernel/descriptors.js";
import type { DomainModule } from "../kernel/module.js";
import { accountAssociationsBindings } from "./account-associations.service.js";
import type { IamDeps } from "./deps.js";
import { createIdentityDirectory } from "./directory.js";
import { externalGroupRoleMappingsBindings } from "./external-group-role-mappings.service.js";
import { groupAccessRequestsBindings } from "./group-access.service.js";
import { groupInviteAcceptanceBindings } from "./group-invites.accept.js";
import { groupInvitesBindings } from "./group-invites.service.js";
import { groupsBindings } from "./groups.service.js";
import { identitiesBindings } from "./identities.service.js";
import { identityProvidersBindings } from "./identity-providers.service.js";
import { roleBindingsBindings } from "./role-bindings.service.js";
import { rolesBindings } from "./roles.service.js";
import { createScimRoutes } from "./scim.routes.js";
import { termsBindings } from "./terms.service.js";
import { createTermsStore } from "./terms.store.js";

export { createProviderLogin } from "./sso-login.js";
export type { IamDeps } from "./deps.js";

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
const grantServiceNames: readonly string[] = servedServices.filter((s) => IAM_PACKAGES.has(s.file.proto.package ?? "")).map((s) => s.typeName);

export interface IamModuleDeps extends IamDeps {
  /** Forgets the grants this server remembers: SCIM runs it after every write, before its response. */
  grantsChanged: () => void;
  /** The largest request body SCIM reads. */
  maxBodyBytes: number;
}

export const iamModule: DomainModule<IamModuleDeps> = {
  name: "iam",
  services: [
    GroupsService,
    IdentitiesService,
    RolesService,
    RoleBindingsService,
    ExternalGroupRoleMappingsService,
    IdentityProvidersService,
    AccountAssociationsService,
    TermsService,
    GroupAccessRequestsService,
    GroupInvitesService,
    GroupInviteAcceptanceService,
  ],
  create: (deps) => ({
    bindings: [
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
    ],
    // SCIM 2.0 (identity providers provisioning their users): its own paths and shapes, outside the contract.
    routes: [{ name: "scim", ...createScimRoutes({ db: deps.db, issuerUrl: deps.issuerUrl, maxBodyBytes: deps.maxBodyBytes, grantsChanged: deps.grantsChanged }) }],
  }),
  hooks: ({ db }) => {
    const terms = createTermsStore(db);
    return { directory: createIdentityDirectory(db), termsAccepted: (uid) => terms.acceptedFor(uid), grantServices: grantServiceNames };
  },
};
