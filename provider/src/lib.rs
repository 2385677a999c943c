//! The sandbox payment provider: a separate program with its own database, standing in for
//! the third party so that Once's tests cross a real process and network boundary.
//!
//! * [`auth`]: every `/v1/…` call carries the merchant's key (`PROVIDER_API_KEY`);
//! * [`charges`]: `POST /v1/charges` (with its own Idempotency-Key and replay), `GET /v1/charges/{id}`;
//! * [`ledger`]: `GET /v1/transactions`, in time order with an opaque cursor, for reconciliation;
//! * [`refunds`]: `POST /v1/refunds`, idempotent, one per charge;
//! * [`webhooks`]: signed `charge.succeeded` / `charge.failed` / `charge.refunded` events from a
//!   durable queue, retried with backoff until the merchant answers 2xx;
//! * [`settings`]: the chaos knobs (duplicates, shuffle, delay, drop, webhooks lost for good,
//!   charging twice) and the webhook URL.

pub mod auth;
pub mod charge;
pub mod charges;
pub mod config;
pub mod error;
pub mod ledger;
pub mod refunds;
pub mod settings;
pub mod startup;
pub mod state;
pub mod webhooks;
