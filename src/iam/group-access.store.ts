// Requests for access to a group (GroupsService.RequestGroupAccess): one row per (group, requester), with
// the first and the latest request time. A request is pending while its requester holds no role binding on
// the group or an ancestor: a binding approves it, and the owners' list stops showing it.
import { and, eq, getTableColumns, inArray, sql } from "drizzle-orm";
import { groupAccessRequests, groups, identities, roleBindings, type PendingAccessRequestRow } from "../db/schema/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { countExpression, keysetPage, pageColumns, type ListPage, type ListPlan } from "../kernel/list/index.js";
import type { Executor } from "../kernel/store.js";
import { ancestorsOf, newChildUid } from "../kernel/uidp.js";

const requestOrderColumns = {
  uid: groupAccessRequests.uid,
  create_time: groupAccessRequests.createTime,
  request_time: groupAccessRequests.requestTime,
  group_uid: groupAccessRequests.groupUid,
} as const;

const pendingRowFields = {
  ...getTableColumns(groupAccessRequests),
  identityName: identities.name,
  identityEmail: identities.email,
};

/** The requester holds no role binding on the requested group or an ancestor. */
const pending = sql`not exists (select 1 from ${roleBindings} where ${roleBindings.identityUid} = ${groupAccessRequests.identityUid}
  and (${roleBindings.groupUid} = ${groupAccessRequests.groupUid}
       or left(${groupAccessRequests.groupUid}, length(${roleBindings.groupUid}) + 1) = ${roleBindings.groupUid} || '/'))`;

export function createGroupAccessStore(db: Executor) {
  return {
    async groupExists(uid: string): Promise<boolean> {
      const [row] = await db.select({ uid: groups.uid }).from(groups).where(eq(groups.uid, uid));
      return row !== undefined;
    },

    /** Whether the identity holds a role binding on the group or an ancestor (it has access already). */
    async hasBindingOn(identityUid: string, groupUid: string): Promise<boolean> {
      const [row] = await db
        .select({ uid: roleBindings.uid })
        .from(roleBindings)
        .where(and(eq(roleBindings.identityUid, identityUid), inArray(roleBindings.groupUid, [...ancestorsOf(groupUid), groupUid])))
        .limit(1);
      return row !== undefined;
    },

    /**
     * Records a request, or renews one older than the window. Returns undefined when recorded, or how long
     * until a repeat is allowed (in ms) when the latest request is within the window. One statement: two
     * repeats at once record one.
     */
    async request(groupUid: string, identityUid: string, windowMs: number): Promise<number | undefined> {
      const window = sql`make_interval(secs => ${windowMs / 1000})`;
      const recorded = await db
        .insert(groupAccessRequests)
        .values({ uid: newChildUid(groupUid), groupUid, identityUid })
        .onConflictDoUpdate({
          target: [groupAccessRequests.groupUid, groupAccessRequests.identityUid],
          set: { requestTime: sql`now()` },
          setWhere: sql`${groupAccessRequests.requestTime} <= now() - ${window}`,
        })
        .returning({ uid: groupAccessRequests.uid });
      if (recorded.length > 0) return undefined;
      const [row] = await db
        .select({ ms: sql<string>`ceil(extract(epoch from (${groupAccessRequests.requestTime} + ${window} - now())) * 1000)::text` })
        .from(groupAccessRequests)
        .where(and(eq(groupAccessRequests.groupUid, groupUid), eq(groupAccessRequests.identityUid, identityUid)));
      return Math.max(1, Number(row?.ms ?? windowMs));
    },

    /** A page of the pending requests for the group and the groups beneath it. */
    listPending(plan: ListPlan, group: string): Promise<ListPage<PendingAccessRequestRow>> {
      const where = and(scopePredicate(groupAccessRequests.groupUid, [group]), pending);
      const total = countExpression(groupAccessRequests, where);
      const query = db
        .select({ row: pendingRowFields, ...pageColumns(plan, requestOrderColumns, total) })
        .from(groupAccessRequests)
        .innerJoin(identities, eq(identities.uid, groupAccessRequests.identityUid))
        .$dynamic();
      return keysetPage(db, query, { plan, orderColumns: requestOrderColumns, where, total });
    },
  };
}
