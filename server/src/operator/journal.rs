//! One order's story (`/operator/orders/{order_no}`) and the search that finds it
//! (`/operator/search?q=…`): docs/design.md, "The order journal".

use std::sync::Arc;

use app::site_files::SiteFiles;
use askama::Template;
use axum::{
    extract::{rejection::QueryRejection, Path, Query, State},
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
};
use serde::Deserialize;
use sqlx::PgPool;

use super::{auth::Operator, chrome::Chrome, pages::render};
use crate::{
    error::ApiError,
    journal::{self, Entry, Found, OrderHeading, View, Window},
};

#[derive(Template)]
#[template(path = "operator/journal.html")]
struct JournalPage {
    chrome: Chrome,
    order: OrderHeading,
    total: String,
    entries: Vec<Entry>,
    /// Whether only the order's and its money's entries are shown.
    money_only: bool,
    /// The entry a search matched, marked on the page.
    matched: Option<i64>,
    /// The links to the neighbouring pages, when the story goes on that way.
    earlier: Option<String>,
    later: Option<String>,
    /// This view's first and latest pages, and the other view's first page.
    first: String,
    latest: String,
    other_view: String,
}

/// Where a journal page starts, and what it shows: `?only=money`, and at most one of
/// `after`, `before` (entry ids: the neighbouring pages), `from` (a search's match) or
/// `latest`.
#[derive(Deserialize, Default)]
pub struct PageQuery {
    only: Option<String>,
    after: Option<i64>,
    before: Option<i64>,
    from: Option<i64>,
    latest: Option<String>,
}

impl PageQuery {
    fn view(&self) -> View {
        match self.only.as_deref() {
            Some("money") => View::Money,
            _ => View::All,
        }
    }

    fn window(&self) -> Window {
        match (self.after, self.before, self.from) {
            (Some(id), _, _) => Window::After(id),
            (_, Some(id), _) => Window::Before(id),
            (_, _, Some(id)) => Window::From(id),
            _ if self.latest.is_some() => Window::Latest,
            _ => Window::First,
        }
    }
}

pub async fn order_journal(
    operator: Operator,
    State(db): State<PgPool>,
    State(site): State<Arc<SiteFiles>>,
    Path(order_no): Path<String>,
    query: Result<Query<PageQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    // A query string no page has (a word for a number) is the story's first page.
    let query = query.map(|Query(query)| query).unwrap_or_default();
    let (view, window) = (query.view(), query.window());
    let Some(journal::Journal {
        order,
        entries,
        earlier,
        later,
    }) = journal::for_order(&db, &order_no, view, window).await?
    else {
        return Ok(not_found(&site, &operator).await);
    };
    let total = format!(
        "{}.{:02} {}",
        order.total_cents / 100,
        order.total_cents % 100,
        order.currency
    );
    let base = format!("/operator/orders/{}", order.order_no);
    let only = if view == View::Money {
        "only=money&"
    } else {
        ""
    };
    let link = |rest: String| format!("{base}?{only}{rest}");
    Ok(render(JournalPage {
        chrome: Chrome::operator(&site, &operator).await,
        money_only: view == View::Money,
        matched: match window {
            Window::From(id) => Some(id),
            _ => None,
        },
        earlier: earlier
            .then(|| entries.first())
            .flatten()
            .map(|e| link(format!("before={}", e.id))),
        later: later
            .then(|| entries.last())
            .flatten()
            .map(|e| link(format!("after={}", e.id))),
        first: match view {
            View::Money => format!("{base}?only=money"),
            View::All => base.clone(),
        },
        latest: link("latest=1".into()),
        other_view: match view {
            View::Money => base.clone(),
            View::All => format!("{base}?only=money"),
        },
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
        let journal = match only.entry {
            Some(entry) => format!("/operator/orders/{}?from={entry}#e{entry}", only.order_no),
            None => format!("/operator/orders/{}", only.order_no),
        };
        return Ok(Redirect::to(&journal).into_response());
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
