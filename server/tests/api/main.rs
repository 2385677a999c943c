//! Integration tests: the real server on port 0 against a real PostgreSQL, one fresh
//! database per test.

mod bad_input;
mod callbacks;
mod checkout;
mod foundation;
mod helpers;
mod idempotency;
mod orders;
mod payments;
mod sessions;
