-- A charge whose outcome is not known yet (test card 4000000000000127), as real providers
-- report "processing": the merchant must keep its attempt pending, never guess a decline.
ALTER TABLE charges DROP CONSTRAINT charges_status_valid;
ALTER TABLE charges ADD CONSTRAINT charges_status_valid CHECK (status IN ('succeeded', 'failed', 'processing'));

-- Merchants look their charges up by their own reference (GET /v1/charges?reference=…).
CREATE INDEX charges_reference_idx ON charges (reference);
