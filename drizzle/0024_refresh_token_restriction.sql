ALTER TABLE "refresh_tokens" ADD COLUMN "scopes" text[];--> statement-breakpoint
ALTER TABLE "refresh_tokens" ADD COLUMN "capabilities" integer[];