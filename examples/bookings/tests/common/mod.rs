//! What the example's tests share: a fresh database of their own, and the example on port 0.

use std::time::Duration;

use bookings::{router, App};
use once_axum::{Executor, FingerprintKeys};
use sqlx::{Connection, PgPool};
use uuid::Uuid;

/// The lease the example runs with in tests: the takeover check waits it out.
pub const LEASE: Duration = Duration::from_secs(2);

/// A fresh database, dropped when the test ends.
pub struct TestDb {
    admin: String,
    name: String,
    /// The database.
    pub pool: PgPool,
}

impl TestDb {
    async fn new() -> Self {
        let admin =
            std::env::var("TEST_DATABASE_ADMIN_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
        let name = format!("once_test_bookings_{}", Uuid::new_v4().simple());
        let mut conn = sqlx::PgConnection::connect(&format!("{admin}/postgres")).await.expect("admin connection");
        sqlx::query(&format!("CREATE DATABASE \"{name}\"")).execute(&mut conn).await.expect("create database");
        let db = PgPool::connect(&format!("{admin}/{name}")).await.expect("test database");
        // Made before the schema, so a schema that fails drops the database too.
        let test_db = Self { admin, name, pool: db };
        sqlx::raw_sql(once_pg::MIGRATION).execute(&test_db.pool).await.expect("the key table, without sqlx's migrator");
        sqlx::raw_sql(include_str!("../../schema.sql")).execute(&test_db.pool).await.expect("the bookings table");
        test_db
    }
}

impl Drop for TestDb {
    /// Drops the database at the end of its test, passed or failed. `drop` cannot await and
    /// may run on the test's runtime: the DROP runs on a thread and a runtime of its own.
    fn drop(&mut self) {
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(async {
                let mut conn = sqlx::PgConnection::connect(&format!("{admin}/postgres")).await?;
                let drop = format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)");
                sqlx::query(&drop).execute(&mut conn).await?;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test database {}", self.name);
        }
    }
}

/// The example on port 0 on a fresh database, its executor as `configure` makes it: the
/// database and the example's address.
pub async fn start(configure: impl FnOnce(Executor) -> Executor) -> (TestDb, String) {
    let test_db = TestDb::new().await;
    let db = test_db.pool.clone();
    let app = App {
        executor: configure(Executor::new(db.clone(), LEASE)),
        fingerprints: FingerprintKeys::new(&["test secret".to_owned()]).unwrap(),
        db,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router(app)).await });
    (test_db, base)
}
