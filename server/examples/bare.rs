//! The floors Once's requests are measured against (`scripts/bench`): a bare axum + sqlx
//! server with no middleware, no session layer, no body parsing, no fingerprint and no
//! executor. What separates it from pgbench is the HTTP server, the pool and the machine;
//! what separates Once from it is Once.
//!
//! * `POST /api/orders` runs nothing but the statement a replay costs Once
//!   (`idempotency::store::read_first`'s, copied below) and answers with the stored body;
//! * `POST /memory/api/orders` runs nothing: it answers one stored body it holds in memory,
//!   as a replay from Once's answer cache does (the HTTP floor);
//! * `POST /new/api/orders` runs the statements a new key costs, in Once's order and with its
//!   transaction boundaries (`scripts/bench.d/new-key.sql` is the same list for pgbench):
//!   the read, the claim, then one transaction that creates the order and completes the key.
//!
//! Usage: bare ADDR DATABASE_URL

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
    routing::post,
    Router,
};
use sqlx::{postgres::PgRow, PgPool, Row};
use uuid::Uuid;

/// `idempotency::store::read_first`'s statement ($1 the scope, $2 the key), copied (as
/// `scripts/bench.d/replay-select.sql` copies it): a query macro takes its SQL only as a
/// literal written in place, so the server's statement cannot be shared from there.
const READ_FIRST: &str = "
    SELECT EXISTS (SELECT 1 FROM tower_sessions.session s
                    WHERE s.id = $1 AND s.expiry_date > now()) AS session_known,
           k.route, k.fingerprint, k.state, coalesce(k.locked_until > now(), false) AS lease_valid,
           k.response_status, k.response_headers, k.response_body
      FROM (VALUES (1)) AS one (n)
      LEFT JOIN idempotency_keys k ON k.scope = $1 AND k.key = $2";

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
        .route("/new/api/orders", post(new_key))
        .route("/memory/api/orders", post(from_memory))
        .with_state(db);
    axum::serve(tokio::net::TcpListener::bind(&addr).await?, app).await?;
    Ok(())
}

/// The session id and the key, as the bench sends them.
fn scope_and_key(headers: &HeaderMap) -> (String, String) {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    };
    let scope = header("cookie").trim_start_matches("once_session=");
    (scope.to_owned(), header("idempotency-key").to_owned())
}

async fn replay(State(db): State<PgPool>, headers: HeaderMap, _body: Bytes) -> Response {
    let (scope, key) = scope_and_key(&headers);
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

/// The size of an order's answer, held once.
static REMEMBERED: std::sync::LazyLock<Bytes> = std::sync::LazyLock::new(|| {
    let id = Uuid::nil();
    Bytes::from(format!(
        r#"{{"id":"{id}","order_no":"ORD-000001","total_cents":1200}}"#
    ))
});

async fn from_memory(headers: HeaderMap, _body: Bytes) -> Response {
    // The key is read as Once reads it, so both parse the same request.
    let (_scope, _key) = scope_and_key(&headers);
    (
        StatusCode::CREATED,
        [("idempotent-replayed", "true")],
        REMEMBERED.clone(),
    )
        .into_response()
}

async fn new_key(State(db): State<PgPool>, headers: HeaderMap, _body: Bytes) -> Response {
    let (scope, key) = scope_and_key(&headers);
    match create(&db, &scope, &key).await {
        Ok(body) => (StatusCode::CREATED, body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

/// One order of one MUG-001 under a new key: the statements of `new-key.sql`, through sqlx.
async fn create(db: &PgPool, scope: &str, key: &str) -> Result<String, sqlx::Error> {
    let fingerprint = "0".repeat(64);
    sqlx::query(READ_FIRST)
        .bind(scope)
        .bind(key)
        .fetch_one(db)
        .await?;
    sqlx::query(
        "INSERT INTO idempotency_keys (scope, key, method, route, fingerprint, state, lease_token, locked_until)
         VALUES ($1, $2, 'POST', 'POST /api/orders', $3, 'processing', $4, now() + 30000 * interval '1 millisecond')
         ON CONFLICT ON CONSTRAINT idempotency_keys_scope_key_key DO NOTHING",
    )
    .bind(scope)
    .bind(key)
    .bind(&fingerprint)
    .bind(Uuid::new_v4())
    .execute(db)
    .await?;
    let mut tx = db.begin().await?;
    let (name, price, currency): (String, i64, String) = sqlx::query_as(
        "SELECT name, price_cents, currency FROM products WHERE sku = ANY('{MUG-001}'::text[])",
    )
    .fetch_one(&mut *tx)
    .await?;
    let id = Uuid::new_v4();
    let (order_no,): (String,) = sqlx::query_as(
        "INSERT INTO orders (id, session_id, currency, total_cents) VALUES ($1, $2, $3, $4)
         RETURNING order_no",
    )
    .bind(id)
    .bind(scope)
    .bind(&currency)
    .bind(price)
    .fetch_one(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO order_items (order_id, line_no, sku, name, quantity, unit_price_cents)
         SELECT $1, * FROM UNNEST('{1}'::int[], '{MUG-001}'::text[], ARRAY[$2]::text[], '{1}'::int[], ARRAY[$3]::bigint[])",
    )
    .bind(id)
    .bind(&name)
    .bind(price)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO order_recipients (order_id, email, name, line1, line2, postal_code, city, country)
         VALUES ($1, 'ada@example.com', 'Ada Lovelace', '1 Main Street', '', 'SW1Y 4JH', 'London', 'GB')",
    )
    .bind(id)
    .execute(&mut *tx)
    .await?;
    let body = format!(r#"{{"id":"{id}","order_no":"{order_no}","total_cents":{price}}}"#);
    sqlx::query(
        "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload)
         VALUES ($1, 'order', $2, 'order.created', $3::jsonb)",
    )
    .bind(Uuid::new_v4())
    .bind(id)
    .bind(&body)
    .execute(&mut *tx)
    .await?;
    sqlx::query("SELECT 1 FROM carts WHERE session_id = $1 FOR UPDATE")
        .bind(scope)
        .fetch_optional(&mut *tx)
        .await?;
    // The order journal's entry of the completed request (journal::request).
    sqlx::query(
        "INSERT INTO order_journal (order_id, kind, summary, scope_tag, idempotency_key)
         SELECT id, 'request', 'POST /api/orders answered 201: executed',
                journal_scope_tag($2), $3
           FROM orders WHERE id = $1 AND session_id = $2",
    )
    .bind(id)
    .bind(scope)
    .bind(key)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "UPDATE idempotency_keys
            SET state = 'completed', response_status = 201, response_headers = '{}'::jsonb,
                response_body = $3, completed_at = now(), finished_at = now(), locked_until = NULL
          WHERE scope = $1 AND key = $2 AND state = 'processing'",
    )
    .bind(scope)
    .bind(key)
    .bind(body.as_bytes())
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(body)
}
