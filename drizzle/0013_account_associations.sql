CREATE TABLE "account_associations" (
	"uid" text COLLATE "C" PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"amazon" jsonb,
	"google" jsonb,
	"azure" jsonb,
	"github" jsonb,
	"chainguard" jsonb,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"update_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "account_associations" ADD CONSTRAINT "account_associations_uid_groups_uid_fk" FOREIGN KEY ("uid") REFERENCES "public"."groups"("uid") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "account_associations_name_idx" ON "account_associations" USING btree ("name","uid");--> statement-breakpoint
CREATE INDEX "account_associations_create_time_idx" ON "account_associations" USING btree ("create_time","uid");--> statement-breakpoint
CREATE INDEX "account_associations_update_time_idx" ON "account_associations" USING btree ("update_time","uid");