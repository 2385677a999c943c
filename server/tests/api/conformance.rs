//! The shop passes the protocol's conformance suite (`once_axum::conformance`), the same
//! one the bookings example runs: `POST /api/orders`, scoped by the session, with the
//! shop's own test-time faults (`Once-Test-Hold`, `Once-Test-Fail`). And the key table the
//! shop's migrations built is the one `once_pg`'s migration builds.

use std::time::Duration;

use once_axum::conformance::{
    a_key_past_retention_is_a_new_request, run_all, Call, Fault, On, Subject,
};
use reqwest::Client;
use serde_json::{json, Value};

use crate::helpers::{
    admin_url, order_with, shopper, spawn_app_with_faults, TestApp, TestDatabase,
};

const LEASE: Duration = Duration::from_secs(2);
/// The retention of the app whose keys the suite waits out (longer than the lease).
const SHORT_RETENTION: Duration = Duration::from_secs(3);

struct Shop(TestApp);

impl Subject for Shop {
    type Scope = Client;

    async fn new_scope(&self) -> Client {
        let client = shopper();
        self.0.open_session(&client).await;
        client
    }

    fn body(&self, _op: usize, n: u32) -> Value {
        order_with(json!([{ "sku": "MUG-001", "quantity": n }]))
    }

    fn refusal(&self, _op: usize) -> Option<Value> {
        Some(order_with(json!([{ "sku": "NO-SUCH-SKU", "quantity": 1 }])))
    }

    async fn send(&self, client: &Client, call: Call<'_>) -> reqwest::Response {
        let mut request = client.post(self.0.url("/api/orders")).json(call.body);
        if let Some(key) = call.key {
            request = request.header("idempotency-key", key);
        }
        if let Some(prefer) = call.prefer() {
            request = request.header("prefer", prefer);
        }
        request = match call.fault {
            Fault::Hold(gate) => request.header("once-test-hold", gate),
            Fault::FailTransient => request.header("once-test-fail", "transient"),
            Fault::ReadOnly => request.header("once-test-fail", "read-only"),
            Fault::HoldThenFail(gate) => request
                .header("once-test-hold", gate)
                .header("once-test-fail", "transient"),
            _ => request,
        };
        request.send().await.expect("the shop answers")
    }

    async fn key_status(&self, client: &Client, key: &str) -> reqwest::Response {
        let url = self.0.url(&format!("/api/idempotency-keys/{key}"));
        client.get(url).send().await.expect("the shop answers")
    }

    async fn effects(&self, client: &Client) -> u64 {
        let orders = self.0.get_json(client, "/api/orders").await;
        orders.as_array().expect("a list of orders").len() as u64
    }

    async fn waiting(&self, gate: &str) -> usize {
        let status = self
            .0
            .get_json(&self.0.client, &format!("/_test/gates/{gate}"))
            .await;
        status["waiting"].as_u64().unwrap_or(0) as usize
    }

    async fn open(&self, gate: &str) {
        self.0.open_gate(gate).await
    }

    fn lease(&self) -> Duration {
        LEASE
    }

    fn longest_wait(&self) -> Option<Duration> {
        Some(self.0.config.idempotency_waits.longest)
    }

    async fn waiters(&self) -> Option<usize> {
        let waiters = self.0.get_json(&self.0.client, "/_test/waiters").await;
        waiters["waiting"].as_u64().map(|n| n as usize)
    }

    /// Only an app made to keep keys for seconds is waited out.
    fn retention(&self) -> Option<Duration> {
        Some(self.0.config.idempotency_retention).filter(|r| *r <= SHORT_RETENTION)
    }

    async fn purge(&self) {
        once_pg::purge(&self.0.db, self.0.config.idempotency_retention)
            .await
            .expect("the purge");
    }
}

#[tokio::test]
async fn the_shop_passes_the_conformance_suite() {
    let app = spawn_app_with_faults(|c| c.idempotency_lease = LEASE).await;
    run_all(&Shop(app)).await;
}

/// The answer cache keeps no answer past its key's retention: the check the suite runs
/// for a subject that says its retention, on an app that keeps keys for seconds.
#[tokio::test]
async fn the_shop_answers_a_key_past_its_retention_as_a_new_request() {
    let app = spawn_app_with_faults(|c| {
        c.idempotency_lease = LEASE;
        c.idempotency_retention = SHORT_RETENTION;
    })
    .await;
    let shop = Shop(app);
    assert!(shop.retention().is_some());
    a_key_past_retention_is_a_new_request(&On {
        subject: &shop,
        op: 0,
    })
    .await;
}

/// Columns, constraints and indexes of `idempotency_keys` in database `name`.
async fn key_table_shape(name: &str) -> Vec<String> {
    let db = sqlx::PgPool::connect(&format!("{}/{}", admin_url(), name))
        .await
        .expect("database");
    sqlx::query_scalar(
        "SELECT format('column %s %s %s %s', column_name, data_type, is_nullable, column_default)
           FROM information_schema.columns WHERE table_name = 'idempotency_keys'
         UNION ALL
         SELECT format('constraint %s %s', conname, pg_get_constraintdef(oid))
           FROM pg_constraint WHERE conrelid = 'idempotency_keys'::regclass
         UNION ALL
         SELECT format('index %s', indexdef) FROM pg_indexes WHERE tablename = 'idempotency_keys'
         ORDER BY 1",
    )
    .fetch_all(&db)
    .await
    .expect("the table's shape")
}

#[tokio::test]
async fn the_shop_s_key_table_is_the_one_once_pg_creates() {
    let app = spawn_app_with_faults(|_| {}).await;
    let crate_db = format!("{}_once_pg", app.db_name);
    let _dropped_at_the_end = TestDatabase::named(&crate_db);
    app.admin(&format!("CREATE DATABASE \"{crate_db}\"")).await;
    let db = sqlx::PgPool::connect(&format!("{}/{}", admin_url(), crate_db))
        .await
        .expect("database");
    once_pg::migrate(&db).await.expect("once-pg's migration");
    let shop = key_table_shape(&app.db_name).await;
    assert!(shop.len() > 15, "the shape was read: {shop:?}");
    assert_eq!(shop, key_table_shape(&crate_db).await);
}
