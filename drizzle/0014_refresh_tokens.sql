CREATE TABLE "refresh_tokens" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"chain_id" uuid NOT NULL,
	"identity_uid" text COLLATE "C" NOT NULL,
	"audience" text[] NOT NULL,
	"upstream_issuer" text NOT NULL,
	"upstream_subject" text NOT NULL,
	"not_after" timestamp (6) with time zone,
	"token_hash" text NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"expire_time" timestamp (6) with time zone NOT NULL,
	"used_time" timestamp (6) with time zone,
	"revoke_time" timestamp (6) with time zone
);
--> statement-breakpoint
ALTER TABLE "refresh_tokens" ADD CONSTRAINT "refresh_tokens_identity_uid_identities_uid_fk" FOREIGN KEY ("identity_uid") REFERENCES "public"."identities"("uid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "refresh_tokens_hash_idx" ON "refresh_tokens" USING btree ("token_hash");--> statement-breakpoint
CREATE INDEX "refresh_tokens_chain_idx" ON "refresh_tokens" USING btree ("chain_id");--> statement-breakpoint
CREATE INDEX "refresh_tokens_identity_idx" ON "refresh_tokens" USING btree ("identity_uid");--> statement-breakpoint
CREATE INDEX "refresh_tokens_expire_time_idx" ON "refresh_tokens" USING btree ("expire_time");