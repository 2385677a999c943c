//! One order's story (`/operator/orders/{order_no}`) and the search that finds it
//! (`/operator/search?q=…`): docs/design.md, "The order journal".

use std::sync::Arc;

use app::site_files::SiteFiles;
use askama::Template;
use axum::{
    extract::{Path, Query, State},
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;
use sqlx::PgPool;

use super::{auth::Operator, chrome::Chrome, pages::render};
use crate::{
    error::ApiError,
    journal::{self, Entry, Found, OrderHeading},
};

#[derive(Template)]
#[template(path = "operator/journal.html")]
struct JournalPage {
    chrome: Chrome,
    order: OrderHeading,
    total: String,
    entries: Vec<Entry>,
    hidden: i64,
    gap_at: usize,
}

pub async fn order_journal(
    operator: Operator,
    State(db): State<PgPool>,
    State(site): State<Arc<SiteFiles>>,
    Path(order_no): Path<String>,
) -> Result<Response, ApiError> {
    let Some(journal::Journal {
        order,
        entries,
        hidden,
        gap_at,
    }) = journal::for_order(&db, &order_no).await?
    else {
        return Ok(not_found(&site, &operator).await);
    };
    let total = format!(
        "{}.{:02} {}",
        order.total_cents / 100,
        order.total_cents % 100,
        order.currency
    );
    Ok(render(JournalPage {
        chrome: Chrome::operator(&site, &operator).await,
        hidden,
        gap_at,
        order,
        total,
        entries,
    }))
}

#[derive(Deserialize)]
pub struct SearchQuery {
    #[serde(default)]
    q: String,
}

#[derive(Template)]
#[template(path = "operator/search.html")]
struct SearchPage {
    chrome: Chrome,
    /// Whether anything was searched for (never what: it is not shown back).
    searched: bool,
    found: Vec<Found>,
}

/// One order found: its journal. Several (a key used in two sessions) or none: a list.
pub async fn search(
    operator: Operator,
    State(db): State<PgPool>,
    State(site): State<Arc<SiteFiles>>,
    Query(SearchQuery { q }): Query<SearchQuery>,
) -> Result<Response, ApiError> {
    let found = journal::search(&db, &q).await?;
    if let [only] = found.as_slice() {
        return Ok(Redirect::to(&format!("/operator/orders/{}", only.order_no)).into_response());
    }
    let status = if found.is_empty() && !q.trim().is_empty() {
        StatusCode::NOT_FOUND
    } else {
        StatusCode::OK
    };
    let page = SearchPage {
        chrome: Chrome::operator(&site, &operator).await,
        searched: !q.trim().is_empty(),
        found,
    };
    Ok((status, render(page)).into_response())
}

async fn not_found(site: &SiteFiles, operator: &Operator) -> Response {
    let page = SearchPage {
        chrome: Chrome::operator(site, operator).await,
        searched: true,
        found: vec![],
    };
    (StatusCode::NOT_FOUND, render(page)).into_response()
}
