-- tag_counts(repo_uid, kind, count) follows the tags table. Statement-level triggers with transition
-- tables: a bulk insert (or COPY) of many tags updates each counter row once, not once per tag.
CREATE FUNCTION tag_counts_after_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO tag_counts (repo_uid, kind, count)
    SELECT repo_uid, kind, count(*) FROM new_rows GROUP BY repo_uid, kind
  ON CONFLICT (repo_uid, kind) DO UPDATE SET count = tag_counts.count + excluded.count;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION tag_counts_after_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE tag_counts c SET count = c.count - d.n
    FROM (SELECT repo_uid, kind, count(*) AS n FROM old_rows GROUP BY repo_uid, kind) d
    WHERE c.repo_uid = d.repo_uid AND c.kind = d.kind;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE FUNCTION tag_counts_after_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE tag_counts c SET count = c.count - d.n
    FROM (SELECT repo_uid, kind, count(*) AS n FROM old_rows GROUP BY repo_uid, kind) d
    WHERE c.repo_uid = d.repo_uid AND c.kind = d.kind;
  INSERT INTO tag_counts (repo_uid, kind, count)
    SELECT repo_uid, kind, count(*) FROM new_rows GROUP BY repo_uid, kind
  ON CONFLICT (repo_uid, kind) DO UPDATE SET count = tag_counts.count + excluded.count;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER tags_count_insert AFTER INSERT ON tags REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION tag_counts_after_insert();
--> statement-breakpoint
CREATE TRIGGER tags_count_delete AFTER DELETE ON tags REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION tag_counts_after_delete();
--> statement-breakpoint
CREATE TRIGGER tags_count_update AFTER UPDATE ON tags REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION tag_counts_after_update();
