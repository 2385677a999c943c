-- A Stripe payment whose bank asks the shopper to confirm it (3-D Secure) stays pending
-- while the shopper's browser does that step (docs/payments.md, "3-D Secure"). The mark
-- lets the order page offer the step again after a reload, and says so to a page without
-- scripts. It means something only while the attempt is pending.
ALTER TABLE payments ADD COLUMN needs_authentication boolean NOT NULL DEFAULT false;
