CREATE TABLE "group_invites" (
	"uid" text COLLATE "C" PRIMARY KEY NOT NULL,
	"group_uid" text COLLATE "C" NOT NULL,
	"role_uid" text COLLATE "C" NOT NULL,
	"email" text DEFAULT '' NOT NULL,
	"expiration_time" timestamp (6) with time zone NOT NULL,
	"single_use" boolean DEFAULT false NOT NULL,
	"code_hash" text NOT NULL,
	"key_id" text NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "group_invites" ADD CONSTRAINT "group_invites_group_uid_groups_uid_fk" FOREIGN KEY ("group_uid") REFERENCES "public"."groups"("uid") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "group_invites" ADD CONSTRAINT "group_invites_role_uid_roles_uid_fk" FOREIGN KEY ("role_uid") REFERENCES "public"."roles"("uid") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "group_invites_code_hash_idx" ON "group_invites" USING btree ("code_hash");--> statement-breakpoint
CREATE UNIQUE INDEX "group_invites_key_id_idx" ON "group_invites" USING btree ("key_id");--> statement-breakpoint
CREATE INDEX "group_invites_group_idx" ON "group_invites" USING btree ("group_uid","uid");--> statement-breakpoint
CREATE INDEX "group_invites_create_time_idx" ON "group_invites" USING btree ("create_time","uid");--> statement-breakpoint
CREATE INDEX "group_invites_role_idx" ON "group_invites" USING btree ("role_uid");