//! Counters of the idempotency protocol, of the event chain (relay, consumers, mailer) and
//! of the console's logins, exposed on `/metrics` in Prometheus text format, to holders of
//! the metrics token only. Counters count this process only; sum them across instances.
//! The outbox lag and the dead letters are read from the database, so every instance
//! reports the same, whole figure.

use std::sync::{
    atomic::{AtomicU64, Ordering},
    Arc,
};

use axum::{
    extract::State,
    http::{header, HeaderMap, HeaderValue},
    response::{IntoResponse, Response},
};
use once_axum::AnswerCache;
use once_events::Counter;
use sqlx::PgPool;

use crate::{config::Config, credentials::secret_matches, error::ApiError};

#[derive(Default)]
pub struct Metrics {
    pub executions: AtomicU64,
    pub replays: AtomicU64,
    pub in_progress: AtomicU64,
    pub key_reused: AtomicU64,
    pub takeovers: AtomicU64,
    pub retries_after_failure: AtomicU64,
    pub fenced: AtomicU64,
    pub remembered: AtomicU64,
    pub events_published: AtomicU64,
    pub events_republished: AtomicU64,
    pub deliveries: AtomicU64,
    pub duplicates_skipped: AtomicU64,
    pub retries: AtomicU64,
    pub dead_letters: AtomicU64,
    pub batch_splits: AtomicU64,
    pub emails_delivered: AtomicU64,
    pub login_failures: AtomicU64,
    pub login_lockouts: AtomicU64,
}

impl Metrics {
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self) -> String {
        let rows: [(&str, &str, &AtomicU64); 18] = [
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
            (
                "once_idempotency_remembered_total",
                "Repeats answered from the answer cache, with no database statement.",
                &self.remembered,
            ),
            (
                "once_relay_published_total",
                "Outbox events published to the bus.",
                &self.events_published,
            ),
            (
                "once_relay_republished_total",
                "Publishes the bus recognised as repeats of a message it had.",
                &self.events_republished,
            ),
            (
                "once_consumer_deliveries_total",
                "Messages delivered to a consumer (repeats included).",
                &self.deliveries,
            ),
            (
                "once_consumer_duplicates_skipped_total",
                "Deliveries of events already consumed: nothing was done.",
                &self.duplicates_skipped,
            ),
            (
                "once_consumer_retries_total",
                "Handler failures sent back to the bus for a later try.",
                &self.retries,
            ),
            (
                "once_consumer_dead_letters_total",
                "Messages this process gave up on.",
                &self.dead_letters,
            ),
            (
                "once_consumer_batch_splits_total",
                "Batches whose transaction failed, their events then applied one at a time.",
                &self.batch_splits,
            ),
            (
                "once_mailer_delivered_total",
                "Emails delivered (sent over SMTP or kept).",
                &self.emails_delivered,
            ),
            (
                "once_operator_login_failures_total",
                "Wrong operator console passwords (attempts refused unchecked not included).",
                &self.login_failures,
            ),
            (
                "once_operator_login_lockouts_total",
                "Console login lockouts begun: of one client address, or of every client.",
                &self.login_lockouts,
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

/// The answer cache's size, on this instance (none without a cache).
fn cache_gauges(answers: Option<&AnswerCache>) -> String {
    let Some(cache) = answers else {
        return String::new();
    };
    [
        (
            "once_answer_cache_entries",
            "Completed answers kept in memory.",
            cache.len(),
        ),
        (
            "once_answer_cache_bytes",
            "Bytes of answers kept in memory, as weighed against ANSWER_CACHE_BYTES.",
            cache.bytes(),
        ),
    ]
    .iter()
    .map(|(name, help, value)| {
        format!("# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n")
    })
    .collect()
}

/// What the event chain reports, in the counters `/metrics` has always shown for it.
impl once_events::Counters for Metrics {
    fn count(&self, counter: Counter) {
        Self::inc(match counter {
            Counter::Published => &self.events_published,
            Counter::Republished => &self.events_republished,
            Counter::Delivery => &self.deliveries,
            Counter::DuplicateSkipped => &self.duplicates_skipped,
            Counter::Retry => &self.retries,
            Counter::DeadLetter => &self.dead_letters,
            Counter::BatchSplit => &self.batch_splits,
            // A counter a later once-events adds: not shown until it is given a name here.
            _ => return,
        });
    }
}

/// Prometheus text. Only for holders of the metrics token: the counters tell how the shop
/// and its console are being used, attacked included.
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "get_metrics",
    tag = "metrics",
    responses((status = 200, description = "This process's counters and the database's gauges, in Prometheus text format.",
        content_type = "text/plain; version=0.0.4", body = String,
        example = "# HELP once_outbox_unpublished Outbox events not yet published.\n# TYPE once_outbox_unpublished gauge\nonce_outbox_unpublished 0\n")),
    security(("metrics_token" = [])),
    extensions(("x-problems" = json!(["metrics-token-invalid"]))),
)]
pub async fn render(
    State(metrics): State<Arc<Metrics>>,
    State(db): State<PgPool>,
    State(config): State<Arc<Config>>,
    State(answers): State<Option<AnswerCache>>,
    headers: HeaderMap,
) -> Response {
    if !token_ok(&config, &headers) {
        return refuse();
    }
    // The counters are worth showing during an outage too: the gauges are left out then.
    let backlog = backlog(&db).await.unwrap_or_else(|e| {
        tracing::warn!(error = %e, "metrics: the database gauges are unavailable");
        String::new()
    });
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        metrics.render() + &cache_gauges(answers.as_ref()) + &backlog,
    )
        .into_response()
}

/// Whether the request carries `Authorization: Bearer <METRICS_TOKEN>`, compared in
/// constant time. Without a configured token (the server always has one once started),
/// nothing is shown.
fn token_ok(config: &Config, headers: &HeaderMap) -> bool {
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, token)| token.trim());
    match (config.metrics_token.as_deref(), given) {
        (Some(expected), Some(given)) => secret_matches(expected, given),
        _ => false,
    }
}

fn refuse() -> Response {
    let mut response = ApiError::Unauthorized {
        problem: "metrics-token-invalid",
        detail: "/metrics needs the header Authorization: Bearer <METRICS_TOKEN>".into(),
    }
    .into_response();
    response
        .headers_mut()
        .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    response
}

/// Gauges read from the database: outbox lag, queued emails, dead letters.
async fn backlog(db: &PgPool) -> Result<String, sqlx::Error> {
    let outbox = once_events::outbox::backlog(db).await?;
    let row = sqlx::query!(
        r#"SELECT (SELECT count(*) FROM emails WHERE status = 'queued') AS "queued_emails!",
                (SELECT count(*) FROM dead_letters WHERE status = 'dead') AS "dead!""#,
    )
    .fetch_one(db)
    .await?;
    let gauges: [(&str, &str, String); 4] = [
        (
            "once_outbox_unpublished",
            "Outbox events not yet published.",
            outbox.unpublished.to_string(),
        ),
        (
            "once_outbox_oldest_unpublished_seconds",
            "Age of the oldest unpublished outbox event (0 when none).",
            format!("{:.3}", outbox.oldest_secs),
        ),
        (
            "once_emails_queued",
            "Emails waiting for the mailer.",
            row.queued_emails.to_string(),
        ),
        (
            "once_dead_letters",
            "Dead letters waiting for an operator.",
            row.dead.to_string(),
        ),
    ];
    Ok(gauges
        .iter()
        .map(|(name, help, value)| {
            format!("# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}\n")
        })
        .collect())
}
