//! The Idempotency-Key protocol's pure parts (the IETF draft
//! `draft-ietf-httpapi-idempotency-key-header`): what a request under the protocol is and
//! what a key stores, with no web framework and no database. `once-pg` keeps keys in
//! PostgreSQL; `once-axum` runs an axum application's requests through them.
//!
//! * [`key`]: the `Idempotency-Key` header, parsed (bare or structured-field form).
//! * [`fingerprint`]: HMAC-SHA256 of method, operation and canonical JSON body, under
//!   rotating secrets, so a key reused with another body is told apart.
//! * [`request`]: one request under the protocol: scope, key, operation, fingerprint.
//! * [`outcome`]: the one rule for which answers a key stores and replays.
//! * [`prefer`]: the `Prefer: wait` a repeat may send, to wait for the running original.
//! * [`stored`]: an answer as stored with its key, replayed byte for byte.

#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod fingerprint;
pub mod key;
pub mod outcome;
pub mod prefer;
pub mod request;
pub mod stored;

pub use fingerprint::{canonical_json, Fingerprint, FingerprintKeys, NoSecret};
pub use key::{IdempotencyKey, KeyError};
pub use outcome::is_stored;
pub use request::{IdempotentRequest, KeyedOperation};
pub use stored::StoredResponse;
