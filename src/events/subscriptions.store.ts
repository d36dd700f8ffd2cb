// Subscriptions in the database. A subscription references its group (ON DELETE RESTRICT): a group holding
// subscriptions cannot be deleted, and a subscription created under a group being deleted ends as NOT_FOUND.
// Its deliveries go with it (ON DELETE CASCADE).
import { and, eq } from "drizzle-orm";
import { GroupSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import { SubscriptionSchema } from "../../gen/chainguard/platform/events/v2/subscriptions_pb.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { subscriptions, type SubscriptionRow } from "../db/schema/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { alreadyExists } from "../kernel/errors/index.js";
import { listPage, type ListPage, type ListPlan } from "../kernel/list/index.js";
import { resourceStore, type Executor } from "../kernel/store.js";
import { uidpPredicate } from "../kernel/uidp.js";

interface SubscriptionListFilter {
  /** The caller's visible scopes: only subscriptions beneath one of them are listed and counted. */
  scopes: readonly string[];
  uidp: UIDPFilter | undefined;
}

const subscriptionOrderColumns = {
  uid: subscriptions.uid,
  create_time: subscriptions.createTime,
  update_time: subscriptions.updateTime,
} as const;

export function createSubscriptionStore(db: Executor) {
  const base = resourceStore<typeof subscriptions, SubscriptionRow, typeof subscriptions.$inferInsert, "groupUid">(db, {
    table: subscriptions,
    type: SubscriptionSchema.typeName,
    parentType: GroupSchema.typeName,
    parentColumn: "groupUid",
    // One subscription per sink in a group (a second would receive every event twice). The unique index
    // decides, so concurrent creates of one sink yield one subscription: ALREADY_EXISTS naming it.
    unique: {
      columns: [subscriptions.groupUid, subscriptions.sink],
      async taken(on, row) {
        const { groupUid, sink } = row as { groupUid: string; sink: string };
        const [other] = await on
          .select({ uid: subscriptions.uid })
          .from(subscriptions)
          .where(and(eq(subscriptions.groupUid, groupUid), eq(subscriptions.sink, sink)));
        // The sink (up to 2,048 characters) is not echoed: the caller sent it, and the uid names the holder.
        return alreadyExists(SubscriptionSchema.typeName, other?.uid ?? groupUid, `A subscription to this sink already exists in group ${groupUid}`);
      },
    },
  });

  return {
    ...base,

    /** A page of subscriptions within the caller's scopes, filtered. */
    list(plan: ListPlan, filter: SubscriptionListFilter): Promise<ListPage<SubscriptionRow>> {
      const where = and(
        scopePredicate(subscriptions.uid, filter.scopes),
        uidpPredicate(filter.uidp, { uid: subscriptions.uid, parent: subscriptions.groupUid }),
      );
      return listPage(db, { table: subscriptions, where, orderColumns: subscriptionOrderColumns, plan });
    },
  };
}
