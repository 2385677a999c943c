//! Who may use the console: an operator who logged in with the operator password in this
//! session. Shoppers' sessions never carry the mark, so they never reach a page or an
//! action. Every form carries the session's CSRF token, checked in constant time. The
//! password is configured in plain text (`OPERATOR_PASSWORD`, compared as digests in
//! constant time, so its length does not leak) or as an argon2 hash
//! (`OPERATOR_PASSWORD_HASH`, so the configuration holds no password).

use axum::http::StatusCode;
use axum::{
    extract::FromRequestParts,
    http::request::Parts,
    response::{IntoResponse, Redirect, Response},
};
use subtle::ConstantTimeEq;
use tower_sessions::Session;

use crate::{
    config::Config,
    credentials::{hash_matches, random_secret, secret_matches},
};

const OPERATOR: &str = "operator";
const CSRF: &str = "operator_csrf";
const NOTICE: &str = "operator_notice";

/// Whether `given` is the operator password, as configured: its argon2 hash, or the plain
/// password. Checking a hash takes tens of milliseconds of CPU: call it off the runtime's
/// threads.
pub fn password_ok(config: &Config, given: &str) -> bool {
    match (&config.operator_password_hash, &config.operator_password) {
        (Some(hash), _) => hash_matches(hash, given),
        (None, Some(password)) => !password.is_empty() && secret_matches(password, given),
        (None, None) => false,
    }
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
    use crate::credentials::{check_password_hash, hash_password};

    #[test]
    fn only_the_secret_matches_whatever_its_length() {
        assert!(secret_matches("correct horse", "correct horse"));
        assert!(!secret_matches("correct horse", "correct hors"));
        assert!(!secret_matches("correct horse", ""));
        assert!(!secret_matches("correct horse", &"x".repeat(10_000)));
    }

    #[test]
    fn a_hash_matches_only_its_password() {
        let hash = hash_password("correct horse").unwrap();
        assert!(hash.starts_with("$argon2id$"), "{hash}");
        assert_eq!(check_password_hash(&hash), Ok(()));
        assert!(hash_matches(&hash, "correct horse"));
        assert!(!hash_matches(&hash, "correct hors"));
        assert_ne!(hash, hash_password("correct horse").unwrap(), "salted");
    }
}
