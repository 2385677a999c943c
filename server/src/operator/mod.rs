//! The operator console, `/operator`: server-rendered with askama (no wasm), behind a login
//! ([`auth`]). It shows what an operator of this shop looks at: outbox and consumer lag,
//! dead letters, idempotency keys and payments by state, reconciliation runs and findings,
//! callback anomalies and recent emails, charts of the last hours ([`samples`], drawn by
//! `charts`), and one order's whole story (`journal`, found by any of its identifiers); and
//! it offers the actions on them: run the reconciler, resolve or refund a finding, retry or
//! discard a dead letter. Failed logins are throttled ([`throttle`]).

pub mod auth;
mod browsers;
mod charts;
mod chrome;
mod cookies;
mod figures;
mod journal;
mod login;
mod login_token;
mod overview;
mod pages;
pub mod samples;
pub mod throttle;

use axum::{
    routing::{get, post},
    Router,
};

use crate::state::AppState;

pub use browsers::{
    enrol as enrol_browser, forget_unused as forget_unused_browsers,
    LINK_MINUTES as BROWSER_LINK_MINUTES,
};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/operator/login", get(login::login_page).post(login::login))
        .route("/operator/login/link", post(login::take_link))
        .route("/operator/logout", post(login::logout))
        .route("/operator", get(overview::overview))
        .route("/operator/search", get(journal::search))
        .route("/operator/orders/{order_no}", get(journal::order_journal))
        .route("/operator/reconciliation", get(pages::reconciliation))
        .route("/operator/reconciliation/run", post(pages::run_reconciler))
        .route(
            "/operator/findings/{id}/resolve",
            post(pages::resolve_finding),
        )
        .route(
            "/operator/findings/{id}/refund",
            post(pages::refund_finding),
        )
        .route("/operator/dead-letters", get(pages::dead_letters))
        .route(
            "/operator/dead-letters/{id}/retry",
            post(pages::retry_dead_letter),
        )
        .route(
            "/operator/dead-letters/{id}/discard",
            post(pages::discard_dead_letter),
        )
        .route("/operator/emails", get(pages::emails))
        .route("/operator/emails/{id}", get(pages::email))
}
