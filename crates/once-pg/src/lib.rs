//! The Idempotency-Key protocol's key table in PostgreSQL. Every transition is one SQL
//! statement and the database decides every race: the unique constraint decides who claims
//! a new key, and completion and failure are fenced on the lease token, so a holder whose
//! lease was taken over changes nothing.
//!
//! * [`store`]: claim, complete, renew, fail, and reading what a key holds.
//! * [`first_read`]: the one-statement read a request starts with, with the application's
//!   question about its scope.
//! * [`inspect`]: whether a key's request runs, which scopes hold keys, counts by state.
//! * [`purge()`]: retention, counted from the end of a request.
//! * [`status`]: a key's state for a client polling after a 409.
//! * [`wake`]: the repeats waiting for their key's running request, woken by the
//!   database's notification when it completes or fails.
//! * [`migrate`]: the table, created by the crate's own migration with sqlx's migrator;
//!   [`MIGRATION`]: the same SQL, for any other migration tool.
//!
//! The scope is a string the application supplies (a session id, a user id, an API key's
//! id): the same key in two scopes is two requests.
//!
//! Every statement is checked at run time, not at compile time: the crate builds in any
//! application, whatever database (if any) its `DATABASE_URL` names.
//!
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod first_read;
pub mod inspect;
pub mod purge;
pub mod status;
pub mod store;
pub mod wake;

pub use first_read::{FirstRead, FirstReadRow};
pub use purge::purge;
pub use status::{key_state, KeyState};
pub use store::{Claimed, Existing, Held};
pub use wake::{WaitLimits, WaitRefused, Waiter, Wakeups};

/// The SQL that creates the key table (`idempotency_keys`) and its indexes: the crate's
/// migrations, one after the other, for an application that creates the table without
/// sqlx's migrator (with refinery, dbmate, `psql -1 -f`, or its own migration holding this
/// text). Apply it once, in one transaction; it is not idempotent. [`migrate`] applies the
/// same files.
pub const MIGRATION: &str = concat!(
    include_str!("../migrations/20261202000000_idempotency_keys.sql"),
    include_str!("../migrations/20261205000000_idempotency_keys_awaited.sql"),
);

/// Creates the key table (`migrations/`) with sqlx's migrator, alongside an application's
/// own migrations: the crate's migration has a version of its own, and each side ignores
/// the other's.
pub async fn migrate(db: &sqlx::PgPool) -> Result<(), sqlx::migrate::MigrateError> {
    let mut migrator = sqlx::migrate!("./migrations");
    migrator.set_ignore_missing(true);
    migrator.run(db).await
}
