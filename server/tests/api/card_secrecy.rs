//! A card number goes to the provider and nowhere else: after a payment, no table of the
//! shop and no line its server logs at info holds the number, nor a plain hash of it (a
//! hash of something from a space as small as card numbers is the number: try them all).
//! The shopper's email and address, which the shop keeps, are in no line of its log either.

use std::{net::TcpListener, path::PathBuf, process::Stdio};

use sha2::{Digest, Sha256};
use sqlx::PgPool;
use uuid::Uuid;

use crate::helpers::*;

const CARD: &str = "4242 4242 4242 4242";
const DIGITS: &str = "4242424242424242";

/// Everything that would give the card away if it were stored or logged.
fn giveaways(order_id: &str) -> Vec<String> {
    let sha = |text: &str| hex::encode(Sha256::digest(text.as_bytes()));
    let mut found = vec![DIGITS.to_owned(), CARD.to_owned(), hex::encode(DIGITS)];
    for card in [CARD, DIGITS] {
        found.push(sha(card));
        // The unkeyed fingerprint of the payment request, as it was once stored.
        let body = format!("{{\"card_number\":\"{card}\"}}");
        found.push(sha(&format!(
            "POST\nPOST /api/orders/{order_id}/payments\n{body}"
        )));
        found.push(sha(&body));
    }
    found
}

/// Every row of every table of the shop's database, as text.
async fn every_row(db: &PgPool) -> String {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT format('%I.%I', schemaname, tablename) FROM pg_tables
          WHERE schemaname NOT IN ('pg_catalog', 'information_schema')",
    )
    .fetch_all(db)
    .await
    .unwrap();
    let mut rows = String::new();
    for table in tables {
        let text: String = sqlx::query_scalar(&format!(
            "SELECT coalesce(string_agg(t::text, E'\\n'), '') FROM {table} t"
        ))
        .fetch_one(db)
        .await
        .unwrap();
        rows.push_str(&text);
    }
    rows
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The real server process at info, its workers included, so that its log is what an
/// operator's log store would keep.
struct ServerAtInfo {
    process: tokio::process::Child,
    base: String,
    database_url: String,
    log_path: PathBuf,
}

impl ServerAtInfo {
    /// Starts it on a database of its own (`db_name`, created by the server), paying through
    /// `provider`, and waits until it answers.
    async fn start(provider: &TestProvider, db_name: &str) -> Self {
        let database_url = format!("{}/{db_name}", admin_url());
        let base = format!("http://127.0.0.1:{}", free_port());
        provider
            .settings
            .set_webhook_url(format!("{base}/webhooks/provider"));
        let log_path = std::env::temp_dir().join(format!("{db_name}.log"));
        let log = std::fs::File::create(&log_path).unwrap();
        let process = tokio::process::Command::new(env!("CARGO_BIN_EXE_server"))
            .env("DATABASE_URL", &database_url)
            .env("LEPTOS_SITE_ADDR", base.trim_start_matches("http://"))
            .env("PROVIDER_URL", &provider.address)
            .env("PROVIDER_WEBHOOK_SECRETS", TEST_WEBHOOK_SECRET)
            .env("PROVIDER_API_KEY", TEST_PROVIDER_API_KEY)
            .env("IDEMPOTENCY_FINGERPRINT_SECRETS", TEST_FINGERPRINT_SECRET)
            .env("OPERATOR_PASSWORD", "card-secrecy-operator")
            .env("EVENTS_POLL_MS", "100")
            .env("RUST_LOG", "info")
            .env_remove("NATS_URL")
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("the server binary starts");
        let client = shopper();
        eventually("the server answers", || async {
            client.get(format!("{base}/healthz")).send().await.is_ok()
        })
        .await;
        Self {
            process,
            base,
            database_url,
            log_path,
        }
    }

    /// Stops it, and returns everything it logged.
    async fn stop(&mut self) -> String {
        self.process.kill().await.unwrap();
        let logged = std::fs::read_to_string(&self.log_path).unwrap();
        let _ = std::fs::remove_file(&self.log_path);
        assert!(logged.contains("Once is listening"), "{logged}");
        logged
    }
}

#[tokio::test]
async fn no_table_and_no_info_log_holds_the_card_or_a_plain_hash_of_it() {
    let provider = spawn_provider().await;
    let db_name = format!("once_test_{}", Uuid::new_v4().simple());
    let _dropped_at_the_end = TestDatabase::named(&db_name);
    let mut server = ServerAtInfo::start(&provider, &db_name).await;
    let base = server.base.clone();
    let database_url = server.database_url.clone();
    let client = shopper();
    client
        .get(format!("{base}/api/session"))
        .send()
        .await
        .unwrap();
    let order: serde_json::Value = client
        .post(format!("{base}/api/orders"))
        .header("idempotency-key", "card-secrecy-order")
        .header("content-type", "application/json")
        .body(MUG_ORDER)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let order_id = order["id"].as_str().unwrap().to_owned();
    let paid = client
        .post(format!("{base}/api/orders/{order_id}/payments"))
        .header("idempotency-key", "card-secrecy-payment")
        .json(&serde_json::json!({ "card_number": CARD }))
        .send()
        .await
        .unwrap();
    assert_eq!(paid.status(), 201);
    let db = PgPool::connect(&database_url).await.unwrap();
    eventually("the order is fulfilled and its email kept", || async {
        let done: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM emails e JOIN orders o ON o.id = e.order_id WHERE o.status = 'fulfilled'",
        )
        .fetch_one(&db)
        .await
        .unwrap();
        done == 1
    })
    .await;
    let logged = server.stop().await;
    let rows = every_row(&db).await;
    // What was read is real: the payment's key and its order are there, the log has lines.
    assert!(rows.contains("card-secrecy-payment") && rows.contains(&order_id));
    for giveaway in giveaways(&order_id) {
        assert!(!rows.contains(&giveaway), "a table holds {giveaway}");
        assert!(!logged.contains(&giveaway), "the log holds {giveaway}");
    }
    // The shopper's details are kept in their tables, and never logged either (docs/
    // operations.md, "Personal data").
    assert!(rows.contains("ada@example.com") && rows.contains("Lovelace"));
    for person in ["ada@example.com", "Lovelace", "1 Main Street", "SW1Y 4JH"] {
        assert!(!logged.contains(person), "the log holds {person}");
    }
}

/// A request's query never reaches the log: the request span names the method and the path
/// only. A query may hold what is nobody's business to keep (the console's one-time browser
/// link, a person's email searched for), and the log keeps what it is given at info.
#[tokio::test]
async fn no_info_log_holds_a_query_string() {
    let provider = spawn_provider().await;
    let db_name = format!("once_test_{}", Uuid::new_v4().simple());
    let _dropped_at_the_end = TestDatabase::named(&db_name);
    let mut server = ServerAtInfo::start(&provider, &db_name).await;
    let client = shopper();
    let login = format!("{}/operator/login", server.base);
    let page = client
        .get(&login)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = crate::operator::csrf_in(&page);
    let refused = client
        .post(format!(
            "{login}?browser=secret-link-token&q=ada%40example.com"
        ))
        .form(&[("csrf", csrf.as_str()), ("password", "a wrong guess")])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    let logged = server.stop().await;
    // The wrong password is logged at info, inside the request's span: the span is there.
    let line = logged
        .lines()
        .find(|l| l.contains("a wrong password was given"))
        .unwrap_or_else(|| panic!("no line for the wrong password in {logged}"));
    assert!(line.contains("/operator/login"), "{line}");
    for secret in [
        "secret-link-token",
        "ada%40example.com",
        "ada@example.com",
        "browser=",
    ] {
        assert!(!logged.contains(secret), "the log holds {secret}: {line}");
    }
}
