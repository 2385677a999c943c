//! All configuration in one struct, read from the environment once in `main` and passed
//! down. Every value has a default that runs on a developer machine.

use std::{net::SocketAddr, time::Duration};

use leptos::config::{Env, LeptosOptions};

/// The sandbox provider's development signing secret (see `provider/src/config.rs`).
pub const DEV_WEBHOOK_SECRET: &str = "whsec_once_development_only";

#[derive(Clone, Debug)]
pub struct Config {
    /// Where the shop database lives; created at start if missing.
    pub database_url: String,
    /// Address the HTTP server listens on (`LEPTOS_SITE_ADDR`, as cargo-leptos sets it).
    pub listen_addr: SocketAddr,
    /// How long a claimed idempotency key stays locked to its first request.
    pub idempotency_lease: Duration,
    /// How long completed keys are kept before the purge worker deletes them.
    pub idempotency_retention: Duration,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// The payment provider's base URL.
    pub provider_url: String,
    /// Secrets that may sign provider callbacks; several, so a secret can be rotated.
    pub webhook_secrets: Vec<String>,
    /// Test-only fault injection (hold points, forced failures); off unless asked for.
    pub fault_injection: bool,
    pub leptos: LeptosOptions,
}

impl Config {
    pub fn from_env() -> anyhow::Result<Self> {
        let listen_addr: SocketAddr = var_or("LEPTOS_SITE_ADDR", "127.0.0.1:3000").parse()?;
        let leptos = LeptosOptions::builder()
            .output_name(var_or("LEPTOS_OUTPUT_NAME", "once"))
            .site_root(var_or("LEPTOS_SITE_ROOT", "target/site"))
            .site_pkg_dir(var_or("LEPTOS_SITE_PKG_DIR", "pkg"))
            .site_addr(listen_addr)
            .reload_port(var_or("LEPTOS_RELOAD_PORT", "3001").parse::<u32>()?)
            .env(
                match var_or("LEPTOS_ENV", "PROD").to_ascii_lowercase().as_str() {
                    "dev" | "development" => Env::DEV,
                    _ => Env::PROD,
                },
            )
            .build();
        Ok(Self {
            database_url: var_or("DATABASE_URL", "postgres://postgres@localhost:5432/once"),
            listen_addr,
            idempotency_lease: Duration::from_millis(
                var_or("IDEMPOTENCY_LEASE_MS", "30000").parse()?,
            ),
            idempotency_retention: Duration::from_secs(
                var_or("IDEMPOTENCY_RETENTION_SECS", "86400").parse()?,
            ),
            max_body_bytes: var_or("MAX_BODY_BYTES", "65536").parse()?,
            provider_url: var_or("PROVIDER_URL", "http://127.0.0.1:3100"),
            webhook_secrets: var_or("PROVIDER_WEBHOOK_SECRETS", DEV_WEBHOOK_SECRET)
                .split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect(),
            fault_injection: matches!(
                var_or("ONCE_FAULT_INJECTION", "off").as_str(),
                "on" | "1" | "true"
            ),
            leptos,
        })
    }
}

fn var_or(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_owned())
}
