-- When the shop last asked the provider about a payment's bank step (3-D Secure): the
-- route that continues the step asks at most once a second per payment, so a client that
-- repeats it cannot turn its requests into calls to the provider (docs/payments.md,
-- "3-D Secure").
ALTER TABLE payments ADD COLUMN authentication_checked_at timestamptz;
