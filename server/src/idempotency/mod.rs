//! The Idempotency-Key protocol (docs/design.md, "The idempotency protocol"): every write route that creates or
//! charges goes through [`execute`], so a repeated request takes effect exactly once.
//!
//! * [`key`]: parsing the header (bare or structured-field form).
//! * [`fingerprint`]: HMAC-SHA256, under a server secret, of method, route and canonical JSON body.
//! * [`request`]: one request under the protocol, and the extractor of its key.
//! * [`store`]: the `idempotency_keys` table and its state machine, in SQL.
//! * [`executor`]: claim, run the business transaction, complete fenced on the lease.
//! * `overlap`: an order's statements run while its claim commits.
//! * [`outcome`]: which outcomes are stored with the key, and which leave it open.
//! * [`status`]: `GET /api/idempotency-keys/{key}` for polling after a 409.
//! * [`purge`]: the retention worker.

pub mod executor;
pub mod fingerprint;
pub mod key;
pub mod outcome;
mod overlap;
pub mod purge;
pub mod request;
pub mod response;
pub mod status;
pub mod store;

pub use executor::execute;
pub use key::IdempotencyKey;
pub use overlap::execute_in_one_tx;
pub use request::{IdempotentRequest, RequestKey};
pub use response::Reply;
