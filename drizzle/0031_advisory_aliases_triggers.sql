-- advisory_aliases(alias, advisory_uid) follows advisories.aliases: statement-level triggers with transition
-- tables, so every writer keeps it (the importer's upserts, a bulk load in SQL), one statement per write.
-- A deleted advisory's rows go by the foreign key's cascade. ListAdvisories' alias filter reads this table
-- by its primary key, an equality PostgreSQL estimates from the table's statistics whatever the value.
CREATE FUNCTION advisory_aliases_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO advisory_aliases (alias, advisory_uid)
    SELECT DISTINCT x.alias, n.uid FROM new_rows n CROSS JOIN unnest(n.aliases) x(alias)
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION advisory_aliases_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM advisory_aliases a USING old_rows o
    WHERE a.advisory_uid = o.uid
      AND NOT EXISTS (SELECT 1 FROM new_rows n WHERE n.uid = o.uid AND a.alias = ANY (n.aliases));
  INSERT INTO advisory_aliases (alias, advisory_uid)
    SELECT DISTINCT x.alias, n.uid FROM new_rows n CROSS JOIN unnest(n.aliases) x(alias)
  ON CONFLICT DO NOTHING;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER advisories_aliases_insert AFTER INSERT ON advisories REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION advisory_aliases_after_insert();
--> statement-breakpoint
CREATE TRIGGER advisories_aliases_update AFTER UPDATE ON advisories REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION advisory_aliases_after_update();
--> statement-breakpoint
-- The advisories already stored.
INSERT INTO advisory_aliases (alias, advisory_uid)
  SELECT DISTINCT x.alias, a.uid FROM advisories a CROSS JOIN unnest(a.aliases) x(alias)
ON CONFLICT DO NOTHING;
--> statement-breakpoint
ANALYZE advisory_aliases;
