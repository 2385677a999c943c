//! The Once server: HTTP API, idempotency, orders, SSR hosting and workers.

// Rendering the order page (the app's views, with an island nested inside) goes deeper into
// its types than the compiler's default limit.
#![recursion_limit = "256"]

pub mod api;
pub mod assets;
pub mod callbacks;
pub mod cart;
pub mod catalog;
pub mod checkout;
pub mod checkout_details;
pub mod cli;
pub mod client_addr;
pub mod config;
pub mod connections;
pub mod credentials;
pub mod db;
pub mod error;
pub mod extract;
pub mod faults;
pub mod fulfillment;
pub mod headers;
pub mod health;
pub mod idempotency;
pub mod journal;
pub mod mailer;
pub mod metrics;
pub mod openapi;
pub mod operator;
pub mod orders;
pub mod origin;
pub mod page_deadline;
pub mod payment_provider;
pub mod payments;
pub mod reconcile;
pub mod refusals;
pub mod retention;
pub mod session;
pub mod ssr;
pub mod startup;
pub mod state;
pub mod telemetry;
pub mod throttle;
pub mod unread_body;
pub mod workers;
