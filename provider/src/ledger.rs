//! `GET /v1/transactions`: the provider's ledger — charges and refunds — oldest first, so a
//! merchant can reconcile its books against ours.
//!
//! The order is the time a charge was recorded, then its id; `starting_after` is an opaque
//! cursor (`<micros>_<id>`) and `since` (RFC 3339) starts at a time. Neither cursor can
//! promise that nothing lands behind it: a charge's time is taken when its transaction
//! starts, and a slow transaction commits after later ones were read. So a reader resumes
//! from a little before what it saw last (an overlap window longer than any charge's
//! transaction) and drops the entries it has already seen, by id.

use axum::{
    extract::{Query, State},
    routing::get,
    Json, Router,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::{error::ProviderError, state::ProviderState};

/// One ledger entry: a charge (`kind: charge`, its status) or a refund (`kind: refund`,
/// status `refunded`, naming the charge it gave back).
#[derive(Clone, Debug, Serialize)]
pub struct Entry {
    pub kind: String,
    pub id: String,
    pub charge_id: Option<String>,
    pub amount_cents: i64,
    pub currency: String,
    pub reference: String,
    pub status: String,
    pub failure_code: Option<String>,
    pub created_at: DateTime<Utc>,
}

const MAX_PAGE: i64 = 100;

pub fn router() -> Router<ProviderState> {
    Router::new().route("/v1/transactions", get(list))
}

#[derive(Deserialize)]
struct Page {
    starting_after: Option<String>,
    since: Option<DateTime<Utc>>,
    limit: Option<i64>,
}

#[derive(Serialize)]
struct Transactions {
    data: Vec<Entry>,
    has_more: bool,
    next_cursor: Option<String>,
}

fn cursor_of(entry: &Entry) -> String {
    format!("{}_{}", entry.created_at.timestamp_micros(), entry.id)
}

fn parse_cursor(cursor: &str) -> Result<(DateTime<Utc>, String), ProviderError> {
    let bad = || {
        ProviderError::BadRequest(
            "invalid_cursor",
            "starting_after is not a cursor this ledger gave".into(),
        )
    };
    let (micros, id) = cursor.split_once('_').ok_or_else(bad)?;
    let at = DateTime::from_timestamp_micros(micros.parse().map_err(|_| bad())?).ok_or_else(bad)?;
    Ok((at, id.to_owned()))
}

async fn list(
    State(db): State<PgPool>,
    Query(page): Query<Page>,
) -> Result<Json<Transactions>, ProviderError> {
    let limit = page.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let (after_time, after_id) = match (&page.starting_after, page.since) {
        (Some(cursor), _) => {
            let (at, id) = parse_cursor(cursor)?;
            (Some(at), id)
        }
        (None, since) => (since, String::new()),
    };
    // A union's columns have no table behind them, so their nullability is stated here: only
    // `charge_id` (a charge names none) and `failure_code` can be null.
    let mut data = sqlx::query_as!(
        Entry,
        r#"SELECT kind AS "kind!", id AS "id!", charge_id AS "charge_id?",
                  amount_cents AS "amount_cents!", currency AS "currency!",
                  reference AS "reference!", status AS "status!",
                  failure_code AS "failure_code?", created_at AS "created_at!: _"
             FROM (SELECT 'charge' AS kind, id, NULL::text AS charge_id, amount_cents, currency,
                          reference, status, failure_code, created_at FROM charges
                   UNION ALL
                   SELECT 'refund', id, charge_id, amount_cents, currency, reference, 'refunded',
                          NULL, created_at
                     FROM refunds) ledger
            WHERE (created_at, id) > (coalesce($1, '-infinity'::timestamptz), $2)
            ORDER BY created_at, id LIMIT $3"#,
        // The server crate's session store turns on sqlx's `time` types in a workspace build,
        // and the macros then expect those; the column's override above and this cast keep
        // chrono's (docs/decisions/0005-compile-checked-sql.md).
        after_time as _,
        after_id,
        limit + 1,
    )
    .fetch_all(&db)
    .await?;
    let has_more = data.len() as i64 > limit;
    data.truncate(limit as usize);
    let next_cursor = data.last().map(cursor_of).filter(|_| has_more);
    Ok(Json(Transactions {
        data,
        has_more,
        next_cursor,
    }))
}
