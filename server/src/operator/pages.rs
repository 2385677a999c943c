//! The console's pages and actions. Every action checks the form's CSRF token first and
//! answers with a redirect to its page; its short notice waits in the operator's session for
//! that page (never in the address, where a link made elsewhere could put any text).

use std::sync::Arc;

use app::site_files::SiteFiles;
use askama::Template;
use axum::{
    extract::{Path, State},
    http::{header, HeaderMap, StatusCode},
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
    browsers::{self, Browser},
    chrome::Chrome,
    login_token,
    throttle::{self, Admission, Client, Locks},
};
use crate::{error::ApiError, fulfillment::Fulfillment, reconcile, state::AppState};

#[derive(Deserialize)]
pub struct CsrfForm {
    csrf: String,
}

#[derive(Deserialize)]
pub struct LoginForm {
    csrf: String,
    password: String,
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

fn forbidden() -> Response {
    (
        StatusCode::FORBIDDEN,
        "the form's CSRF token is missing or wrong",
    )
        .into_response()
}

#[derive(Template)]
#[template(path = "operator/login.html")]
struct LoginPage {
    chrome: Chrome,
}

/// The login form; its token is kept in a cookie, so looking at it stores nothing.
pub async fn login_page(State(state): State<AppState>, headers: HeaderMap) -> Response {
    login_form(&state, &headers, None)
}

/// The login form with `notice`, its token renewed in its cookie.
fn login_form(state: &AppState, headers: &HeaderMap, notice: Option<String>) -> Response {
    let (csrf, cookie) = login_token::issue(headers, state.config.served_over_https);
    let page = LoginPage {
        chrome: Chrome::visitor(&state.site, csrf, notice),
    };
    ([(header::SET_COOKIE, cookie)], render(page)).into_response()
}

/// The login: counted by the throttle before the password is looked at, and refused
/// unchecked while a lock holds (docs/design.md, "The operator console").
pub async fn login(
    State(state): State<AppState>,
    Client(client): Client,
    session: Session,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if !login_token::matches(&headers, &form.csrf) {
        // Not the form this browser was given (another site's, or one kept too long): the
        // form again, nothing checked.
        let notice = "That login form had expired: please enter the password again.";
        let form = login_form(&state, &headers, Some(notice.into()));
        return (StatusCode::FORBIDDEN, form).into_response();
    }
    let (client, browser, admission) = match admit(&state, &headers, client).await {
        Ok(admitted) => admitted,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let locks = match admission {
        Admission::Checked(locks) => locks,
        Admission::Refused { retry_after_secs } => {
            return locked_out(&state.site, retry_after_secs)
        }
    };
    let right = password_ok(&state, form.password).await;
    throttle::report(&state.metrics, &client, &locks, right);
    if !right {
        return wrong_password(&state.site, form.csrf, &locks);
    }
    if let Err(e) = throttle::forget(&state.db, &client).await {
        tracing::warn!(error = %e, "operator console: this address's failed logins stay counted");
    }
    if let Err(response) = auth::log_in(&session).await {
        return response;
    }
    match browsers::remember(&state.db, &state.config, browser.as_ref()).await {
        Ok(cookie) => ([(header::SET_COOKIE, cookie)], Redirect::to("/operator")).into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "operator console: this browser is not remembered");
            Redirect::to("/operator").into_response()
        }
    }
}

/// Counts the attempt: under the browser, when it is one an operator logged in from, else
/// under its address and with every client. The name it was counted under is returned.
async fn admit(
    state: &AppState,
    headers: &HeaderMap,
    address: String,
) -> Result<(String, Option<Browser>, Admission), sqlx::Error> {
    let limits = &state.config.login_limits;
    match browsers::known(&state.db, &state.config, headers).await? {
        Some(browser) => {
            let client = browser.throttle_key();
            let admission = throttle::admit_browser(&state.db, &client, limits).await?;
            Ok((client, Some(browser), admission))
        }
        None => {
            let admission = throttle::admit(&state.db, &address, limits).await?;
            Ok((address, None, admission))
        }
    }
}

/// The password check, off the runtime's threads (an argon2 hash costs milliseconds).
async fn password_ok(state: &AppState, given: String) -> bool {
    let config = state.config.clone();
    tokio::task::spawn_blocking(move || auth::password_ok(&config, &given))
        .await
        .unwrap_or(false)
}

/// The form again, with the token its cookie still carries; nothing is stored.
fn wrong_password(site: &SiteFiles, csrf: String, locks: &Locks) -> Response {
    let notice = match locks.address.max(locks.every_client) {
        Some(secs) => format!(
            "Wrong password. Too many failed logins: none is checked for {}.",
            wait_words(secs)
        ),
        None => "Wrong password.".into(),
    };
    let page = LoginPage {
        chrome: Chrome::visitor(site, csrf, Some(notice)),
    };
    (StatusCode::UNAUTHORIZED, render(page)).into_response()
}

#[derive(Template)]
#[template(path = "operator/locked.html")]
struct LockedPage {
    chrome: Chrome,
    until: String,
    wait: String,
}

/// 429 with `Retry-After`, and a page that says when to come back.
fn locked_out(site: &SiteFiles, retry_after_secs: u64) -> Response {
    let until = chrono::Utc::now() + chrono::Duration::seconds(retry_after_secs as i64);
    let page = LockedPage {
        chrome: Chrome::visitor(site, String::new(), None),
        until: until.format("%H:%M:%S UTC").to_string(),
        wait: wait_words(retry_after_secs),
    };
    (
        StatusCode::TOO_MANY_REQUESTS,
        [(header::RETRY_AFTER, retry_after_secs.to_string())],
        render(page),
    )
        .into_response()
}

fn wait_words(secs: u64) -> String {
    match secs {
        1 => "1 second".into(),
        0..=119 => format!("{secs} seconds"),
        _ => format!("{} minutes", secs.div_ceil(60)),
    }
}

pub async fn logout(operator: Operator, Form(form): Form<CsrfForm>) -> Response {
    if !auth::csrf_ok(&operator.session, &form.csrf).await {
        return forbidden();
    }
    auth::log_out(&operator.session).await;
    Redirect::to("/operator/login").into_response()
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
