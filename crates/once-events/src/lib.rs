//! The event chain of an application on PostgreSQL, as a library: a transactional outbox, a
//! relay that moves its events to a bus (PostgreSQL tables or NATS JetStream, behind one
//! [`bus::Bus`] trait), and a consumer runtime with retries, dead letters and wake-ups. Every
//! link delivers at least once; what makes an event take effect exactly once is
//! [`consume_once`], which every handler's events go through in the transaction that applies
//! their effects. A link that fails (a relay that dies after publishing, a consumer that dies
//! before its ack, a lost notification) delivers again, and the repeat is absorbed: by the
//! bus, which stores a message once per event id, and by [`consume_once`], which says "first
//! time" once per consumer and event.
//!
//! * [`outbox`]: [`outbox::record`] writes an event in the transaction of the change it
//!   announces; [`outbox::backlog`], what the relay has yet to publish.
//! * [`relay`]: [`relay::Relay`] publishes the outbox to the bus, a batch at a time, any
//!   number of relays side by side; [`relay::prune`], retention.
//! * [`bus`]: the [`bus::Bus`] trait, [`bus::postgres::PgBus`] (nothing but the app's
//!   database) and [`bus::nats::NatsBus`] (NATS JetStream); [`bus::connect`] picks one from a
//!   [`BusConfig`].
//! * [`consumer`]: [`consumer::Consumer`] runs a [`Handler`] on a subscription, in batches,
//!   with retries and dead letters; [`consume_once`] / [`consume_all`], the dedup.
//! * [`dead_letters`]: what a consumer gave up on, to list, retry or discard.
//! * [`db_error`]: which database errors are an outage to wait out; [`wake`]: `LISTEN` with
//!   polling as the fallback.
//!
//! # Using once-events in your app
//!
//! Give your database the chain's tables: the crate's migration,
//! [`MIGRATION`], plain SQL (an app with its own migrations puts it among them, with any
//! tool, since [`MIGRATOR`]'s version 1 would clash with the app's own in
//! `_sqlx_migrations`; an app without them runs [`MIGRATOR`]). Write each event with
//! [`outbox::record`] in the transaction of the change it announces. Connect a bus with
//! [`bus::connect`] and run a [`relay::Relay`]. For each consumer, implement [`Handler`]:
//! apply an event's effects in the transaction you are handed, never committing it; the
//! runtime has recorded the event there with [`consume_once`] first, skips events consumed
//! before, and commits a batch of events together. Subscribe it with
//! [`consumer::Consumer::spec`] and [`bus::Bus::subscribe`], and run the
//! [`consumer::Consumer`]; the PostgreSQL bus registers a new consumer on its first
//! subscribe. Implement [`Counters`] to count what happens (or pass `()`), and list
//! [`dead_letters`] for your operators.
//!
//! Every statement is checked at run time, not at compile time: the crate builds in any
//! application, whatever database (if any) its `DATABASE_URL` names.
//!
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

// Modules use only modules listed before them here (no cycles): `config`, `counters`,
// `db_error`, `wake`, `bus`, `outbox`, `relay`, `dedup`, `handler`, `dead_letters`,
// `consumer`.

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

/// The chain's schema (the crate's `migrations/0001_event_chain.sql`: the outbox, the
/// PostgreSQL bus's tables, `consumed_events` and `dead_letters`), for apps without a
/// migration history of their own (and for this crate's tests). An app with sqlx migrations
/// of its own copies the SQL into them instead: this migrator's version 1 would clash with
/// the app's in `_sqlx_migrations`.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// The chain's schema as plain SQL (the same file [`MIGRATOR`] applies), for an app to put
/// among its own migrations, whatever tool runs them. Apply it once, in one transaction.
pub const MIGRATION: &str = include_str!("../migrations/0001_event_chain.sql");
