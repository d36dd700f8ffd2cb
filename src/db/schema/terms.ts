// Terms acceptances and group access requests: the two records left on the way into a group (its
// organization accepted the operator's terms; a person asked to be let in).
//
// terms_acceptances: one row per (organization, document) the first time it is accepted; accepting again
// keeps the first row (who accepted first, and when). accepted_by is the accepting identity's uid as text, not
// a foreign key: the record of who accepted stays when that identity is deleted. The organization's rows go
// with it (ON DELETE CASCADE).
//
// group_access_requests: one row per (group, requesting identity), holding the first and the latest request
// time; a repeat within the window is refused by the upsert's condition (no race between two repeats). A row
// is pending while its requester holds no role binding on the group or an ancestor (the owners' list says
// so); it goes with its group or its identity.
import { index, pgTable, text, uniqueIndex } from "drizzle-orm/pg-core";
import { instant, uidText } from "./columns.js";
import { groups, identities } from "./iam.js";

export const termsAcceptances = pgTable(
  "terms_acceptances",
  {
    /** <org uid>/<16 hex>: internal, the list's tie-breaker. */
    uid: uidText("uid").primaryKey(),
    orgUid: uidText("org_uid")
      .notNull()
      .references(() => groups.uid, { onDelete: "cascade" }),
    docId: text("doc_id").notNull(),
    /** The uid of the identity that accepted (kept after that identity is deleted). */
    acceptedBy: uidText("accepted_by").notNull(),
    createTime: instant("create_time").notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("terms_acceptances_org_doc_idx").on(t.orgUid, t.docId),
    index("terms_acceptances_org_time_idx").on(t.orgUid, t.createTime, t.uid),
  ],
);

export const groupAccessRequests = pgTable(
  "group_access_requests",
  {
    /** <group uid>/<16 hex> */
    uid: uidText("uid").primaryKey(),
    groupUid: uidText("group_uid")
      .notNull()
      .references(() => groups.uid, { onDelete: "cascade" }),
    identityUid: uidText("identity_uid")
      .notNull()
      .references(() => identities.uid, { onDelete: "cascade" }),
    /** The first request. */
    createTime: instant("create_time").notNull().defaultNow(),
    /** The latest request (a repeat after the window moves it). */
    requestTime: instant("request_time").notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex("group_access_requests_group_identity_idx").on(t.groupUid, t.identityUid),
    index("group_access_requests_identity_idx").on(t.identityUid),
    index("group_access_requests_request_time_idx").on(t.requestTime, t.uid),
  ],
);

export type TermsAcceptanceRow = typeof termsAcceptances.$inferSelect;
export type GroupAccessRequestRow = typeof groupAccessRequests.$inferSelect;
/** A pending access request with its requester's name and email (the owners' list). */
export type PendingAccessRequestRow = GroupAccessRequestRow & { identityName: string; identityEmail: string };
