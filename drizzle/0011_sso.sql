CREATE TABLE "external_group_role_mappings" (
	"uid" text COLLATE "C" PRIMARY KEY NOT NULL,
	"identity_provider_uid" text COLLATE "C" NOT NULL,
	"external_group_id" text NOT NULL,
	"role_uid" text COLLATE "C" NOT NULL,
	"scope" text COLLATE "C" NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "identity_providers" (
	"uid" text COLLATE "C" PRIMARY KEY NOT NULL,
	"group_uid" text COLLATE "C" NOT NULL,
	"name" text NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"default_role_uid" text COLLATE "C" NOT NULL,
	"oidc_issuer" text NOT NULL,
	"oidc_client_id" text NOT NULL,
	"oidc_client_secret" text,
	"oidc_additional_scopes" text[] DEFAULT '{}' NOT NULL,
	"oidc_groups_claim" text DEFAULT '' NOT NULL,
	"oidc_correlation_rule" integer DEFAULT 0 NOT NULL,
	"oidc_pkce_enabled" boolean DEFAULT false NOT NULL,
	"scim_enabled" boolean DEFAULT false NOT NULL,
	"scim_etag" text DEFAULT gen_random_uuid()::text NOT NULL,
	"scim_token_hash" text,
	"scim_token_expire_time" timestamp (6) with time zone,
	"scim_previous_token_hash" text,
	"scim_previous_token_expire_time" timestamp (6) with time zone,
	"scim_revoke_time" timestamp (6) with time zone,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"update_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "identities" ADD COLUMN "identity_provider_uid" text COLLATE "C";--> statement-breakpoint
ALTER TABLE "identities" ADD COLUMN "external_id" text;--> statement-breakpoint
ALTER TABLE "identities" ADD COLUMN "active" boolean DEFAULT true NOT NULL;--> statement-breakpoint
ALTER TABLE "identities" ADD COLUMN "scim" jsonb;--> statement-breakpoint
ALTER TABLE "role_bindings" ADD COLUMN "mapping_uid" text COLLATE "C";--> statement-breakpoint
ALTER TABLE "external_group_role_mappings" ADD CONSTRAINT "external_group_role_mappings_identity_provider_uid_identity_providers_uid_fk" FOREIGN KEY ("identity_provider_uid") REFERENCES "public"."identity_providers"("uid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "external_group_role_mappings" ADD CONSTRAINT "external_group_role_mappings_role_uid_roles_uid_fk" FOREIGN KEY ("role_uid") REFERENCES "public"."roles"("uid") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "external_group_role_mappings" ADD CONSTRAINT "external_group_role_mappings_scope_groups_uid_fk" FOREIGN KEY ("scope") REFERENCES "public"."groups"("uid") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "identity_providers" ADD CONSTRAINT "identity_providers_group_uid_groups_uid_fk" FOREIGN KEY ("group_uid") REFERENCES "public"."groups"("uid") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "identity_providers" ADD CONSTRAINT "identity_providers_default_role_uid_roles_uid_fk" FOREIGN KEY ("default_role_uid") REFERENCES "public"."roles"("uid") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "external_group_role_mappings_unique_idx" ON "external_group_role_mappings" USING btree ("identity_provider_uid","external_group_id","role_uid","scope");--> statement-breakpoint
CREATE INDEX "external_group_role_mappings_create_time_idx" ON "external_group_role_mappings" USING btree ("create_time","uid");--> statement-breakpoint
CREATE INDEX "external_group_role_mappings_role_idx" ON "external_group_role_mappings" USING btree ("role_uid");--> statement-breakpoint
CREATE UNIQUE INDEX "identity_providers_group_name_idx" ON "identity_providers" USING btree ("group_uid","name");--> statement-breakpoint
CREATE INDEX "identity_providers_name_idx" ON "identity_providers" USING btree ("name","uid");--> statement-breakpoint
CREATE INDEX "identity_providers_create_time_idx" ON "identity_providers" USING btree ("create_time","uid");--> statement-breakpoint
CREATE INDEX "identity_providers_update_time_idx" ON "identity_providers" USING btree ("update_time","uid");--> statement-breakpoint
CREATE INDEX "identity_providers_default_role_idx" ON "identity_providers" USING btree ("default_role_uid");--> statement-breakpoint
CREATE UNIQUE INDEX "identity_providers_scim_token_idx" ON "identity_providers" USING btree ("scim_token_hash");--> statement-breakpoint
CREATE UNIQUE INDEX "identity_providers_scim_previous_token_idx" ON "identity_providers" USING btree ("scim_previous_token_hash");--> statement-breakpoint
ALTER TABLE "identities" ADD CONSTRAINT "identities_identity_provider_uid_identity_providers_uid_fk" FOREIGN KEY ("identity_provider_uid") REFERENCES "public"."identity_providers"("uid") ON DELETE set null ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "role_bindings" ADD CONSTRAINT "role_bindings_mapping_uid_external_group_role_mappings_uid_fk" FOREIGN KEY ("mapping_uid") REFERENCES "public"."external_group_role_mappings"("uid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "identities_provider_external_idx" ON "identities" USING btree ("identity_provider_uid","external_id");--> statement-breakpoint
CREATE INDEX "role_bindings_mapping_idx" ON "role_bindings" USING btree ("mapping_uid");