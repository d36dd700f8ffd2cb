ALTER TABLE "advisories" ADD COLUMN "search" text DEFAULT '' NOT NULL;--> statement-breakpoint
CREATE INDEX "advisories_package_uid_idx" ON "advisories" USING btree ("package","uid");--> statement-breakpoint
CREATE INDEX "advisories_artifact_type_uid_idx" ON "advisories" USING btree ("artifact_type","uid");--> statement-breakpoint
CREATE INDEX "advisories_artifact_architecture_uid_idx" ON "advisories" USING btree ("artifact_architecture","uid");--> statement-breakpoint
CREATE INDEX "advisories_component_name_uid_idx" ON "advisories" USING btree ("component_name","uid");--> statement-breakpoint
CREATE INDEX "advisories_component_type_uid_idx" ON "advisories" USING btree ("component_type","uid");--> statement-breakpoint
CREATE INDEX "advisories_component_location_uid_idx" ON "advisories" USING btree ("component_location","uid");--> statement-breakpoint
CREATE INDEX "advisories_latest_event_type_uid_idx" ON "advisories" USING btree ("latest_event_type","uid");--> statement-breakpoint
CREATE INDEX "advisories_aliases_idx" ON "advisories" USING gin ("aliases");--> statement-breakpoint
CREATE INDEX "advisory_events_type_advisory_idx" ON "advisory_events" USING btree ("type","advisory_uid");--> statement-breakpoint
CREATE INDEX "advisory_events_author_advisory_idx" ON "advisory_events" USING btree ("author","advisory_uid");--> statement-breakpoint
CREATE INDEX "advisory_events_reviewer_advisory_idx" ON "advisory_events" USING btree ("reviewer","advisory_uid");--> statement-breakpoint
CREATE INDEX "advisory_events_review_state_advisory_idx" ON "advisory_events" USING btree ("review_state","advisory_uid");