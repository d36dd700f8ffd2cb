CREATE TABLE "outbox_events" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"type" text NOT NULL,
	"subject" text NOT NULL,
	"group_uid" text NOT NULL,
	"audience" smallint NOT NULL,
	"method" text NOT NULL,
	"actor" text NOT NULL,
	"body" jsonb NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "outbox_events_create_time_idx" ON "outbox_events" USING btree ("create_time","id");