-- A repeat that waits for its key's running request (`Prefer: wait`, docs/protocol.md,
-- "Waiting for the original") marks the row; completion and failure notify the channel
-- `once_keys` only for a marked row, so a key nobody waits for costs no notification.
ALTER TABLE idempotency_keys ADD COLUMN awaited boolean NOT NULL DEFAULT false;
