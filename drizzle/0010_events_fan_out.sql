-- uid_lineage('a/b/c') = {a, a/b, a/b/c}: a uid and each of its ancestors ('' has none).
CREATE FUNCTION uid_lineage(uid text) RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT coalesce(array_agg(array_to_string(parts[1:n], '/') COLLATE "C" ORDER BY n), '{}')
  FROM (SELECT string_to_array(nullif(uid, ''), '/') AS parts) p, generate_series(1, coalesce(cardinality(p.parts), 0)) n
$$;
--> statement-breakpoint
-- Fan-out: each customer event (audience 2, apiserver.options.v1.AUDIENCE_CUSTOMER) committed to the outbox gets
-- one pending delivery per subscription on its group or on an ancestor of it, in the same transaction; the
-- delivery workers are notified at commit. Statement-level with a transition table: a bulk insert of events
-- fans out in one statement.
CREATE FUNCTION outbox_events_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO event_deliveries (event_id, subscription_uid, next_attempt_time)
    SELECT e.id, s.uid, e.create_time
    FROM new_events e JOIN subscriptions s ON s.group_uid = ANY (uid_lineage(e.group_uid))
    WHERE e.audience = 2;
  IF FOUND THEN
    PERFORM pg_notify('apiserver_events', '');
  END IF;
  RETURN NULL;
END $$;
--> statement-breakpoint
CREATE TRIGGER outbox_events_fan_out AFTER INSERT ON outbox_events REFERENCING NEW TABLE AS new_events
  FOR EACH STATEMENT EXECUTE FUNCTION outbox_events_fan_out();
--> statement-breakpoint
-- For operators: every delivery that has failed at least once and is not delivered, newest problem first:
--   SELECT * FROM event_delivery_problems WHERE subscription_uid = '<uid>';
-- state 'failed' = given up (retries ran out); 'pending' = still being retried (next_attempt_time).
CREATE VIEW event_delivery_problems AS
  SELECT d.subscription_uid, s.sink, d.state, d.attempts, d.last_error, d.last_status, d.last_attempt_time,
         d.next_attempt_time, d.done_time, e.id AS event_id, e.type AS event_type, e.subject AS event_subject,
         e.group_uid AS event_group, e.create_time AS event_time
  FROM event_deliveries d
  JOIN subscriptions s ON s.uid = d.subscription_uid
  JOIN outbox_events e ON e.id = d.event_id
  WHERE d.state = 'failed' OR (d.state = 'pending' AND d.last_error IS NOT NULL);
