//! The provider's configuration, from the environment, with development defaults.

use std::net::SocketAddr;

use crate::settings::Chaos;

/// The development signing secret; Once's server accepts it by default. Never use it anywhere real.
pub const DEV_WEBHOOK_SECRET: &str = "whsec_once_development_only";

#[derive(Clone, Debug)]
pub struct Config {
    pub database_url: String,
    pub addr: SocketAddr,
    pub webhook_url: String,
    pub webhook_secret: String,
    pub chaos: Chaos,
}

impl Config {
    pub fn from_env() -> anyhow::Result<Self> {
        Ok(Self {
            database_url: var_or(
                "PROVIDER_DATABASE_URL",
                "postgres://postgres@localhost:5432/once_provider",
            ),
            addr: var_or("PROVIDER_ADDR", "127.0.0.1:3100").parse()?,
            webhook_url: var_or(
                "PROVIDER_WEBHOOK_URL",
                "http://127.0.0.1:3000/webhooks/provider",
            ),
            webhook_secret: var_or("PROVIDER_WEBHOOK_SECRET", DEV_WEBHOOK_SECRET),
            chaos: Chaos {
                duplicates: var_or("PROVIDER_CHAOS_DUPLICATES", "0").parse()?,
                shuffle: var_or("PROVIDER_CHAOS_SHUFFLE", "false").parse()?,
                delay_ms: var_or("PROVIDER_CHAOS_DELAY_MS", "0").parse()?,
                drop_rate: var_or("PROVIDER_CHAOS_DROP_RATE", "0").parse()?,
            },
        })
    }
}

fn var_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}
