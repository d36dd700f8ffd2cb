CREATE TABLE "event_deliveries" (
	"event_id" uuid NOT NULL,
	"subscription_uid" text COLLATE "C" NOT NULL,
	"state" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"last_attempt_time" timestamp (6) with time zone,
	"last_error" text,
	"last_status" smallint,
	"done_time" timestamp (6) with time zone,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "event_deliveries_event_id_subscription_uid_pk" PRIMARY KEY("event_id","subscription_uid"),
	CONSTRAINT "event_deliveries_state_check" CHECK (state IN ('pending', 'delivered', 'failed'))
);
--> statement-breakpoint
CREATE TABLE "subscriptions" (
	"uid" text COLLATE "C" PRIMARY KEY NOT NULL,
	"group_uid" text COLLATE "C" NOT NULL,
	"sink" text NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"update_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "event_deliveries" ADD CONSTRAINT "event_deliveries_event_id_outbox_events_id_fk" FOREIGN KEY ("event_id") REFERENCES "public"."outbox_events"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "event_deliveries" ADD CONSTRAINT "event_deliveries_subscription_uid_subscriptions_uid_fk" FOREIGN KEY ("subscription_uid") REFERENCES "public"."subscriptions"("uid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "subscriptions" ADD CONSTRAINT "subscriptions_group_uid_groups_uid_fk" FOREIGN KEY ("group_uid") REFERENCES "public"."groups"("uid") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "event_deliveries_due_idx" ON "event_deliveries" USING btree ("subscription_uid","next_attempt_time") WHERE state = 'pending';--> statement-breakpoint
CREATE INDEX "event_deliveries_done_idx" ON "event_deliveries" USING btree ("done_time") WHERE state <> 'pending';--> statement-breakpoint
CREATE INDEX "event_deliveries_subscription_idx" ON "event_deliveries" USING btree ("subscription_uid","state");--> statement-breakpoint
CREATE UNIQUE INDEX "subscriptions_group_sink_idx" ON "subscriptions" USING btree ("group_uid","sink");--> statement-breakpoint
CREATE INDEX "subscriptions_create_time_idx" ON "subscriptions" USING btree ("create_time","uid");--> statement-breakpoint
CREATE INDEX "subscriptions_update_time_idx" ON "subscriptions" USING btree ("update_time","uid");