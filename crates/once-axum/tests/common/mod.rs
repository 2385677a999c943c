//! A fresh database per test, with once-pg's tables and the test's own.

use sqlx::{Connection, PgPool};

/// A database of the test's own, dropped with it: at the end of its test, passed or failed.
pub struct TestDb {
    pub db: PgPool,
    name: String,
}

fn admin() -> String {
    std::env::var("TEST_DATABASE_ADMIN_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into())
}

async fn on_postgres(statement: &str) {
    let mut conn = sqlx::PgConnection::connect(&format!("{}/postgres", admin()))
        .await
        .unwrap();
    sqlx::query(statement).execute(&mut conn).await.unwrap();
}

impl TestDb {
    /// A new database with once-pg's migration and `schema` applied.
    pub async fn create(schema: &str) -> Self {
        let name = format!("once_test_axum_{}", uuid::Uuid::new_v4().simple());
        on_postgres(&format!("CREATE DATABASE \"{name}\"")).await;
        let db = Self {
            db: PgPool::connect(&format!("{}/{name}", admin()))
                .await
                .unwrap(),
            name,
        };
        sqlx::raw_sql(once_pg::MIGRATION)
            .execute(&db.db)
            .await
            .unwrap();
        sqlx::raw_sql(schema).execute(&db.db).await.unwrap();
        db
    }

    /// Another pool on the same database: another instance's.
    #[allow(dead_code)]
    pub async fn another_pool(&self) -> PgPool {
        PgPool::connect(&format!("{}/{}", admin(), self.name))
            .await
            .unwrap()
    }

    /// Whether the database takes new connections (existing ones stay).
    #[allow(dead_code)]
    pub async fn allow_connections(&self, allowed: bool) {
        let alter = format!(
            "ALTER DATABASE \"{}\" ALLOW_CONNECTIONS {allowed}",
            self.name
        );
        on_postgres(&alter).await;
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // `drop` cannot await and may run on the test's runtime: the DROP runs on a thread
        // and a runtime of its own. FORCE ends the connections the test's pools still hold.
        let statement = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        let dropped = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map(|runtime| runtime.block_on(on_postgres(&statement)))
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test database {}", self.name);
        }
    }
}
