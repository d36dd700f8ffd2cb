// ArtifactsService: the library artifacts (Java, Python) and their versions, read-only global data (the
// contract's rules are unscoped: CAP_LIBRARIES_ARTIFACTS_LIST on any group suffices, checked first, before the
// request is validated), written by the
// import-libraries command.
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
import { and, count, eq, ilike, inArray, or, sql } from "drizzle-orm";
import type {
  Ecosystem} from "../../gen/chainguard/platform/libraries/v2/artifacts_pb.js";
import {
  ArtifactSchema,
  ArtifactsService,
  ArtifactVersionSchema,
  GetArtifactCountResponseSchema,
  ListArtifactsResponseSchema,
  ListArtifactVersionsResponseSchema,
} from "../../gen/chainguard/platform/libraries/v2/artifacts_pb.js";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import { libraryArtifacts, libraryArtifactVersions, type LibraryArtifactRow, type LibraryArtifactVersionRow } from "../db/schema/index.js";
import { invalidArgument, notFound } from "../kernel/errors/index.js";
import { countExpression, defineListSpec, keysetPage, pageColumns, pageFields } from "../kernel/list/index.js";
import { bindService, type DomainDeps, type ServiceBinding } from "../server/bindings.js";
import { ecosystems as known } from "./ecosystems.js";
import { requireRuleAnywhere } from "../kernel/auth/index.js";

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

const artifactOrder = {
  uid: libraryArtifacts.uid,
  name: libraryArtifacts.name,
  create_time: libraryArtifacts.createTime,
  update_time: libraryArtifacts.updateTime,
  version_count: libraryArtifacts.versionCount,
} as const;

const versionOrder = {
  uid: libraryArtifactVersions.uid,
  version: libraryArtifactVersions.ordinal,
  create_time: libraryArtifactVersions.createTime,
  update_time: libraryArtifactVersions.updateTime,
} as const;

function checkEcosystems(list: readonly Ecosystem[]): Ecosystem[] {
  if (list.length === 0) throw invalidArgument({ field: "ecosystems", description: "at least one ecosystem is required (ECOSYSTEM_JAVA, ECOSYSTEM_PYTHON)" });
  for (const [i, e] of list.entries()) {
    if (!(known as readonly Ecosystem[]).includes(e)) throw invalidArgument({ field: `ecosystems[${i}]`, description: `unknown or unspecified ecosystem ${e}` });
  }
  return [...new Set(list)];
}

function escapeLike(s: string): string {
  return s.replace(/[\\%_]/g, (c) => `\\${c}`);
}

function toArtifact(r: LibraryArtifactRow) {
  return create(ArtifactSchema, {
    uid: r.uid,
    name: r.name,
    description: r.description,
    ecosystem: r.ecosystem,
    latestVersion: r.latestVersion,
    versionCount: r.versionCount,
    createTime: timestampFromDate(r.createTime),
    updateTime: timestampFromDate(r.updateTime),
  });
}

function toArtifactVersion(r: LibraryArtifactVersionRow) {
  return create(ArtifactVersionSchema, {
    uid: r.uid,
    name: r.name,
    version: r.version,
    description: r.description,
    sizeBytes: BigInt(r.sizeBytes),
    createTime: timestampFromDate(r.createTime),
    updateTime: timestampFromDate(r.updateTime),
  });
}

export function artifactsBindings(deps: DomainDeps): ServiceBinding[] {
  const db = deps.db;
  const impl: ServiceImpl<typeof ArtifactsService> = {
    async listArtifacts(req, ctx) {
      await requireRuleAnywhere(ctx);
      const eco = checkEcosystems(req.ecosystems);
      const plan = deps.lists.plan(req, artifactList, []);
      const q = req.query.trim();
      const where = and(
        inArray(libraryArtifacts.ecosystem, eco),
        q ? or(ilike(libraryArtifacts.name, `%${escapeLike(q)}%`), ilike(libraryArtifacts.uid, `%${escapeLike(q)}%`)) : undefined,
        req.cudaVersion !== undefined || req.remediated ? sql`false` : undefined,
      );
      const total = countExpression(libraryArtifacts, where);
      const query = db.select({ row: libraryArtifacts, ...pageColumns(plan, artifactOrder, total) }).from(libraryArtifacts).$dynamic();
      const page = await keysetPage(db, query, { plan, orderColumns: artifactOrder, where, total });
      return create(ListArtifactsResponseSchema, { artifacts: page.rows.map(toArtifact), ...pageFields(page) });
    },

    async listArtifactVersions(req, ctx) {
      await requireRuleAnywhere(ctx);
      if (!req.artifactId) throw invalidArgument({ field: "artifact_id", description: "required" });
      const plan = deps.lists.plan(req, artifactVersionList, []);
      const [artifact] = await db.select({ uid: libraryArtifacts.uid }).from(libraryArtifacts).where(eq(libraryArtifacts.uid, req.artifactId));
      if (!artifact) throw notFound(ArtifactSchema.typeName, req.artifactId);
      const where = eq(libraryArtifactVersions.artifactUid, req.artifactId);
      const total = countExpression(libraryArtifactVersions, where);
      const query = db.select({ row: libraryArtifactVersions, ...pageColumns(plan, versionOrder, total) }).from(libraryArtifactVersions).$dynamic();
      const page = await keysetPage(db, query, { plan, orderColumns: versionOrder, where, total });
      return create(ListArtifactVersionsResponseSchema, { artifactVersions: page.rows.map(toArtifactVersion), ...pageFields(page) });
    },

    async getArtifactCount(req, ctx) {
      await requireRuleAnywhere(ctx);
      const eco = checkEcosystems(req.ecosystems);
      const rows = await db
        .select({ ecosystem: libraryArtifacts.ecosystem, n: count() })
        .from(libraryArtifacts)
        .where(inArray(libraryArtifacts.ecosystem, eco))
        .groupBy(libraryArtifacts.ecosystem);
      const byEco = new Map(rows.map((r) => [r.ecosystem, r.n]));
      return create(GetArtifactCountResponseSchema, { counts: eco.map((e) => ({ ecosystem: e, totalCount: BigInt(byEco.get(e) ?? 0) })) });
    },
  };
  return [bindService(ArtifactsService, impl)];
}
