//! Webhooks: every charge enqueues a signed event in the same transaction; a worker delivers
//! due events with `FOR UPDATE SKIP LOCKED` (several workers are safe) and retries with
//! exponential backoff until the merchant answers 2xx. The chaos knobs add duplicates,
//! shuffle the order, delay first attempts and lose attempts.
//!
//! Signature: `Once-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "t.body">`.

use std::time::Duration;

use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;
use sqlx::{PgConnection, PgPool};

use crate::{
    charge::Charge,
    settings::{Chaos, Settings, SharedSettings},
};

const BATCH: i64 = 20;
const IDLE_POLL: Duration = Duration::from_millis(100);
const MAX_BACKOFF_MS: f64 = 60_000.0;

/// Queues the event announcing `charge` (plus chaos copies) in the charge's transaction.
pub async fn enqueue(
    tx: &mut PgConnection,
    charge: &Charge,
    chaos: &Chaos,
) -> Result<(), sqlx::Error> {
    let event_type = match charge.status.as_str() {
        "succeeded" => "charge.succeeded",
        "failed" => "charge.failed",
        _ => return Ok(()), // no outcome yet, nothing to announce
    };
    let tx_no = format!("txn_{:010}", charge.tx_no);
    enqueue_event(tx, charge, event_type, &tx_no, chaos).await
}

/// Queues `event_type` about `charge` (`charge.refunded` for a refund) under its own
/// transaction number `tx_no` (merchants dedup callbacks on it, so a refund must never
/// share its charge's), unless the chaos knobs lose webhooks for good.
pub async fn enqueue_event(
    tx: &mut PgConnection,
    charge: &Charge,
    event_type: &str,
    tx_no: &str,
    chaos: &Chaos,
) -> Result<(), sqlx::Error> {
    if chaos.drop_webhooks {
        tracing::warn!(charge = %charge.id, event_type, "sandbox chaos: this webhook is lost for good");
        return Ok(());
    }
    let event_id = format!("evt_{}", uuid::Uuid::new_v4().simple());
    let payload = json!({
        "id": event_id,
        "type": event_type,
        "tx_no": tx_no,
        "created": chrono::Utc::now().timestamp(),
        "data": {
            "charge_id": charge.id,
            "amount_cents": charge.amount_cents,
            "currency": charge.currency,
            "reference": charge.reference,
            "status": charge.status,
            "failure_code": charge.failure_code,
        }
    });
    for _ in 0..=chaos.duplicates {
        // `::bigint`: the delay is a whole number of milliseconds (unannotated, Postgres
        // would ask for a float8 here).
        sqlx::query!(
            "INSERT INTO webhook_deliveries (event_id, tx_no, event_type, payload, next_attempt_at)
             VALUES ($1, $2, $3, $4, now() + $5::bigint * interval '1 millisecond')",
            event_id,
            tx_no,
            event_type,
            payload,
            (chaos.delay_ms as i64),
        )
        .execute(&mut *tx)
        .await?;
    }
    Ok(())
}

/// The `Once-Signature` header value for `body` sent at `timestamp`.
pub fn sign(secret: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key length");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!(
        "t={timestamp},v1={}",
        hex::encode(mac.finalize().into_bytes())
    )
}

struct Due {
    id: i64,
    payload: serde_json::Value,
    attempts: i32,
}

/// Delivers one batch of due webhooks; returns how many were attempted.
pub async fn try_execute_task(
    db: &PgPool,
    http: &reqwest::Client,
    settings: &SharedSettings,
    secret: &str,
) -> Result<usize, sqlx::Error> {
    let Settings { webhook_url, chaos } = settings.get();
    let mut tx = db.begin().await?;
    let due = sqlx::query_as!(
        Due,
        "SELECT id, payload, attempts FROM webhook_deliveries
          WHERE delivered_at IS NULL AND next_attempt_at <= now()
          ORDER BY CASE WHEN $1 THEN random() ELSE id::float8 END
          LIMIT $2 FOR UPDATE SKIP LOCKED",
        chaos.shuffle,
        BATCH,
    )
    .fetch_all(&mut *tx)
    .await?;
    for delivery in &due {
        let outcome = if rand::random::<f64>() < chaos.drop_rate {
            Err("lost on the way (chaos)".to_owned())
        } else {
            deliver(http, &webhook_url, secret, &delivery.payload).await
        };
        record(&mut tx, delivery, outcome).await?;
    }
    tx.commit().await?;
    Ok(due.len())
}

async fn deliver(
    http: &reqwest::Client,
    url: &str,
    secret: &str,
    payload: &serde_json::Value,
) -> Result<(), String> {
    let body = serde_json::to_vec(payload).expect("JSON");
    let signature = sign(secret, chrono::Utc::now().timestamp(), &body);
    let response = http
        .post(url)
        .header("content-type", "application/json")
        .header("once-signature", signature)
        .body(body)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    match response.status() {
        s if s.is_success() => Ok(()),
        s => Err(format!("merchant answered {s}")),
    }
}

async fn record(
    tx: &mut PgConnection,
    delivery: &Due,
    outcome: Result<(), String>,
) -> Result<(), sqlx::Error> {
    match outcome {
        Ok(()) => sqlx::query!(
            "UPDATE webhook_deliveries SET delivered_at = now(), attempts = attempts + 1 WHERE id = $1",
            delivery.id
        )
        .execute(tx)
        .await
        .map(drop),
        Err(error) => {
            let bound = (500.0 * 2f64.powi(delivery.attempts)).min(MAX_BACKOFF_MS);
            let wait_ms = (bound / 2.0 + rand::random::<f64>() * bound / 2.0) as i64;
            tracing::info!(delivery = delivery.id, %error, wait_ms, "webhook delivery failed; will retry");
            sqlx::query!(
                "UPDATE webhook_deliveries SET attempts = attempts + 1, last_error = $2,
                        next_attempt_at = now() + $3::bigint * interval '1 millisecond' WHERE id = $1",
                delivery.id,
                error,
                wait_ms,
            )
            .execute(tx)
            .await
            .map(drop)
        }
    }
}

/// Delivers webhooks until the task is dropped.
pub async fn run_worker(db: PgPool, settings: SharedSettings, secret: String) {
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("HTTP client");
    loop {
        match try_execute_task(&db, &http, &settings, &secret).await {
            Ok(0) => tokio::time::sleep(IDLE_POLL).await,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(error = %e, "webhook worker: database error; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
