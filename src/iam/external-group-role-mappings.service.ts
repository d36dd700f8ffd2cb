// ExternalGroupRoleMappingsService: which role an identity provider's group gives its members. At each login
// through the provider, the identity's bindings made from mappings follow the groups claim (the sync is the
// login's); this service only keeps the mappings.
//
// Decisions:
// - A mapping lives under its provider (`parent`, uid `<provider uid>/<16 hex>`): an unknown provider is
//   NOT_FOUND naming it as an IdentityProvider. identity_provider_uid, uid and create_time are output-only.
// - scope is where the mapping's bindings are made: the provider's organization (root group). Empty means
//   that; anything else is INVALID_ARGUMENT.
// - The role follows the role-bindings rule for a binding on the scope (role-bindings.rules.ts): a managed
//   role, or a custom role defined on the organization root (the only group at or above the scope). A role of
//   a sub-group means nothing on the organization, so it is refused even when the provider lives in that
//   sub-group.
// - No escalation: the caller must hold every capability of the role on the scope, where its bindings will
//   grant them (PERMISSION_DENIED naming the missing ones), as for a role binding made there by hand.
// - external_group_id is the group's value in the groups claim (an Okta or Entra id, a Keycloak path, a
//   Google group e-mail): 1 to 256 characters, no control characters, no leading or trailing space (claims
//   are matched exactly: a stray space would match nothing).
// - (provider, external group, role, scope) is unique: ALREADY_EXISTS naming the mapping that has it.
// - Deleting a mapping deletes the bindings it made (role_bindings.mapping_uid cascades); bindings made by
//   hand are never touched. The service is therefore one whose writes change grants (iam/index.ts).
// - BatchDelete under `parent` (the provider): 1 to 100 names; a malformed name or one under another
//   provider is INVALID_ARGUMENT naming each; names that name nothing are skipped; the rest are deleted in
//   one statement (all or none) and returned in request order, each once.
// - ListExternalGroupRoleMappings defaults to create_time order; uid may be ordered by too.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  BatchDeleteExternalGroupRoleMappingsResponseSchema,
  ExternalGroupRoleMappingSchema,
  ExternalGroupRoleMappingsService,
  ListExternalGroupRoleMappingsResponseSchema,
} from "../../gen/chainguard/platform/iam/v2/external_group_role_mappings_pb.js";
import { accessOf, listScopesOf } from "../kernel/auth/index.js";
import { type FieldViolation, invalidArgument, throwIfAny } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { isValidUid, parentOf } from "../kernel/uidp.js";
import { bindService, type ServiceBinding } from "../kernel/module.js";
import type { IamDeps } from "./deps.js";
import { toExternalGroupRoleMapping } from "./external-group-role-mappings.mapper.js";
import { createExternalGroupRoleMappingStore } from "./external-group-role-mappings.store.js";
import { organizationOf, roleViolations } from "./role-bindings.rules.js";
import { requireNoEscalation } from "./roles.rules.js";
import { createRoleStore } from "./roles.store.js";

export const mappingListSpec = defineListSpec({
  name: "iam.v2.ListExternalGroupRoleMappings",
  message: ExternalGroupRoleMappingSchema,
  orderBy: ["create_time"],
  defaultOrder: "create_time",
});

/** The longest external group id, in characters. */
export const MAX_EXTERNAL_GROUP_ID = 256;
/** The most names one BatchDeleteExternalGroupRoleMappings may name. */
export const MAX_BATCH_DELETE = 100;

// C0 and C1 controls, DEL, line and paragraph separators, and lone surrogates.
const UNPRINTABLE = /[\p{Cc}\p{Cs}\u2028\u2029]/u;

/** What is wrong with an external group id, as violations on `field`. */
export function externalGroupIdViolations(id: string, field: string): FieldViolation[] {
  if (id === "") return [{ field, description: "is required" }];
  if ([...id].length > MAX_EXTERNAL_GROUP_ID) return [{ field, description: `must be at most ${MAX_EXTERNAL_GROUP_ID} characters long` }];
  if (UNPRINTABLE.test(id)) return [{ field, description: "must not contain control characters" }];
  if (id.trim() !== id) return [{ field, description: "must not begin or end with white space" }];
  return [];
}

/** What is wrong with the names of a batch delete under `provider`, one violation per name. */
export function batchNameViolations(names: readonly string[], provider: string): FieldViolation[] {
  if (names.length === 0) return [{ field: "names", description: "at least one name is required" }];
  if (names.length > MAX_BATCH_DELETE) return [{ field: "names", description: `at most ${MAX_BATCH_DELETE} names are allowed, got ${names.length}` }];
  return names.flatMap((name, i): FieldViolation[] => {
    if (!isValidUid(name)) return [{ field: `names[${i}]`, description: `${JSON.stringify(name)} is not a valid uid` }];
    if (parentOf(name) !== provider) return [{ field: `names[${i}]`, description: `${name} is not a mapping of identity provider ${provider}` }];
    return [];
  });
}

export function externalGroupRoleMappingsBindings(deps: IamDeps): ServiceBinding[] {
  const mappings = storeFactory(deps.db, createExternalGroupRoleMappingStore);
  const roles = storeFactory(deps.db, createRoleStore);

  const impl: ServiceImpl<typeof ExternalGroupRoleMappingsService> = {
    async createExternalGroupRoleMapping(req, ctx) {
      // parent: checked by the interceptor (CAP_IAM_IDENTITY_PROVIDERS_CREATE, CAP_IAM_ROLE_BINDINGS_CREATE).
      const m = req.externalGroupRoleMapping ?? create(ExternalGroupRoleMappingSchema);
      // The provider's uid begins with its group's, so its organization is known before anything is read.
      const scope = organizationOf(req.parent);
      const field = "external_group_role_mapping";
      throwIfAny([
        ...externalGroupIdViolations(m.externalGroupId, `${field}.external_group_id`),
        ...roleViolations(m.roleUid, `${field}.role_uid`, scope),
        ...(m.scope === "" || m.scope === scope
          ? []
          : [{ field: `${field}.scope`, description: `must be empty or the identity provider's organization ${JSON.stringify(scope)}` }]),
      ]);
      const held = await accessOf(ctx).capabilitiesAt(scope);
      await mappings(ctx).provider(req.parent);
      // Share-locked: a concurrent change of the role's capabilities waits for this call to end.
      const [role] = await roles(ctx).findShared([m.roleUid]);
      if (!role) throw invalidArgument({ field: `${field}.role_uid`, description: "does not name an existing role" });
      requireNoEscalation(held, role.capabilities, scope, `mapping to role ${JSON.stringify(m.roleUid)}`);
      const row = await mappings(ctx).create(req.parent, { externalGroupId: m.externalGroupId, roleUid: m.roleUid, scope });
      return toExternalGroupRoleMapping(row);
    },

    async getExternalGroupRoleMapping(req, ctx) {
      // uid: checked by the interceptor (CAP_IAM_IDENTITY_PROVIDERS_LIST).
      return toExternalGroupRoleMapping(await mappings(ctx).get(req.uid));
    },

    async deleteExternalGroupRoleMapping(req, ctx) {
      // uid: checked by the interceptor (CAP_IAM_IDENTITY_PROVIDERS_DELETE). Its bindings go with it.
      await mappings(ctx).remove(req.uid);
      return {};
    },

    async batchDeleteExternalGroupRoleMappings(req, ctx) {
      // parent: checked by the interceptor (CAP_IAM_IDENTITY_PROVIDERS_DELETE) on the provider.
      throwIfAny(batchNameViolations(req.names, req.parent));
      await mappings(ctx).provider(req.parent);
      const names = [...new Set(req.names)];
      const deleted = new Map((await mappings(ctx).removeMany(req.parent, names)).map((r) => [r.uid, r]));
      const rows = names.flatMap((uid) => {
        const row = deleted.get(uid);
        return row ? [row] : [];
      });
      return create(BatchDeleteExternalGroupRoleMappingsResponseSchema, { parent: req.parent, externalGroupRoleMappings: rows.map(toExternalGroupRoleMapping) });
    },

    async listExternalGroupRoleMappings(req, ctx) {
      if (req.identityProviderUid !== "" && !isValidUid(req.identityProviderUid)) {
        throw invalidArgument({ field: "identity_provider_uid", description: "is not a valid uid" });
      }
      const scopes = await listScopesOf(ctx);
      const filter = { scopes, uidp: req.uidp, identityProvider: req.identityProviderUid };
      const page = await mappings(ctx).list(deps.lists.plan(req, mappingListSpec, scopes), filter);
      return create(ListExternalGroupRoleMappingsResponseSchema, { externalGroupRoleMappings: page.rows.map(toExternalGroupRoleMapping), ...pageFields(page) });
    },
  };

  return [bindService(ExternalGroupRoleMappingsService, impl)];
}
