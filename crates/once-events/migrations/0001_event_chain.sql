-- The event chain's schema, whole: the outbox, the PostgreSQL bus, the consumers' dedup and
-- dead letters, and the triggers that wake the relay and the subscriptions. The shop creates
-- the same in its own history (migrations 0002 and 0005); a test keeps the two identical.

-- Workers are woken when work is written: a statement trigger notifies the channel named by
-- its argument. pg_notify is delivered at commit, so a worker never wakes for work it cannot
-- see yet; a lost notification is covered by polling.
CREATE FUNCTION notify_channel() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_ARGV[0], '');
    RETURN NULL;
END $$;

-- The transactional outbox: written in the same transaction as the change it announces.
CREATE TABLE outbox_events (
    id             uuid        NOT NULL,
    aggregate_type text        NOT NULL,
    aggregate_id   uuid        NOT NULL,
    event_type     text        NOT NULL,
    payload        jsonb       NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    published_at   timestamptz,
    CONSTRAINT outbox_events_pkey PRIMARY KEY (id)
);
-- The relay claims unpublished events oldest first; pruning reads published ones by age.
CREATE INDEX outbox_events_unpublished_idx ON outbox_events (created_at) WHERE published_at IS NULL;
CREATE INDEX outbox_events_published_idx ON outbox_events (published_at) WHERE published_at IS NOT NULL;
-- The relay, woken by new events.
CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events
    FOR EACH STATEMENT EXECUTE FUNCTION notify_channel('outbox_events');

-- The PostgreSQL bus. A message's id is the event's id, so publishing an event twice stores
-- it once (as Nats-Msg-Id does on JetStream). Each durable consumer gets its own delivery
-- row per message, with a delivery count and a time it becomes visible again (ack wait,
-- or the backoff of a negative ack).
CREATE TABLE bus_messages (
    id           uuid        NOT NULL,
    subject      text        NOT NULL,
    body         bytea       NOT NULL,
    published_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT bus_messages_pkey PRIMARY KEY (id)
);
-- Durable consumers, registered by their first subscribe (or declared by a migration, to
-- see messages published before it).
CREATE TABLE bus_consumers (
    name    text NOT NULL,
    subject text NOT NULL,
    CONSTRAINT bus_consumers_pkey PRIMARY KEY (name)
);
CREATE TABLE bus_deliveries (
    consumer   text        NOT NULL,
    message_id uuid        NOT NULL,
    deliveries integer     NOT NULL DEFAULT 0,
    visible_at timestamptz NOT NULL DEFAULT now(),
    settled_at timestamptz,
    CONSTRAINT bus_deliveries_pkey PRIMARY KEY (consumer, message_id),
    CONSTRAINT bus_deliveries_consumer_fk FOREIGN KEY (consumer) REFERENCES bus_consumers (name),
    CONSTRAINT bus_deliveries_message_fk FOREIGN KEY (message_id) REFERENCES bus_messages (id) ON DELETE CASCADE
);
CREATE INDEX bus_deliveries_ready_idx ON bus_deliveries (consumer, visible_at) WHERE settled_at IS NULL;
-- Deleting a message cascades to its deliveries, and pruning asks for unsettled ones: both
-- look deliveries up by message.
CREATE INDEX bus_deliveries_message_idx ON bus_deliveries (message_id);
CREATE TRIGGER bus_deliveries_notify AFTER INSERT ON bus_deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION notify_channel('bus_deliveries');

-- The consumers' dedup: one row per (consumer, event), written in the same transaction as the
-- consumer's side effects. A redelivered event finds its row and does nothing.
CREATE TABLE consumed_events (
    consumer    text        NOT NULL,
    event_id    uuid        NOT NULL,
    outcome     text        NOT NULL,
    consumed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT consumed_events_pkey PRIMARY KEY (consumer, event_id)
);

-- Messages a consumer gave up on, kept for operators with the last error. One row per
-- (consumer, message); a message that dies again after a retry updates its row.
CREATE TABLE dead_letters (
    id          uuid        NOT NULL,
    consumer    text        NOT NULL,
    message_id  text        NOT NULL,
    subject     text        NOT NULL,
    body        bytea       NOT NULL,
    error       text        NOT NULL,
    deliveries  integer     NOT NULL,
    status      text        NOT NULL DEFAULT 'dead',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT dead_letters_pkey PRIMARY KEY (id),
    CONSTRAINT dead_letters_one_per_message UNIQUE (consumer, message_id),
    CONSTRAINT dead_letters_status_valid CHECK (status IN ('dead', 'retrying', 'retried', 'discarded'))
);
