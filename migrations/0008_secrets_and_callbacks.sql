-- Request fingerprints are now keyed with a server secret (idempotency::fingerprint). The
-- fingerprints stored before were plain SHA-256 of the body, and a payment's body holds the
-- card number, which a plain hash gives away to anyone who tries the card space. Those rows
-- go. A retry of such a payment is still charged at most once: the payment attempt is keyed
-- by the same (scope, key) (`payments_attempt_key`), so it finds its attempt and answers
-- from it. Order keys hold nothing secret and stay; a reuse of one within the retention
-- window after this upgrade no longer matches its fingerprint and answers 422.
DELETE FROM idempotency_keys WHERE route LIKE 'POST /api/orders/%/payments';

-- A callback whose charge is not the attempt's own and that the provider does not confirm
-- for the attempt (callbacks::confirm) is recorded as such and changes nothing.
ALTER TABLE payment_callbacks DROP CONSTRAINT payment_callbacks_outcome_valid;
ALTER TABLE payment_callbacks ADD CONSTRAINT payment_callbacks_outcome_valid CHECK (outcome IN (
    'received', 'applied', 'already_applied', 'refund_due', 'ignored',
    'unknown_payment', 'amount_mismatch', 'conflict', 'malformed', 'unconfirmed'));
