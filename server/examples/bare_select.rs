//! The floor a replay is measured against (`scripts/bench`): a bare axum + sqlx server whose
//! `POST /api/orders` runs nothing but the statement a replay costs Once
//! (`idempotency::store::READ_FIRST`) and answers with the stored body. No middleware, no
//! session layer, no body parsing, no fingerprint: what separates it from pgbench is the
//! HTTP server, the pool and the machine; what separates Once's replay from it is Once.
//!
//! Usage: bare_select ADDR DATABASE_URL

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
    Router,
};
use server::idempotency::store::READ_FIRST;
use sqlx::{postgres::PgRow, PgPool, Row};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:3952".into());
    let url = args
        .next()
        .ok_or_else(|| anyhow::anyhow!("give the database URL"))?;
    let db = PgPool::connect(&url).await?;
    let app = Router::new()
        .route("/api/orders", post(replay))
        .with_state(db);
    axum::serve(tokio::net::TcpListener::bind(&addr).await?, app).await?;
    Ok(())
}

async fn replay(State(db): State<PgPool>, headers: HeaderMap, _body: Bytes) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    let scope = header("cookie")
        .trim_start_matches("once_session=")
        .to_owned();
    let key = header("idempotency-key").to_owned();
    let row = sqlx::query(READ_FIRST)
        .bind(scope)
        .bind(key)
        .fetch_one(&db)
        .await;
    let known = |row: &PgRow| row.get::<bool, _>("session_known");
    match row {
        Ok(row) if known(&row) => {
            let body: Option<Vec<u8>> = row.get("response_body");
            let body = body.unwrap_or_default();
            (StatusCode::CREATED, [("idempotent-replayed", "true")], body).into_response()
        }
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}
