CREATE TABLE "library_artifact_versions" (
	"uid" text PRIMARY KEY NOT NULL,
	"artifact_uid" text NOT NULL,
	"name" text NOT NULL,
	"version" text NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"size_bytes" bigint DEFAULT 0 NOT NULL,
	"ordinal" integer DEFAULT 0 NOT NULL,
	"source" text DEFAULT '' NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"update_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "library_artifacts" (
	"uid" text PRIMARY KEY NOT NULL,
	"ecosystem" smallint NOT NULL,
	"name" text NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"latest_version" text DEFAULT '' NOT NULL,
	"version_count" integer DEFAULT 0 NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"update_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "library_artifact_versions" ADD CONSTRAINT "library_artifact_versions_artifact_uid_library_artifacts_uid_fk" FOREIGN KEY ("artifact_uid") REFERENCES "public"."library_artifacts"("uid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "library_artifact_versions_artifact_version_idx" ON "library_artifact_versions" USING btree ("artifact_uid","version");--> statement-breakpoint
CREATE INDEX "library_artifact_versions_artifact_ordinal_idx" ON "library_artifact_versions" USING btree ("artifact_uid","ordinal","uid");--> statement-breakpoint
CREATE INDEX "library_artifacts_ecosystem_name_idx" ON "library_artifacts" USING btree ("ecosystem","name","uid");--> statement-breakpoint
CREATE INDEX "library_artifacts_name_idx" ON "library_artifacts" USING btree ("name","uid");--> statement-breakpoint
CREATE INDEX "library_artifacts_update_time_idx" ON "library_artifacts" USING btree ("update_time","uid");