-- A repeat that waits for its key's running request (`Prefer: wait`, docs/protocol.md,
-- "Waiting for the original") marks the key's row; completion and failure notify the
-- channel `once_keys` only for a marked row. The same column as once-pg's own migration.
ALTER TABLE idempotency_keys ADD COLUMN awaited boolean NOT NULL DEFAULT false;
