//! The Idempotency-Key protocol (the IETF draft `draft-ietf-httpapi-idempotency-key-header`)
//! for axum applications on PostgreSQL: every keyed write goes through an [`Executor`], so
//! a repeated request takes effect exactly once, and its answer is stored with the key in
//! the work's own transaction.
//!
//! * [`Keyed`] / [`RequestKey`]: the `Idempotency-Key` extractors, with the caller's scope;
//!   [`HeaderScope`], a ready scope; [`JsonBody`] / [`PathParams`], refusing as a [`Problem`].
//! * [`Executor`]: claim the key, run the work, complete the key in the work's transaction
//!   fenced on the lease, or leave it open for the retry; [`executor::overlap`] is the
//!   opt-in overlapped claim; [`Waits`] lets a repeat wait for its running original
//!   (`Prefer: wait`), woken by the database; [`AnswerCache`] answers repeats of completed
//!   keys from memory.
//! * [`Problem`]: a ready `application/problem+json` error; [`Refusal`], the protocol's
//!   own answers; [`ProtocolError`], for an application's own error type.
//! * [`Hooks`]: an application's first read, metrics and journal; [`Faults`]: test-time
//!   faults, plugged in without changing the application's types.
//! * [`Reply`]: what work answers, stored and replayed byte for byte.
//! * [`status`]: the key-status route, for polling after a 409; [`purge`]: retention.
//! * `conformance` (feature `conformance`): the protocol's conformance suite, which an
//!   application runs from its own tests against its own server.
//!
//! The key table is `once-pg`'s; the pure rules are `once-core`'s.
//!
#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod answer_cache;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod executor;
pub mod extract;
pub mod faults;
pub mod hooks;
pub mod problem;
pub mod purge;
pub mod refusal;
pub mod reply;
pub mod status;

pub use answer_cache::AnswerCache;
pub use executor::{
    wait::{WaitLimits, Waits},
    Executor, PgTx, Worked,
};
pub use extract::{
    HeaderScope, JsonBody, Keyed, PathParams, RequestKey, Scope, ScopeHeader, Scoped,
};
pub use faults::Faults;
pub use hooks::{Counted, Hooks, KeyRead, NoHooks, Repeat};
pub use once_core::{FingerprintKeys, IdempotencyKey, IdempotentRequest, KeyedOperation};
pub use problem::{Problem, ProtocolError};
pub use refusal::Refusal;
pub use reply::Reply;
