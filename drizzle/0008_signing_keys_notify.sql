-- Servers keep the signing keys in memory, and remember the tokens they have verified. Any statement that
-- adds, retires or removes a key notifies the channel apiserver_keys (delivered at commit, to every server
-- listening): each server then reloads its keys, so a rotation on one server is used by all, and a token of
-- a removed key stops verifying everywhere.
CREATE FUNCTION apiserver_keys_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('apiserver_keys', TG_OP);
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER signing_keys_changed AFTER INSERT OR UPDATE OR DELETE ON signing_keys
  FOR EACH STATEMENT EXECUTE FUNCTION apiserver_keys_changed();
