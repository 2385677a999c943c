//! `GET /v1/transactions?starting_after=<tx_no>&limit=<n>`: the provider's ledger, oldest
//! first, cursor-paginated, so a merchant can reconcile its books against ours.

use axum::{
    extract::{Query, State},
    routing::get,
    Json, Router,
};
use serde::{Deserialize, Serialize};
use sqlx::PgPool;

use crate::{
    charges::{Charge, CHARGE_COLUMNS},
    error::ProviderError,
    startup::ProviderState,
};

const MAX_PAGE: i64 = 100;

pub fn router() -> Router<ProviderState> {
    Router::new().route("/v1/transactions", get(list))
}

#[derive(Deserialize)]
struct Page {
    starting_after: Option<i64>,
    limit: Option<i64>,
}

#[derive(Serialize)]
struct Transactions {
    data: Vec<Charge>,
    has_more: bool,
    next_cursor: Option<i64>,
}

async fn list(
    State(db): State<PgPool>,
    Query(page): Query<Page>,
) -> Result<Json<Transactions>, ProviderError> {
    let limit = page.limit.unwrap_or(50).clamp(1, MAX_PAGE);
    let mut data: Vec<Charge> = sqlx::query_as(&format!(
        "SELECT {CHARGE_COLUMNS} FROM charges WHERE tx_no > $1 ORDER BY tx_no LIMIT $2"
    ))
    .bind(page.starting_after.unwrap_or(0))
    .bind(limit + 1)
    .fetch_all(&db)
    .await?;
    let has_more = data.len() as i64 > limit;
    data.truncate(limit as usize);
    let next_cursor = data.last().map(|c| c.tx_no).filter(|_| has_more);
    Ok(Json(Transactions {
        data,
        has_more,
        next_cursor,
    }))
}
