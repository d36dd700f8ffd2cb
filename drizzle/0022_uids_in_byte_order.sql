-- Advisory and library uids in byte order (COLLATE "C"), as every other uid column: their default list order
-- (uid) is then the same on every database, whatever its default collation, and a uid range or prefix
-- predicate can use the primary key. A collation change rewrites no rows; PostgreSQL rebuilds the indexes.
ALTER TABLE "library_artifact_versions" ALTER COLUMN "uid" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "library_artifact_versions" ALTER COLUMN "artifact_uid" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "library_artifacts" ALTER COLUMN "uid" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "advisories" ALTER COLUMN "uid" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "advisory_events" ALTER COLUMN "uid" SET DATA TYPE text COLLATE "C";--> statement-breakpoint
ALTER TABLE "advisory_events" ALTER COLUMN "advisory_uid" SET DATA TYPE text COLLATE "C";