//! The console's first page: the figures of now (`figures`), and the last hours drawn from
//! the samples (`samples`, `charts`).

use std::sync::Arc;

use app::site_files::SiteFiles;
use askama::Template;
use axum::{extract::State, response::Response};
use chrono::{DateTime, Utc};
use sqlx::PgPool;

use super::{
    auth::Operator,
    charts::{Chart, Series},
    chrome::Chrome,
    figures,
    pages::render,
    samples::{self, Sample},
};
use crate::error::ApiError;

/// How far back the charts look.
const HOURS: i32 = 6;

#[derive(Template)]
#[template(path = "operator/overview.html")]
struct OverviewPage {
    chrome: Chrome,
    figures: Vec<(String, String)>,
    charts: Vec<Chart>,
    hours: i32,
}

pub async fn overview(
    operator: Operator,
    State(db): State<PgPool>,
    State(site): State<Arc<SiteFiles>>,
) -> Result<Response, ApiError> {
    let figures = figures::read(&db).await?;
    let samples = samples::since(&db, HOURS).await?;
    Ok(render(OverviewPage {
        chrome: Chrome::operator(&site, &operator).await,
        figures,
        charts: charts(&samples, Utc::now()),
        hours: HOURS,
    }))
}

/// The overview's charts over the `HOURS` before `now`.
fn charts(samples: &[Sample], now: DateTime<Utc>) -> Vec<Chart> {
    let times: Vec<DateTime<Utc>> = samples.iter().map(|s| s.at).collect();
    let window = (now - chrono::Duration::hours(HOURS.into()), now);
    let values = |f: fn(&Sample) -> Option<f64>| samples.iter().map(f).collect();
    let line = |name, class, f| Series {
        name,
        class,
        values: values(f),
    };
    let draw = |title, series| Chart::draw(title, series, &times, window);
    vec![
        draw(
            "Outbox lag (seconds)",
            vec![line("oldest unpublished event", "line-a", |s| {
                Some(s.outbox_lag_ms as f64 / 1000.0)
            })],
        ),
        draw(
            "Deliveries waiting",
            vec![
                line("PostgreSQL bus", "line-a", |s| {
                    Some(s.deliveries_waiting_pg.into())
                }),
                line("JetStream (pending + unacked)", "line-b", |s| {
                    s.deliveries_waiting_js.map(f64::from)
                }),
            ],
        ),
        draw(
            "Dead letters waiting",
            vec![line("dead letters", "line-c", |s| {
                Some(s.dead_letters.into())
            })],
        ),
        draw(
            "Requests per minute",
            vec![
                line("executed", "line-a", |s| Some(s.new_keys.into())),
                line("replayed", "line-b", |s| Some(s.replays.into())),
                line("409 in progress", "line-c", |s| Some(s.in_progress.into())),
                line("422 key reused", "line-d", |s| Some(s.key_reused.into())),
            ],
        ),
    ]
}
