// The IAM domain's side of the auth kernel's IdentityDirectory (kernel/auth/directory.ts): what token
// verification and capability checks read of identities, roles and role bindings, and the one thing they
// write (an identity's lastSeenTime). A deactivated identity (SCIM active=false) is granted nothing and
// assumed by no external token: it cannot call, nor be exchanged for, until it is reactivated.
import { and, asc, eq, inArray, isNull, lt, or, sql } from "drizzle-orm";
import type { Db } from "../db/client.js";
import { identities, roleBindings, roles } from "../db/schema/index.js";
import type { AssumableIdentity, IdentityDirectory } from "../kernel/auth/types.js";
import { log } from "../kernel/log.js";
import { ancestorsOf } from "../kernel/uidp.js";
import { hotStatement } from "../kernel/prepared-rows.js";
import { relationshipOf } from "./identities.mapper.js";

function assumable(row: { uid: string; parentUid: string | null; relationship: Record<string, unknown> }): AssumableIdentity {
  const relationship = relationshipOf(row.relationship);
  if (relationship.case === undefined) log.warn("identity relationship does not parse", { identity: row.uid });
  return { uid: row.uid, relationship, homeGroup: row.parentUid ?? undefined };
}

/** The directory over this database. The grants query is prepared once, here. */
export function createIdentityDirectory(db: Db): IdentityDirectory {
  // The identity and its bindings read together: one row per binding (one with null binding columns when it
  // has none), none when the identity does not exist.
  const grantsQuery = hotStatement(
    db
      .select({ parentUid: identities.parentUid, active: identities.active, groupUid: roleBindings.groupUid, capabilities: roles.capabilities })
      .from(identities)
      .leftJoin(roleBindings, eq(roleBindings.identityUid, identities.uid))
      .leftJoin(roles, eq(roles.uid, roleBindings.roleUid))
      .where(eq(identities.uid, sql.placeholder("uid")))
      .prepare("auth_identity_grants"),
  );
  const assumableColumns = { uid: identities.uid, parentUid: identities.parentUid, relationship: identities.relationship };

  return {
    async grants(identityUid) {
      const rows = await grantsQuery.execute({ uid: identityUid });
      if (rows.length === 0) return undefined;
      const homeGroup = rows[0]!.parentUid ?? undefined;
      // A deactivated identity (SCIM active=false) is granted nothing, whatever bindings it keeps.
      if (!rows[0]!.active) return { homeGroup, bindings: [], inactive: true };
      return {
        homeGroup,
        bindings: rows.flatMap((r) => (r.groupUid && r.capabilities ? [{ groupUid: r.groupUid, capabilities: r.capabilities }] : [])),
      };
    },

    async withIssuerAndSubject(issuer, subject, limit, within) {
      const homes = within === undefined ? undefined : [...ancestorsOf(within), within];
      const rows = await db
        .select(assumableColumns)
        .from(identities)
        .where(
          and(
            eq(identities.issuer, issuer),
            eq(identities.subject, subject),
            eq(identities.active, true),
            homes ? or(isNull(identities.parentUid), inArray(identities.parentUid, homes)) : undefined,
          ),
        )
        .orderBy(
          sql`${identities.parentUid} is not null`,
          ...(homes ? [sql`length(${identities.parentUid})`] : []),
          asc(identities.createTime),
          asc(identities.uid),
        )
        .limit(limit);
      return rows.map(assumable);
    },

    async assumable(identityUid) {
      const [row] = await db
        .select(assumableColumns)
        .from(identities)
        .where(and(eq(identities.uid, identityUid), eq(identities.active, true)))
        .limit(1);
      return row && assumable(row);
    },

    async markSeen(identityUid, withinSeconds) {
      await db
        .update(identities)
        .set({ lastSeenTime: sql`now()` })
        .where(
          and(
            eq(identities.uid, identityUid),
            or(isNull(identities.lastSeenTime), lt(identities.lastSeenTime, sql`now() - make_interval(secs => ${withinSeconds})`)),
          ),
        );
    },
  };
}
