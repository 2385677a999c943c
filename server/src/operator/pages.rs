//! The console's pages and actions, after the login (`login`). Every action checks the form's CSRF token first and
//! answers with a redirect to its page; its short notice waits in the operator's session for
//! that page (never in the address, where a link made elsewhere could put any text).

use std::sync::Arc;

use app::site_files::SiteFiles;
use askama::Template;
use axum::{
    extract::{Path, State},
    http::{header, StatusCode},
    response::{Html, IntoResponse, Redirect, Response},
    Form,
};
use once_events::{dead_letters, Handler};
use serde::Deserialize;
use sqlx::PgPool;
use tower_sessions::Session;
use uuid::Uuid;

use super::{
    auth::{self, Operator},
    chrome::Chrome,
};
use crate::{error::ApiError, fulfillment::Fulfillment, reconcile, state::AppState};

#[derive(Deserialize)]
pub struct CsrfForm {
    pub(super) csrf: String,
}

pub(super) fn render(template: impl Template) -> Response {
    match template.render() {
        Ok(html) => Html(html).into_response(),
        Err(e) => ApiError::Internal(e.into()).into_response(),
    }
}

async fn back(session: &Session, to: &str, notice: &str) -> Response {
    auth::leave_notice(session, notice).await;
    Redirect::to(to).into_response()
}

pub(super) fn forbidden() -> Response {
    (
        StatusCode::FORBIDDEN,
        "the form's CSRF token is missing or wrong",
    )
        .into_response()
}

struct RunRow {
    started_at: chrono::DateTime<chrono::Utc>,
    status: String,
    charges_seen: i32,
    findings: i32,
    error: Option<String>,
}

#[derive(Template)]
#[template(path = "operator/reconciliation.html")]
struct ReconciliationPage {
    chrome: Chrome,
    findings: Vec<reconcile::FindingRow>,
    runs: Vec<RunRow>,
}

pub async fn reconciliation(
    operator: Operator,
    State(db): State<PgPool>,
    State(site): State<Arc<SiteFiles>>,
) -> Result<Response, ApiError> {
    let findings = reconcile::list_findings(&db).await?;
    let runs = sqlx::query_as!(
        RunRow,
        // sqlx's `time` feature is on too (through a dependency), and would map timestamptz
        // to `time::OffsetDateTime` by default.
        r#"SELECT started_at AS "started_at: chrono::DateTime<chrono::Utc>", status, charges_seen, findings, error FROM reconcile_runs ORDER BY started_at DESC LIMIT 20"#,
    )
    .fetch_all(&db)
    .await?;
    Ok(render(ReconciliationPage {
        chrome: Chrome::operator(&site, &operator).await,
        findings,
        runs,
    }))
}

pub async fn run_reconciler(
    operator: Operator,
    State(state): State<AppState>,
    Form(form): Form<CsrfForm>,
) -> Response {
    if !auth::csrf_ok(&operator.session, &form.csrf).await {
        return forbidden();
    }
    // Its own task: a request abandoned halfway (a closed tab, a proxy timeout) does not
    // cut the run short between a repair and its record.
    let reconciler = crate::workers::Context::of(&state).reconciler();
    let run = tokio::spawn(async move { reconciler.try_execute_task().await }).await;
    let notice = match run {
        Ok(Ok(Some(run))) => format!(
            "Run finished: {} charges seen, {} new findings.",
            run.charges_seen, run.findings
        ),
        Ok(Ok(None)) => "Another run is under way.".to_owned(),
        Ok(Err(e)) => format!("The run failed: {e}"),
        Err(e) => format!("The run failed: {e}"),
    };
    back(&operator.session, "/operator/reconciliation", &notice).await
}

pub async fn resolve_finding(
    operator: Operator,
    State(db): State<PgPool>,
    Path(id): Path<Uuid>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ApiError> {
    if !auth::csrf_ok(&operator.session, &form.csrf).await {
        return Ok(forbidden());
    }
    let notice = if reconcile::resolve_finding(&db, id).await? {
        "Finding resolved."
    } else {
        "That finding is not open."
    };
    Ok(back(&operator.session, "/operator/reconciliation", notice).await)
}

pub async fn refund_finding(
    operator: Operator,
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ApiError> {
    if !auth::csrf_ok(&operator.session, &form.csrf).await {
        return Ok(forbidden());
    }
    let notice =
        match reconcile::refund_finding(&crate::workers::Context::of(&state).reconciler(), id)
            .await?
        {
            true => "Refunded, and the finding is resolved.",
            false => "That finding has no charge to refund, or is not open.",
        };
    Ok(back(&operator.session, "/operator/reconciliation", notice).await)
}

#[derive(Template)]
#[template(path = "operator/dead_letters.html")]
struct DeadLettersPage {
    chrome: Chrome,
    letters: Vec<dead_letters::DeadLetter>,
}

pub async fn dead_letters(
    operator: Operator,
    State(db): State<PgPool>,
    State(site): State<Arc<SiteFiles>>,
) -> Result<Response, ApiError> {
    let letters = dead_letters::list(&db).await?;
    Ok(render(DeadLettersPage {
        chrome: Chrome::operator(&site, &operator).await,
        letters,
    }))
}

pub async fn retry_dead_letter(
    operator: Operator,
    State(db): State<PgPool>,
    Path(id): Path<Uuid>,
    Form(form): Form<CsrfForm>,
) -> Response {
    if !auth::csrf_ok(&operator.session, &form.csrf).await {
        return forbidden();
    }
    let handler: Arc<dyn Handler> = Arc::new(Fulfillment);
    let notice = match dead_letters::retry(&db, &handler, id).await {
        Ok(handled) => format!("Retried: {handled:?}."),
        Err(e) => format!("Not retried: {e}"),
    };
    back(&operator.session, "/operator/dead-letters", &notice).await
}

pub async fn discard_dead_letter(
    operator: Operator,
    State(db): State<PgPool>,
    Path(id): Path<Uuid>,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ApiError> {
    if !auth::csrf_ok(&operator.session, &form.csrf).await {
        return Ok(forbidden());
    }
    let notice = if dead_letters::discard(&db, id).await? {
        "Discarded."
    } else {
        "That dead letter is not waiting."
    };
    Ok(back(&operator.session, "/operator/dead-letters", notice).await)
}

struct EmailRow {
    id: Uuid,
    recipient: String,
    subject: String,
    status: String,
    created_at: chrono::DateTime<chrono::Utc>,
}

#[derive(Template)]
#[template(path = "operator/emails.html")]
struct EmailsPage {
    chrome: Chrome,
    emails: Vec<EmailRow>,
}

pub async fn emails(
    operator: Operator,
    State(db): State<PgPool>,
    State(site): State<Arc<SiteFiles>>,
) -> Result<Response, ApiError> {
    let emails = sqlx::query_as!(
        EmailRow,
        // As for the runs: chrono, not the `time` crate sqlx would pick by default.
        r#"SELECT id, recipient, subject, status, created_at AS "created_at: chrono::DateTime<chrono::Utc>"
             FROM emails ORDER BY created_at DESC LIMIT 100"#,
    )
    .fetch_all(&db)
    .await?;
    Ok(render(EmailsPage {
        chrome: Chrome::operator(&site, &operator).await,
        emails,
    }))
}

/// One email as the shopper got it (sandboxed: nothing in it runs on this origin).
pub async fn email(
    _operator: Operator,
    State(db): State<PgPool>,
    Path(id): Path<Uuid>,
) -> Result<Response, ApiError> {
    let html = sqlx::query_scalar!("SELECT html_body FROM emails WHERE id = $1", id)
        .fetch_optional(&db)
        .await?
        .ok_or(ApiError::NotFound)?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, "sandbox"),
        ],
        html,
    )
        .into_response())
}
