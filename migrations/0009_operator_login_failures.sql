-- The operator console's login throttle (operator::throttle; docs/design.md, "The operator
-- console"). One row per client address, and one row, client '*', for every client at
-- once. Kept here rather than in a process, so every instance on this database sees the
-- same counts and locks. A row changes only through one INSERT … ON CONFLICT DO UPDATE
-- per attempt; a successful login deletes its address's row, and the retention worker
-- deletes rows quiet for a day.
CREATE TABLE operator_login_failures (
    client            text        NOT NULL,
    -- Attempts in the current window (a successful one deletes the row, so these are the
    -- failures, plus any attempt still being checked).
    failures          integer     NOT NULL,
    window_started_at timestamptz NOT NULL,
    -- Set when the window's attempts reached the limit; no attempt is checked before it.
    locked_until      timestamptz,
    -- Locks so far: each lasts twice the one before, up to a cap.
    lockouts          integer     NOT NULL DEFAULT 0,
    CONSTRAINT operator_login_failures_pkey PRIMARY KEY (client),
    CONSTRAINT operator_login_failures_counts_valid CHECK (failures >= 0 AND lockouts >= 0)
);
