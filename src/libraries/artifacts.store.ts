// Library artifacts and their versions in the database, read-only here (the importer writes them). Versions
// are ordered by `ordinal`, their rank in the ecosystem's order, kept by the importer.
import { and, count, eq, ilike, inArray, or, sql } from "drizzle-orm";
import type { Ecosystem } from "../../gen/chainguard/platform/libraries/v2/artifacts_pb.js";
import { libraryArtifacts, libraryArtifactVersions, type LibraryArtifactRow, type LibraryArtifactVersionRow } from "../db/schema/index.js";
import { countExpression, keysetPage, pageColumns, type ListPage, type ListPlan } from "../kernel/list/index.js";
import type { Executor } from "../kernel/store.js";
import { escapeLike } from "../kernel/uidp.js";

interface ArtifactListFilter {
  ecosystems: readonly Ecosystem[];
  /** Case-insensitive substring of the name or the uid; empty for any. */
  query: string;
  /** Whether the request asks for builds this server does not hold (CUDA variants, remediated builds). */
  none: boolean;
}

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

export function createArtifactStore(db: Executor) {
  return {
    list(plan: ListPlan, filter: ArtifactListFilter): Promise<ListPage<LibraryArtifactRow>> {
      const like = `%${escapeLike(filter.query)}%`;
      const where = and(
        inArray(libraryArtifacts.ecosystem, [...filter.ecosystems]),
        filter.query ? or(ilike(libraryArtifacts.name, like), ilike(libraryArtifacts.uid, like)) : undefined,
        filter.none ? sql`false` : undefined,
      );
      const total = countExpression(libraryArtifacts, where);
      const query = db.select({ row: libraryArtifacts, ...pageColumns(plan, artifactOrder, total) }).from(libraryArtifacts).$dynamic();
      return keysetPage(db, query, { plan, orderColumns: artifactOrder, where, total });
    },

    async exists(uid: string): Promise<boolean> {
      const [row] = await db.select({ uid: libraryArtifacts.uid }).from(libraryArtifacts).where(eq(libraryArtifacts.uid, uid));
      return row !== undefined;
    },

    listVersions(plan: ListPlan, artifactUid: string): Promise<ListPage<LibraryArtifactVersionRow>> {
      const where = eq(libraryArtifactVersions.artifactUid, artifactUid);
      const total = countExpression(libraryArtifactVersions, where);
      const query = db.select({ row: libraryArtifactVersions, ...pageColumns(plan, versionOrder, total) }).from(libraryArtifactVersions).$dynamic();
      return keysetPage(db, query, { plan, orderColumns: versionOrder, where, total });
    },

    /** The number of artifacts of each ecosystem asked for (0 for one with none). */
    async countByEcosystem(ecosystems: readonly Ecosystem[]): Promise<Map<Ecosystem, number>> {
      const rows = await db
        .select({ ecosystem: libraryArtifacts.ecosystem, n: count() })
        .from(libraryArtifacts)
        .where(inArray(libraryArtifacts.ecosystem, [...ecosystems]))
        .groupBy(libraryArtifacts.ecosystem);
      return new Map(rows.map((r) => [r.ecosystem as Ecosystem, r.n]));
    },
  };
}
