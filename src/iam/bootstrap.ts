// Bootstrap: a root organization owned by a given (issuer, subject), for a fresh installation. Idempotent:
// running it again with the same arguments returns what the first run created. The operator may also record
// the owner's verified email and mark the organization verified (the one thing only the operator may set:
// LookupGroup shows a verified organization to people whose verified email's domain is its name); a rerun
// with these applies them to what exists.
import { and, eq, isNull, sql } from "drizzle-orm";
import { RelationshipType } from "../../gen/chainguard/platform/iam/v2/identities_pb.js";
import type { Db } from "../db/client.js";
import { groups, identities, roleBindings } from "../db/schema/index.js";
import { newChildUid, newRootUid } from "../kernel/uidp.js";
import { ensureManagedRoles, managedRole } from "./managed-roles.js";
import { personUidOf } from "./person-uid.js";

export interface BootstrapOptions {
  issuer: string;
  subject: string;
  /** Name of the organization (root group). */
  organization: string;
  /** Name of the owner identity. */
  identityName?: string;
  /** The owner's email, as verified by the operator (recorded as the identity's verified email). */
  email?: string;
  /** Marks the organization verified: LookupGroup shows it to people whose verified email's domain is its name. */
  verified?: boolean;
}

export interface BootstrapResult {
  group: string;
  identity: string;
  roleBinding: string;
  created: boolean;
}

export async function bootstrap(db: Db, opts: BootstrapOptions): Promise<BootstrapResult> {
  await ensureManagedRoles(db);
  const owner = managedRole("owner");
  return db.transaction(async (tx) => {
    // One bootstrap at a time, so two concurrent runs cannot create two organizations.
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext('apiserver:bootstrap'))`);
    let [identity] = await tx
      .select({ uid: identities.uid })
      .from(identities)
      .where(and(isNull(identities.parentUid), eq(identities.issuer, opts.issuer), eq(identities.subject, opts.subject)));
    if (identity) {
      if (opts.email !== undefined) {
        await tx.update(identities).set({ email: opts.email, updateTime: sql`now()` }).where(eq(identities.uid, identity.uid));
      }
      const [existing] = await tx
        .select({ group: groups.uid, binding: roleBindings.uid })
        .from(roleBindings)
        .innerJoin(groups, eq(groups.uid, roleBindings.groupUid))
        .where(
          and(
            eq(roleBindings.identityUid, identity.uid),
            eq(roleBindings.roleUid, owner.uid),
            isNull(groups.parentUid),
            eq(groups.name, opts.organization),
          ),
        );
      if (existing) {
        if (opts.verified) await tx.update(groups).set({ verified: true, updateTime: sql`now()` }).where(eq(groups.uid, existing.group));
        return { group: existing.group, identity: identity.uid, roleBinding: existing.binding, created: false };
      }
    } else {
      // The person's uid, the one LookupIdentity answered for this pair before it existed.
      identity = { uid: personUidOf(opts.issuer, opts.subject) };
      await tx.insert(identities).values({
        uid: identity.uid,
        parentUid: null,
        name: opts.identityName ?? "owner",
        email: opts.email ?? "",
        relationship: { claimMatch: { issuer: opts.issuer, subject: opts.subject } },
        relationshipType: RelationshipType.CLAIM_MATCH,
        issuer: opts.issuer,
        subject: opts.subject,
      });
    }
    const group = newRootUid();
    await tx.insert(groups).values({ uid: group, parentUid: null, name: opts.organization, verified: opts.verified ?? false });
    const binding = newChildUid(group);
    await tx.insert(roleBindings).values({ uid: binding, groupUid: group, identityUid: identity.uid, roleUid: owner.uid });
    return { group, identity: identity.uid, roleBinding: binding, created: true };
  });
}
