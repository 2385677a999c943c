//! The shopper's details as typed at the checkout, kept with the cart (`carts.details`) so
//! that a reload, or the no-wasm form's answer, shows them again. A draft may be wrong (that
//! is what the page shows each field's problem for); it is bounded in size, never trusted:
//! an order takes the details its request carries, checked (docs/protocol.md, "The shopper's
//! details").

use std::time::Duration;

use domain::details::DetailsDraft;
use sqlx::{types::Json, PgPool};

/// Keeps `draft` with the session's cart. A session without a cart has nothing to order, and
/// keeps nothing: `false`.
pub async fn save(
    db: &PgPool,
    session_id: &str,
    draft: &DetailsDraft,
) -> Result<bool, sqlx::Error> {
    let saved = sqlx::query!(
        "UPDATE carts SET details = $2, details_saved_at = now() WHERE session_id = $1",
        session_id,
        Json(draft.bounded()) as _,
    )
    .execute(db)
    .await?;
    Ok(saved.rows_affected() > 0)
}

/// The details last kept with the session's cart; empty when there are none.
pub async fn read(db: &PgPool, session_id: &str) -> Result<DetailsDraft, sqlx::Error> {
    let draft = sqlx::query_scalar!(
        r#"SELECT details AS "details!: Json<DetailsDraft>" FROM carts
            WHERE session_id = $1 AND details IS NOT NULL"#,
        session_id,
    )
    .fetch_optional(db)
    .await?;
    Ok(draft.map(|d| d.0).unwrap_or_default())
}

/// Forgets the details of carts left alone for `retention`: a person who typed them and never
/// ordered is not kept (docs/operations.md, "Personal data").
pub async fn forget_old(db: &PgPool, retention: Duration) -> Result<u64, sqlx::Error> {
    let forgotten = sqlx::query!(
        "UPDATE carts SET details = NULL, details_saved_at = NULL
          WHERE details IS NOT NULL
            AND details_saved_at < now() - $1::bigint * interval '1 millisecond'",
        retention.as_millis() as i64,
    )
    .execute(db)
    .await?;
    Ok(forgotten.rows_affected())
}
