//! Structured logs through `tracing`; `RUST_LOG` overrides the default filter.

use tracing_subscriber::{fmt, EnvFilter};

pub fn init() {
    let filter = EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new("info,server=info,tower_http=info,sqlx=warn"));
    // `try_init` so that tests, which spawn many apps in one process, can call it freely.
    let _ = fmt().with_env_filter(filter).with_target(false).try_init();
}

/// How a response that failed is logged (the request trace's `on_failure`). A 503 is the
/// shop shedding load or riding out a database failover, answered with `Retry-After` by
/// design: a warning, so that alerting on errors sees faults only. Any other 5xx is an
/// error (what failed inside is logged where it failed, `crate::error`).
pub fn log_failed_response(
    class: tower_http::classify::ServerErrorsFailureClass,
    latency: std::time::Duration,
    _span: &tracing::Span,
) {
    use tower_http::classify::ServerErrorsFailureClass::StatusCode;
    let latency_ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
    match class {
        StatusCode(axum::http::StatusCode::SERVICE_UNAVAILABLE) => {
            tracing::warn!(latency_ms, "answered 503: unavailable for now, retry later")
        }
        class => tracing::error!(classification = %class, latency_ms, "response failed"),
    }
}
