ALTER TABLE "outbox_events" ALTER COLUMN "body" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "outbox_events" ADD COLUMN "body_type" text DEFAULT '' NOT NULL;--> statement-breakpoint
ALTER TABLE "outbox_events" ADD COLUMN "extensions" jsonb DEFAULT '{}'::jsonb NOT NULL;