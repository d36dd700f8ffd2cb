CREATE TABLE "groups" (
	"uid" text COLLATE "C" PRIMARY KEY NOT NULL,
	"parent_uid" text COLLATE "C",
	"name" text NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"verified" boolean DEFAULT false NOT NULL,
	"kind" integer DEFAULT 0 NOT NULL,
	"status" integer DEFAULT 2 NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"update_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "identities" (
	"uid" text COLLATE "C" PRIMARY KEY NOT NULL,
	"parent_uid" text COLLATE "C",
	"name" text NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"email" text DEFAULT '' NOT NULL,
	"email_unverified" text DEFAULT '' NOT NULL,
	"company" text DEFAULT '' NOT NULL,
	"relationship" jsonb NOT NULL,
	"relationship_type" integer NOT NULL,
	"issuer" text,
	"subject" text,
	"last_seen_time" timestamp (6) with time zone,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"update_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "role_bindings" (
	"uid" text COLLATE "C" PRIMARY KEY NOT NULL,
	"group_uid" text COLLATE "C" NOT NULL,
	"identity_uid" text COLLATE "C" NOT NULL,
	"role_uid" text COLLATE "C" NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"update_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "roles" (
	"uid" text COLLATE "C" PRIMARY KEY NOT NULL,
	"parent_uid" text COLLATE "C",
	"name" text NOT NULL,
	"description" text DEFAULT '' NOT NULL,
	"capabilities" integer[] NOT NULL,
	"managed" boolean DEFAULT false NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"update_time" timestamp (6) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "signing_keys" (
	"kid" text PRIMARY KEY NOT NULL,
	"alg" text NOT NULL,
	"private_jwk" jsonb NOT NULL,
	"public_jwk" jsonb NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	"retire_time" timestamp (6) with time zone
);
--> statement-breakpoint
ALTER TABLE "groups" ADD CONSTRAINT "groups_parent_uid_groups_uid_fk" FOREIGN KEY ("parent_uid") REFERENCES "public"."groups"("uid") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "identities" ADD CONSTRAINT "identities_parent_uid_groups_uid_fk" FOREIGN KEY ("parent_uid") REFERENCES "public"."groups"("uid") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "role_bindings" ADD CONSTRAINT "role_bindings_group_uid_groups_uid_fk" FOREIGN KEY ("group_uid") REFERENCES "public"."groups"("uid") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "role_bindings" ADD CONSTRAINT "role_bindings_identity_uid_identities_uid_fk" FOREIGN KEY ("identity_uid") REFERENCES "public"."identities"("uid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "role_bindings" ADD CONSTRAINT "role_bindings_role_uid_roles_uid_fk" FOREIGN KEY ("role_uid") REFERENCES "public"."roles"("uid") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "roles" ADD CONSTRAINT "roles_parent_uid_groups_uid_fk" FOREIGN KEY ("parent_uid") REFERENCES "public"."groups"("uid") ON DELETE restrict ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "groups_parent_idx" ON "groups" USING btree ("parent_uid","uid");--> statement-breakpoint
CREATE INDEX "groups_name_idx" ON "groups" USING btree ("name","uid");--> statement-breakpoint
CREATE INDEX "groups_create_time_idx" ON "groups" USING btree ("create_time","uid");--> statement-breakpoint
CREATE INDEX "identities_parent_idx" ON "identities" USING btree ("parent_uid","uid");--> statement-breakpoint
CREATE INDEX "identities_issuer_subject_idx" ON "identities" USING btree ("issuer","subject");--> statement-breakpoint
CREATE INDEX "identities_name_idx" ON "identities" USING btree ("name","uid");--> statement-breakpoint
CREATE UNIQUE INDEX "role_bindings_unique_idx" ON "role_bindings" USING btree ("group_uid","identity_uid","role_uid");--> statement-breakpoint
CREATE INDEX "role_bindings_identity_idx" ON "role_bindings" USING btree ("identity_uid","group_uid");--> statement-breakpoint
CREATE INDEX "role_bindings_group_idx" ON "role_bindings" USING btree ("group_uid","uid");--> statement-breakpoint
CREATE INDEX "role_bindings_role_idx" ON "role_bindings" USING btree ("role_uid");--> statement-breakpoint
CREATE INDEX "roles_parent_idx" ON "roles" USING btree ("parent_uid","uid");--> statement-breakpoint
CREATE UNIQUE INDEX "roles_managed_name_idx" ON "roles" USING btree ("name") WHERE managed;