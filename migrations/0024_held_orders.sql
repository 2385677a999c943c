-- The reconciler holds an order paid by a charge the provider lists for another amount or
-- does not know: an open `amount_mismatch` or `unknown_to_provider` finding on the payment
-- keeps fulfillment from shipping it (docs/design.md, "Reconciliation"). Fulfillment looks
-- for such findings in every batch; this index keeps that lookup to the open ones.
CREATE INDEX reconcile_findings_open_holds_idx ON reconcile_findings (payment_id)
    WHERE status = 'open' AND kind IN ('amount_mismatch', 'unknown_to_provider');
