-- A browser the operator never used, let in by someone who can run commands on the server
-- (`server operator-browser`; docs/design.md, "The operator console"): its row is written
-- before any login, with the time its link stops working. Until a login from it, it is
-- known only until then; the right password from it clears the time, and it is then a
-- browser like any other.
ALTER TABLE operator_browsers ADD COLUMN unused_until timestamptz;
