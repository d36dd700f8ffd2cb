// Group invites: a promised role binding on a group, redeemed with a code (iam/group-invites.*).
//
// The code is never stored: only its sha256 (a code carries 256 random bits, so a fast hash is enough) and
// its key id, a short public part of the code that names the invite (shown by Get and List, so an admin
// holding a code can tell which invite it is). An invite lives under its group (RESTRICT, as every resource
// under a group) and names a role (RESTRICT: a role some invite promises cannot be deleted under it). It ends
// with the identity that made it (CASCADE): a promise of a binding that identity made is not kept once it
// is gone.
import { boolean, index, pgTable, text, uniqueIndex } from "drizzle-orm/pg-core";
import { instant, uidText } from "./columns.js";
import { groups, identities, roles } from "./iam.js";

export const groupInvites = pgTable(
  "group_invites",
  {
    /** <group uid>/<16 hex> */
    uid: uidText("uid").primaryKey(),
    groupUid: uidText("group_uid")
      .notNull()
      .references(() => groups.uid, { onDelete: "restrict" }),
    roleUid: uidText("role_uid")
      .notNull()
      .references(() => roles.uid, { onDelete: "restrict" }),
    /** Empty: anyone holding the code; else the verified email the accepting token must carry (lowercase). */
    email: text("email").notNull().default(""),
    expirationTime: instant("expiration_time").notNull(),
    singleUse: boolean("single_use").notNull().default(false),
    /** sha256 (hex) of the code. */
    codeHash: text("code_hash").notNull(),
    /** The public part of the code (16 hex), unique. */
    keyId: text("key_id").notNull(),
    createTime: instant("create_time").notNull().defaultNow(),
    /** The identity that made the invite; null only for invites made before it was recorded. */
    creatorUid: uidText("creator_uid").references(() => identities.uid, { onDelete: "cascade" }),
  },
  (t) => [
    uniqueIndex("group_invites_code_hash_idx").on(t.codeHash),
    index("group_invites_creator_idx").on(t.creatorUid),
    uniqueIndex("group_invites_key_id_idx").on(t.keyId),
    index("group_invites_group_idx").on(t.groupUid, t.uid),
    index("group_invites_create_time_idx").on(t.createTime, t.uid),
    index("group_invites_role_idx").on(t.roleUid),
  ],
);

export type GroupInviteRow = typeof groupInvites.$inferSelect;
