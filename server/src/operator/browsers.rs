//! Browsers an operator has logged in from: the console's second factor of trust, which a
//! crowd of guessers lacks (docs/design.md, "The operator console"). The right password
//! gives the browser a secret in a cookie (`once_operator_browser`, sent to the login only,
//! kept 90 days); its SHA-256 is stored in `operator_browsers`. A login that carries a
//! known secret is counted under that browser alone (`throttle::admit_browser`), so guesses
//! from every address together cannot lock the operator out of a browser they do not hold,
//! while a stolen cookie still buys one address's share of guesses, no more.
//!
//! A browser the operator never used gets in the same way through a link that someone who
//! can run commands on the server makes (`server operator-browser`, [`enrol`]): the first
//! browser that takes it (a press of the button its page shows, within [`LINK_MINUTES`];
//! fetching the page takes nothing, so a link preview cannot use it up) gets a secret of
//! its own in place of the link's ([`from_link`]); the password is still needed. The link's
//! own secret is no browser's, so a leaked link lets in one browser at most, and never a
//! second one beside the operator's.

use axum::http::{HeaderMap, HeaderValue};
use sha2::{Digest, Sha256};
use sqlx::PgPool;

use crate::{config::Config, credentials::random_secret};

const COOKIE: &str = "once_operator_browser";
/// How long a browser stays known without a login.
const KEPT_DAYS: i32 = 90;
/// The most browsers known at once; a new one past it forgets the longest unused. Whoever
/// knew the password can hold at most this many shares of guesses, and only until the
/// password changes.
const MOST_BROWSERS: i64 = 10;
/// The length of a browser's secret, in alphanumeric characters.
const SECRET_LEN: usize = 43;
/// How long a link from [`enrol`] lets a new browser in.
pub const LINK_MINUTES: i32 = 15;

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

/// What is stored of a secret: its digest together with the password as configured (its
/// hash, or the plain one), so that a new password forgets every browser, and the table
/// holds nothing a guess of the password could be checked against without the secret.
fn digest(config: &Config, secret: &str) -> String {
    let password = config
        .operator_password_hash
        .as_deref()
        .or(config.operator_password.as_deref())
        .unwrap_or("");
    let mut hasher = Sha256::new();
    hasher.update(password.as_bytes());
    hasher.update([0]);
    hasher.update(secret.as_bytes());
    hex::encode(hasher.finalize())
}

/// The browser that sent `headers`, if its secret is one a login under this password gave.
pub async fn known(
    db: &PgPool,
    config: &Config,
    headers: &HeaderMap,
) -> Result<Option<Browser>, sqlx::Error> {
    let Some(secret) = secret_in(headers) else {
        return Ok(None);
    };
    let known = sqlx::query_scalar!(
        "SELECT secret_sha256 FROM operator_browsers
          WHERE secret_sha256 = $1 AND last_login_at > now() - make_interval(days => $2)
            AND (unused_until IS NULL OR unused_until > now())
            AND secret_sha256 IS DISTINCT FROM link_sha256",
        digest(config, secret),
        KEPT_DAYS
    )
    .fetch_optional(db)
    .await?;
    Ok(known.map(|secret_sha256| Browser { secret_sha256 }))
}

fn secret_in(headers: &HeaderMap) -> Option<&str> {
    super::cookies::value(headers, COOKIE).filter(|secret| secret.len() == SECRET_LEN)
}

/// After the right password: the browser gets a new secret, in place of its old one when
/// it was known (a copy of the old cookie is then worth nothing), and its 90 days start
/// again; the `Set-Cookie` that gives it. Past [`MOST_BROWSERS`], the longest unused is
/// forgotten.
pub async fn remember(
    db: &PgPool,
    config: &Config,
    browser: Option<&Browser>,
) -> Result<HeaderValue, sqlx::Error> {
    let secret = random_secret(SECRET_LEN);
    let new = digest(config, &secret);
    let mut tx = db.begin().await?;
    let renewed = match browser {
        Some(browser) => sqlx::query!(
            "UPDATE operator_browsers
                SET secret_sha256 = $2, last_login_at = now(), unused_until = NULL
              WHERE secret_sha256 = $1",
            browser.secret_sha256,
            new
        )
        .execute(&mut *tx)
        .await?
        .rows_affected(),
        None => 0,
    };
    if renewed == 0 {
        sqlx::query!(
            "INSERT INTO operator_browsers (secret_sha256) VALUES ($1)",
            new
        )
        .execute(&mut *tx)
        .await?;
    }
    keep_the_newest(&mut tx).await?;
    tx.commit().await?;
    Ok(cookie(config, &secret))
}

/// Past [`MOST_BROWSERS`], forgets the longest unused, and any link past its time. A new
/// link is the newest: it never goes at once, even when ten browsers are known.
async fn keep_the_newest(tx: &mut sqlx::PgConnection) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM operator_browsers WHERE secret_sha256 NOT IN (
             SELECT secret_sha256 FROM operator_browsers
              WHERE unused_until IS NULL OR unused_until > now()
              ORDER BY last_login_at DESC LIMIT $1)",
        MOST_BROWSERS
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// The `Set-Cookie` that gives the browser `secret`, sent to the login only.
fn cookie(config: &Config, secret: &str) -> HeaderValue {
    let secure = if config.served_over_https {
        "; Secure"
    } else {
        ""
    };
    let max_age = i64::from(KEPT_DAYS) * 86_400;
    let cookie = format!(
        "{COOKIE}={secret}; Path=/operator/login; Max-Age={max_age}; HttpOnly; SameSite=Strict{secure}"
    );
    HeaderValue::from_str(&cookie).expect("a secret is alphanumeric")
}

/// For `server operator-browser`: a link's secret, waiting for [`LINK_MINUTES`], for the
/// link `/operator/login?browser=<secret>` that lets in the browser that takes it
/// ([`from_link`]). Counts among the [`MOST_BROWSERS`].
pub async fn enrol(db: &PgPool, config: &Config) -> Result<String, sqlx::Error> {
    let secret = random_secret(SECRET_LEN);
    let mut tx = db.begin().await?;
    sqlx::query!(
        "INSERT INTO operator_browsers (secret_sha256, link_sha256, unused_until)
         VALUES ($1, $1, now() + make_interval(mins => $2))",
        digest(config, &secret),
        LINK_MINUTES
    )
    .execute(&mut *tx)
    .await?;
    keep_the_newest(&mut tx).await?;
    tx.commit().await?;
    Ok(secret)
}

/// What became of a link from [`enrol`], as its page tells it.
#[derive(Debug, PartialEq, Eq)]
pub enum Link {
    /// Nobody took it yet, and it works.
    Waiting,
    /// The browser that sent the request took it already.
    TakenHere,
    /// Taken by another browser, past its time, made under another password, or no link.
    Gone,
}

/// What became of the link `secret`, for the browser that sent `headers`. Reads only.
pub async fn link_state(
    db: &PgPool,
    config: &Config,
    headers: &HeaderMap,
    secret: &str,
) -> Result<Link, sqlx::Error> {
    if secret.len() != SECRET_LEN {
        return Ok(Link::Gone);
    }
    let link = digest(config, secret);
    let held = secret_in(headers).map(|own| digest(config, own));
    // The row keeps the link's digest after its browser's first login, so that browser
    // opening the link again is recognised then too.
    let row = sqlx::query!(
        r#"SELECT secret_sha256 = link_sha256 AND unused_until > now() AS "waiting!",
                  secret_sha256 = $2 AS "here!"
             FROM operator_browsers
            WHERE link_sha256 = $1 AND (unused_until > now() OR secret_sha256 = $2)"#,
        link,
        held.unwrap_or_default(),
    )
    .fetch_optional(db)
    .await?;
    Ok(match row {
        Some(row) if row.waiting => Link::Waiting,
        Some(row) if row.here => Link::TakenHere,
        _ => Link::Gone,
    })
}

/// The `Set-Cookie` that lets in the one browser that takes a link from [`enrol`], while the
/// link works and nobody took it: the browser gets a secret of its own, which takes the
/// link's place in one statement, so the link's secret is worth nothing from then on. A
/// second browser taking the same link (it leaked, or was taken twice) gets nothing, and
/// cannot spend the guesses of the browser the link let in. `None` for any other text.
pub async fn from_link(
    db: &PgPool,
    config: &Config,
    secret: &str,
) -> Result<Option<HeaderValue>, sqlx::Error> {
    if secret.len() != SECRET_LEN {
        return Ok(None);
    }
    let link = digest(config, secret);
    let own = random_secret(SECRET_LEN);
    let taken = sqlx::query!(
        "UPDATE operator_browsers SET secret_sha256 = $2
          WHERE link_sha256 = $1 AND secret_sha256 = $1 AND unused_until > now()",
        link,
        digest(config, &own)
    )
    .execute(db)
    .await?
    .rows_affected();
    Ok((taken == 1).then(|| cookie(config, &own)))
}

/// Forgets browsers without a login for [`KEPT_DAYS`], and links nobody used in time.
pub async fn forget_unused(db: &PgPool) -> Result<u64, sqlx::Error> {
    let forgotten = sqlx::query!(
        "DELETE FROM operator_browsers
          WHERE last_login_at < now() - make_interval(days => $1) OR unused_until < now()",
        KEPT_DAYS
    )
    .execute(db)
    .await?;
    Ok(forgotten.rows_affected())
}
