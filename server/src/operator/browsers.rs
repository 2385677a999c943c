//! Browsers an operator has logged in from: the console's second factor of trust, which a
//! crowd of guessers lacks (docs/design.md, "The operator console"). The right password
//! gives the browser a secret in a cookie (`once_operator_browser`, sent to the login only,
//! kept 90 days); its SHA-256 is stored in `operator_browsers`. A login that carries a
//! known secret is counted under that browser alone (`throttle::admit_browser`), so guesses
//! from every address together cannot lock the operator out of a browser they do not hold,
//! while a stolen cookie still buys one address's share of guesses, no more.

use axum::http::{header, HeaderMap, HeaderValue};
use sha2::{Digest, Sha256};
use sqlx::PgPool;

use crate::credentials::random_secret;

const COOKIE: &str = "once_operator_browser";
/// How long a browser stays known without a login.
const KEPT_DAYS: i32 = 90;
/// The length of a browser's secret, in alphanumeric characters.
const SECRET_LEN: usize = 43;

/// A browser known by its secret, named in the throttle by a short part of its digest.
pub struct Browser {
    secret_sha256: String,
}

impl Browser {
    /// The throttle's name for this browser's attempts (no address is spelled so).
    pub fn throttle_key(&self) -> String {
        format!("browser:{}", &self.secret_sha256[..16])
    }
}

fn digest(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// The browser that sent `headers`, if its secret is one a login gave.
pub async fn known(db: &PgPool, headers: &HeaderMap) -> Result<Option<Browser>, sqlx::Error> {
    let Some(secret) = secret_in(headers) else {
        return Ok(None);
    };
    let secret_sha256 = digest(secret);
    let known = sqlx::query_scalar!(
        "SELECT secret_sha256 FROM operator_browsers
          WHERE secret_sha256 = $1 AND last_login_at > now() - make_interval(days => $2)",
        secret_sha256,
        KEPT_DAYS
    )
    .fetch_optional(db)
    .await?;
    Ok(known.map(|secret_sha256| Browser { secret_sha256 }))
}

fn secret_in(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(name, value)| (name == COOKIE && value.len() == SECRET_LEN).then_some(value))
}

/// After the right password: the browser's login is recorded (a known one) or it becomes
/// known; the `Set-Cookie` that gives it its secret, when it is new.
pub async fn remember(
    db: &PgPool,
    browser: Option<&Browser>,
    https: bool,
) -> Result<Option<HeaderValue>, sqlx::Error> {
    if let Some(browser) = browser {
        sqlx::query!(
            "UPDATE operator_browsers SET last_login_at = now() WHERE secret_sha256 = $1",
            browser.secret_sha256
        )
        .execute(db)
        .await?;
        return Ok(None);
    }
    let secret = random_secret(SECRET_LEN);
    sqlx::query!(
        "INSERT INTO operator_browsers (secret_sha256) VALUES ($1)",
        digest(&secret)
    )
    .execute(db)
    .await?;
    let secure = if https { "; Secure" } else { "" };
    let max_age = i64::from(KEPT_DAYS) * 86_400;
    let cookie = format!(
        "{COOKIE}={secret}; Path=/operator/login; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}"
    );
    Ok(Some(
        HeaderValue::from_str(&cookie).expect("a secret is alphanumeric"),
    ))
}

/// Forgets browsers without a login for [`KEPT_DAYS`].
pub async fn forget_unused(db: &PgPool) -> Result<u64, sqlx::Error> {
    let forgotten = sqlx::query!(
        "DELETE FROM operator_browsers WHERE last_login_at < now() - make_interval(days => $1)",
        KEPT_DAYS
    )
    .execute(db)
    .await?;
    Ok(forgotten.rows_affected())
}
