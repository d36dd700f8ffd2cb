CREATE TABLE "repo_blobs" (
	"repo_uid" text COLLATE "C" NOT NULL,
	"digest" text NOT NULL,
	"size" bigint NOT NULL,
	"create_time" timestamp (6) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "repo_blobs_repo_uid_digest_pk" PRIMARY KEY("repo_uid","digest")
);
--> statement-breakpoint
ALTER TABLE "manifests" ADD COLUMN "subject" text;--> statement-breakpoint
ALTER TABLE "manifests" ADD COLUMN "artifact_type" text;--> statement-breakpoint
ALTER TABLE "manifests" ADD COLUMN "annotations" jsonb;--> statement-breakpoint
ALTER TABLE "repos" ADD COLUMN "public" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "repo_blobs" ADD CONSTRAINT "repo_blobs_repo_uid_repos_uid_fk" FOREIGN KEY ("repo_uid") REFERENCES "public"."repos"("uid") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "repo_blobs_digest_idx" ON "repo_blobs" USING btree ("digest");--> statement-breakpoint
CREATE INDEX "manifests_repo_subject_idx" ON "manifests" USING btree ("repo_uid","subject");