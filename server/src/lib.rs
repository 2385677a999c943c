//! The Once server: HTTP API, idempotency, orders, SSR hosting and workers.

pub mod callbacks;
pub mod cart;
pub mod catalog;
pub mod checkout;
pub mod config;
pub mod db;
pub mod error;
pub mod extract;
pub mod faults;
pub mod health;
pub mod idempotency;
pub mod metrics;
pub mod orders;
pub mod outbox;
pub mod payments;
pub mod session;
pub mod ssr;
pub mod startup;
pub mod telemetry;
