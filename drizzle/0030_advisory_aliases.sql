CREATE TABLE "advisory_aliases" (
	"alias" text NOT NULL,
	"advisory_uid" text COLLATE "C" NOT NULL,
	CONSTRAINT "advisory_aliases_alias_advisory_uid_pk" PRIMARY KEY("alias","advisory_uid")
);
--> statement-breakpoint
ALTER TABLE "advisory_aliases" ADD CONSTRAINT "advisory_aliases_advisory_uid_advisories_uid_fk" FOREIGN KEY ("advisory_uid") REFERENCES "public"."advisories"("uid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "advisory_aliases_advisory_uid_idx" ON "advisory_aliases" USING btree ("advisory_uid");