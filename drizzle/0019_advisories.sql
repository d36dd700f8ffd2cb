CREATE TABLE "advisories" (
	"uid" text PRIMARY KEY NOT NULL,
	"package" text NOT NULL,
	"advisory_id" text NOT NULL,
	"artifact_type" text DEFAULT 'apk' NOT NULL,
	"artifact_architecture" text DEFAULT '' NOT NULL,
	"component_name" text DEFAULT '' NOT NULL,
	"component_type" text DEFAULT '' NOT NULL,
	"component_location" text DEFAULT '' NOT NULL,
	"aliases" text[] DEFAULT '{}' NOT NULL,
	"latest_event_type" smallint DEFAULT 0 NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"update_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "advisory_documents" (
	"package" text PRIMARY KEY NOT NULL,
	"schema_version" text NOT NULL,
	"source" text NOT NULL,
	"content_hash" text NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"update_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "advisory_events" (
	"uid" text PRIMARY KEY NOT NULL,
	"advisory_uid" text NOT NULL,
	"ordinal" integer NOT NULL,
	"time" timestamp (6) with time zone NOT NULL,
	"type" smallint NOT NULL,
	"author" text DEFAULT '' NOT NULL,
	"reviewer" text DEFAULT '' NOT NULL,
	"review_state" smallint NOT NULL,
	"data" jsonb DEFAULT '{}'::jsonb NOT NULL
);
--> statement-breakpoint
CREATE TABLE "osv_records" (
	"id" text PRIMARY KEY NOT NULL,
	"summary" text DEFAULT '' NOT NULL,
	"details" text DEFAULT '' NOT NULL,
	"aliases" text[] DEFAULT '{}' NOT NULL,
	"references" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"severities" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"modified_time" timestamp (6) with time zone,
	"published_time" timestamp (6) with time zone,
	"withdrawn_time" timestamp (6) with time zone,
	"source" text NOT NULL,
	"content_hash" text NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"update_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "advisories" ADD CONSTRAINT "advisories_package_advisory_documents_package_fk" FOREIGN KEY ("package") REFERENCES "public"."advisory_documents"("package") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "advisory_events" ADD CONSTRAINT "advisory_events_advisory_uid_advisories_uid_fk" FOREIGN KEY ("advisory_uid") REFERENCES "public"."advisories"("uid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "advisories_package_advisory_id_idx" ON "advisories" USING btree ("package","advisory_id");--> statement-breakpoint
CREATE INDEX "advisories_advisory_id_idx" ON "advisories" USING btree ("advisory_id");--> statement-breakpoint
CREATE UNIQUE INDEX "advisory_events_advisory_ordinal_idx" ON "advisory_events" USING btree ("advisory_uid","ordinal");--> statement-breakpoint
CREATE INDEX "advisory_events_type_time_idx" ON "advisory_events" USING btree ("type","time");