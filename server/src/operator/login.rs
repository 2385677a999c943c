//! The console's way in and out: the login form, the login (throttled, and counted under
//! a browser the operator used before), the pages that refuse it, and the logout
//! (docs/design.md, "The operator console").

use app::site_files::SiteFiles;
use askama::Template;
use axum::{
    extract::{Query, State},
    http::{header, HeaderMap, StatusCode},
    response::{IntoResponse, Redirect, Response},
    Form,
};
use serde::Deserialize;
use tower_sessions::Session;

use super::{
    auth::{self, Operator},
    browsers::{self, Browser, Link},
    chrome::Chrome,
    login_token,
    pages::{forbidden, render, CsrfForm},
    throttle::{self, Admission, Client, Locks},
};
use crate::{error::ApiError, state::AppState};

#[derive(Deserialize)]
pub struct LoginForm {
    csrf: String,
    password: String,
}

#[derive(Template)]
#[template(path = "operator/login.html")]
struct LoginPage {
    chrome: Chrome,
}

#[derive(Deserialize)]
pub struct LinkQuery {
    /// The secret of a link from `server operator-browser` (`browsers::enrol`).
    browser: Option<String>,
}

/// The login form; its token is kept in a cookie, so looking at it stores nothing. Opened
/// through a link from `server operator-browser`, it shows the link's button instead
/// ([`take_link`]): fetching the page takes nothing, so a link preview or a prefetch cannot
/// use the link up.
pub async fn login_page(
    State(state): State<AppState>,
    headers: HeaderMap,
    Query(link): Query<LinkQuery>,
) -> Response {
    let Some(secret) = link.browser else {
        return login_form(&state, &headers, None);
    };
    match browsers::link_state(&state.db, &state.config, &headers, &secret).await {
        Ok(Link::Waiting) => link_page(&state, &headers, secret),
        // Opened again by the browser it let in (a reload): nothing to say.
        Ok(Link::TakenHere) => Redirect::to("/operator/login").into_response(),
        Ok(Link::Gone) => login_form(&state, &headers, Some(LINK_GONE.into())),
        Err(e) => ApiError::from(e).into_response(),
    }
}

const LINK_GONE: &str = "That link lets no browser in: another browser took it (if that was \
                         not you, someone else has it), it is older than 15 minutes, or it \
                         was made under another password. Run server operator-browser for a \
                         new one.";

#[derive(Template)]
#[template(path = "operator/link.html")]
struct LinkPage {
    chrome: Chrome,
    link: String,
}

/// The link's page: one button that takes it for this browser.
fn link_page(state: &AppState, headers: &HeaderMap, link: String) -> Response {
    let (csrf, cookie) = login_token::issue(headers, state.config.served_over_https);
    let page = LinkPage {
        chrome: Chrome::visitor(&state.site, csrf, None),
        link,
    };
    ([(header::SET_COOKIE, cookie)], render(page)).into_response()
}

#[derive(Deserialize)]
pub struct TakeLinkForm {
    csrf: String,
    browser: String,
}

/// The link's button: this browser takes the link (a secret of its own, which uses the link
/// up) and is sent to the plain form, so the link leaves the address bar.
pub async fn take_link(
    State(state): State<AppState>,
    headers: HeaderMap,
    Form(form): Form<TakeLinkForm>,
) -> Response {
    if !login_token::matches(&headers, &form.csrf) {
        let notice = "That page had expired: please open the link again.";
        return not_this_form(&state, &headers, notice);
    }
    match browsers::from_link(&state.db, &state.config, &form.browser).await {
        Ok(Some(cookie)) => {
            let to_form = Redirect::to("/operator/login");
            ([(header::SET_COOKIE, cookie)], to_form).into_response()
        }
        // A second press by the browser that took it (a double click): nothing to say.
        Ok(None) => {
            match browsers::link_state(&state.db, &state.config, &headers, &form.browser).await {
                Ok(Link::TakenHere) => Redirect::to("/operator/login").into_response(),
                Ok(_) => login_form(&state, &headers, Some(LINK_GONE.into())),
                Err(e) => ApiError::from(e).into_response(),
            }
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// The answer to a form this browser was not given (another site's, or one kept too long):
/// the login form again with `notice`, 403, nothing checked; a program that asked for no
/// page is told in problem+json.
fn not_this_form(state: &AppState, headers: &HeaderMap, notice: &str) -> Response {
    if !crate::refusals::wants_page(headers) {
        return ApiError::CrossSite.into_response();
    }
    let form = login_form(state, headers, Some(notice.into()));
    (StatusCode::FORBIDDEN, form).into_response()
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
        let notice = "That login form had expired: please enter the password again.";
        return not_this_form(&state, &headers, notice);
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
