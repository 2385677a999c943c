//! Integration tests: the real server on port 0 against a real PostgreSQL, one fresh
//! database per test.

mod foundation;
mod helpers;
mod idempotency;
mod bad_input;
mod orders;
mod checkout;
