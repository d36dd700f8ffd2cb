-- Deleting an identity's last role binding ends its refresh tokens. A deferred constraint trigger: the check
-- runs at commit, so a transaction that replaces bindings (an SSO login bringing mapped bindings in line
-- deletes some and inserts others) ends nothing as long as one binding remains when it commits. Concurrent
-- deletions of an identity's last two bindings can each still see the other's: the token exchange also
-- refuses a refresh for an identity holding no binding (sts/refresh-tokens.store.ts).
CREATE FUNCTION refresh_tokens_end_unbound() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM role_bindings WHERE identity_uid = OLD.identity_uid) THEN
    DELETE FROM refresh_tokens WHERE identity_uid = OLD.identity_uid;
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE CONSTRAINT TRIGGER role_bindings_end_refresh_tokens AFTER DELETE ON role_bindings
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refresh_tokens_end_unbound();
