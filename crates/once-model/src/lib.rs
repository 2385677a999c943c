//! Stateright models of Once's two exactly-once mechanisms, checked exhaustively (within
//! small bounds) by this crate's tests:
//!
//! - [`key_protocol`]: the idempotency key row (claim, takeover, fenced completion, lease
//!   expiry, crashes) as in `once-pg`;
//! - [`event_chain`]: outbox relay, at-least-once bus and the consumer's dedup row as in
//!   `once-events`.
//!
//! Each model also has broken variants that the tests expect the checker to refute. What is
//! modelled, what is not, and the figures: see `docs/model-checking.md`.

pub mod event_chain;
pub mod key_protocol;
