//! The example passes the protocol's conformance suite, run against it over HTTP, on a
//! fresh database of its own.

use std::time::Duration;

use once_axum::conformance::{run_all, Fault, Gates, Subject};
use once_axum::Executor;
use serde_json::{json, Value};
use sqlx::{Connection, PgPool};
use transfers::{router, App, AppError};

const LEASE: Duration = Duration::from_secs(2);

struct Transfers {
    base: String,
    db: PgPool,
    gates: Gates<AppError>,
    http: reqwest::Client,
}

impl Subject for Transfers {
    type Scope = String;

    async fn new_scope(&self) -> String {
        uuid::Uuid::new_v4().to_string()
    }

    fn body(&self, n: u32) -> Value {
        json!({ "from": "acc-1", "to": "acc-2", "amount_cents": 100 + n })
    }

    async fn send(
        &self,
        scope: &String,
        key: Option<&str>,
        body: &Value,
        fault: Fault,
    ) -> reqwest::Response {
        if let Some(key) = key {
            match fault {
                Fault::None => {}
                Fault::Hold(gate) => self.gates.hold(key, &gate),
                Fault::FailTransient => self.gates.fail(key),
            }
        }
        let mut request = self
            .http
            .post(format!("{}/transfers", self.base))
            .header("x-api-key", scope)
            .json(body);
        if let Some(key) = key {
            request = request.header("idempotency-key", key);
        }
        request.send().await.expect("the example answers")
    }

    async fn effects(&self, scope: &String) -> u64 {
        let count: i64 = sqlx::query_scalar("SELECT count(*) FROM transfers WHERE api_key = $1")
            .bind(scope)
            .fetch_one(&self.db)
            .await
            .expect("count transfers");
        count as u64
    }

    async fn waiting(&self, gate: &str) -> usize {
        self.gates.waiting(gate)
    }

    async fn open(&self, gate: &str) {
        self.gates.open(gate)
    }

    fn lease(&self) -> Duration {
        LEASE
    }
}

/// A fresh database with the key table and the example's own table.
async fn fresh_db() -> PgPool {
    let admin = std::env::var("TEST_DATABASE_ADMIN_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
    let name = format!("once_test_transfers_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(&format!("{admin}/postgres"))
        .await
        .expect("admin connection");
    sqlx::query(&format!("CREATE DATABASE \"{name}\""))
        .execute(&mut conn)
        .await
        .expect("create database");
    let db = PgPool::connect(&format!("{admin}/{name}"))
        .await
        .expect("test database");
    once_pg::migrate(&db).await.expect("the key table");
    let mut own = sqlx::migrate!("./migrations");
    own.set_ignore_missing(true);
    own.run(&db).await.expect("the example's table");
    db
}

/// The example on port 0, on a fresh database, with test faults by key: its address, its
/// database and its faults.
async fn start() -> (String, PgPool, Gates<AppError>) {
    let db = fresh_db().await;
    let gates = Gates::default();
    let app = App {
        executor: Executor::new(db.clone(), LEASE, gates.clone()),
        fingerprints: once_core::FingerprintKeys::new(&["test secret".to_owned()]),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router(app)).await });
    (base, db, gates)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_example_passes_the_conformance_suite() {
    let (base, db, gates) = start().await;
    let http = reqwest::Client::new();
    run_all(&Transfers {
        base,
        db,
        gates,
        http,
    })
    .await;
}

#[tokio::test]
async fn a_refusal_is_stored_and_replayed_like_a_success() {
    let (base, _, _) = start().await;
    let http = reqwest::Client::new();
    let send = || {
        http.post(format!("{base}/transfers"))
            .header("x-api-key", "k")
            .header("idempotency-key", "negative")
            .json(&json!({ "from": "a", "to": "b", "amount_cents": -5 }))
            .send()
    };
    let first = send().await.unwrap();
    assert_eq!(first.status(), 422);
    let again = send().await.unwrap();
    assert_eq!(again.status(), 422);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
}

#[tokio::test]
async fn a_key_s_status_is_visible_to_its_own_scope_only() {
    let (base, _, _) = start().await;
    let http = reqwest::Client::new();
    let made = http
        .post(format!("{base}/transfers"))
        .header("x-api-key", "mine")
        .header("idempotency-key", "t-1")
        .json(&json!({ "from": "a", "to": "b", "amount_cents": 5 }))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 201);
    let status = |api_key: &'static str| {
        http.get(format!("{base}/idempotency-keys/t-1"))
            .header("x-api-key", api_key)
            .send()
    };
    let mine = status("mine").await.unwrap();
    let (code, headers) = (mine.status(), mine.headers().clone());
    let text = mine.text().await.unwrap();
    assert_eq!(code, 200, "{headers:?} {text}");
    let mine: Value = serde_json::from_str(&text).unwrap();

    assert_eq!(mine["state"], "completed");
    assert_eq!(mine["response_status"], 201);
    assert_eq!(
        mine["location"],
        made.headers()["location"].to_str().unwrap()
    );
    assert_eq!(status("theirs").await.unwrap().status(), 404);
}
