CREATE TABLE "manifests" (
	"repo_uid" text COLLATE "C" NOT NULL,
	"digest" text NOT NULL,
	"media_type" text NOT NULL,
	"is_index" boolean NOT NULL,
	"platform" text,
	"size" bigint,
	"children" jsonb,
	"manifest_size" bigint DEFAULT 0 NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "manifests_repo_uid_digest_pk" PRIMARY KEY("repo_uid","digest")
);
--> statement-breakpoint
CREATE TABLE "repos" (
	"uid" text COLLATE "C" PRIMARY KEY NOT NULL,
	"group_uid" text COLLATE "C" NOT NULL,
	"name" text NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"catalog_tier" integer DEFAULT 0 NOT NULL,
	"bundles" text[] DEFAULT '{}' NOT NULL,
	"aliases" text[] DEFAULT '{}' NOT NULL,
	"active_tags" text[] DEFAULT '{}' NOT NULL,
	"sync_config" jsonb,
	"custom_overlay" jsonb,
	"readme" text DEFAULT '' NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"update_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "tag_counts" (
	"repo_uid" text COLLATE "C" NOT NULL,
	"kind" smallint NOT NULL,
	"count" bigint DEFAULT 0 NOT NULL,
	CONSTRAINT "tag_counts_repo_uid_kind_pk" PRIMARY KEY("repo_uid","kind")
);
--> statement-breakpoint
CREATE TABLE "tags" (
	"uid" text COLLATE "C" PRIMARY KEY NOT NULL,
	"repo_uid" text COLLATE "C" NOT NULL,
	"name" text NOT NULL,
	"digest" text NOT NULL,
	"deprecated" boolean DEFAULT false NOT NULL,
	"bundles" text[] DEFAULT '{}' NOT NULL,
	"kind" smallint DEFAULT 0 NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"update_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "manifests" ADD CONSTRAINT "manifests_repo_uid_repos_uid_fk" FOREIGN KEY ("repo_uid") REFERENCES "public"."repos"("uid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "repos" ADD CONSTRAINT "repos_group_uid_groups_uid_fk" FOREIGN KEY ("group_uid") REFERENCES "public"."groups"("uid") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tag_counts" ADD CONSTRAINT "tag_counts_repo_uid_repos_uid_fk" FOREIGN KEY ("repo_uid") REFERENCES "public"."repos"("uid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tags" ADD CONSTRAINT "tags_repo_uid_repos_uid_fk" FOREIGN KEY ("repo_uid") REFERENCES "public"."repos"("uid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "repos_group_name_idx" ON "repos" USING btree ("group_uid","name");--> statement-breakpoint
CREATE INDEX "repos_name_idx" ON "repos" USING btree ("name","uid");--> statement-breakpoint
CREATE INDEX "repos_create_time_idx" ON "repos" USING btree ("create_time","uid");--> statement-breakpoint
CREATE INDEX "repos_update_time_idx" ON "repos" USING btree ("update_time","uid");--> statement-breakpoint
CREATE UNIQUE INDEX "tags_repo_name_idx" ON "tags" USING btree ("repo_uid","name");--> statement-breakpoint
CREATE INDEX "tags_repo_kind_uid_idx" ON "tags" USING btree ("repo_uid","kind","uid");--> statement-breakpoint
CREATE INDEX "tags_repo_kind_name_idx" ON "tags" USING btree ("repo_uid","kind","name","uid");--> statement-breakpoint
CREATE INDEX "tags_repo_kind_update_time_idx" ON "tags" USING btree ("repo_uid","kind","update_time","uid");--> statement-breakpoint
CREATE INDEX "tags_repo_digest_idx" ON "tags" USING btree ("repo_uid","digest");