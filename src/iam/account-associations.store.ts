// Account associations in the database. An association's uid is its group's uid: created under a group
// that does not exist, NOT_FOUND naming the group (the foreign key decides, also against a concurrent
// delete); a second one for the same group, ALREADY_EXISTS (the primary key decides: concurrent creates
// yield one). A group holding an association cannot be deleted (RESTRICT).
import { and, eq } from "drizzle-orm";
import { AccountAssociationSchema } from "../../gen/chainguard/platform/iam/v2/account_associations_pb.js";
import { GroupSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { accountAssociations, type AccountAssociationFields, type AccountAssociationRow } from "../db/schema/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { alreadyExists } from "../kernel/errors/index.js";
import { listPage, type ListPage, type ListPlan } from "../kernel/list/index.js";
import { resourceStore, type Executor } from "../kernel/store.js";
import { uidpPredicate } from "../kernel/uidp.js";

export interface AccountAssociationListFilter {
  /** The caller's visible scopes: only associations of groups at or beneath one of them are listed and counted. */
  scopes: readonly string[];
  uidp: UIDPFilter | undefined;
  /** Exact name; empty for any. */
  name: string;
}

const orderColumns = {
  uid: accountAssociations.uid,
  name: accountAssociations.name,
  create_time: accountAssociations.createTime,
  update_time: accountAssociations.updateTime,
} as const;

export function createAccountAssociationStore(db: Executor) {
  const base = resourceStore<typeof accountAssociations, AccountAssociationRow>(db, {
    table: accountAssociations,
    type: AccountAssociationSchema.typeName,
    parentType: GroupSchema.typeName,
    unique: {
      columns: [accountAssociations.uid],
      taken: async (_on, row) => {
        const uid = (row as { uid: string }).uid;
        return alreadyExists(AccountAssociationSchema.typeName, uid, `group ${uid} already has an account association (one per group): update it instead`);
      },
    },
  });

  return {
    ...base,

    /** Creates the association of `group` (its uid is the group's). */
    async createFor(group: string, fields: AccountAssociationFields): Promise<AccountAssociationRow> {
      const [row] = await base.insert(group, [{ uid: group, ...fields }]);
      return row!;
    },

    /** A page of associations within the caller's scopes, filtered. The uid is a group's: uidp filters apply to it. */
    list(plan: ListPlan, filter: AccountAssociationListFilter): Promise<ListPage<AccountAssociationRow>> {
      const where = and(
        scopePredicate(accountAssociations.uid, filter.scopes),
        uidpPredicate(filter.uidp, { uid: accountAssociations.uid }),
        filter.name ? eq(accountAssociations.name, filter.name) : undefined,
      );
      return listPage(db, { table: accountAssociations, where, orderColumns, plan });
    },
  };
}
