// Groups in the database. Integrity is the schema's: every row beneath a group references it with
// ON DELETE RESTRICT, so a delete racing a create under the same group ends one way or the other, never with
// an orphan (the insert's foreign-key check takes a KEY SHARE lock on the parent row; the delete needs the
// row exclusively, and its RESTRICT check sees children committed before it got the row).
import { and, asc, eq, isNull, sql } from "drizzle-orm";
import { GroupSchema } from "../../gen/chainguard/platform/iam/v2/groups_pb.js";
import type { UIDPFilter } from "../../gen/platform/common/v1/uidp.platform_pb.js";
import { groups, identities, roleBindings, type GroupFields, type GroupRow } from "../db/schema/index.js";
import { scopePredicate } from "../kernel/auth/index.js";
import { listPage, type ListPage, type ListPlan } from "../kernel/list/index.js";
import { resourceStore, type Executor } from "../kernel/store.js";
import { newChildUid, newRootUid, uidpPredicate } from "../kernel/uidp.js";
import { managedRole } from "./managed-roles.js";

/** What the referencing rows are, in the API's words, from the error's table field (never its message). */
const KINDS: Readonly<Record<string, string>> = {
  groups: "sub-groups",
  identities: "identities",
  roles: "custom roles",
  role_bindings: "role bindings",
  repos: "repos",
  subscriptions: "event subscriptions",
  account_associations: "an account association",
};
function blockingKind(err: unknown): string {
  for (let e = err, depth = 0; e && depth < 5; e = (e as { cause?: unknown }).cause, depth++) {
    const { table, table_name } = e as { table?: unknown; table_name?: unknown };
    const name = typeof table === "string" ? table : typeof table_name === "string" ? table_name : undefined;
    if (name) return KINDS[name] ?? "resources";
  }
  return "resources";
}

export interface GroupListFilter {
  /** The caller's visible scopes: only groups at or beneath one of them are listed and counted. */
  scopes: readonly string[];
  uidp: UIDPFilter | undefined;
  name: string;
}

const groupOrderColumns = {
  uid: groups.uid,
  name: groups.name,
  create_time: groups.createTime,
  update_time: groups.updateTime,
} as const;

/** The domain of an email address (after its last "@"), lowercased; undefined when there is none. */
export function emailDomainOf(email: string): string | undefined {
  const at = email.lastIndexOf("@");
  const domain = at < 0 ? "" : email.slice(at + 1).toLowerCase();
  return domain === "" ? undefined : domain;
}

export function createGroupStore(db: Executor) {
  const base = resourceStore(db, {
    table: groups,
    type: GroupSchema.typeName,
    parentType: GroupSchema.typeName,
    parentColumn: "parentUid",
    // Deleting a group anything references (sub-groups, identities, roles, role bindings, or rows of any
    // table added later that references groups) is refused by the database: no child is looked up first, so
    // no race slips between check and delete.
    stillReferenced: (uid, err) => ({
      type: "RESOURCE_NOT_EMPTY",
      subject: uid,
      description: `group ${uid} still contains ${blockingKind(err)}; delete what it contains first`,
    }),
  });

  return {
    ...base,

    /** Creates an organization (root group) and binds `owner` to it with the managed owner role (run it in a unit of work). */
    async createOrganization(fields: GroupFields, owner: string): Promise<GroupRow> {
      const uid = newRootUid();
      const [row] = await base.insert("", [{ uid, parentUid: null, ...fields }]);
      await db.insert(roleBindings).values({ uid: newChildUid(uid), groupUid: uid, identityUid: owner, roleUid: managedRole("owner").uid });
      return row!;
    },

    /** A page of groups within the caller's scopes, filtered. */
    async list(plan: ListPlan, filter: GroupListFilter): Promise<ListPage<GroupRow>> {
      const where = and(
        scopePredicate(groups.uid, filter.scopes),
        uidpPredicate(filter.uidp, { uid: groups.uid, parent: groups.parentUid }),
        filter.name ? eq(groups.name, filter.name) : undefined,
      );
      return listPage(db, { table: groups, where, orderColumns: groupOrderColumns, plan });
    },

    /**
     * The verified organization (root group) named after the domain of the person's verified email (names
     * compared case-insensitively; the oldest when several are), or undefined: also when `identityUid` is not
     * a person (a root-level identity) or has no verified email.
     */
    async verifiedOrganizationOf(identityUid: string): Promise<GroupRow | undefined> {
      const [person] = await db
        .select({ email: identities.email })
        .from(identities)
        .where(and(eq(identities.uid, identityUid), isNull(identities.parentUid)));
      const domain = emailDomainOf(person?.email ?? "");
      if (domain === undefined) return undefined;
      const [row] = await db
        .select()
        .from(groups)
        .where(and(isNull(groups.parentUid), eq(groups.verified, true), sql`lower(${groups.name}) = ${domain}`))
        .orderBy(asc(groups.createTime), asc(groups.uid))
        .limit(1);
      return row;
    },
  };
}
