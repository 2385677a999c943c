-- Fulfillment: the outbox relay's wake-up, the PostgreSQL bus, the consumer's dedup table,
-- fulfillments, confirmation emails and dead letters. See docs/design.md, "Fulfillment".

-- Workers are woken when work is written: a statement trigger notifies the channel named by
-- its argument. pg_notify is delivered at commit, so a worker never wakes for work it cannot
-- see yet; a lost notification is covered by polling.
CREATE FUNCTION notify_channel() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(TG_ARGV[0], '');
    RETURN NULL;
END $$;
-- The relay, woken by new events.
CREATE TRIGGER outbox_events_notify AFTER INSERT ON outbox_events
    FOR EACH STATEMENT EXECUTE FUNCTION notify_channel('outbox_events');
-- Pruning reads published events by age.
CREATE INDEX outbox_events_published_idx ON outbox_events (published_at) WHERE published_at IS NOT NULL;

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
CREATE TABLE bus_consumers (
    name    text NOT NULL,
    subject text NOT NULL,
    CONSTRAINT bus_consumers_pkey PRIMARY KEY (name)
);
-- Durable consumers are declared here, as a JetStream consumer is created before use: a
-- message published before its consumer existed would otherwise never reach it.
INSERT INTO bus_consumers (name, subject) VALUES ('fulfillment', 'order.paid');

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

-- The consumer's dedup: one row per (consumer, event), written in the same transaction as the
-- consumer's side effects. A redelivered event finds its row and does nothing.
CREATE TABLE consumed_events (
    consumer    text        NOT NULL,
    event_id    uuid        NOT NULL,
    outcome     text        NOT NULL,
    consumed_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT consumed_events_pkey PRIMARY KEY (consumer, event_id)
);

CREATE SEQUENCE shipment_no_seq START 1001;
CREATE TABLE fulfillments (
    id          uuid        NOT NULL,
    order_id    uuid        NOT NULL,
    status      text        NOT NULL,
    shipment_no bigint,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT fulfillments_pkey PRIMARY KEY (id),
    CONSTRAINT fulfillments_one_per_order UNIQUE (order_id),
    CONSTRAINT fulfillments_shipment_no_unique UNIQUE (shipment_no),
    CONSTRAINT fulfillments_order_fk FOREIGN KEY (order_id) REFERENCES orders (id),
    CONSTRAINT fulfillments_status_valid CHECK (status IN ('shipped', 'backordered')),
    CONSTRAINT fulfillments_shipped_has_number CHECK ((status = 'shipped') = (shipment_no IS NOT NULL))
);

-- Emails, rendered when queued and delivered once by the mailer: over SMTP when it is set up
-- (`sent`), otherwise kept here (`kept`), where the shopper's order page shows them.
CREATE TABLE emails (
    id              uuid        NOT NULL,
    order_id        uuid        NOT NULL,
    kind            text        NOT NULL,
    recipient       text        NOT NULL,
    subject         text        NOT NULL,
    html_body       text        NOT NULL,
    text_body       text        NOT NULL,
    status          text        NOT NULL DEFAULT 'queued',
    attempts        integer     NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    delivered_at    timestamptz,
    CONSTRAINT emails_pkey PRIMARY KEY (id),
    CONSTRAINT emails_one_per_order_and_kind UNIQUE (order_id, kind),
    CONSTRAINT emails_order_fk FOREIGN KEY (order_id) REFERENCES orders (id),
    CONSTRAINT emails_status_valid CHECK (status IN ('queued', 'sent', 'kept'))
);
CREATE INDEX emails_queued_idx ON emails (next_attempt_at) WHERE status = 'queued';

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

-- The mailer is woken when an email is queued (polling covers lost notifications).
CREATE TRIGGER emails_notify AFTER INSERT ON emails
    FOR EACH STATEMENT EXECUTE FUNCTION notify_channel('emails');
