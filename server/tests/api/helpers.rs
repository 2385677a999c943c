//! `spawn_app()`: a fresh database and a running server per test, plus a client with a
//! cookie jar (one shopper session) and helpers to read the database directly.

use std::net::SocketAddr;

use reqwest::{redirect::Policy, Client};
use server::{config::Config, startup::Application, telemetry};
use sqlx::{Connection, PgConnection, PgPool};
use uuid::Uuid;

/// The PostgreSQL server tests create their databases on.
fn admin_url() -> String {
    std::env::var("TEST_DATABASE_ADMIN_URL").unwrap_or_else(|_| "postgres://postgres@localhost:5432".into())
}

pub struct TestApp {
    pub address: String,
    pub db: PgPool,
    pub db_name: String,
    pub config: Config,
    /// A shopper: one cookie jar, so one session.
    pub client: Client,
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
    let mut config = Config::from_env().expect("configuration");
    config.database_url = format!("{}/{}", admin_url(), db_name);
    config.listen_addr = SocketAddr::from(([127, 0, 0, 1], 0));
    customize(&mut config);
    start(config, db_name).await
}

/// Starts another server instance on the same database (a restart, or a second instance).
pub async fn start(config: Config, db_name: String) -> TestApp {
    let app = Application::build(config.clone()).await.expect("application builds");
    let address = format!("http://127.0.0.1:{}", app.port());
    let db = app.db().clone();
    tokio::spawn(app.run_until_stopped(std::future::pending()));
    TestApp { address, db, db_name, config, client: shopper() }
}

/// A new client with its own cookie jar: a different shopper.
pub fn shopper() -> Client {
    Client::builder().cookie_store(true).redirect(Policy::none()).build().expect("client")
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// Runs SQL as the superuser on the server (outside the app's pool).
    pub async fn admin(&self, sql: &str) {
        let mut conn = PgConnection::connect(&format!("{}/postgres", admin_url())).await.expect("admin connection");
        sqlx::query(sql).execute(&mut conn).await.expect("admin statement");
    }

    /// Cuts the app off from its database: no new connections, existing ones killed.
    pub async fn take_database_down(&self) {
        self.admin(&format!("ALTER DATABASE \"{}\" WITH ALLOW_CONNECTIONS false", self.db_name)).await;
        self.kill_connections().await;
    }

    pub async fn bring_database_up(&self) {
        self.admin(&format!("ALTER DATABASE \"{}\" WITH ALLOW_CONNECTIONS true", self.db_name)).await;
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
        sqlx::query_scalar(&format!("SELECT count(*) FROM {table}")).fetch_one(&self.db).await.expect("count")
    }
}

/// Asserts a response is an RFC 9457 problem with the given status and type suffix, and
/// returns its body.
pub async fn assert_problem(response: reqwest::Response, status: u16, problem: &str) -> serde_json::Value {
    assert_eq!(response.status().as_u16(), status, "status of {}", response.url());
    let content_type = response.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    assert_eq!(content_type, "application/problem+json");
    let body: serde_json::Value = response.json().await.expect("problem body is JSON");
    assert_eq!(body["status"], status);
    let kind = body["type"].as_str().expect("type");
    assert!(kind.ends_with(&format!("/{problem}")), "problem type {kind} should end in {problem}");
    assert!(body["title"].is_string() && body["detail"].is_string());
    body
}
