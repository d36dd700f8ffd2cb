// SecurityAdvisoryService: advisory documents, vulnerability metadata and resolved-vulnerability reports over
// the global advisory data (written by the import commands). ListDocuments and ListVulnerabilityMetadata need
// no authentication (the contract's rule is `disabled`); ListResolvedVulnsReports needs the rule's four
// capabilities on some group (checked before the request is validated) and reports only on repos the caller
// sees in the registry.
//
// Decisions (docs/importing.md, "Advisory data"):
// - ListDocuments needs `id` or `cves` (INVALID_ARGUMENT otherwise); at most 1,000 cves. An advisory matches a
//   cve when its advisory id or one of its aliases equals it (exact, case-sensitive). The response holds at
//   most 5,000 advisories: a request matching more is INVALID_ARGUMENT (narrow it) rather than a silent part.
//   An unknown package is an empty list, not NOT_FOUND.
// - ListVulnerabilityMetadata: `id` and `ids` together name at most 1,000 records; neither lists every record,
//   paged (order_by: id). Withdrawn OSV records are left out.
// - ListResolvedVulnsReports: at most 100 refs of 100 tags each; the range is inclusive, both ends required,
//   at most 366 days. One report per UTC day that has fixes (days without are left out), oldest first; each
//   lists the advisories whose `fixed` event falls on that day, for the packages the refs name (image-ref.ts),
//   with their aliases and the CVSS severities of the OSV records (not withdrawn) whose id is the advisory id
//   or an alias. Tags are checked for syntax only: the advisory data is per package, not per image digest, so
//   every tag of a repo gets the same report.
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  ListDocumentsResponseSchema,
  ListResolvedVulnsReportsResponseSchema,
  ListVulnerabilityMetadataResponseSchema,
  SecurityAdvisoryService,
  VulnerabilityMetadataSchema,
} from "../../gen/chainguard/platform/advisory/v2/advisory_pb.js";
import { RepoSchema } from "../../gen/chainguard/platform/registry/v2/repos_pb.js";
import { listScopesOf, requireRuleAnywhere } from "../kernel/auth/index.js";
import { notFound } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { bindService, type StoreDeps, type ServiceBinding } from "../kernel/module.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { toDocuments, toResolvedVulnsReports, toVulnerabilityMetadata } from "./security-advisory.mapper.js";
import { createSecurityAdvisoryStore } from "./security-advisory.store.js";
import { documentFilterOf, MAX_DOCUMENT_ADVISORIES, metadataIdsOf, reportRequestOf, tooBroad } from "./security-advisory.validate.js";

const metadataList = defineListSpec({
  name: "advisory.v2.ListVulnerabilityMetadata",
  message: VulnerabilityMetadataSchema,
  orderBy: ["id"],
  defaultOrder: "id",
});

export function securityAdvisoryBindings(deps: StoreDeps): ServiceBinding[] {
  // Global data, read outside any unit of work: the store over the database the call's reads go to (a
  // replica's when replicas are configured, kernel/unit-of-work.ts storeFactory).
  const store = storeFactory(deps.db, createSecurityAdvisoryStore);

  const impl: ServiceImpl<typeof SecurityAdvisoryService> = {
    async listDocuments(req, ctx) {
      const rows = await store(ctx).documents(documentFilterOf(req), MAX_DOCUMENT_ADVISORIES);
      if (!rows) throw tooBroad(req);
      return create(ListDocumentsResponseSchema, { documents: toDocuments(rows) });
    },

    async listVulnerabilityMetadata(req, ctx) {
      const ids = metadataIdsOf(req);
      const plan = deps.lists.plan(req, metadataList, []);
      const page = await store(ctx).metadata(plan, ids);
      return create(ListVulnerabilityMetadataResponseSchema, { vulnerabilityMetadata: page.rows.map(toVulnerabilityMetadata), ...pageFields(page) });
    },

    async listResolvedVulnsReports(req, ctx) {
      await requireRuleAnywhere(ctx);
      const { start, end, refs } = reportRequestOf(req);
      const visible = await store(ctx).visibleRepoNames(await listScopesOf(ctx), refs.flatMap((r) => r.repoNames));
      const missing = refs.find((r) => !r.repoNames.some((n) => visible.has(n)));
      if (missing) throw notFound(RepoSchema.typeName, missing.repo, `No repo named ${JSON.stringify(missing.repo)} (image_refs[${missing.index}].repo) that the caller can see`);

      const fixes = await store(ctx).fixedAdvisories([...new Set(refs.map((r) => r.packageName))], start, end);
      const severities = await store(ctx).severities([...new Set(fixes.flatMap((f) => [f.advisoryId, ...f.aliases]))]);
      return create(ListResolvedVulnsReportsResponseSchema, { resolvedVulnsReports: toResolvedVulnsReports(fixes, severities) });
    },
  };
  return [bindService(SecurityAdvisoryService, impl)];
}
