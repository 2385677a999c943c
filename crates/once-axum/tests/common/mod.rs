//! A fresh database per test, with once-pg's tables and the test's own.

use sqlx::{Connection, PgPool};

/// A database of the test's own, dropped by [`TestDb::drop_database`].
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

    /// Drops the database, whoever is still connected.
    pub async fn drop_database(&self) {
        self.db.close().await;
        on_postgres(&format!(
            "DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)",
            self.name
        ))
        .await;
    }
}
