// IdentitiesService: the principals that role bindings grant to. Scoped methods (Create, Get, Update,
// Delete) are authorized by the auth interceptor before they run; ListIdentities, LookupIdentity and
// UpdateIdentityMetadata are unscoped and filter (or act on the caller itself) here.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import {
  IdentitiesService,
  IdentityMetadataSchema,
  IdentitySchema,
  ListIdentitiesResponseSchema,
  LookupIdentityResponseSchema,
  RelationshipTypeSchema,
} from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import { accessOf, listScopesOf } from "../kernel/auth/index.js";
import { type FieldViolation, invalidArgument, notFound, throwIfAny } from "../kernel/errors/index.js";
import { applyUpdate } from "../kernel/field-mask.js";
import { defineListSpec, pageFields, parseListRequest } from "../kernel/list/index.js";
import type { DomainDeps, ServiceBinding } from "../server/bindings.js";
import { identityFields, identityMetadataFields, toIdentity, toIdentityMetadata } from "./identities.mapper.js";
import { createIdentityStore, IDENTITY_TYPE } from "./identities.store.js";
import { identityMetadataViolations, identityViolations, MAX_CLAIM_VALUE_LENGTH, parentDepthViolations } from "./validate.js";

export const identityList = defineListSpec({
  name: "iam.v2.ListIdentities",
  message: IdentitySchema,
  orderBy: ["name", "create_time", "update_time"],
  defaultOrder: "uid",
});

function requiredText(field: string, value: string): FieldViolation[] {
  if (value === "") return [{ field, description: "is required" }];
  if (value.length > MAX_CLAIM_VALUE_LENGTH) return [{ field, description: `must be at most ${MAX_CLAIM_VALUE_LENGTH} characters long` }];
  return [];
}

export function identitiesBindings(deps: DomainDeps): ServiceBinding[] {
  const store = createIdentityStore(deps.db);

  const impl: ServiceImpl<typeof IdentitiesService> = {
    async createIdentity(req) {
      const identity = req.identity ?? create(IdentitySchema);
      throwIfAny([...parentDepthViolations(req.parent), ...identityViolations(identity)]);
      return toIdentity(await store.create(req.parent, identityFields(identity)));
    },

    async getIdentity(req) {
      return toIdentity(await store.require(req.uid));
    },

    async updateIdentity(req) {
      const patch = req.identity ?? create(IdentitySchema);
      const row = await store.update(patch.uid, (current) => {
        const { message, changed } = applyUpdate(IdentitySchema, toIdentity(current), patch, req.updateMask);
        if (changed.length === 0) return undefined;
        throwIfAny(identityViolations(message, changed));
        return identityFields(message);
      });
      return toIdentity(row);
    },

    async deleteIdentity(req) {
      await store.delete(req.uid);
      return {};
    },

    async listIdentities(req, ctx) {
      if (!RelationshipTypeSchema.values.some((v) => v.number === req.relationshipType)) {
        throw invalidArgument({ field: "relationship_type", description: `${req.relationshipType} is not a RelationshipType value` });
      }
      const scopes = await listScopesOf(ctx);
      const filter = { uidp: req.uidp, name: req.name, relationshipType: req.relationshipType };
      const plan = parseListRequest(req, identityList, { secret: deps.pageTokenSecret, filters: filter, scope: scopes });
      const page = await store.list(plan, { scopes, ...filter });
      return create(ListIdentitiesResponseSchema, { identities: page.rows.map(toIdentity), ...pageFields(page) });
    },

    async lookupIdentity(req, ctx) {
      throwIfAny([...requiredText("issuer", req.issuer), ...requiredText("subject", req.subject)]);
      const access = accessOf(ctx);
      const scopes = await access.visibleScopes([Capability.CAP_IAM_IDENTITY_LIST]);
      const uid = await store.lookup(req.issuer, req.subject, { scopes, self: access.principal.identityUid });
      // The same answer whether no identity matches or the caller may not see the one that does.
      if (!uid) throw notFound(IDENTITY_TYPE, `${req.issuer} ${req.subject}`, "No identity visible to the caller has this issuer and subject");
      return create(LookupIdentityResponseSchema, { uid });
    },

    async updateIdentityMetadata(req, ctx) {
      const patch = req.identityMetadata ?? create(IdentityMetadataSchema);
      const row = await store.updateMetadata(accessOf(ctx).principal.identityUid, (current) => {
        const { message, changed } = applyUpdate(IdentityMetadataSchema, toIdentityMetadata(current), patch, req.updateMask);
        if (changed.length === 0) return undefined;
        throwIfAny(identityMetadataViolations(message, changed));
        return identityMetadataFields(message);
      });
      return toIdentityMetadata(row);
    },
  };

  return [{ service: IdentitiesService, impl }];
}
