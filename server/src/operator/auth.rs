//! Who may use the console: an operator who logged in with `OPERATOR_PASSWORD` in this
//! session. Shoppers' sessions never carry the mark, so they never reach a page or an
//! action. Every form carries the session's CSRF token, checked in constant time, and the
//! password is compared in constant time too (as digests, so its length does not leak).

use axum::http::StatusCode;
use axum::{
    extract::FromRequestParts,
    http::request::Parts,
    response::{IntoResponse, Redirect, Response},
};
use rand::distr::{Alphanumeric, SampleString};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;
use tower_sessions::Session;

const OPERATOR: &str = "operator";
const CSRF: &str = "operator_csrf";
const NOTICE: &str = "operator_notice";

/// Whether `given` is the operator password: compared as SHA-256 digests in constant time.
pub fn password_matches(expected: &str, given: &str) -> bool {
    let (a, b) = (
        Sha256::digest(expected.as_bytes()),
        Sha256::digest(given.as_bytes()),
    );
    a.ct_eq(&b).into()
}

/// A random secret: the generated password, or a CSRF token.
pub fn random_secret(len: usize) -> String {
    Alphanumeric.sample_string(&mut rand::rng(), len)
}

/// The session's CSRF token, made on first use.
pub async fn csrf_token(session: &Session) -> Result<String, Response> {
    if let Ok(Some(token)) = session.get::<String>(CSRF).await {
        return Ok(token);
    }
    let token = random_secret(32);
    session
        .insert(CSRF, &token)
        .await
        .map_err(|_| unavailable())?;
    Ok(token)
}

/// Whether a form's token is the session's.
pub async fn csrf_ok(session: &Session, given: &str) -> bool {
    match session.get::<String>(CSRF).await {
        Ok(Some(token)) => token.as_bytes().ct_eq(given.as_bytes()).into(),
        _ => false,
    }
}

/// Marks the session as an operator's, under a new session id (no fixation).
pub async fn log_in(session: &Session) -> Result<(), Response> {
    session.cycle_id().await.map_err(|_| unavailable())?;
    session
        .insert(OPERATOR, true)
        .await
        .map_err(|_| unavailable())?;
    session
        .insert(CSRF, random_secret(32))
        .await
        .map_err(|_| unavailable())
}

/// A notice for the next page the operator sees (an action's outcome).
pub async fn leave_notice(session: &Session, text: &str) {
    let _ = session.insert(NOTICE, text).await;
}

/// The notice left for this page, shown once. The session is changed (and so saved) only
/// when there is one: a page that saved its session on every view could write back a
/// session that a logout in another tab had just ended.
pub async fn take_notice(session: &Session) -> Option<String> {
    let notice = session.get::<String>(NOTICE).await.ok().flatten()?;
    let _ = session.remove::<String>(NOTICE).await;
    Some(notice)
}

/// Ends the operator's session in the store, not only in this browser: a copy of its
/// cookie names nothing afterwards, and no notice is left for whoever logs in next.
pub async fn log_out(session: &Session) {
    let _ = session.flush().await;
}

fn unavailable() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "the session store is unavailable",
    )
        .into_response()
}

/// A request from a logged-in operator. Pages without it redirect to the login; actions
/// (POST) without it are refused with 403.
pub struct Operator {
    pub session: Session,
    pub csrf: String,
}

impl<S: Send + Sync> FromRequestParts<S> for Operator {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        let refuse = |parts: &Parts| {
            if parts.method.is_safe() {
                Redirect::to("/operator/login").into_response()
            } else {
                (StatusCode::FORBIDDEN, "operators only").into_response()
            }
        };
        let Some(session) = parts.extensions.get::<Session>().cloned() else {
            return Err(refuse(parts));
        };
        match session.get::<bool>(OPERATOR).await {
            Ok(Some(true)) => {}
            _ => return Err(refuse(parts)),
        }
        let csrf = csrf_token(&session).await?;
        Ok(Self { session, csrf })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_password_matches_whatever_its_length() {
        assert!(password_matches("correct horse", "correct horse"));
        assert!(!password_matches("correct horse", "correct hors"));
        assert!(!password_matches("correct horse", ""));
        assert!(!password_matches("correct horse", &"x".repeat(10_000)));
    }
}
