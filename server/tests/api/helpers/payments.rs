//! Helpers for payment tests: the sandbox provider wired to the shop, orders to pay, and
//! callbacks signed like the provider signs them.

use std::net::SocketAddr;

use uuid::Uuid;

use super::{admin_url, post_order, shopper, spawn_app_with_faults, TestApp, MUG_ORDER};
use sqlx::PgPool;

/// The sandbox provider, running in this process on port 0 over real HTTP, with its own
/// fresh database; its webhooks go to the shop under test.
pub struct TestProvider {
    pub address: String,
    pub db: PgPool,
    pub settings: provider::settings::SharedSettings,
    /// Keeps the provider's database while the provider lives.
    pub _database: std::sync::Arc<super::TestDatabase>,
}

/// A shop (with fault injection) and a provider wired to each other.
pub async fn spawn_shop_and_provider() -> (TestApp, TestProvider) {
    spawn_shop_and_provider_with(|_| {}).await
}

/// Like [`spawn_shop_and_provider`], with a chance to adjust the shop's configuration.
pub async fn spawn_shop_and_provider_with(
    customize: impl FnOnce(&mut server::config::Config) + Send + 'static,
) -> (TestApp, TestProvider) {
    let provider = spawn_provider().await;
    let provider_url = provider.address.clone();
    let app = spawn_app_with_faults(move |c| {
        c.provider_url = provider_url;
        customize(c);
    })
    .await;
    provider
        .settings
        .set_webhook_url(app.url("/webhooks/provider"));
    (app, provider)
}

/// The sandbox provider alone; its webhooks go nowhere until a shop is named.
pub async fn spawn_provider() -> TestProvider {
    let name = format!("once_provider_test_{}", Uuid::new_v4().simple());
    // Held before the provider creates the database, so a start that fails drops it too.
    let database = super::TestDatabase::named(&name);
    let config = provider::config::Config {
        database_url: format!("{}/{name}", admin_url()),
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        webhook_url: "http://127.0.0.1:9/not-yet".into(),
        webhook_secret: super::TEST_WEBHOOK_SECRET.into(),
        api_key: super::TEST_PROVIDER_API_KEY.into(),
        chaos: Default::default(),
    };
    let provider_app = provider::startup::Application::build(config)
        .await
        .expect("provider builds");
    let provider = TestProvider {
        address: format!("http://127.0.0.1:{}", provider_app.port()),
        db: provider_app.db().clone(),
        settings: provider_app.settings(),
        _database: database,
    };
    tokio::spawn(provider_app.run_until_stopped(std::future::pending()));
    provider
}

impl TestProvider {
    /// Charges in the provider's ledger for one merchant reference (a payment attempt id).
    pub async fn charges_for(&self, reference: &str) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM charges WHERE reference = $1")
            .bind(reference)
            .fetch_one(&self.db)
            .await
            .unwrap()
    }

    /// Charges in the provider's ledger for every attempt the shop recorded for `order_id`
    /// (each attempt id is the provider's reference).
    pub async fn charges_for_order(&self, app: &TestApp, order_id: &str) -> i64 {
        let attempts: Vec<String> =
            sqlx::query_scalar("SELECT id::text FROM payments WHERE order_id = $1::uuid")
                .bind(order_id)
                .fetch_all(&app.db)
                .await
                .unwrap();
        let mut charged = 0;
        for attempt in &attempts {
            charged += self.charges_for(attempt).await;
        }
        charged
    }

    /// Charges `amount_cents` for the merchant reference `reference` directly at the
    /// provider, as our own charge call would; returns the charge id.
    pub async fn charge(&self, reference: &str, card: &str, amount_cents: i64) -> String {
        let response = reqwest::Client::new()
            .post(format!("{}/v1/charges", self.address))
            .bearer_auth(super::TEST_PROVIDER_API_KEY)
            .header("idempotency-key", format!("test-{reference}"))
            .json(&serde_json::json!({
                "amount_cents": amount_cents, "currency": "EUR",
                "card_number": card, "reference": reference,
            }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 201);
        let charge: serde_json::Value = response.json().await.unwrap();
        charge["id"].as_str().unwrap().to_owned()
    }

    /// A charge the provider really made for `reference` (so the shop confirms a callback
    /// naming it), whose webhooks the provider keeps to itself: the test sends the
    /// callbacks. Returns the charge id.
    pub async fn unannounced_charge(&self, reference: &str) -> String {
        self.settings.set_webhook_url("http://127.0.0.1:9/nowhere");
        self.charge(reference, CARD_OK, 3600).await
    }

    /// The id of the provider's charge for `reference`.
    pub async fn charge_id_for(&self, reference: &str) -> String {
        sqlx::query_scalar("SELECT id FROM charges WHERE reference = $1")
            .bind(reference)
            .fetch_one(&self.db)
            .await
            .unwrap()
    }

    /// Webhook deliveries the merchant acknowledged.
    pub async fn delivered(&self) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM webhook_deliveries WHERE delivered_at IS NOT NULL")
            .fetch_one(&self.db)
            .await
            .unwrap()
    }

    pub async fn charges(&self) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM charges")
            .fetch_one(&self.db)
            .await
            .unwrap()
    }
}

/// The sandbox provider's test cards (see `provider/src/charges.rs`).
pub const CARD_OK: &str = "4242424242424242";
pub const CARD_DECLINED: &str = "4000000000000002";
pub const CARD_DROPS_RESPONSE: &str = "4000000000000259";
pub const CARD_SLOW: &str = "4000000000000077";
pub const CARD_PROCESSING: &str = "4000000000000127";

/// An order paid through the API; returns (order id, payment id, charge id).
pub async fn paid_order(app: &TestApp) -> (String, String, String) {
    let order_id = place_order(app).await;
    let payment: serde_json::Value = pay(app, &order_id, "paid", CARD_OK, &[])
        .await
        .json()
        .await
        .unwrap();
    let id = payment["id"].as_str().unwrap().to_owned();
    (
        order_id,
        id,
        payment["provider_charge_id"].as_str().unwrap().to_owned(),
    )
}

/// Now, in Unix seconds, as callbacks are timestamped.
pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

/// A payment attempt the charge call has not finished yet (as if its answer were still on
/// the way), recorded as the shop records one: with its first call stamped; returns its id.
pub async fn pending_attempt(app: &TestApp, order_id: &str) -> String {
    sqlx::query_scalar(
        "INSERT INTO payments (id, order_id, idempotency_scope, idempotency_key, amount_cents, currency,
                               charge_requested_at)
         VALUES (gen_random_uuid(), $1::uuid, 's', gen_random_uuid()::text, 3600, 'EUR', now())
         RETURNING id::text",
    )
    .bind(order_id)
    .fetch_one(&app.db)
    .await
    .unwrap()
}

/// Makes an attempt look abandoned `hours` ago: its creation and its first call's stamp
/// (which the shop writes together) both moved back.
pub async fn backdate_attempt(app: &TestApp, payment_id: &str, hours: i32) {
    sqlx::query(
        "UPDATE payments SET created_at = now() - make_interval(hours => $2),
                            charge_requested_at = now() - make_interval(hours => $2)
          WHERE id = $1::uuid",
    )
    .bind(payment_id)
    .bind(hours)
    .execute(&app.db)
    .await
    .unwrap();
}

/// Places an order for two mugs (€36.00) and returns its id.
pub async fn place_order(app: &TestApp) -> String {
    let response = post_order(
        &app.client,
        app,
        Some(&Uuid::new_v4().to_string()),
        MUG_ORDER,
    )
    .await;
    assert_eq!(response.status(), 201);
    let order: serde_json::Value = response.json().await.unwrap();
    order["id"].as_str().unwrap().to_owned()
}

/// `POST /api/orders/{order_id}/payments` as the app's shopper, ready to send.
pub fn pay_request(
    app: &TestApp,
    order_id: &str,
    key: &str,
    card: &str,
    headers: &[(&str, &str)],
) -> reqwest::RequestBuilder {
    let mut request = app
        .client
        .post(app.url(&format!("/api/orders/{order_id}/payments")))
        .header("idempotency-key", key)
        .json(&serde_json::json!({ "card_number": card }));
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request
}

pub async fn pay(
    app: &TestApp,
    order_id: &str,
    key: &str,
    card: &str,
    headers: &[(&str, &str)],
) -> reqwest::Response {
    pay_request(app, order_id, key, card, headers)
        .send()
        .await
        .unwrap()
}

/// Starts a payment in the background (a first tab, or a request to be held at a gate).
pub fn spawn_pay(
    app: &TestApp,
    order_id: &str,
    key: &str,
    card: &str,
    headers: &[(&str, &str)],
) -> tokio::task::JoinHandle<reqwest::Response> {
    let request = pay_request(app, order_id, key, card, headers);
    tokio::spawn(async move { request.send().await.unwrap() })
}

/// Polls `check` for up to ten seconds.
pub async fn eventually<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    for _ in 0..100 {
        if check().await {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("timed out waiting until {what}");
}

impl TestApp {
    pub async fn order_status(&self, order_id: &str) -> String {
        sqlx::query_scalar("SELECT status FROM orders WHERE id = $1::uuid")
            .bind(order_id)
            .fetch_one(&self.db)
            .await
            .unwrap()
    }

    pub async fn count_where(&self, table: &str, condition: &str) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM {table} WHERE {condition}"))
            .fetch_one(&self.db)
            .await
            .unwrap()
    }

    /// Waits until `n` statements of this test's database wait on a lock (`what` they are).
    pub async fn wait_for_lock_waiters(&self, n: i64, what: &str) {
        eventually(what, || async {
            self.count_where(
                "pg_stat_activity",
                "datname = current_database() AND wait_event_type = 'Lock'",
            )
            .await
                == n
        })
        .await;
    }

    /// Runs `sql` with one text parameter `$1` against the shop database.
    pub async fn sql(&self, sql: &str, arg: &str) {
        sqlx::query(sql).bind(arg).execute(&self.db).await.unwrap();
    }

    /// Sends a signed callback now and returns the outcome the shop answered with.
    pub async fn callback_outcome(&self, body: &serde_json::Value) -> String {
        let response = self
            .send_callback(body, chrono::Utc::now().timestamp())
            .await;
        assert_eq!(
            response.status(),
            200,
            "never an error the provider would retry"
        );
        let answer: serde_json::Value = response.json().await.unwrap();
        answer["outcome"].as_str().unwrap().to_owned()
    }

    /// Sends a provider callback signed with the test secret at `timestamp`.
    pub async fn send_callback(
        &self,
        body: &serde_json::Value,
        timestamp: i64,
    ) -> reqwest::Response {
        signed_callback(self, body, super::TEST_WEBHOOK_SECRET, timestamp)
            .send()
            .await
            .unwrap()
    }
}

/// A callback body as the provider would send it.
pub fn callback(
    kind: &str,
    tx_no: &str,
    charge_id: &str,
    amount_cents: i64,
    reference: &str,
) -> serde_json::Value {
    serde_json::json!({
        "id": format!("evt_{}", Uuid::new_v4().simple()),
        "type": kind,
        "tx_no": tx_no,
        "created": chrono::Utc::now().timestamp(),
        "data": {
            "charge_id": charge_id,
            "amount_cents": amount_cents,
            "currency": "EUR",
            "reference": reference,
            "status": if kind == "charge.succeeded" { "succeeded" } else { "failed" },
            "failure_code": null
        }
    })
}

/// A callback to `app`, signed with `secret` at `timestamp` the way the provider signs it.
pub fn signed_callback(
    app: &TestApp,
    body: &serde_json::Value,
    secret: &str,
    timestamp: i64,
) -> reqwest::RequestBuilder {
    let body = serde_json::to_vec(body).unwrap();
    let signature = provider::webhooks::sign(secret, timestamp, &body);
    shopper()
        .post(app.url("/webhooks/provider"))
        .header("content-type", "application/json")
        .header("once-signature", signature)
        .body(body)
}
