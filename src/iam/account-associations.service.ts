// AccountAssociationsService: a group's links to accounts at cloud providers (AWS, Google Cloud, Azure), GitHub
// App installations, and Chainguard service bindings. Scoped methods are authorized by the auth interceptor
// from the group in the request's uid (or parent); ListAccountAssociations is unscoped and filters to the
// caller's visible scopes.
//
// Decisions:
// - One association per group: its uid is the group's uid. CreateAccountAssociation under `parent` (a group)
//   makes it; a second is ALREADY_EXISTS naming the association; a missing group is NOT_FOUND naming it.
//   Its events are about the group itself (subject = group uid, group = that group: subject_depth 0).
// - Field rules: account-associations.validate.ts (AWS account 12 digits, GCP project id rules, Azure UUIDs,
//   GitHub ids positive, Chainguard service bindings: service name -> identity uid). Violations name the path
//   from the request's root (`account_association.amazon.account`).
// - UpdateAccountAssociation follows the PATCH rules of the field-mask kernel (a provider block is a message
//   field: `amazon` replaces or clears the block, `google.project_number` one field of it; maps are replaced
//   whole). Output-only fields are never taken from a request.
// - ListAccountAssociations filters by uidp (on the group uid), exact name, and the common list parameters;
//   default order name; name, create_time, update_time and uid may be ordered by.
// - CheckAccountAssociation reports what can be known without calling the provider: READY (reason
//   CONFIGURED) when the provider's block is set, complete and passes the field rules; otherwise NOT_READY
//   with NOT_CONFIGURED (no block), INCOMPLETE (a required value missing) or INVALID_CONFIGURATION (a value
//   that breaks the rules). The API refuses incomplete or invalid blocks, so the last two arise from values
//   stored under older rules or written outside the API. Nothing is verified at the provider (that the
//   account exists, or trusts this service). provider_type UNSPECIFIED (or unknown) is INVALID_ARGUMENT.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  AccountAssociationSchema,
  AccountAssociationsService,
  AccountProviderType,
  CheckAccountAssociationResponseSchema,
  CheckStatus,
  ListAccountAssociationsResponseSchema,
  type AccountAssociation,
  type CheckAccountAssociationResponse,
} from "../../gen/chainguard/platform/iam/v2/account_associations_pb.js";
import { listScopesOf } from "../kernel/auth/index.js";
import { invalidArgument, throwIfAny, under } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { defineUpdate, updateUnderLock } from "../kernel/update.js";
import { bindService, type ServiceBinding } from "../kernel/module.js";
import type { IamDeps } from "./deps.js";
import { accountAssociationFields, toAccountAssociation, writableAccountAssociation } from "./account-associations.mapper.js";
import { createAccountAssociationStore } from "./account-associations.store.js";
import {
  accountAssociationViolations,
  amazonViolations,
  azureViolations,
  googleViolations,
  type BlockViolation,
} from "./account-associations.validate.js";

export const accountAssociationList = defineListSpec({
  name: "iam.v2.ListAccountAssociations",
  message: AccountAssociationSchema,
  orderBy: ["name", "create_time", "update_time"],
  defaultOrder: "name",
});

const accountAssociationUpdate = defineUpdate({
  schema: AccountAssociationSchema,
  field: "account_association",
  toMessage: toAccountAssociation,
  toFields: accountAssociationFields,
  check: accountAssociationViolations,
});

/** The block each checkable provider type reads, and its rules. */
const providers: Record<number, { block: string; label: string; violations: (a: AccountAssociation) => BlockViolation[] | undefined }> = {
  [AccountProviderType.AMAZON]: { block: "amazon", label: "Amazon Web Services", violations: (a) => a.amazon && amazonViolations(a.amazon) },
  [AccountProviderType.GOOGLE]: { block: "google", label: "Google Cloud", violations: (a) => a.google && googleViolations(a.google) },
  [AccountProviderType.AZURE]: { block: "azure", label: "Azure", violations: (a) => a.azure && azureViolations(a.azure) },
};

function providerOf(providerType: AccountProviderType) {
  const provider = providers[providerType];
  if (!provider) {
    throw invalidArgument({ field: "provider_type", description: "is required: ACCOUNT_PROVIDER_TYPE_GOOGLE, ACCOUNT_PROVIDER_TYPE_AMAZON or ACCOUNT_PROVIDER_TYPE_AZURE" });
  }
  return provider;
}

/** The readiness of the association for one provider, from its stored configuration alone. */
export function checkAssociation(a: AccountAssociation, providerType: AccountProviderType): CheckAccountAssociationResponse {
  const provider = providerOf(providerType);
  const notReady = (reason: string, message: string) => create(CheckAccountAssociationResponseSchema, { status: CheckStatus.NOT_READY, reason, message });
  const violations = provider.violations(a);
  if (violations === undefined) {
    return notReady("NOT_CONFIGURED", `the association has no ${provider.block} configuration: set account_association.${provider.block}`);
  }
  const listed = (vs: BlockViolation[]) => vs.map((v) => `${v.field}: ${v.description}`).join("; ");
  const missing = violations.filter((v) => v.missing);
  if (missing.length > 0) return notReady("INCOMPLETE", `the ${provider.block} configuration is incomplete: ${listed(missing)}`);
  if (violations.length > 0) return notReady("INVALID_CONFIGURATION", `the ${provider.block} configuration is invalid: ${listed(violations)}`);
  return create(CheckAccountAssociationResponseSchema, {
    status: CheckStatus.READY,
    reason: "CONFIGURED",
    message: `the ${provider.block} configuration is complete and well-formed; access at ${provider.label} is not verified by this service`,
  });
}

export function accountAssociationsBindings(deps: IamDeps): ServiceBinding[] {
  const associations = storeFactory(deps.db, createAccountAssociationStore);

  const impl: ServiceImpl<typeof AccountAssociationsService> = {
    async createAccountAssociation(req, ctx) {
      // parent: checked by the interceptor (IAM_ACCOUNT_ASSOCIATIONS_CREATE on the group).
      const a = writableAccountAssociation(req.accountAssociation ?? create(AccountAssociationSchema));
      throwIfAny(under("account_association", accountAssociationViolations(a)));
      return toAccountAssociation(await associations(ctx).createFor(req.parent, accountAssociationFields(a)));
    },

    async getAccountAssociation(req, ctx) {
      return toAccountAssociation(await associations(ctx).get(req.uid));
    },

    async listAccountAssociations(req, ctx) {
      const scopes = await listScopesOf(ctx);
      const page = await associations(ctx).list(deps.lists.plan(req, accountAssociationList, scopes), { scopes, uidp: req.uidp, name: req.name });
      return create(ListAccountAssociationsResponseSchema, { accountAssociations: page.rows.map(toAccountAssociation), ...pageFields(page) });
    },

    async updateAccountAssociation(req, ctx) {
      const uid = req.accountAssociation?.uid ?? "";
      return toAccountAssociation(await updateUnderLock(associations(ctx), uid, req.accountAssociation, req.updateMask, accountAssociationUpdate));
    },

    async deleteAccountAssociation(req, ctx) {
      await associations(ctx).remove(req.uid);
      return {};
    },

    async checkAccountAssociation(req, ctx) {
      // The provider type first: a bad request is refused whether or not the association exists.
      providerOf(req.providerType);
      return checkAssociation(toAccountAssociation(await associations(ctx).get(req.uid)), req.providerType);
    },
  };

  return [bindService(AccountAssociationsService, impl)];
}
