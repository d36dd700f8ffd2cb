// TermsService: an organization accepts the configured documents (config.ts TERMS_DOCUMENTS), and lists
// what it and its ancestors accepted. Methods the operator marks (TERMS_REQUIRED_FOR) answer
// FAILED_PRECONDITION until every document is accepted: kernel/terms-gate.ts, fed by this store.
//
// A sub-group stands for its organization (the root of its uid): acceptance is the organization's, so the
// caller must hold TERMS_ACCEPT on the organization itself, not only on the sub-group named.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import { Capability } from "../../gen/capabilities/capabilities_pb.js";
import { GroupSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import {
  AcceptTermsResponseSchema,
  ListTermsAcceptancesResponseSchema,
  TermsAcceptanceSchema,
  TermsService,
} from "../../gen/chainguard/platform/iam/v2/terms_pb.js";
import { accessOf } from "../kernel/auth/index.js";
import { notFound, throwIfAny, type FieldViolation } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { bindService, type ServiceBinding } from "../kernel/module.js";
import type { IamDeps } from "./deps.js";
import { toTermsAcceptance } from "./terms.mapper.js";
import { createTermsStore } from "./terms.store.js";

export const termsAcceptanceList = defineListSpec({
  name: "iam.v2.ListTermsAcceptances",
  message: TermsAcceptanceSchema,
  orderBy: ["create_time", "doc_id", "org_uid"],
  defaultOrder: "create_time",
});

/** The most document ids one AcceptTerms may name. */
const MAX_DOCUMENT_IDS = 100;

export function termsBindings(deps: IamDeps): ServiceBinding[] {
  const terms = storeFactory(deps.db, createTermsStore);
  const known = new Map(deps.terms.documents.map((d) => [d.id, d]));
  const knownList = deps.terms.documents.map((d) => d.id).join(", ");

  function documentViolations(ids: readonly string[]): FieldViolation[] {
    if (ids.length === 0) return [{ field: "document_ids", description: "is required: name at least one document" }];
    if (ids.length > MAX_DOCUMENT_IDS) return [{ field: "document_ids", description: `names more than ${MAX_DOCUMENT_IDS} documents` }];
    return ids.flatMap((id, i) =>
      known.has(id) ? [] : [{ field: `document_ids[${i}]`, description: `is not a known document (known: ${knownList || "none"})` }],
    );
  }

  const impl: ServiceImpl<typeof TermsService> = {
    async acceptTerms(req, ctx) {
      throwIfAny(documentViolations(req.documentIds));
      const org = req.group.split("/")[0]!;
      const access = accessOf(ctx);
      // Authorization before existence, as the interceptor did on the group named.
      if (org !== req.group) await access.require(org, [Capability.CAP_TERMS_ACCEPT]);
      const store = terms(ctx);
      if (!(await store.groupExists(req.group))) throw notFound(GroupSchema.typeName, req.group);
      const ids = [...new Set(req.documentIds)];
      await store.accept(org, ids, access.principal.identityUid);
      return create(AcceptTermsResponseSchema, { group: org, documentIds: ids });
    },

    async listTermsAcceptances(req, ctx) {
      const store = terms(ctx);
      if (!(await store.groupExists(req.group))) throw notFound(GroupSchema.typeName, req.group);
      const page = await store.list(deps.lists.plan(req, termsAcceptanceList, [req.group]), req.group);
      return create(ListTermsAcceptancesResponseSchema, { termsAcceptances: page.rows.map(toTermsAcceptance), ...pageFields(page) });
    },
  };

  return [bindService(TermsService, impl)];
}
