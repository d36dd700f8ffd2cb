-- Servers remember each caller's identity and role bindings for a few seconds. Any statement that can change
-- what a caller is granted notifies the channel apiserver_grants (delivered at commit, to every server
-- listening), and each server then forgets what it remembered. Updates of other identity columns
-- (last_seen_time, name, ...) do not notify.
CREATE FUNCTION apiserver_grants_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('apiserver_grants', TG_TABLE_NAME);
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER role_bindings_grants_changed AFTER INSERT OR UPDATE OR DELETE ON role_bindings
  FOR EACH STATEMENT EXECUTE FUNCTION apiserver_grants_changed();
--> statement-breakpoint
CREATE TRIGGER roles_grants_changed AFTER UPDATE OF capabilities OR DELETE ON roles
  FOR EACH STATEMENT EXECUTE FUNCTION apiserver_grants_changed();
--> statement-breakpoint
CREATE TRIGGER identities_grants_changed AFTER UPDATE OF parent_uid OR DELETE ON identities
  FOR EACH STATEMENT EXECUTE FUNCTION apiserver_grants_changed();
