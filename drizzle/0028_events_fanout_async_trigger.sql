-- Fan-out outside the writer's transaction. The writer's transaction no longer adds one delivery per
-- subscription (at 1,000 subscriptions that took 22-35 ms of every write); it records each customer event
-- (audience 2, apiserver.options.v1.AUDIENCE_CUSTOMER) that some subscription on its group or on an ancestor
-- of it matches in event_expansions, with the transaction's id and snapshot (the columns' defaults), and
-- notifies the delivery workers at commit. A worker then adds the deliveries in its own transaction
-- (events/delivery/queue.ts, expand): one per subscription that this transaction saw (committed before the
-- snapshot, or created by the transaction itself) and that still exists. An event no subscription matches
-- records nothing more than before.
CREATE OR REPLACE FUNCTION outbox_events_fan_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO event_expansions (event_id, create_time)
    SELECT e.id, e.create_time FROM new_events e
    WHERE e.audience = 2 AND EXISTS (SELECT 1 FROM subscriptions s WHERE s.group_uid = ANY (uid_lineage(e.group_uid)));
  IF FOUND THEN
    PERFORM pg_notify('apiserver_events', '');
  END IF;
  RETURN NULL;
END $$;
