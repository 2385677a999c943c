//! The sandbox payment provider: a separate program with its own database, standing in for
//! the third party so that Once's tests cross a real process and network boundary.
//!
//! * [`charges`]: `POST /v1/charges` (with its own Idempotency-Key and replay), `GET /v1/charges/{id}`;
//! * [`ledger`]: `GET /v1/transactions`, cursor-paginated, for reconciliation;
//! * [`webhooks`]: signed `charge.succeeded` / `charge.failed` events from a durable queue,
//!   retried with backoff until the merchant answers 2xx;
//! * [`settings`]: the chaos knobs (duplicates, shuffle, delay, drop) and the webhook URL.

pub mod charges;
pub mod config;
pub mod error;
pub mod ledger;
pub mod settings;
pub mod startup;
pub mod webhooks;
