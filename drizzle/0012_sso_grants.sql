-- A SCIM client deactivating (or reactivating) an identity changes what it is granted: every server forgets
-- its cached grants at once, as for a binding change (0005).
DROP TRIGGER identities_grants_changed ON identities;
--> statement-breakpoint
CREATE TRIGGER identities_grants_changed AFTER UPDATE OF parent_uid, active OR DELETE ON identities
  FOR EACH STATEMENT EXECUTE FUNCTION apiserver_grants_changed();
