// ArtifactsService: the library artifacts (Java, Python) and their versions, read-only global data (the
// contract's rules are unscoped: CAP_LIBRARIES_ARTIFACTS_LIST on any group suffices, checked first, before the
// request is validated), written by the import-libraries command (import.ts).
//
// Decisions:
// - ecosystems is required on ListArtifacts and GetArtifactCount: INVALID_ARGUMENT when empty or naming
//   ECOSYSTEM_UNSPECIFIED or an unknown value.
// - query is a case-insensitive substring of the name or uid. cuda_version and remediated describe builds this
//   server does not hold: a request asking for them matches no artifact.
// - ListArtifacts defaults to name order; ListArtifactVersions to version descending, the ecosystem's own order
//   (the importer stores each version's rank).
import { create } from "@bufbuild/protobuf";
import type { ServiceImpl } from "@connectrpc/connect";
import {
  ArtifactSchema,
  ArtifactsService,
  ArtifactVersionSchema,
  GetArtifactCountResponseSchema,
  ListArtifactsResponseSchema,
  ListArtifactVersionsResponseSchema,
  type Ecosystem,
} from "../../gen/chainguard/platform/libraries/v2/artifacts_pb.js";
import { requireRuleAnywhere } from "../kernel/auth/index.js";
import { invalidArgument, notFound } from "../kernel/errors/index.js";
import { defineListSpec, pageFields } from "../kernel/list/index.js";
import { bindService, type StoreDeps, type ServiceBinding } from "../kernel/module.js";
import { storeFactory } from "../kernel/unit-of-work.js";
import { toArtifact, toArtifactVersion } from "./artifacts.mapper.js";
import { createArtifactStore } from "./artifacts.store.js";
import { ecosystems as known } from "./ecosystems.js";

export const artifactList = defineListSpec({
  name: "libraries.v2.ListArtifacts",
  message: ArtifactSchema,
  orderBy: ["name", "create_time", "update_time", "version_count"],
  defaultOrder: "name",
});

export const artifactVersionList = defineListSpec({
  name: "libraries.v2.ListArtifactVersions",
  message: ArtifactVersionSchema,
  orderBy: ["version", "create_time", "update_time"],
  defaultOrder: "version desc",
});

function checkEcosystems(list: readonly Ecosystem[]): Ecosystem[] {
  if (list.length === 0) throw invalidArgument({ field: "ecosystems", description: "at least one ecosystem is required (ECOSYSTEM_JAVA, ECOSYSTEM_PYTHON)" });
  for (const [i, e] of list.entries()) {
    if (!(known as readonly Ecosystem[]).includes(e)) throw invalidArgument({ field: `ecosystems[${i}]`, description: `unknown or unspecified ecosystem ${e}` });
  }
  return [...new Set(list)];
}

export function artifactsBindings(deps: StoreDeps): ServiceBinding[] {
  // Global data, read outside any unit of work: the store over the database the call's reads go to (a
  // replica's when replicas are configured, kernel/unit-of-work.ts storeFactory).
  const artifacts = storeFactory(deps.db, createArtifactStore);

  const impl: ServiceImpl<typeof ArtifactsService> = {
    async listArtifacts(req, ctx) {
      await requireRuleAnywhere(ctx);
      const ecosystems = checkEcosystems(req.ecosystems);
      const plan = deps.lists.plan(req, artifactList, []);
      const page = await artifacts(ctx).list(plan, { ecosystems, query: req.query.trim(), none: req.cudaVersion !== undefined || req.remediated });
      return create(ListArtifactsResponseSchema, { artifacts: page.rows.map(toArtifact), ...pageFields(page) });
    },

    async listArtifactVersions(req, ctx) {
      await requireRuleAnywhere(ctx);
      if (!req.artifactId) throw invalidArgument({ field: "artifact_id", description: "required" });
      const plan = deps.lists.plan(req, artifactVersionList, []);
      if (!(await artifacts(ctx).exists(req.artifactId))) throw notFound(ArtifactSchema.typeName, req.artifactId);
      const page = await artifacts(ctx).listVersions(plan, req.artifactId);
      return create(ListArtifactVersionsResponseSchema, { artifactVersions: page.rows.map(toArtifactVersion), ...pageFields(page) });
    },

    async getArtifactCount(req, ctx) {
      await requireRuleAnywhere(ctx);
      const ecosystems = checkEcosystems(req.ecosystems);
      const counts = await artifacts(ctx).countByEcosystem(ecosystems);
      return create(GetArtifactCountResponseSchema, { counts: ecosystems.map((e) => ({ ecosystem: e, totalCount: BigInt(counts.get(e) ?? 0) })) });
    },
  };
  return [bindService(ArtifactsService, impl)];
}
