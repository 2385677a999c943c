//! `POST /v1/charges` and `GET /v1/charges/{id}`. Charges are idempotent on the caller's
//! Idempotency-Key: the same key with the same parameters replays the charge, with other
//! parameters it is refused (422). The charge, its ledger entry and its webhook are one
//! transaction. Test card numbers pick the outcome:
//!
//! | card | outcome |
//! |---|---|
//! | 4242424242424242 (and any other valid number) | succeeds |
//! | 4000000000000002 | declined (`status: failed`, `failure_code: card_declined`) |
//! | 4000000000000259 | succeeds, but the first HTTP response is dropped after the commit |
//! | 4000000000000077 | succeeds after 3 seconds |
//! | 4000000000000127 | stays `processing`: an outcome not known yet (no webhook) |

use std::time::Duration;

use axum::{
    body::Bytes,
    extract::{Path, State},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Json, Router,
};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use sqlx::PgPool;

use crate::{
    charge::Charge, error::ProviderError, settings::SharedSettings, state::ProviderState, webhooks,
};

pub const CARD_DECLINED: &str = "4000000000000002";
pub const CARD_DROP_RESPONSE: &str = "4000000000000259";
pub const CARD_SLOW: &str = "4000000000000077";
pub const CARD_PROCESSING: &str = "4000000000000127";
const SLOW_ANSWER: Duration = Duration::from_secs(3);
/// The slow card's charge is made within this long of the request that asked for it, or
/// not at all: a merchant that closes a quiet attempt as never charged after a longer grace
/// is never contradicted by a charge landing later.
pub const SLOW_CHARGE_LIMIT: Duration = Duration::from_secs(4);

pub fn router() -> Router<ProviderState> {
    Router::new()
        .route("/v1/charges", post(create).get(find_by_reference))
        .route("/v1/charges/{id}", get(show))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChargeRequest {
    amount_cents: i64,
    currency: String,
    card_number: String,
    /// The merchant's own reference for this charge (Once sends its payment attempt id).
    reference: String,
}

async fn create(
    State(db): State<PgPool>,
    State(settings): State<SharedSettings>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, ProviderError> {
    let key = idempotency_key(&headers)?;
    let request: ChargeRequest = serde_json::from_slice(&body).map_err(|e| {
        ProviderError::BadRequest("invalid_request", format!("invalid charge request: {e}"))
    })?;
    validate(&request)?;
    let fingerprint = fingerprint(&request);
    if request.card_number != CARD_SLOW {
        return charge(db, settings, key, request, fingerprint).await;
    }
    // Once the charge is made, a repeat is answered from it at once (a request before
    // that is as slow as the first, and replays the first's charge).
    if let Some(stored) = stored(&db, &key, &fingerprint).await? {
        return Ok(stored);
    }
    // The charge goes on when the caller stops waiting for it, as a real provider's does:
    // in a task of its own, which a dropped connection does not cancel; but never past
    // SLOW_CHARGE_LIMIT (a transaction cut off there rolls back).
    let slow = tokio::spawn(async move {
        tokio::time::sleep(SLOW_ANSWER).await;
        let made = charge(db, settings, key, request, fingerprint);
        match tokio::time::timeout(SLOW_CHARGE_LIMIT - SLOW_ANSWER, made).await {
            Ok(made) => made,
            Err(_) => Err(ProviderError::Internal(sqlx::Error::PoolTimedOut)),
        }
    });
    slow.await.unwrap_or_else(|e| {
        Err(ProviderError::Internal(sqlx::Error::Protocol(
            e.to_string(),
        )))
    })
}

/// Makes the charge `request` asks for under `key`, or replays the one made under it.
async fn charge(
    db: PgPool,
    settings: SharedSettings,
    key: String,
    request: ChargeRequest,
    fingerprint: String,
) -> Result<Response, ProviderError> {
    let mut tx = db.begin().await?;
    let inserted = sqlx::query_as!(
        Charge,
        r#"INSERT INTO charges (id, idempotency_key, request_fingerprint, amount_cents, currency, card_last4, reference, status, failure_code)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
         ON CONFLICT ON CONSTRAINT charges_idempotency_key_key DO NOTHING
         RETURNING id, tx_no, amount_cents, currency, card_last4, reference, status, failure_code, created_at AS "created_at: _""#,
        format!("ch_{}", uuid::Uuid::new_v4().simple()),
        key,
        fingerprint,
        request.amount_cents,
        request.currency,
        &request.card_number[request.card_number.len() - 4..],
        request.reference,
        outcome(&request.card_number),
        (request.card_number == CARD_DECLINED).then_some("card_declined"),
    )
    .fetch_optional(&mut *tx)
    .await?;

    let Some(charge) = inserted else {
        tx.rollback().await?;
        return replay(&db, &key, &fingerprint).await;
    };
    let chaos = settings.get().chaos;
    webhooks::enqueue(&mut tx, &charge, &chaos).await?;
    if chaos.charge_twice && charge.status == "succeeded" {
        charge_again(&mut tx, &charge, &key, &fingerprint, &chaos).await?;
    }
    tx.commit().await?;
    tracing::info!(charge = %charge.id, status = %charge.status, "charge recorded");
    if request.card_number == CARD_DROP_RESPONSE {
        drop_the_response(&charge.id);
    }
    Ok((StatusCode::CREATED, Json(charge)).into_response())
}

/// Sandbox chaos: a second, separate charge of the same amount for the same reference, with
/// its own id, ledger entry and webhook: a double charge for the merchant to find.
async fn charge_again(
    tx: &mut sqlx::PgConnection,
    charge: &Charge,
    key: &str,
    fingerprint: &str,
    chaos: &crate::settings::Chaos,
) -> Result<(), ProviderError> {
    let double = sqlx::query_as!(
        Charge,
        r#"INSERT INTO charges (id, idempotency_key, request_fingerprint, amount_cents, currency, card_last4, reference, status)
         VALUES ($1, $2, $3, $4, $5, $6, $7, 'succeeded')
         RETURNING id, tx_no, amount_cents, currency, card_last4, reference, status, failure_code, created_at AS "created_at: _""#,
        format!("ch_{}", uuid::Uuid::new_v4().simple()),
        format!("{key}#charged-twice"),
        fingerprint,
        charge.amount_cents,
        charge.currency,
        charge.card_last4,
        charge.reference,
    )
    .fetch_one(&mut *tx)
    .await?;
    tracing::warn!(charge = %double.id, reference = %charge.reference, "sandbox chaos: charged twice");
    webhooks::enqueue(tx, &double, chaos).await?;
    Ok(())
}

/// The caller's Idempotency-Key (1 to 255 characters), required on every write.
pub fn idempotency_key(headers: &HeaderMap) -> Result<String, ProviderError> {
    headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .filter(|k| !k.is_empty() && k.len() <= 255)
        .map(str::to_owned)
        .ok_or_else(|| {
            ProviderError::BadRequest(
                "idempotency_key_missing",
                "an Idempotency-Key header is required".into(),
            )
        })
}

/// The same key again: the stored charge if the parameters match.
async fn replay(db: &PgPool, key: &str, fingerprint: &str) -> Result<Response, ProviderError> {
    let stored = stored(db, key, fingerprint).await?;
    stored.ok_or(ProviderError::Internal(sqlx::Error::RowNotFound))
}

/// The answer stored under `key`, replayed; `None` if no charge was made under it yet.
async fn stored(
    db: &PgPool,
    key: &str,
    fingerprint: &str,
) -> Result<Option<Response>, ProviderError> {
    let stored_fingerprint = sqlx::query_scalar!(
        "SELECT request_fingerprint FROM charges WHERE idempotency_key = $1",
        key
    )
    .fetch_optional(db)
    .await?;
    let Some(stored_fingerprint) = stored_fingerprint else {
        return Ok(None);
    };
    if stored_fingerprint != fingerprint {
        return Err(ProviderError::KeyReused);
    }
    let charge = sqlx::query_as!(
        Charge,
        r#"SELECT id, tx_no, amount_cents, currency, card_last4, reference, status, failure_code, created_at AS "created_at: _"
           FROM charges WHERE idempotency_key = $1"#,
        key
    )
    .fetch_one(db)
    .await?;
    Ok(Some(
        (
            StatusCode::CREATED,
            [("idempotent-replayed", "true")],
            Json(charge),
        )
            .into_response(),
    ))
}

/// Test card 4000000000000259: the charge is committed, then the connection is cut before
/// any byte of the answer is written, as when a network drops a response. Panicking here
/// ends this connection's task only; the server goes on.
fn drop_the_response(charge_id: &str) -> ! {
    tracing::warn!(
        charge = charge_id,
        "sandbox: dropping this response on purpose (test card)"
    );
    std::panic::resume_unwind(Box::new("sandbox: response dropped on purpose"))
}

/// The status a test card's charge gets.
fn outcome(card_number: &str) -> &'static str {
    match card_number {
        CARD_DECLINED => "failed",
        CARD_PROCESSING => "processing",
        _ => "succeeded",
    }
}

/// The largest charge the sandbox takes, as card networks cap a single charge (999,999.99
/// in a currency's major unit): totals and ledgers far from any overflow.
const MAX_AMOUNT_CENTS: i64 = 99_999_999;

fn validate(request: &ChargeRequest) -> Result<(), ProviderError> {
    let bad = |message: &str| {
        Err(ProviderError::BadRequest(
            "invalid_request",
            message.to_owned(),
        ))
    };
    if !(1..=MAX_AMOUNT_CENTS).contains(&request.amount_cents) {
        return bad("amount_cents must be between 1 and 99999999");
    }
    if request.currency.len() != 3 || !request.currency.bytes().all(|b| b.is_ascii_uppercase()) {
        return bad("currency must be a three-letter ISO code");
    }
    if !(12..=19).contains(&request.card_number.len())
        || !request.card_number.bytes().all(|b| b.is_ascii_digit())
    {
        return bad("card_number must be 12 to 19 digits");
    }
    if request.reference.is_empty()
        || request.reference.len() > 255
        || request.reference.chars().any(char::is_control)
    {
        return bad("reference must be 1 to 255 printable characters");
    }
    Ok(())
}

fn fingerprint(request: &ChargeRequest) -> String {
    let text = format!(
        "{}\n{}\n{}\n{}",
        request.amount_cents, request.currency, request.card_number, request.reference
    );
    hex::encode(Sha256::digest(text.as_bytes()))
}

#[derive(Deserialize)]
struct ByReference {
    reference: String,
}

/// `GET /v1/charges?reference=…`: every charge made for a merchant reference, oldest first,
/// so a merchant whose call's outcome is unknown can ask instead of guessing.
async fn find_by_reference(
    State(db): State<PgPool>,
    axum::extract::Query(query): axum::extract::Query<ByReference>,
) -> Result<Json<Vec<Charge>>, ProviderError> {
    let charges = sqlx::query_as!(
        Charge,
        r#"SELECT id, tx_no, amount_cents, currency, card_last4, reference, status, failure_code, created_at AS "created_at: _"
           FROM charges WHERE reference = $1 ORDER BY tx_no"#,
        query.reference
    )
    .fetch_all(&db)
    .await?;
    Ok(Json(charges))
}

async fn show(
    State(db): State<PgPool>,
    Path(id): Path<String>,
) -> Result<Json<Charge>, ProviderError> {
    sqlx::query_as!(
        Charge,
        r#"SELECT id, tx_no, amount_cents, currency, card_last4, reference, status, failure_code, created_at AS "created_at: _"
           FROM charges WHERE id = $1"#,
        id
    )
    .fetch_optional(&db)
    .await?
    .map(Json)
    .ok_or(ProviderError::NotFound)
}
