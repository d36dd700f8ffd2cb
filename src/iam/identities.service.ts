// IdentitiesService: the principals that role bindings grant to. Scoped methods (Create, Get, Update,
// Delete) are authorized by the auth interceptor before they run; ListIdentities, LookupIdentity and
// UpdateIdentityMetadata are unscoped and filter (or act on the caller itself) here.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  IdentitiesService,
  IdentityMetadataSchema,
  IdentitySchema,
  ListIdentitiesResponseSchema,
  LookupIdentityResponseSchema,
  RelationshipTypeSchema,
} from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { accessOf, listScopesOf } from "../kernel/auth/index.js";
import { type FieldViolation, invalidArgument, throwIfAny, under } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { defineUpdate, updateUnderLock } from "../kernel/update.js";
import { bindService, type ServiceBinding } from "../kernel/module.js";
import type { IamDeps } from "./deps.js";
import { identityFields, identityMetadataFields, toIdentity, toIdentityMetadata } from "./identities.mapper.js";
import { createIdentityStore } from "./identities.store.js";
import { personUidOf } from "./person-uid.js";
import { identityMetadataViolations, identityViolations, MAX_CLAIM_VALUE_LENGTH, parentDepthViolations } from "./validate.js";

export const identityList = defineListSpec({
  name: "iam.v2.ListIdentities",
  message: IdentitySchema,
  orderBy: ["name", "create_time", "update_time"],
  defaultOrder: "uid",
});

const identityUpdate = defineUpdate({ schema: IdentitySchema, field: "identity", toMessage: toIdentity, toFields: identityFields, check: identityViolations });
const metadataUpdate = defineUpdate({
  schema: IdentityMetadataSchema,
  field: "identity_metadata",
  toMessage: toIdentityMetadata,
  toFields: identityMetadataFields,
  check: identityMetadataViolations,
});

function requiredText(field: string, value: string): FieldViolation[] {
  if (value === "") return [{ field, description: "is required" }];
  if (value.length > MAX_CLAIM_VALUE_LENGTH) return [{ field, description: `must be at most ${MAX_CLAIM_VALUE_LENGTH} characters long` }];
  return [];
}

export function identitiesBindings(deps: IamDeps): ServiceBinding[] {
  const identities = storeFactory(deps.db, createIdentityStore);

  const impl: ServiceImpl<typeof IdentitiesService> = {
    async createIdentity(req, ctx) {
      const identity = req.identity ?? create(IdentitySchema);
      throwIfAny([...parentDepthViolations(req.parent), ...under("identity", identityViolations(identity))]);
      return toIdentity(await identities(ctx).create(req.parent, identityFields(identity)));
    },

    async getIdentity(req, ctx) {
      return toIdentity(await identities(ctx).get(req.uid));
    },

    async updateIdentity(req, ctx) {
      return toIdentity(await updateUnderLock(identities(ctx), req.identity?.uid ?? "", req.identity, req.updateMask, identityUpdate));
    },

    async deleteIdentity(req, ctx) {
      await identities(ctx).remove(req.uid);
      return {};
    },

    async listIdentities(req, ctx) {
      if (!RelationshipTypeSchema.values.some((v) => v.number === req.relationshipType)) {
        throw invalidArgument({ field: "relationship_type", description: `${req.relationshipType} is not a RelationshipType value` });
      }
      const scopes = await listScopesOf(ctx);
      const filter = { scopes, uidp: req.uidp, name: req.name, relationshipType: req.relationshipType };
      const page = await identities(ctx).list(deps.lists.plan(req, identityList, scopes), filter);
      return create(ListIdentitiesResponseSchema, { identities: page.rows.map(toIdentity), ...pageFields(page) });
    },

    async lookupIdentity(req, ctx) {
      throwIfAny([...requiredText("issuer", req.issuer), ...requiredText("subject", req.subject)]);
      // Any authenticated caller may ask; what it finds is limited to what it may see (identities.store.ts).
      const access = accessOf(ctx);
      const scopes = await access.visibleScopes([Capability.CAP_IAM_IDENTITY_LIST]);
      const found = await identities(ctx).lookup(req.issuer, req.subject, { scopes, self: access.principal.identityUid });
      // Nothing it may see matches: the uid the person of this pair gets when registered, the same answer
      // whether no identity matches or the caller may not see the one that does.
      return create(LookupIdentityResponseSchema, { uid: found ?? personUidOf(req.issuer, req.subject) });
    },

    async updateIdentityMetadata(req, ctx) {
      // The caller's own identity: no scope to check, nothing to find.
      const uid = accessOf(ctx).principal.identityUid;
      return toIdentityMetadata(await updateUnderLock(identities(ctx), uid, req.identityMetadata, req.updateMask, metadataUpdate));
    },
  };

  return [bindService(IdentitiesService, impl)];
}
