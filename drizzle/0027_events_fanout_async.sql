CREATE TABLE "event_expansions" (
	"event_id" uuid PRIMARY KEY NOT NULL,
	"writer_xid" "xid8" DEFAULT pg_current_xact_id() NOT NULL,
	"writer_snapshot" "pg_snapshot" DEFAULT pg_current_snapshot() NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "subscriptions" ADD COLUMN "create_xid" "xid8" DEFAULT pg_current_xact_id() NOT NULL;--> statement-breakpoint
ALTER TABLE "event_expansions" ADD CONSTRAINT "event_expansions_event_id_outbox_events_id_fk" FOREIGN KEY ("event_id") REFERENCES "public"."outbox_events"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "event_expansions_create_time_idx" ON "event_expansions" USING btree ("create_time");