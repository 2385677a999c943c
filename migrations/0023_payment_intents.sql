-- A provider that charges in two steps (Stripe: a PaymentIntent is created, then confirmed)
-- gives the attempt an object before any money moves. Its id is recorded here before the
-- confirming call (a recovery point, docs/payments.md "Going live with Stripe"), so a retry
-- after a lost answer resumes that intent instead of creating a second one. The sandbox
-- charges in one call and records none.
ALTER TABLE payments ADD COLUMN provider_intent_id text;
ALTER TABLE payments ADD CONSTRAINT payments_provider_intent_id_key UNIQUE (provider_intent_id);
ALTER TABLE payments ADD CONSTRAINT payments_provider_intent_id_length
    CHECK (length(provider_intent_id) BETWEEN 1 AND 255);

-- The journal tells the recording too: it is the point a lost answer resumes from.
CREATE OR REPLACE FUNCTION journal_payment() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM journal_write(NEW.order_id, 'payment',
            'payment attempt recorded (recovery point 1), ' || NEW.amount_cents || ' ' || NEW.currency,
            NEW.id, NULL, NULL);
    END IF;
    IF (TG_OP = 'INSERT' AND NEW.charge_requested_at IS NOT NULL)
       OR (TG_OP = 'UPDATE' AND NEW.charge_requested_at IS DISTINCT FROM OLD.charge_requested_at) THEN
        PERFORM journal_write(NEW.order_id, 'provider_call',
            'charge call to the provider started (recovery point 2; provider key from the attempt)',
            NEW.id, NULL, NULL);
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.provider_intent_id IS DISTINCT FROM OLD.provider_intent_id THEN
        PERFORM journal_write(NEW.order_id, 'provider_call',
            'payment intent ' || NEW.provider_intent_id || ' recorded before it is confirmed',
            NEW.id, NULL, NULL);
    END IF;
    IF TG_OP = 'UPDATE' AND NEW.status IS DISTINCT FROM OLD.status THEN
        PERFORM journal_write(NEW.order_id, 'payment',
            'payment ' || OLD.status || ' → ' || NEW.status
                || coalesce(' (' || NEW.failure_code || ')', '')
                || coalesce(', charge ' || NEW.provider_charge_id, ''),
            NEW.id, NEW.provider_charge_id, NULL);
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER payments_journal_update ON payments;
CREATE TRIGGER payments_journal_update AFTER UPDATE OF status, charge_requested_at, provider_intent_id
    ON payments FOR EACH ROW EXECUTE FUNCTION journal_payment();
