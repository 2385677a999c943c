-- The reconciler holds an order paid by a charge the provider lists for another amount: an
-- open `amount_mismatch` finding on the payment keeps fulfillment from shipping it
-- (docs/design.md, "Reconciliation"). Fulfillment looks for such findings in every batch;
-- this index keeps that lookup to the open ones.
CREATE INDEX reconcile_findings_open_mismatch_idx ON reconcile_findings (payment_id)
    WHERE kind = 'amount_mismatch' AND status = 'open';
