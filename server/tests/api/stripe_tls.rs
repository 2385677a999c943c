//! The Stripe adapter over TLS, as it calls Stripe in production: localstripe behind a real
//! TLS terminator (HAProxy, which `scripts/setup` installs), with certificates made at run
//! time. The shop trusts the test CA through `SSL_CERT_FILE`, the convention rustls's
//! native roots share with OpenSSL. A payment succeeds over TLS; a certificate from
//! another CA, an expired one, and one for another host name are each refused, with
//! nothing charged and the attempt left pending, to settle.

use std::{process::Stdio, time::Duration};

use crate::helpers::{tls::*, *};

/// HAProxy ending TLS with `pem` on a free port, in front of `backend`; killed when dropped.
struct Terminator {
    port: u16,
    _process: tokio::process::Child,
}

async fn terminator(name: &str, pem: &str, backend: &str) -> Terminator {
    let dir = &authorities().dir;
    let (cert, config) = (
        dir.join(format!("{name}.pem")),
        dir.join(format!("{name}.cfg")),
    );
    std::fs::write(&cert, pem).unwrap();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let backend = backend.trim_start_matches("http://");
    std::fs::write(
        &config,
        format!(
            "global\n  maxconn 100\ndefaults\n  mode tcp\n  timeout connect 5s\n  timeout client 30s\n  timeout server 30s\n\
             frontend tls\n  bind 127.0.0.1:{port} ssl crt {}\n  default_backend stripe\n\
             backend stripe\n  server localstripe {backend}\n",
            cert.display()
        ),
    )
    .unwrap();
    let process = tokio::process::Command::new("haproxy")
        .args(["-db", "-f"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("haproxy runs (scripts/setup installs it)");
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Terminator {
                port,
                _process: process,
            };
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("haproxy did not listen on {port}");
}

/// A shop paying through localstripe behind a terminator with `pem`, reached as `host`; the
/// answer to one payment, and the store of localstripe.
async fn pay_over_tls(name: &str, pem: &str, host: &str) -> (TestApp, TestStripe, String, u16) {
    let stripe = spawn_stripe().await;
    let front = terminator(name, pem, &stripe.base).await;
    let mut settings = settings(&stripe);
    settings.api_base = format!("https://{host}:{}", front.port);
    let app = spawn_app_with_faults(move |c| {
        c.payment_provider = server::config::ProviderChoice::Stripe(settings);
        c.provider_timeout = Duration::from_secs(2);
        c.payment_settle_grace = Duration::from_secs(4);
    })
    .await;
    let order_id = place_order(&app).await;
    let answer = pay_with_method(&app, &order_id, "pay-tls", PM_VISA)
        .send()
        .await
        .unwrap();
    let status = answer.status().as_u16();
    drop(front);
    (app, stripe, order_id, status)
}

#[tokio::test]
async fn a_payment_reaches_stripe_over_verified_tls() {
    let ca = &authorities().trusted;
    let pem = certificate("localhost", ca, false);
    let (app, stripe, order_id, status) = pay_over_tls("good", &pem, "localhost").await;
    assert_eq!(status, 201, "paid over TLS");
    assert_eq!(stripe.charged(&order_id).await, 1);
    assert_eq!(app.order_status(&order_id).await, "paid");
}

/// Each certificate the shop must not trust: nothing reaches Stripe, nothing is charged,
/// and the attempt stays pending for the settling to close.
#[tokio::test]
async fn a_certificate_the_shop_must_not_trust_is_refused_and_nothing_is_charged() {
    let cas = authorities();
    let cases = [
        ("stranger", certificate("localhost", &cas.stranger, false)),
        ("expired", certificate("localhost", &cas.trusted, true)),
        ("misnamed", certificate("example.com", &cas.trusted, false)),
    ];
    for (name, pem) in cases {
        let (app, stripe, order_id, status) = pay_over_tls(name, &pem, "localhost").await;
        assert_eq!(
            status, 503,
            "{name}: the provider could not be reached safely"
        );
        assert_eq!(stripe.charged(&order_id).await, 0, "{name}");
        assert!(
            stripe.intents_of_order(&order_id).await.is_empty(),
            "{name}"
        );
        let attempt: String =
            sqlx::query_scalar("SELECT status FROM payments WHERE order_id = $1::uuid")
                .bind(&order_id)
                .fetch_one(&app.db)
                .await
                .unwrap();
        assert_eq!(attempt, "pending", "{name}: left to settle");
    }
}
