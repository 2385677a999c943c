//! The Once server: HTTP API, idempotency, orders, SSR hosting and workers.

pub mod cart;
pub mod catalog;
pub mod config;
pub mod db;
pub mod error;
pub mod extract;
pub mod health;
pub mod session;
pub mod ssr;
pub mod startup;
pub mod telemetry;
