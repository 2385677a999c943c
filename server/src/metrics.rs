//! Counters of the idempotency protocol, exposed on `/metrics` in Prometheus text format.
//! They count this instance only; sum them across instances.

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc,
};

use axum::{extract::State, http::header, response::IntoResponse};

#[derive(Default)]
pub struct Metrics {
    pub executions: AtomicU64,
    pub replays: AtomicU64,
    pub in_progress: AtomicU64,
    pub key_reused: AtomicU64,
    pub takeovers: AtomicU64,
    pub retries_after_failure: AtomicU64,
    pub fenced: AtomicU64,
}

impl Metrics {
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self) -> String {
        let rows: [(&str, &str, &AtomicU64); 7] = [
            (
                "once_idempotency_executions_total",
                "Requests that ran the business work.",
                &self.executions,
            ),
            (
                "once_idempotency_replays_total",
                "Stored responses replayed.",
                &self.replays,
            ),
            (
                "once_idempotency_in_progress_total",
                "409 answers: the key was still processing.",
                &self.in_progress,
            ),
            (
                "once_idempotency_key_reused_total",
                "422 answers: the key came with a different request.",
                &self.key_reused,
            ),
            (
                "once_idempotency_takeovers_total",
                "Expired leases taken over.",
                &self.takeovers,
            ),
            (
                "once_idempotency_retries_after_failure_total",
                "Failed keys executed again.",
                &self.retries_after_failure,
            ),
            (
                "once_idempotency_fenced_total",
                "Late commits refused because the lease was lost.",
                &self.fenced,
            ),
        ];
        rows.iter()
            .map(|(name, help, value)| {
                format!(
                    "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}\n",
                    value.load(Ordering::Relaxed)
                )
            })
            .collect()
    }
}

pub async fn render(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        metrics.render(),
    )
}
