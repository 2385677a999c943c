//! The bus between the outbox relay and the consumers: one trait ([`Bus`]), two
//! implementations. [`postgres`] needs nothing but the app's database; [`nats`] uses NATS
//! JetStream. Both deliver at least once: a consumer must ack each message, and an unacked
//! one comes back after the ack wait.

mod contract;
pub mod nats;
pub mod postgres;

use std::sync::Arc;

use sqlx::PgPool;

pub use contract::{
    Acker, Bus, ConsumerSpec, Delivery, Message, Published, Subscription, MAX_DELIVER,
};

use crate::config::BusConfig;

/// The bus the configuration asks for: JetStream when `nats_url` is set, else PostgreSQL.
pub async fn connect(config: &BusConfig, db: &PgPool) -> anyhow::Result<Arc<dyn Bus>> {
    Ok(match &config.nats_url {
        Some(url) => Arc::new(nats::NatsBus::connect(url, config).await?),
        None => Arc::new(postgres::PgBus::new(db.clone(), config.poll_every)),
    })
}
