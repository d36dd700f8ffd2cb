CREATE TABLE "group_access_requests" (
	"uid" text COLLATE "C" PRIMARY KEY NOT NULL,
	"group_uid" text COLLATE "C" NOT NULL,
	"identity_uid" text COLLATE "C" NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"request_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "terms_acceptances" (
	"uid" text COLLATE "C" PRIMARY KEY NOT NULL,
	"org_uid" text COLLATE "C" NOT NULL,
	"doc_id" text NOT NULL,
	"accepted_by" text COLLATE "C" NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "group_access_requests" ADD CONSTRAINT "group_access_requests_group_uid_groups_uid_fk" FOREIGN KEY ("group_uid") REFERENCES "public"."groups"("uid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "group_access_requests" ADD CONSTRAINT "group_access_requests_identity_uid_identities_uid_fk" FOREIGN KEY ("identity_uid") REFERENCES "public"."identities"("uid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "terms_acceptances" ADD CONSTRAINT "terms_acceptances_org_uid_groups_uid_fk" FOREIGN KEY ("org_uid") REFERENCES "public"."groups"("uid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "group_access_requests_group_identity_idx" ON "group_access_requests" USING btree ("group_uid","identity_uid");--> statement-breakpoint
CREATE INDEX "group_access_requests_identity_idx" ON "group_access_requests" USING btree ("identity_uid");--> statement-breakpoint
CREATE INDEX "group_access_requests_request_time_idx" ON "group_access_requests" USING btree ("request_time","uid");--> statement-breakpoint
CREATE UNIQUE INDEX "terms_acceptances_org_doc_idx" ON "terms_acceptances" USING btree ("org_uid","doc_id");--> statement-breakpoint
CREATE INDEX "terms_acceptances_org_time_idx" ON "terms_acceptances" USING btree ("org_uid","create_time","uid");