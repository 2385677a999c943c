//! The sandbox provider on its own: idempotent charges, test cards, the ledger, webhooks.

use std::net::SocketAddr;

use axum::{routing::post, Router};
use provider::{config::Config, settings::Chaos, startup::Application};
use serde_json::{json, Value};
use sqlx::PgPool;
use tokio::sync::mpsc;

/// The secret this test's provider signs with.
const SECRET: &str = "whsec_sandbox_test_secret";
/// The merchant's key this test's provider takes calls with.
const API_KEY: &str = "sk_sandbox_test_merchant_key";

struct Sandbox {
    url: String,
    db: PgPool,
    http: reqwest::Client,
    /// Its database, dropped with it.
    _database: DropsDatabase,
}

/// Drops its database when it goes: at the end of the test, passed or failed.
struct DropsDatabase {
    admin: String,
    name: String,
}

async fn spawn(chaos: Chaos, webhook_url: String) -> Sandbox {
    let admin = std::env::var("TEST_DATABASE_ADMIN_URL")
        .unwrap_or_else(|_| "postgres://postgres@localhost:5432".into());
    let name = format!("once_provider_test_{}", uuid::Uuid::new_v4().simple());
    // Before the provider creates the database, so a start that fails drops it too.
    let database = DropsDatabase {
        admin: admin.clone(),
        name: name.clone(),
    };
    let config = Config {
        database_url: format!("{admin}/{name}"),
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        webhook_url,
        webhook_secret: SECRET.into(),
        api_key: API_KEY.into(),
        chaos,
    };
    let app = Application::build(config).await.unwrap();
    let sandbox = Sandbox {
        url: format!("http://127.0.0.1:{}", app.port()),
        db: app.db().clone(),
        http: merchant_client(API_KEY),
        _database: database,
    };
    tokio::spawn(app.run_until_stopped(std::future::pending()));
    sandbox
}

/// A client that sends `key` as the merchant's key with every call.
fn merchant_client(key: &str) -> reqwest::Client {
    let bearer = reqwest::header::HeaderValue::from_str(&format!("Bearer {key}")).unwrap();
    reqwest::Client::builder()
        .default_headers(
            [(reqwest::header::AUTHORIZATION, bearer)]
                .into_iter()
                .collect(),
        )
        .build()
        .unwrap()
}

impl Drop for DropsDatabase {
    /// `drop` cannot await and runs on the test's runtime: the DROP runs on a thread and a
    /// runtime of its own.
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                use sqlx::Connection;
                let mut conn = sqlx::PgConnection::connect(&format!("{admin}/postgres")).await?;
                sqlx::query(&format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"))
                    .execute(&mut conn)
                    .await?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test database {}", self.name);
        }
    }
}

impl Sandbox {
    async fn charge_json(&self, key: &str, card: &str, amount: i64) -> Value {
        self.charge(key, card, amount).await.json().await.unwrap()
    }

    async fn charge(&self, key: &str, card: &str, amount: i64) -> reqwest::Response {
        self.http
            .post(format!("{}/v1/charges", self.url))
            .header("idempotency-key", key)
            .json(&json!({ "amount_cents": amount, "currency": "EUR", "card_number": card, "reference": key }))
            .send()
            .await
            .unwrap()
    }
}

/// A merchant endpoint that records every webhook it receives: the signature header, the
/// parsed event, and the raw body bytes the signature covers.
async fn merchant() -> (String, mpsc::UnboundedReceiver<(String, Value, String)>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = Router::new().route(
        "/hook",
        post(move |headers: axum::http::HeaderMap, body: String| {
            let tx = tx.clone();
            async move {
                let signature = headers["once-signature"].to_str().unwrap().to_owned();
                tx.send((signature, serde_json::from_str(&body).unwrap(), body))
                    .unwrap();
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (url, rx)
}

#[tokio::test]
async fn a_charge_is_idempotent_on_its_key() {
    let sandbox = spawn(Chaos::default(), "http://127.0.0.1:9/".into()).await;
    let first: Value = sandbox.charge_json("k1", "4242424242424242", 1800).await;
    assert_eq!(first["status"], "succeeded");
    let replay = sandbox.charge("k1", "4242424242424242", 1800).await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(replay.json::<Value>().await.unwrap(), first);
    let reused = sandbox.charge("k1", "4242424242424242", 1900).await;
    assert_eq!(reused.status(), 422);
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM charges")
        .fetch_one(&sandbox.db)
        .await
        .unwrap();
    assert_eq!(count, 1);

    let missing_key = sandbox
        .http
        .post(format!("{}/v1/charges", sandbox.url))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(missing_key.status(), 400);
}

#[tokio::test]
async fn test_cards_pick_the_outcome() {
    let sandbox = spawn(Chaos::default(), "http://127.0.0.1:9/".into()).await;
    let declined: Value = sandbox.charge_json("d", "4000000000000002", 500).await;
    assert_eq!(declined["status"], "failed");
    assert_eq!(declined["failure_code"], "card_declined");

    let lost = sandbox
        .http
        .post(format!("{}/v1/charges", sandbox.url))
        .header("idempotency-key", "lost")
        .json(&json!({ "amount_cents": 500, "currency": "EUR", "card_number": "4000000000000259", "reference": "lost" }))
        .send()
        .await;
    assert!(
        lost.is_err(),
        "no answer the first time: the connection is cut"
    );
    let after: Value = sandbox.charge_json("lost", "4000000000000259", 500).await;
    assert_eq!(
        after["status"], "succeeded",
        "the charge was committed before the answer was lost"
    );

    let started = std::time::Instant::now();
    let slow = sandbox.charge("slow", "4000000000000077", 500).await;
    assert_eq!(slow.status(), 201);
    assert!(started.elapsed() >= std::time::Duration::from_secs(3));
    // Only the key's first request is slow: a repeat is answered from the stored charge
    // (within a second, where the first took three).
    let slow: Value = slow.json().await.unwrap();
    let repeat = sandbox
        .http
        .post(format!("{}/v1/charges", sandbox.url))
        .header("idempotency-key", "slow")
        .timeout(std::time::Duration::from_secs(1))
        .json(&json!({ "amount_cents": 500, "currency": "EUR", "card_number": "4000000000000077", "reference": "slow" }))
        .send()
        .await
        .expect("a repeat answered at once");
    assert_eq!(repeat.headers()["idempotent-replayed"], "true");
    assert_eq!(repeat.json::<Value>().await.unwrap()["id"], slow["id"]);

    let shown: Value = sandbox
        .http
        .get(format!(
            "{}/v1/charges/{}",
            sandbox.url,
            after["id"].as_str().unwrap()
        ))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown, after);
}

#[tokio::test]
async fn the_ledger_is_cursor_paginated() {
    let sandbox = spawn(Chaos::default(), "http://127.0.0.1:9/".into()).await;
    for i in 0..5 {
        sandbox
            .charge(&format!("l{i}"), "4242424242424242", 100 + i)
            .await;
    }
    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let after = cursor
            .as_ref()
            .map(|c| format!("&starting_after={c}"))
            .unwrap_or_default();
        let page: Value = sandbox
            .http
            .get(format!("{}/v1/transactions?limit=2{after}", sandbox.url))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        seen.extend(
            page["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["amount_cents"].as_i64().unwrap()),
        );
        if !page["has_more"].as_bool().unwrap() {
            break;
        }
        cursor = Some(page["next_cursor"].as_str().unwrap().to_owned());
    }
    assert_eq!(seen, vec![100, 101, 102, 103, 104]);
}

#[tokio::test]
async fn webhooks_are_signed_and_duplicated_on_demand() {
    let (url, mut received) = merchant().await;
    let sandbox = spawn(
        Chaos {
            duplicates: 2,
            ..Chaos::default()
        },
        url,
    )
    .await;
    let charge: Value = sandbox.charge_json("w1", "4242424242424242", 700).await;
    let mut events = Vec::new();
    for _ in 0..3 {
        let (signature, event, raw) =
            tokio::time::timeout(std::time::Duration::from_secs(10), received.recv())
                .await
                .unwrap()
                .unwrap();
        let (t, v1) = signature.split_once(',').unwrap();
        let t = t.strip_prefix("t=").unwrap();
        let v1 = v1.strip_prefix("v1=").unwrap();
        assert_eq!(v1, independent_hmac(SECRET, &format!("{t}.{raw}")));
        events.push(event);
    }
    assert!(events
        .iter()
        .all(|e| e["type"] == "charge.succeeded" && e["data"]["charge_id"] == charge["id"]));
    assert!(
        events.iter().all(|e| e["tx_no"] == events[0]["tx_no"]),
        "copies share the transaction number"
    );
}

#[tokio::test]
async fn chaos_delays_and_loses_deliveries_which_are_retried_until_they_land() {
    let (url, mut received) = merchant().await;
    let chaos = Chaos {
        drop_rate: 1.0,
        delay_ms: 300,
        shuffle: true,
        ..Chaos::default()
    };
    let sandbox = spawn(chaos, url).await;
    for i in 0..3 {
        sandbox
            .charge(&format!("c{i}"), "4242424242424242", 100 + i)
            .await;
    }
    // Every attempt is lost on the way: nothing arrives, and the queue counts the attempts.
    let nothing =
        tokio::time::timeout(std::time::Duration::from_millis(1500), received.recv()).await;
    assert!(
        nothing.is_err(),
        "a lost delivery never reaches the merchant"
    );
    let attempted: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM webhook_deliveries WHERE attempts > 0 AND delivered_at IS NULL",
    )
    .fetch_one(&sandbox.db)
    .await
    .unwrap();
    assert_eq!(attempted, 3);

    // The network heals (through the admin endpoint): the retries deliver every event.
    let healed = sandbox
        .http
        .post(format!("{}/v1/admin/chaos", sandbox.url))
        .json(&json!({ "shuffle": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(healed.status(), 200);
    let mut amounts = Vec::new();
    for _ in 0..3 {
        let (_, event, _) =
            tokio::time::timeout(std::time::Duration::from_secs(15), received.recv())
                .await
                .unwrap()
                .unwrap();
        amounts.push(event["data"]["amount_cents"].as_i64().unwrap());
    }
    amounts.sort();
    assert_eq!(amounts, vec![100, 101, 102]);
}

/// HMAC-SHA256 (RFC 2104) written out from SHA-256 alone, so the provider's signature is
/// checked against an implementation that shares no code with it.
fn independent_hmac(key: &str, message: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut block = [0u8; 64];
    block[..key.len()].copy_from_slice(key.as_bytes());
    let pad = |byte: u8| block.iter().map(|b| b ^ byte).collect::<Vec<u8>>();
    let inner = Sha256::new()
        .chain_update(pad(0x36))
        .chain_update(message.as_bytes())
        .finalize();
    let outer = Sha256::new()
        .chain_update(pad(0x5c))
        .chain_update(inner)
        .finalize();
    hex::encode(outer)
}

#[test]
fn the_independent_hmac_matches_the_rfc_4231_vector() {
    // RFC 4231, test case 2.
    assert_eq!(
        independent_hmac("Jefe", "what do ya want for nothing?"),
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    );
}

impl Sandbox {
    async fn refund(&self, key: &str, charge_id: &str) -> reqwest::Response {
        self.http
            .post(format!("{}/v1/refunds", self.url))
            .header("idempotency-key", key)
            .json(&json!({ "charge_id": charge_id }))
            .send()
            .await
            .unwrap()
    }

    async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar(sql).fetch_one(&self.db).await.unwrap()
    }
}

#[tokio::test]
async fn a_refund_is_idempotent_one_per_charge_in_the_ledger_and_announced() {
    let sandbox = spawn(Chaos::default(), "http://127.0.0.1:9/".into()).await;
    let charge = sandbox.charge_json("r1", "4242424242424242", 1800).await;
    let charge_id = charge["id"].as_str().unwrap();

    let first = sandbox.refund("refund-r1", charge_id).await;
    assert_eq!(first.status(), 201);
    let first: Value = first.json().await.unwrap();
    let again = sandbox.refund("refund-r1", charge_id).await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(first, again, "the same key replays the same refund");
    // Another key cannot refund the charge a second time.
    assert_eq!(
        sandbox.refund("refund-r1-bis", charge_id).await.status(),
        400
    );
    assert_eq!(sandbox.count("SELECT count(*) FROM refunds").await, 1);
    assert_eq!(
        sandbox
            .count("SELECT count(*) FROM webhook_deliveries WHERE event_type = 'charge.refunded'")
            .await,
        1
    );
    // Its own transaction number: merchants dedup callbacks on it.
    assert_eq!(
        sandbox
            .count("SELECT count(DISTINCT tx_no) FROM webhook_deliveries")
            .await,
        2,
        "the refund's event does not reuse its charge's number"
    );
    let ledger: Value = sandbox
        .http
        .get(format!("{}/v1/transactions", sandbox.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let kinds: Vec<&str> = ledger["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["charge", "refund"]);
}

#[tokio::test]
async fn chaos_can_lose_webhooks_for_good_and_charge_twice() {
    let chaos = Chaos {
        drop_webhooks: true,
        charge_twice: true,
        ..Chaos::default()
    };
    let sandbox = spawn(chaos, "http://127.0.0.1:9/".into()).await;
    sandbox.charge_json("twice", "4242424242424242", 1800).await;
    assert_eq!(
        sandbox
            .count(
                "SELECT count(*) FROM charges WHERE reference = 'twice' AND status = 'succeeded'"
            )
            .await,
        2
    );
    assert_eq!(
        sandbox
            .count("SELECT count(*) FROM webhook_deliveries")
            .await,
        0
    );
}

/// Every call of the API takes the merchant's key: without it, or with another, a charge is
/// refused 401 and nothing is charged; the ledger, refunds and the chaos knobs likewise
/// (seen red when the API was open: the charge was made).
#[tokio::test]
async fn calls_without_the_merchants_key_are_refused_and_charge_nothing() {
    let sandbox = spawn(Chaos::default(), "http://127.0.0.1:9/nowhere".into()).await;
    let body = json!({ "amount_cents": 1, "currency": "EUR",
        "card_number": "4242424242424242", "reference": "someone-elses-attempt" });
    for client in [
        reqwest::Client::new(),
        merchant_client("sk_sandbox_a_guessed_key"),
    ] {
        let calls = [
            client
                .post(format!("{}/v1/charges", sandbox.url))
                .header("idempotency-key", "k")
                .json(&body),
            client.get(format!(
                "{}/v1/charges?reference=someone-elses-attempt",
                sandbox.url
            )),
            client.get(format!("{}/v1/transactions", sandbox.url)),
            client
                .post(format!("{}/v1/refunds", sandbox.url))
                .header("idempotency-key", "r")
                .json(&json!({"charge_id": "ch_1"})),
            client
                .post(format!("{}/v1/admin/chaos", sandbox.url))
                .json(&json!({"drop_webhooks": true})),
        ];
        for call in calls {
            let answer = call.send().await.unwrap();
            assert_eq!(answer.status(), 401);
            let error: Value = answer.json().await.unwrap();
            assert_eq!(error["error"]["code"], "unauthorized");
        }
    }
    let charges: i64 = sqlx::query_scalar("SELECT count(*) FROM charges")
        .fetch_one(&sandbox.db)
        .await
        .unwrap();
    assert_eq!(charges, 0);
    let answer = sandbox
        .charge("with-the-key", "4242424242424242", 100)
        .await;
    assert_eq!(answer.status(), 201, "the merchant's own call");
}
