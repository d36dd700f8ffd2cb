-- ListAdvisories' `query`: a case-insensitive substring of advisories.search (package, component name and
-- aliases, written by the importer), served by a trigram GIN index (ILIKE '%q%' for q of 3 characters or more).
-- pg_trgm ships with PostgreSQL's contrib (and with PGlite, loaded in src/db/client.ts).
CREATE EXTENSION IF NOT EXISTS pg_trgm;
--> statement-breakpoint
CREATE INDEX "advisories_search_trgm_idx" ON "advisories" USING gin ("search" gin_trgm_ops);
