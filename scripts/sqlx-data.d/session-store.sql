-- The session store's table, as tower-sessions-sqlx-store's PostgresStore::migrate creates it
-- when the server starts. scripts/sqlx-data adds it to the database the shop's queries are
-- checked against, because the first read of every idempotent request reads it. The test
-- sessions::the_table_the_queries_are_checked_against_is_the_session_stores_own fails when
-- an upgrade of the store changes its table and this copy is not changed with it.
CREATE SCHEMA tower_sessions;
CREATE TABLE tower_sessions.session (
    id          text        PRIMARY KEY NOT NULL,
    data        bytea       NOT NULL,
    expiry_date timestamptz NOT NULL
);
-- The operator console's sessions, a table apart of the same shape (server/src/session.rs).
CREATE TABLE tower_sessions.operator_session (
    id          text        PRIMARY KEY NOT NULL,
    data        bytea       NOT NULL,
    expiry_date timestamptz NOT NULL
);
