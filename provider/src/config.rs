//! The provider's configuration, from the environment, with development defaults.

use std::net::SocketAddr;

use crate::settings::Chaos;

#[derive(Clone, Debug)]
pub struct Config {
    pub database_url: String,
    pub addr: SocketAddr,
    pub webhook_url: String,
    pub webhook_secret: String,
    /// The key every `/v1/…` call must carry (`PROVIDER_API_KEY`), shared with the shop.
    pub api_key: String,
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
            webhook_secret: webhook_secret()?,
            api_key: api_key()?,
            chaos: Chaos {
                duplicates: var_or("PROVIDER_CHAOS_DUPLICATES", "0").parse()?,
                shuffle: var_or("PROVIDER_CHAOS_SHUFFLE", "false").parse()?,
                delay_ms: var_or("PROVIDER_CHAOS_DELAY_MS", "0").parse()?,
                drop_rate: var_or("PROVIDER_CHAOS_DROP_RATE", "0").parse()?,
                drop_webhooks: var_or("PROVIDER_CHAOS_DROP_WEBHOOKS", "false").parse()?,
                charge_twice: var_or("PROVIDER_CHAOS_CHARGE_TWICE", "false").parse()?,
            },
        })
    }
}

/// The secret webhooks are signed with. Required, with no built-in default: a default
/// written in the source is a secret anyone can read, and sign a forged payment with.
fn webhook_secret() -> anyhow::Result<String> {
    let secret = std::env::var("PROVIDER_WEBHOOK_SECRET").unwrap_or_default();
    anyhow::ensure!(
        secret.len() >= 16,
        "PROVIDER_WEBHOOK_SECRET must be set to a random secret of at least 16 characters, \
         shared with the shop (scripts/run generates one)"
    );
    Ok(secret)
}

/// The merchant's key. Required, with no built-in default, for the reason the webhook
/// secret has none.
fn api_key() -> anyhow::Result<String> {
    let key = std::env::var("PROVIDER_API_KEY").unwrap_or_default();
    anyhow::ensure!(
        key.len() >= 16 && key.bytes().all(|b| b.is_ascii_graphic()),
        "PROVIDER_API_KEY must be set to a random key of at least 16 printable ASCII \
         characters without spaces, shared with the shop (scripts/run generates one)"
    );
    Ok(key)
}

fn var_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}
