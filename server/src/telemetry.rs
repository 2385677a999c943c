//! Structured logs through `tracing`; `RUST_LOG` overrides the default filter.

use tracing_subscriber::{fmt, EnvFilter};

pub fn init() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,server=info,tower_http=info,sqlx=warn"));
    // `try_init` so that tests, which spawn many apps in one process, can call it freely.
    let _ = fmt().with_env_filter(filter).with_target(false).try_init();
}
