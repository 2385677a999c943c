//! `DATABASE_URL=postgres://… cargo run -p transfers`, then
//! `curl -X POST localhost:3100/transfers -H 'X-Api-Key: k1' -H 'Idempotency-Key: t1' \
//!   -H 'content-type: application/json' -d '{"from":"a","to":"b","amount_cents":100}'`.

use std::time::Duration;

use once_axum::{Executor, NoHooks};
use transfers::{router, App};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let db = sqlx::PgPool::connect(&std::env::var("DATABASE_URL")?).await?;
    once_pg::migrate(&db).await?;
    let mut own = sqlx::migrate!("./migrations");
    own.set_ignore_missing(true);
    own.run(&db).await?;
    let secret = std::env::var("FINGERPRINT_SECRET").unwrap_or_else(|_| "change me".into());
    let app = App {
        executor: Executor::new(db, Duration::from_secs(30), NoHooks::default()),
        fingerprints: once_core::FingerprintKeys::new(&[secret]),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3100").await?;
    axum::serve(listener, router(app)).await?;
    Ok(())
}
