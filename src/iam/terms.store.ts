// Terms acceptances in the database: one row per (organization, document), the first acceptance kept.
import { asc, eq, inArray } from "drizzle-orm";
import { groups, termsAcceptances, type TermsAcceptanceRow } from "../db/schema/index.js";
import { countExpression, listPage, type ListPage, type ListPlan } from "../kernel/list/index.js";
import type { Executor } from "../kernel/store.js";
import { ancestorsOf, newChildUid } from "../kernel/uidp.js";

const acceptanceOrderColumns = {
  uid: termsAcceptances.uid,
  create_time: termsAcceptances.createTime,
  doc_id: termsAcceptances.docId,
  org_uid: termsAcceptances.orgUid,
} as const;

/** The uid and its ancestors: the organizations whose acceptances hold for it. */
const selfAndAncestors = (uid: string) => [...ancestorsOf(uid), uid];

export function createTermsStore(db: Executor) {
  return {
    /** Whether the group exists. */
    async groupExists(uid: string): Promise<boolean> {
      const [row] = await db.select({ uid: groups.uid }).from(groups).where(eq(groups.uid, uid));
      return row !== undefined;
    },

    /** Records the acceptances the organization does not have yet; accepting again keeps the first record. */
    async accept(orgUid: string, docIds: readonly string[], acceptedBy: string): Promise<void> {
      if (docIds.length === 0) return;
      await db
        .insert(termsAcceptances)
        .values(docIds.map((docId) => ({ uid: newChildUid(orgUid), orgUid, docId, acceptedBy })))
        .onConflictDoNothing({ target: [termsAcceptances.orgUid, termsAcceptances.docId] });
    },

    /** The document ids accepted for `uid` (a group, or a resource inside one) or any of its ancestors. */
    async acceptedFor(uid: string): Promise<ReadonlySet<string>> {
      const rows = await db
        .selectDistinct({ docId: termsAcceptances.docId })
        .from(termsAcceptances)
        .where(inArray(termsAcceptances.orgUid, selfAndAncestors(uid)))
        .orderBy(asc(termsAcceptances.docId));
      return new Set(rows.map((r) => r.docId));
    },

    /** A page of the acceptances of the group and of its ancestors. */
    list(plan: ListPlan, group: string): Promise<ListPage<TermsAcceptanceRow>> {
      const where = inArray(termsAcceptances.orgUid, selfAndAncestors(group));
      return listPage(db, { table: termsAcceptances, where, orderColumns: acceptanceOrderColumns, plan, total: countExpression(termsAcceptances, where) });
    },
  };
}
