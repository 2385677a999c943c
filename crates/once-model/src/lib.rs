//! Stateright models of two exactly-once mechanisms, checked exhaustively (within small
//! bounds):
//!
//! - [`key_protocol`]: the idempotency key row (claim, takeover, fenced completion, lease
//!   expiry, crashes, and repeats that wait for the running request) as in `once-pg`;
//! - [`event_chain`]: outbox relay, at-least-once bus and the consumer's dedup row as in
//!   `once-events`.
//!
//! Each model names its properties with public constants (for
//! [`stateright::Checker::discovery`] and [`stateright::Model::property`]), and has broken
//! variants ([`key_protocol::CompletionGuard`], [`key_protocol::WakeUp`],
//! [`event_chain::Dedup`]) that the checker refutes with a counterexample. The bounds
//! (clients and requests; events, crashes and redeliveries) are the models' parameters: the
//! crate's own tests check three clients sending three requests each, waits included (about
//! 950,000 unique states, under 20 s in a debug build), and two events with three crashes
//! and two redeliveries (about 48,000, about a second).
//!
//! Not modelled: real time (a lease is either valid or expired), the request fingerprint,
//! quotas, purging old keys, the stored response itself, effects outside the database, and
//! the outbox write (assumed atomic with the business effect); nor dead letters, poison
//! messages or a bus that loses a message it accepted.
//!
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod event_chain;
pub mod key_protocol;
