CREATE TABLE "read_positions" (
	"identity" text PRIMARY KEY NOT NULL,
	"xid" bigint NOT NULL,
	"expire_time" timestamp (6) with time zone NOT NULL
);
--> statement-breakpoint
-- Added by hand (drizzle-kit has no word for it): the positions are read on the primary only, so the table
-- is not replicated and its rows, written with every write, cost no WAL.
ALTER TABLE "read_positions" SET UNLOGGED;
