// Account associations: a group's links to accounts at cloud providers and other systems. One per group: the
// association's uid is its group's uid (the primary key and the foreign key at once), RESTRICT like every row
// beneath a group, so a group holding an association cannot be deleted until the association is. Each
// provider block (amazon, google, azure, github, chainguard) is stored as its proto3 JSON, null when unset.
import { index, jsonb, pgTable, text } from "drizzle-orm/pg-core";
import { instant, uidText } from "./columns.js";
import { groups } from "./iam.js";

export const accountAssociations = pgTable(
  "account_associations",
  {
    /** The group's uid. */
    uid: uidText("uid")
      .primaryKey()
      .references(() => groups.uid, { onDelete: "restrict" }),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    amazon: jsonb("amazon").$type<Record<string, unknown>>(),
    google: jsonb("google").$type<Record<string, unknown>>(),
    azure: jsonb("azure").$type<Record<string, unknown>>(),
    github: jsonb("github").$type<Record<string, unknown>>(),
    chainguard: jsonb("chainguard").$type<Record<string, unknown>>(),
    createTime: instant("create_time").notNull().defaultNow(),
    updateTime: instant("update_time").notNull().defaultNow(),
  },
  (t) => [
    index("account_associations_name_idx").on(t.name, t.uid),
    index("account_associations_create_time_idx").on(t.createTime, t.uid),
    index("account_associations_update_time_idx").on(t.updateTime, t.uid),
  ],
);

export type AccountAssociationRow = typeof accountAssociations.$inferSelect;
export type AccountAssociationFields = Omit<typeof accountAssociations.$inferInsert, "uid" | "createTime" | "updateTime">;
