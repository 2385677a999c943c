//! The Idempotency-Key protocol for axum applications (docs/design.md, "The idempotency
//! protocol"): every write that creates or charges goes through an [`Executor`], so a
//! repeated request takes effect exactly once.
//!
//! * [`extract`]: the `Idempotency-Key` extractor, [`RequestKey`].
//! * [`executor`]: claim the key, run the work, complete the key in the work's own
//!   transaction fenced on the lease, or leave it open for the retry.
//! * [`overlap`]: the opt-in overlapped claim, for work whose only effects are the writes of
//!   one transaction.
//! * [`hooks`]: what an application plugs in: its error type ([`ProtocolError`]), its first
//!   read (a scope check in the same statement), metrics, and test-time faults.
//! * [`reply`]: what work answers, stored and replayed byte for byte.
//! * [`status`]: the key-status route, for polling after a 409.
//! * [`purge`]: the retention task.
//! * `conformance` (feature `conformance`): the protocol's conformance suite, which an
//!   application runs from its own tests against its own server.
//!
//! The key table is `once-pg`'s; the pure rules are `once-core`'s.

#[cfg(feature = "conformance")]
pub mod conformance;
pub mod executor;
pub mod extract;
pub mod hooks;
pub mod overlap;
pub mod purge;
pub mod reply;
pub mod status;

pub use executor::{Executor, PgTx};
pub use extract::RequestKey;
pub use hooks::{Counted, Hooks, NoHooks, ProtocolError, Refusal, Repeat};
pub use once_core::{IdempotencyKey, IdempotentRequest};
pub use reply::Reply;
