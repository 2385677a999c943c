//! The event chain of Once, as a library: a transactional outbox, a relay that moves its
//! events to a bus (PostgreSQL tables or NATS JetStream, behind one [`bus::Bus`] trait), and
//! a consumer runtime with retries, dead letters and wake-ups. Every link delivers at least
//! once; what makes an event take effect exactly once is [`consume_once`], which every
//! handler calls in the transaction that applies the event's effects. Why each link is
//! there, and how it fails: docs/design.md, section "Fulfillment".
//!
//! # Using once-events in your app
//!
//! Give your database the chain's tables: `migrations/0001_event_chain.sql` (plain SQL; an
//! app with its own sqlx migrations copies it into them, since [`MIGRATOR`]'s version 1
//! would clash with the app's own in `_sqlx_migrations`; an app without them runs
//! [`MIGRATOR`]). Write each event with [`outbox::record`] in the transaction of the change
//! it announces. Connect a bus with [`bus::connect`] and run a [`relay::Relay`]. For each
//! consumer, implement [`Handler`]: apply an event's effects in the transaction you are
//! handed, never committing it; the runtime has recorded the event there with
//! [`consume_once`] first, skips events consumed before, and commits a batch of events
//! together. Subscribe it with [`consumer::Consumer::spec`] and [`bus::Bus::subscribe`], and
//! run the [`consumer::Consumer`]; the PostgreSQL bus registers a new consumer on its first
//! subscribe. Implement [`Counters`] to count what happens (or pass `()`), and list
//! [`dead_letters`] for your operators.
//!
//! Modules use only modules listed before them here (no cycles): `config`, `counters`,
//! `db_error`, `wake`, `bus`, `outbox`, `relay`, `dedup`, `handler`, `dead_letters`,
//! `consumer`.

mod config;
mod counters;
pub mod db_error;
pub mod wake;

pub mod bus;
pub mod outbox;
pub mod relay;

mod dedup;
mod handler;

pub mod consumer;
pub mod dead_letters;

pub use config::BusConfig;
pub use counters::{Counter, Counters};
pub use dedup::{consume_all, consume_once, record_outcomes};
pub use handler::{apply_in_one_tx, apply_one, Handled, Handler, HandlerError};

/// The chain's schema, `migrations/0001_event_chain.sql`, for apps without a migration
/// history of their own (and for this crate's tests).
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");
