//! `DATABASE_URL=postgres://… FINGERPRINT_SECRET=… cargo run`, then `curl -X POST localhost:3300/bookings -H 'X-Api-Key: k1' -H 'Idempotency-Key: b1' -H 'content-type: application/json' -d '{"room":1,"night":"2027-01-01","guest":"Ada"}'`.
#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let db = sqlx::PgPool::connect(&std::env::var("DATABASE_URL")?).await?;
    once_pg::migrate(&db).await?;
    sqlx::raw_sql(include_str!("../schema.sql")).execute(&db).await?;
    let fingerprints = once_axum::FingerprintKeys::new(&[std::env::var("FINGERPRINT_SECRET")?])?;
    let executor = once_axum::Executor::new(db.clone(), std::time::Duration::from_secs(30)).with_keys_per_hour(1000);
    let day = std::time::Duration::from_secs(24 * 3600);
    tokio::spawn(once_axum::purge::run(db.clone(), day, std::time::Duration::from_secs(60)));
    let app = bookings::App { executor, fingerprints, db };
    axum::serve(tokio::net::TcpListener::bind("127.0.0.1:3300").await?, bookings::router(app)).await?;
    Ok(())
}
