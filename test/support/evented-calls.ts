// The calls of every method that declares an event (apiserver.options.v1.event), for tests that must cover
// each: per method (keyed "<Service>.<Method>"), a call that succeeds (its fixtures made first, over Connect as
// the owner) and a call refused after authorization. A test gets the table at collection time and calls
// `prepare` once its server and world exist (before any row runs): it adds what some rows need (a custom role
// for the readme, two identity providers in the team).
import type { DescMethod, DescMethodUnary, MessageShape } from "@bufbuild/protobuf";
import { Code } from "@connectrpc/connect";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { AccountAssociationsService } from "../../gen/chainguard/platform/iam/v2/account_associations_pb.js";
import { ExternalGroupRoleMappingsService } from "../../gen/chainguard/platform/iam/v2/external_group_role_mappings_pb.js";
import { GroupInvitesService } from "../../gen/chainguard/platform/iam/v2/group_invites_pb.js";
import { GroupsService } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { IdentityProvidersService } from "../../gen/chainguard/platform/iam/v2/identity_providers_pb.js";
import { IdentitiesService } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { RoleBindingsService } from "../../gen/chainguard/platform/iam/v2/role_bindings_pb.js";
import { RolesService } from "../../gen/chainguard/platform/iam/v2/roles_pb.js";
import { SubscriptionsService } from "../../gen/chainguard/platform/events/v2/subscriptions_pb.js";
import { ReposService } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { TagsService } from "../../gen/chainguard/platform/registry/v2/tags_pb.js";
import { groups, identityProviders, roleBindings, roles } from "../../src/db/schema/index.js";
import { managedRole } from "../../src/iam/managed-roles.js";
import { eventRuleOf } from "../../src/kernel/descriptors.js";
import { newChildUid, newRootUid } from "../../src/kernel/uidp.js";
import { call } from "../contract/harness.js";
import { implementedServices } from "./domains.js";
import type { TestServer } from "./server.js";
import type { World } from "./world.js";

/** A client secret no event body may carry (the identity providers' rows use it). */
export const CLIENT_SECRET = "outbox-client-secret-value";

export interface EventedCall {
  request: object;
  /** The event's subject and group; undefined: the response's uid (and, for group, the team). */
  subject?: string;
  group?: string;
}

export interface EventedRow {
  /** A call that succeeds (fixtures made first). */
  ok: () => Promise<EventedCall>;
  /** A call refused after authorization, with the code it gets. */
  refused: () => Promise<{ request: object; code: Code }>;
}

/** "<Service>.<Method>", the table's key. */
export const eventedKeyOf = (m: DescMethod) => `${m.parent.name}.${m.name}`;

/** The methods of the implemented services that declare an event (read from the descriptors). */
export function eventedMethods(): DescMethod[] {
  return implementedServices().flatMap((service) => service.methods.filter((m) => eventRuleOf(m) !== undefined));
}

export function createEventedCalls(): { table: Record<string, EventedRow>; prepare: (server: TestServer, world: World) => Promise<void> } {
  let server: TestServer;
  let world: World;
  let n = 0;
  const unique = (prefix: string) => `${prefix}-${++n}`;
  const digest = (i: number) => `sha256:${i.toString(16).padStart(64, "0")}`;

  /** Calls a method as the owner over Connect, for fixtures; fails the test on an error. */
  async function make<M extends DescMethodUnary>(method: M, request: object): Promise<MessageShape<M["output"]>> {
    const out = await call("connect-json", server.baseUrl, method, request as never, world.auth("owner"));
    if (out.error) throw new Error(`${method.name}: ${out.error.message}`);
    return out.message as MessageShape<M["output"]>;
  }

  const newGroup = async () => (await make(GroupsService.method.createGroup, { parent: world.team, group: { name: unique("g") } })).uid;
  const identityInit = () => ({
    name: unique("robot"),
    relationship: { case: "claimMatch", value: { iss: { case: "issuer", value: "https://issuer.test" }, sub: { case: "subject", value: unique("s") } } },
  });
  const newIdentity = async () => (await make(IdentitiesService.method.createIdentity, { parent: world.team, identity: identityInit() })).uid;
  const newRole = async () =>
    (await make(RolesService.method.createRole, { parent: world.team, role: { name: unique("r"), capabilities: [Capability.CAP_REPO_LIST] } })).uid;
  const viewer = () => managedRole("viewer").uid;
  const newBinding = async () =>
    (await make(RoleBindingsService.method.createRoleBinding, { parent: world.team, roleBinding: { identityUid: await newIdentity(), roleUid: viewer() } })).uid;
  const newRepo = async () => (await make(ReposService.method.createRepo, { parent: world.team, repo: { name: unique("repo") } })).uid;
  const newTag = async () => (await make(TagsService.method.createTag, { parent: await newRepo(), tag: { name: unique("v"), digest: digest(++n) } })).uid;
  const newSubscription = async () =>
    (await make(SubscriptionsService.method.createSubscription, { parent: world.team, subscription: { sink: `https://hooks.invalid/${unique("s")}` } })).uid;
  const bogus = () => `${world.team}/ffffffffffffffff`;
  const newAssociation = async () => {
    const group = await newGroup();
    return (await make(AccountAssociationsService.method.createAccountAssociation, { parent: group, accountAssociation: { name: unique("links") } })).uid;
  };
  /** An organization the owner holds nothing on (inserted: a group it may ask access to). */
  const foreignGroup = async () => {
    const uid = newRootUid();
    await server.database.db.insert(groups).values({ uid, parentUid: null, name: unique("elsewhere") });
    return uid;
  };
  const newInvite = async () => (await make(GroupInvitesService.method.createGroupInvite, { parent: world.team, groupInvite: { roleUid: viewer(), ttl: { seconds: 600n } } })).uid;
  /** An identity provider in the team (inserted in beforeAll: its service is not this test's), and another. */
  let provider = "";
  let otherProvider = "";
  const newMapping = async () =>
    (await make(ExternalGroupRoleMappingsService.method.createExternalGroupRoleMapping, { parent: provider, externalGroupRoleMapping: { externalGroupId: unique("g"), roleUid: viewer() } })).uid;
  const providerInit = () => ({
    name: unique("idp"),
    defaultRole: viewer(),
    configuration: { case: "oidc", value: { issuer: "https://idp.invalid", clientId: "outbox", clientSecret: CLIENT_SECRET } },
  });
  const newProvider = async () => (await make(IdentityProvidersService.method.createIdentityProvider, { parent: world.team, identityProvider: providerInit() })).uid;
  /** A provider with a live SCIM token, and the etag of its SCIM state. */
  const newProviderWithToken = async () => {
    const uid = await newProvider();
    const { etag } = await make(IdentityProvidersService.method.generateScimToken, { identityProviderUid: uid });
    return { uid, etag };
  };
  const scimEtagOf = async (uid: string) => (await make(IdentityProvidersService.method.getIdentityProvider, { uid })).scim!.etag;

  const table: Record<string, EventedRow> = {
    "GroupsService.CreateGroup": {
      ok: async () => ({ request: { parent: world.team, group: { name: unique("g") } }, group: "<subject>" }),
      refused: async () => ({ request: { parent: world.team, group: { name: "" } }, code: Code.InvalidArgument }),
    },
    "GroupsService.UpdateGroup": {
      ok: async () => ({ request: { group: { uid: await newGroup(), description: "changed" } }, group: "<subject>" }),
      refused: async () => ({ request: { group: { uid: await newGroup(), name: "" }, updateMask: { paths: ["name"] } }, code: Code.InvalidArgument }),
    },
    "GroupsService.DeleteGroup": {
      ok: async () => {
        const uid = await newGroup();
        return { request: { uid }, subject: uid, group: uid };
      },
      refused: async () => ({ request: { uid: world.team }, code: Code.FailedPrecondition }),
    },
    "IdentitiesService.CreateIdentity": {
      ok: async () => ({
        request: { parent: world.team, identity: identityInit() },
      }),
      refused: async () => ({ request: { parent: world.team, identity: { name: "Not A Name!" } }, code: Code.InvalidArgument }),
    },
    "IdentitiesService.UpdateIdentity": {
      ok: async () => ({ request: { identity: { uid: await newIdentity(), description: "changed" } } }),
      refused: async () => ({ request: { identity: { uid: await newIdentity(), name: "Not A Name!" } }, code: Code.InvalidArgument }),
    },
    "IdentitiesService.DeleteIdentity": {
      ok: async () => {
        const uid = await newIdentity();
        return { request: { uid }, subject: uid };
      },
      refused: async () => ({ request: { uid: bogus() }, code: Code.NotFound }),
    },
    "IdentitiesService.UpdateIdentityMetadata": {
      // The caller's own metadata: a root-level identity lives in no group.
      ok: async () => ({ request: { identityMetadata: { company: unique("acme") } }, subject: world.identity.owner, group: "" }),
      refused: async () => ({ request: { identityMetadata: { company: "x".repeat(300) } }, code: Code.InvalidArgument }),
    },
    "RolesService.CreateRole": {
      ok: async () => ({ request: { parent: world.team, role: { name: unique("r"), capabilities: [Capability.CAP_REPO_LIST] } } }),
      refused: async () => ({ request: { parent: world.team, role: { name: unique("r"), capabilities: [] } }, code: Code.InvalidArgument }),
    },
    "RolesService.UpdateRole": {
      ok: async () => ({ request: { role: { uid: await newRole(), description: "changed" } } }),
      refused: async () => ({ request: { role: { uid: await newRole(), capabilities: [] }, updateMask: { paths: ["capabilities"] } }, code: Code.InvalidArgument }),
    },
    "RolesService.DeleteRole": {
      ok: async () => {
        const uid = await newRole();
        return { request: { uid }, subject: uid };
      },
      refused: async () => ({ request: { uid: bogus() }, code: Code.NotFound }),
    },
    "RoleBindingsService.CreateRoleBinding": {
      ok: async () => ({ request: { parent: world.team, roleBinding: { identityUid: await newIdentity(), roleUid: viewer() } } }),
      refused: async () => ({ request: { parent: world.team, roleBinding: { identityUid: await newIdentity(), roleUid: "" } }, code: Code.InvalidArgument }),
    },
    "RoleBindingsService.BatchCreateRoleBindings": {
      // No uid in the response: the subject is the group the bindings were created on.
      ok: async () => ({
        request: { parent: world.team, requests: [{ roleBinding: { identityUid: await newIdentity(), roleUid: viewer() } }, { roleBinding: { identityUid: await newIdentity(), roleUid: viewer() } }] },
        subject: world.team,
        group: world.team,
      }),
      // The second binding exists already: the first, inserted in the same statement, is not kept either.
      refused: async () => {
        const taken = await newIdentity();
        await make(RoleBindingsService.method.createRoleBinding, { parent: world.team, roleBinding: { identityUid: taken, roleUid: viewer() } });
        return {
          request: { parent: world.team, requests: [{ roleBinding: { identityUid: await newIdentity(), roleUid: viewer() } }, { roleBinding: { identityUid: taken, roleUid: viewer() } }] },
          code: Code.AlreadyExists,
        };
      },
    },
    "RoleBindingsService.UpdateRoleBinding": {
      ok: async () => ({ request: { roleBinding: { uid: await newBinding(), roleUid: managedRole("editor").uid }, updateMask: { paths: ["role_uid"] } } }),
      refused: async () => ({ request: { roleBinding: { uid: await newBinding(), roleUid: "nope" }, updateMask: { paths: ["role_uid"] } }, code: Code.InvalidArgument }),
    },
    "RoleBindingsService.DeleteRoleBinding": {
      ok: async () => {
        const uid = await newBinding();
        return { request: { uid }, subject: uid };
      },
      refused: async () => ({ request: { uid: bogus() }, code: Code.NotFound }),
    },
    "IdentityProvidersService.CreateIdentityProvider": {
      ok: async () => ({ request: { parent: world.team, identityProvider: providerInit() } }),
      refused: async () => ({ request: { parent: world.team, identityProvider: { ...providerInit(), name: "ab" } }, code: Code.InvalidArgument }),
    },
    "IdentityProvidersService.UpdateIdentityProvider": {
      ok: async () => ({
        request: { identityProvider: { uid: await newProvider(), configuration: { case: "oidc", value: { clientSecret: `${CLIENT_SECRET}-2` } } } },
      }),
      refused: async () => ({ request: { identityProvider: { uid: await newProvider(), name: "" }, updateMask: { paths: ["name"] } }, code: Code.InvalidArgument }),
    },
    "IdentityProvidersService.DeleteIdentityProvider": {
      ok: async () => {
        const uid = await newProvider();
        return { request: { uid }, subject: uid };
      },
      refused: async () => ({ request: { uid: bogus() }, code: Code.NotFound }),
    },
    // The SCIM methods answer no uid: the subject is the provider named in the request.
    "IdentityProvidersService.GenerateScimToken": {
      ok: async () => {
        const uid = await newProvider();
        return { request: { identityProviderUid: uid }, subject: uid };
      },
      refused: async () => ({ request: { identityProviderUid: (await newProviderWithToken()).uid }, code: Code.FailedPrecondition }),
    },
    "IdentityProvidersService.RegenerateScimToken": {
      ok: async () => {
        const { uid, etag } = await newProviderWithToken();
        return { request: { identityProviderUid: uid, etag }, subject: uid };
      },
      refused: async () => ({ request: { identityProviderUid: (await newProviderWithToken()).uid, etag: "stale" }, code: Code.FailedPrecondition }),
    },
    "IdentityProvidersService.RevokeScimToken": {
      ok: async () => {
        const { uid } = await newProviderWithToken();
        return { request: { identityProviderUid: uid }, subject: uid };
      },
      refused: async () => ({ request: { identityProviderUid: bogus() }, code: Code.NotFound }),
    },
    "IdentityProvidersService.SetScimEnabled": {
      // The organization has three owners (world.ts).
      ok: async () => {
        const uid = await newProvider();
        return { request: { identityProviderUid: uid, enabled: true, etag: await scimEtagOf(uid) }, subject: uid };
      },
      refused: async () => ({ request: { identityProviderUid: await newProvider(), enabled: true, etag: "stale" }, code: Code.FailedPrecondition }),
    },
    // An association's uid is its group's: the event's subject and group are that group.
    "AccountAssociationsService.CreateAccountAssociation": {
      ok: async () => ({ request: { parent: await newGroup(), accountAssociation: { name: "links", amazon: { account: "123456789012" } } }, group: "<subject>" }),
      refused: async () => ({ request: { parent: await newGroup(), accountAssociation: { name: "links", amazon: { account: "1234" } } }, code: Code.InvalidArgument }),
    },
    "AccountAssociationsService.UpdateAccountAssociation": {
      ok: async () => ({ request: { accountAssociation: { uid: await newAssociation(), description: "changed" } }, group: "<subject>" }),
      refused: async () => ({ request: { accountAssociation: { uid: await newAssociation(), google: { projectId: "Bad" } } }, code: Code.InvalidArgument }),
    },
    "AccountAssociationsService.DeleteAccountAssociation": {
      ok: async () => {
        const uid = await newAssociation();
        return { request: { uid }, subject: uid, group: uid };
      },
      refused: async () => ({ request: { uid: await newGroup() }, code: Code.NotFound }),
    },
    "ReposService.CreateRepo": {
      ok: async () => ({ request: { parent: world.team, repo: { name: unique("repo") } } }),
      refused: async () => ({ request: { parent: world.team, repo: { name: "Not A Repo" } }, code: Code.InvalidArgument }),
    },
    "ReposService.UpdateRepo": {
      ok: async () => ({ request: { repo: { uid: await newRepo(), description: "changed" } } }),
      refused: async () => ({ request: { repo: { uid: await newRepo(), name: "Not A Repo" } }, code: Code.InvalidArgument }),
    },
    "ReposService.DeleteRepo": {
      ok: async () => {
        const uid = await newRepo();
        return { request: { uid }, subject: uid };
      },
      refused: async () => ({ request: { uid: bogus() }, code: Code.NotFound }),
    },
    "ReposService.UpdateRepoReadme": {
      ok: async () => ({ request: { repoReadme: { uid: await newRepo(), content: "# hello" } } }),
      refused: async () => ({ request: { repoReadme: { uid: bogus(), content: "# hello" } }, code: Code.NotFound }),
    },
    "TagsService.CreateTag": {
      ok: async () => ({ request: { parent: await newRepo(), tag: { name: "latest", digest: digest(++n) } } }),
      refused: async () => ({ request: { parent: await newRepo(), tag: { name: "latest", digest: "sha256:nope" } }, code: Code.InvalidArgument }),
    },
    "TagsService.DeleteTag": {
      ok: async () => {
        const uid = await newTag();
        return { request: { uid }, subject: uid };
      },
      refused: async () => ({ request: { uid: `${await newRepo()}/ffffffffffffffff` }, code: Code.NotFound }),
    },
    "ExternalGroupRoleMappingsService.CreateExternalGroupRoleMapping": {
      // The subject is <team>/<provider>/<mapping>: the event happened in the provider's group.
      ok: async () => ({ request: { parent: provider, externalGroupRoleMapping: { externalGroupId: unique("g"), roleUid: viewer() } } }),
      refused: async () => ({ request: { parent: provider, externalGroupRoleMapping: { externalGroupId: "", roleUid: viewer() } }, code: Code.InvalidArgument }),
    },
    "ExternalGroupRoleMappingsService.DeleteExternalGroupRoleMapping": {
      ok: async () => {
        const uid = await newMapping();
        return { request: { uid }, subject: uid };
      },
      refused: async () => ({ request: { uid: `${provider}/ffffffffffffffff` }, code: Code.NotFound }),
    },
    "ExternalGroupRoleMappingsService.BatchDeleteExternalGroupRoleMappings": {
      // No uid in the response: the subject is the provider, in the team.
      ok: async () => ({ request: { parent: provider, names: [await newMapping(), await newMapping()] }, subject: provider }),
      // A name of another provider: none is deleted, the valid one included.
      refused: async () => ({ request: { parent: provider, names: [await newMapping(), `${otherProvider}/ffffffffffffffff`] }, code: Code.InvalidArgument }),
    },
    // Terms and group access requests (issue 12, parts 3 and 4).
    "TermsService.AcceptTerms": {
      // No uid in the response: the subject is the organization it names (subject_field: a sub-group stands for
      // its organization), and the event is the organization's.
      ok: async () => ({ request: { group: world.team, documentIds: ["terms-of-service", "privacy-notice"] }, subject: world.org, group: world.org }),
      refused: async () => ({ request: { group: world.team, documentIds: ["terms-of-service", "no-such-document"] }, code: Code.InvalidArgument }),
    },
    "GroupsService.RequestGroupAccess": {
      // The subject and group are the group asked for (subject_field), so its subscribers hear it; the
      // response is empty, so the body is the request.
      ok: async () => {
        const uid = await foreignGroup();
        return { request: { groupUid: uid }, subject: uid, group: uid };
      },
      refused: async () => ({ request: { groupUid: newRootUid() }, code: Code.NotFound }),
    },
    "GroupInvitesService.CreateGroupInvite": {
      // The body is the response without its code (debug_redact): checked below, with the code as a secret.
      ok: async () => ({ request: { parent: world.team, groupInvite: { roleUid: viewer(), ttl: { seconds: 600n }, singleUse: true } } }),
      refused: async () => ({ request: { parent: world.team, groupInvite: { roleUid: viewer(), ttl: { seconds: 0n } } }, code: Code.InvalidArgument }),
    },
    "GroupInvitesService.DeleteGroupInvite": {
      ok: async () => {
        const uid = await newInvite();
        return { request: { uid }, subject: uid };
      },
      refused: async () => ({ request: { uid: bogus() }, code: Code.NotFound }),
    },
    "SubscriptionsService.CreateSubscription": {
      ok: async () => ({ request: { parent: world.team, subscription: { sink: `https://hooks.invalid/${unique("s")}` } } }),
      refused: async () => ({ request: { parent: world.team, subscription: { sink: "http://hooks.invalid/plain" } }, code: Code.InvalidArgument }),
    },
    "SubscriptionsService.DeleteSubscription": {
      ok: async () => {
        const uid = await newSubscription();
        return { request: { uid }, subject: uid };
      },
      refused: async () => ({ request: { uid: bogus() }, code: Code.NotFound }),
    },
  };

  async function prepare(s: TestServer, w: World): Promise<void> {
    [server, world] = [s, w];
    const { db } = server.database;
    // The readme needs CAP_REPO_INTERNAL_ADMIN, which no managed role grants: the owner gets it from a custom role.
    const role = newChildUid(world.org);
    await db.insert(roles).values({ uid: role, parentUid: world.org, name: "readme-admin", capabilities: [Capability.CAP_REPO_LIST, Capability.CAP_REPO_UPDATE, Capability.CAP_REPO_INTERNAL_ADMIN] });
    await db.insert(roleBindings).values({ uid: newChildUid(world.org), groupUid: world.org, identityUid: world.identity.owner, roleUid: role });
    const idp = (name: string) => ({ uid: newChildUid(world.team), groupUid: world.team, name, defaultRoleUid: viewer(), oidcIssuer: "https://idp.test", oidcClientId: name });
    const [p, o] = [idp("outbox-idp"), idp("outbox-idp-other")];
    await db.insert(identityProviders).values([p, o]);
    [provider, otherProvider] = [p.uid, o.uid];
  }

  return { table, prepare };
}
