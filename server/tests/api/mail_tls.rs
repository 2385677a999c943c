//! The mailer through a real relay, as a shop on the internet sends: aiosmtpd demanding TLS
//! and a login, its certificate from a CA made at run time and trusted through
//! `SSL_CERT_FILE`. A confirmation is delivered once over STARTTLS and over implicit TLS;
//! a relay whose certificate does not verify gets nothing, and the email stays queued until
//! a later try reaches a relay it can trust.

use percent_encoding::{utf8_percent_encode, NON_ALPHANUMERIC};
use server::config::SmtpRelay;

use crate::{
    helpers::{
        relay::{Mode, Relay, LOGIN},
        tls::{authorities, certificate},
        *,
    },
    mailer::shipped_orders,
};

/// `SMTP_URL` for `relay` with the relay's login, percent-encoded as a URL needs it.
fn relay_url(scheme_and_query: (&str, &str), relay: &Relay) -> SmtpRelay {
    let encode = |s| utf8_percent_encode(s, NON_ALPHANUMERIC).to_string();
    let (scheme, query) = scheme_and_query;
    SmtpRelay::parse(&format!(
        "{scheme}://{}:{}@localhost:{}{query}",
        encode(LOGIN.0),
        encode(LOGIN.1),
        relay.port
    ))
    .unwrap()
}

const STARTTLS: (&str, &str) = ("smtp", "?tls=required");
const IMPLICIT: (&str, &str) = ("smtps", "");

/// A shop with one shipped order whose mailer sends through `smtp`.
async fn shop_sending_through(smtp: SmtpRelay) -> TestApp {
    let app = spawn_chain(OnBus::Postgres, |config| config.events.smtp = Some(smtp)).await;
    shipped_orders(&app, 1).await;
    app
}

async fn email_row(app: &TestApp) -> (String, i32, Option<String>) {
    sqlx::query_as("SELECT status, attempts, last_error FROM emails")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_confirmation_is_delivered_once_over_starttls_and_over_tls_with_a_login() {
    let good = certificate("localhost", &authorities().trusted, false);
    for (mode, url) in [(Mode::StartTls, STARTTLS), (Mode::Implicit, IMPLICIT)] {
        let relay = Relay::start(mode, &good, 0).await;
        let app = shop_sending_through(relay_url(url, &relay)).await;
        let mailer = app.workers().await.mailer().unwrap();
        assert_eq!(mailer.try_execute_task().await.unwrap(), 1);
        assert_eq!(mailer.try_execute_task().await.unwrap(), 0, "sent once");

        let taken = relay.taken();
        assert_eq!(taken.len(), 1, "{}: one message", url.0);
        assert_eq!(taken[0]["login"], LOGIN.0, "sent after the relay's login");
        assert_eq!(taken[0]["encrypted"], true, "over TLS");
        let (status, attempts, _) = email_row(&app).await;
        assert_eq!((status.as_str(), attempts), ("sent", 1));
    }
}

#[tokio::test]
async fn a_relay_whose_certificate_does_not_verify_gets_nothing_and_the_email_waits() {
    let cas = authorities();
    let relay = Relay::start(
        Mode::StartTls,
        &certificate("localhost", &cas.stranger, false),
        0,
    )
    .await;
    let port = relay.port;
    let app = shop_sending_through(relay_url(STARTTLS, &relay)).await;
    let mailer = app.workers().await.mailer().unwrap();
    assert_eq!(mailer.try_execute_task().await.unwrap(), 1);
    assert!(relay.taken().is_empty(), "nothing reached the relay");
    let (status, attempts, error) = email_row(&app).await;
    assert_eq!(
        (status.as_str(), attempts),
        ("queued", 1),
        "kept for a retry"
    );
    let error = error.unwrap();
    assert!(error.to_lowercase().contains("certificate"), "{error}");

    // The relay is given a certificate the shop trusts; the retry, when it is due, sends
    // the email once.
    drop(relay);
    let relay = Relay::start(
        Mode::StartTls,
        &certificate("localhost", &cas.trusted, false),
        port,
    )
    .await;
    sqlx::query("UPDATE emails SET next_attempt_at = now()")
        .execute(&app.db)
        .await
        .unwrap();
    assert_eq!(mailer.try_execute_task().await.unwrap(), 1);
    assert_eq!(relay.taken().len(), 1);
    let (status, attempts, error) = email_row(&app).await;
    assert_eq!((status.as_str(), attempts, error), ("sent", 2, None));
}

#[tokio::test]
async fn a_relay_that_offers_no_starttls_is_given_neither_the_login_nor_the_email() {
    let relay = Relay::start(
        Mode::Clear,
        &certificate("localhost", &authorities().trusted, false),
        0,
    )
    .await;
    let app = shop_sending_through(relay_url(STARTTLS, &relay)).await;
    let mailer = app.workers().await.mailer().unwrap();
    assert_eq!(mailer.try_execute_task().await.unwrap(), 1);
    assert!(relay.taken().is_empty(), "nothing sent in clear");
    let (status, attempts, error) = email_row(&app).await;
    assert_eq!(
        (status.as_str(), attempts),
        ("queued", 1),
        "kept for a retry"
    );
    assert!(error.unwrap().contains("STARTTLS"));
}
