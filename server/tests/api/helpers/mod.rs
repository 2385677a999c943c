//! `spawn_app()`: a fresh database and a running server per test, plus a client with a
//! cookie jar (one shopper session) and helpers to read the database directly.

use std::{net::SocketAddr, sync::Arc};

use reqwest::{redirect::Policy, Client};
use server::{config::Config, startup::Application, telemetry};
use sqlx::{Connection, PgConnection, PgPool};
use uuid::Uuid;

/// The PostgreSQL server tests create their databases on.
pub fn admin_url() -> String {
    std::env::var("TEST_DATABASE_ADMIN_URL")
        .unwrap_or_else(|_| "postgres://postgres@localhost:5432".into())
}

/// The secret the tests' provider signs callbacks with, and the shop accepts.
pub const TEST_WEBHOOK_SECRET: &str = "whsec_integration_tests";

/// The merchant's key the tests' provider takes calls with, and the shop calls with.
pub const TEST_PROVIDER_API_KEY: &str = "sk_sandbox_integration_tests";

/// The secret the tests' servers key request fingerprints with.
pub const TEST_FINGERPRINT_SECRET: &str = "fingerprints_of_integration_tests";

/// The bearer token the tests' servers ask for on `/metrics`.
pub const TEST_METRICS_TOKEN: &str = "metrics-token-of-integration-tests";

pub struct TestApp {
    pub address: String,
    pub db: PgPool,
    pub db_name: String,
    pub config: Config,
    /// A shopper: one cookie jar, so one session.
    pub client: Client,
    /// Keeps the database until the last instance on it is dropped.
    pub _database: Arc<TestDatabase>,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(|_| {}).await
}

/// Like [`spawn_app`], with a chance to adjust the configuration first.
pub async fn spawn_app_with(customize: impl FnOnce(&mut Config)) -> TestApp {
    if std::env::var("TEST_LOG").is_ok() {
        telemetry::init();
    }
    let db_name = format!("once_test_{}", Uuid::new_v4().simple());
    let mut config = Config::from_vars(|name| match name {
        "PROVIDER_WEBHOOK_SECRETS" => Some(TEST_WEBHOOK_SECRET.to_owned()),
        "IDEMPOTENCY_FINGERPRINT_SECRETS" => Some(TEST_FINGERPRINT_SECRET.to_owned()),
        "PROVIDER_API_KEY" => Some(TEST_PROVIDER_API_KEY.to_owned()),
        _ => std::env::var(name).ok(),
    })
    .expect("configuration");
    config.database_url = format!("{}/{}", admin_url(), db_name);
    config.listen_addr = SocketAddr::from(([127, 0, 0, 1], 0));
    // Tests drive the relay, the consumers and the mailer themselves (see helpers/events.rs).
    config.events.run_workers = false;
    // One test is one client sending bursts no shopper sends (fifty requests with one key,
    // tabs paying at once, order after order): the rates and quotas are off, and the tests
    // of the limits (limits.rs) turn on the one each tests.
    let off = server::config::Rate {
        per_second: 0,
        burst: 0,
    };
    config.limits.per_client = off;
    config.limits.writes_per_session = off;
    config.limits.new_sessions_per_client_per_hour = 0;
    config.limits.pending_orders = 0;
    config.limits.pending_orders_per_client = 0;
    config.limits.orders_per_client_per_hour = 0;
    config.limits.keys_per_hour = 0;
    config.limits.cart_adds_per_hour = 0;
    config.metrics_token = Some(TEST_METRICS_TOKEN.into());
    customize(&mut config);
    start(config, db_name).await
}

/// Starts another server instance on the same database (a restart, or a second instance).
pub async fn start(config: Config, db_name: String) -> TestApp {
    // Held before the server creates the database, so a start that fails drops it too.
    let database = TestDatabase::named(&db_name);
    let app = Application::build(config.clone())
        .await
        .expect("application builds");
    let address = format!("http://127.0.0.1:{}", app.port());
    let db = app.db().clone();
    tokio::spawn(app.run_until_stopped(std::future::pending()));
    let app = TestApp {
        address,
        db,
        _database: database,
        db_name,
        config,
        client: shopper(),
    };
    app.open_session(&app.client).await;
    app
}

/// A new client with its own cookie jar: a different shopper.
pub fn shopper() -> Client {
    shopper_builder().build().expect("client")
}

/// A shopper whose connections come from `source`, an address of the loopback network
/// (127.0.0.0/8): another client, as the server's per-client limits count them.
pub fn shopper_from(source: [u8; 4]) -> Client {
    shopper_builder()
        .local_address(std::net::IpAddr::from(source))
        .build()
        .expect("client")
}

/// Listens on every address of both families, as `[::]:3000` does: IPv4 peers then come
/// as `::ffff:a.b.c.d`.
pub fn dual_stack(config: &mut Config) {
    config.listen_addr = "[::]:0".parse().expect("an address");
}

fn shopper_builder() -> reqwest::ClientBuilder {
    Client::builder()
        .cookie_store(true)
        .redirect(Policy::none())
        // A hung request fails its test instead of holding the whole run.
        .timeout(std::time::Duration::from_secs(60))
}

impl TestApp {
    /// A first request, as a browser's page load would be: the client gets its session
    /// cookie, so that concurrent requests that follow share one session.
    pub async fn open_session(&self, client: &Client) {
        let response = client
            .get(self.url("/api/products"))
            .send()
            .await
            .expect("first request");
        assert_eq!(response.status(), 200);
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// Runs SQL as the superuser on the server (outside the app's pool).
    pub async fn admin(&self, sql: &str) {
        let mut conn = PgConnection::connect(&format!("{}/postgres", admin_url()))
            .await
            .expect("admin connection");
        sqlx::query(sql)
            .execute(&mut conn)
            .await
            .expect("admin statement");
    }

    /// Cuts the app off from its database: no new connections, existing ones killed.
    pub async fn take_database_down(&self) {
        self.admin(&format!(
            "ALTER DATABASE \"{}\" WITH ALLOW_CONNECTIONS false",
            self.db_name
        ))
        .await;
        self.kill_connections().await;
    }

    pub async fn bring_database_up(&self) {
        self.admin(&format!(
            "ALTER DATABASE \"{}\" WITH ALLOW_CONNECTIONS true",
            self.db_name
        ))
        .await;
    }

    /// Terminates every backend connected to this test's database (`pg_terminate_backend`).
    pub async fn kill_connections(&self) {
        self.admin(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{}' AND pid <> pg_backend_pid()",
            self.db_name
        ))
        .await;
    }

    pub async fn count(&self, table: &str) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&self.db)
            .await
            .expect("count")
    }
}

/// Asserts a response is an RFC 9457 problem with the given status and type suffix, and
/// returns its body.
pub async fn assert_problem(
    response: reqwest::Response,
    status: u16,
    problem: &str,
) -> serde_json::Value {
    let url = response.url().clone();
    let got = response.status().as_u16();
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    // The whole answer goes into every failure: a CI log is all a failure leaves.
    let text = match response.text().await {
        Ok(text) => text,
        Err(e) => {
            panic!("{url} answered {got} {content_type}, and its body could not be read: {e}")
        }
    };
    let seen = format!("{url} answered {got} {content_type}: {text}");
    assert_eq!(got, status, "{seen}");
    assert_eq!(content_type, "application/problem+json", "{seen}");
    let body: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{seen}: not JSON: {e}"));
    assert_eq!(body["status"], status, "{seen}");
    let kind = body["type"]
        .as_str()
        .unwrap_or_else(|| panic!("{seen}: no type"));
    assert!(kind.ends_with(&format!("/{problem}")), "{seen}");
    assert!(
        body["title"].is_string() && body["detail"].is_string(),
        "{seen}"
    );
    body
}

/// A shopper's details, as an order request and the checkout's API door carry them.
pub fn details() -> serde_json::Value {
    serde_json::json!({
        "email": "ada@example.com",
        "shipping_address": {"name": "Ada Lovelace", "line1": "1 Main Street",
                             "postal_code": "SW1Y 4JH", "city": "London", "country": "GB"},
    })
}

/// An order request for `items` with the shopper's [`details`].
pub fn order_with(items: serde_json::Value) -> serde_json::Value {
    let mut body = details();
    body["items"] = items;
    body
}

/// The same details as the no-wasm checkout form posts them.
pub const DETAILS_FORM: &[(&str, &str)] = &[
    ("email", "ada@example.com"),
    ("name", "Ada Lovelace"),
    ("line1", "1 Main Street"),
    ("line2", ""),
    ("postal_code", "SW1Y 4JH"),
    ("city", "London"),
    ("country", "GB"),
];

pub const MUG_ORDER: &str = r#"{"items":[{"sku":"MUG-001","quantity":2}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#;

/// `POST /api/orders` with a key (none if `None`) and a raw JSON body.
pub async fn post_order(
    client: &Client,
    app: &TestApp,
    key: Option<&str>,
    body: &str,
) -> reqwest::Response {
    post_order_with(client, app, key, body, &[]).await
}

pub async fn post_order_with(
    client: &Client,
    app: &TestApp,
    key: Option<&str>,
    body: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    let mut request = client
        .post(app.url("/api/orders"))
        .header("content-type", "application/json")
        .body(body.to_owned());
    if let Some(key) = key {
        request = request.header("idempotency-key", key);
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.expect("request sent")
}

/// An app with fault injection on (hold gates, forced failures).
pub async fn spawn_app_with_faults(customize: impl FnOnce(&mut Config)) -> TestApp {
    spawn_app_with(|c| {
        c.fault_injection = true;
        customize(c);
    })
    .await
}

impl TestApp {
    /// Starts `POST /api/orders` (two mugs) in the background, to be held inside its
    /// transaction at the fault-injection gate `gate`.
    pub fn spawn_held_order(
        &self,
        key: &str,
        gate: &str,
    ) -> tokio::task::JoinHandle<reqwest::Response> {
        let request = self
            .client
            .post(self.url("/api/orders"))
            .header("content-type", "application/json")
            .header("idempotency-key", key)
            .header("once-test-hold", gate)
            .body(MUG_ORDER);
        tokio::spawn(async move { request.send().await.expect("request sent") })
    }

    /// Adds to `client`'s cart through the server function the shop's form posts to, under
    /// a fresh add key (each call is a new click).
    pub async fn add_to_cart(&self, client: &Client, sku: &str, quantity: u32) {
        let key = uuid::Uuid::new_v4().to_string();
        self.add_to_cart_with_key(client, sku, quantity, &key).await;
    }

    /// Posts the shop's "Add to cart" form with the given add key.
    pub async fn add_to_cart_with_key(&self, client: &Client, sku: &str, quantity: u32, key: &str) {
        let added = self
            .post_fn(
                client,
                "add_to_cart",
                &[
                    ("sku", sku),
                    ("quantity", &quantity.to_string()),
                    ("add_key", key),
                ],
            )
            .await;
        assert!(
            added.status().is_success() || added.status().is_redirection(),
            "{}",
            added.status()
        );
    }

    /// Sets a cart line's quantity (0 removes it) through the cart page's server function.
    pub async fn set_cart_quantity(&self, client: &Client, sku: &str, quantity: u32) {
        let changed = self
            .post_fn(
                client,
                "set_cart_quantity",
                &[("sku", sku), ("quantity", &quantity.to_string())],
            )
            .await;
        assert!(changed.status().is_success(), "{}", changed.status());
    }

    /// Posts a form to the server function `name`, as the shop's pages do.
    pub async fn post_fn(
        &self,
        client: &Client,
        name: &str,
        form: &[(&str, &str)],
    ) -> reqwest::Response {
        client
            .post(self.url(&format!("/_fn/{name}")))
            .form(form)
            .send()
            .await
            .expect("request sent")
    }

    /// `client`'s cart, as the server function returns it.
    pub async fn cart(&self, client: &Client) -> serde_json::Value {
        let response = client
            .post(self.url("/_fn/get_cart"))
            .send()
            .await
            .expect("request sent");
        response.json().await.expect("a JSON cart")
    }

    /// `GET path` as `client`: the body as text (a page's HTML).
    pub async fn get_text(&self, client: &Client, path: &str) -> String {
        client
            .get(self.url(path))
            .send()
            .await
            .expect("request sent")
            .text()
            .await
            .expect("a text body")
    }

    /// `GET path` as `client`, parsed as JSON.
    pub async fn get_json(&self, client: &Client, path: &str) -> serde_json::Value {
        client
            .get(self.url(path))
            .send()
            .await
            .expect("request sent")
            .json()
            .await
            .expect("a JSON body")
    }

    /// Waits until `n` requests are held at the gate `name`.
    pub async fn wait_until_held(&self, name: &str, n: u64) {
        for _ in 0..200 {
            let status = self
                .get_json(&self.client, &format!("/_test/gates/{name}"))
                .await;
            if status["waiting"].as_u64() == Some(n) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!("no request reached gate {name}");
    }

    pub async fn open_gate(&self, name: &str) {
        let response = self
            .client
            .post(self.url(&format!("/_test/gates/{name}/open")))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 204);
    }

    pub async fn key_state(&self, key: &str) -> Option<String> {
        sqlx::query_scalar("SELECT state FROM idempotency_keys WHERE key = $1")
            .bind(key)
            .fetch_optional(&self.db)
            .await
            .unwrap()
    }

    /// `/metrics`, read with the metrics token.
    pub async fn metrics_text(&self) -> String {
        let response = self
            .client
            .get(self.url("/metrics"))
            .bearer_auth(TEST_METRICS_TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "/metrics with the token");
        response.text().await.unwrap()
    }

    /// The value of a counter on `/metrics`.
    pub async fn metric(&self, name: &str) -> u64 {
        let text = self.metrics_text().await;
        text.lines()
            .find_map(|l| {
                l.strip_prefix(name)
                    .and_then(|rest| rest.trim().parse().ok())
            })
            .unwrap_or_else(|| panic!("metric {name} missing"))
    }
}

mod checkout;
mod databases;
mod events;
mod journal;
mod logs;
mod payments;
pub mod proxy;
pub mod relay;
pub mod smtp;
mod stripe;
pub mod tls;
pub use checkout::*;
pub use databases::*;
pub use events::*;
pub use journal::*;
pub use logs::Logs;
pub use payments::*;
pub use stripe::*;
