//! Write routes require a session that already exists: a write that opened its own session
//! would lose it with a lost response, and its retry would run again as a stranger.

use crate::helpers::*;

async fn stored_sessions(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM tower_sessions.session")
        .fetch_one(&app.db)
        .await
        .unwrap()
}

async fn assert_nothing_stored(app: &TestApp, sessions_before: i64) {
    assert_eq!(app.count("orders").await, 0);
    assert_eq!(app.count("idempotency_keys").await, 0);
    assert_eq!(app.count("payments").await, 0);
    assert_eq!(
        stored_sessions(app).await,
        sessions_before,
        "no session opened"
    );
}

#[tokio::test]
async fn a_first_post_without_a_session_is_refused_and_its_retry_too() {
    let app = spawn_app().await;
    let sessions = stored_sessions(&app).await;
    let stranger = shopper();
    for _ in 0..2 {
        // The same request twice, as a client retries after a lost answer.
        let response = post_order(&stranger, &app, Some("first-post"), MUG_ORDER).await;
        assert!(response.headers().get("set-cookie").is_none());
        let problem = assert_problem(response, 400, "session-required").await;
        assert!(problem["detail"]
            .as_str()
            .unwrap()
            .contains("GET /api/session"));
        assert_eq!(problem["retryable"], false);
    }
    assert_nothing_stored(&app, sessions).await;
}

#[tokio::test]
async fn a_cookie_the_store_does_not_know_is_no_session() {
    let app = spawn_app().await;
    let sessions = stored_sessions(&app).await;
    let forged = reqwest::Client::new()
        .post(app.url("/api/orders"))
        .header("cookie", FORGED_COOKIE)
        .header("content-type", "application/json")
        .header("idempotency-key", "forged-cookie")
        .body(MUG_ORDER)
        .send()
        .await
        .unwrap();
    assert_problem(forged, 400, "session-required").await;
    assert_nothing_stored(&app, sessions).await;
}

const FORGED_COOKIE: &str = "once_session=AAAAAAAAAAAAAAAAAAAAAA";

#[tokio::test]
async fn a_payment_under_a_cookie_the_store_does_not_know_or_no_longer_knows_is_refused() {
    let app = spawn_app().await;
    let order_id = place_order(&app).await;
    let pay = |cookie: String, key: &'static str| {
        reqwest::Client::new()
            .post(app.url(&format!("/api/orders/{order_id}/payments")))
            .header("cookie", cookie)
            .header("idempotency-key", key)
            .json(&serde_json::json!({ "card_number": "4242424242424242" }))
            .send()
    };
    let forged = pay(FORGED_COOKIE.to_owned(), "forged-pay").await.unwrap();
    assert_problem(forged, 400, "session-required").await;
    // The order's own session, ended (as an idle one does after 30 days).
    let (id,): (String,) = sqlx::query_as("SELECT id FROM tower_sessions.session")
        .fetch_one(&app.db)
        .await
        .unwrap();
    sqlx::query("UPDATE tower_sessions.session SET expiry_date = now() - interval '1 second'")
        .execute(&app.db)
        .await
        .unwrap();
    let ended = pay(format!("once_session={id}"), "ended-pay")
        .await
        .unwrap();
    assert_problem(ended, 400, "session-required").await;
    assert_eq!(app.count("payments").await, 0);
    assert_eq!(
        app.count("idempotency_keys").await,
        1,
        "the order's own key"
    );
}

#[tokio::test]
async fn paying_and_the_checkout_form_require_a_session_too() {
    let app = spawn_app().await;
    let sessions = stored_sessions(&app).await;
    let order_id = place_order(&app).await;
    let stranger = shopper();
    let pay = stranger
        .post(app.url(&format!("/api/orders/{order_id}/payments")))
        .header("idempotency-key", "stranger-pay")
        .json(&serde_json::json!({ "card_number": "4242424242424242" }))
        .send()
        .await
        .unwrap();
    assert_problem(pay, 400, "session-required").await;
    let form = stranger
        .post(app.url("/checkout"))
        .form(&[("idempotency_key", "stranger-form")])
        .send()
        .await
        .unwrap();
    assert_eq!(form.status(), 303, "the form always redirects");
    let location = form.headers()["location"].to_str().unwrap().to_owned();
    assert!(location.contains("session"), "{location}");
    assert!(form.headers().get("set-cookie").is_none());
    assert_eq!(app.count("payments").await, 0);
    assert_eq!(
        app.count("idempotency_keys").await,
        1,
        "only the order's own key"
    );
    assert_eq!(stored_sessions(&app).await, sessions, "no session opened");
}

#[tokio::test]
async fn get_api_session_opens_the_session_a_write_then_uses() {
    let app = spawn_app().await;
    let client = shopper();
    let opened = client.get(app.url("/api/session")).send().await.unwrap();
    assert_eq!(opened.status(), 200);
    assert!(opened.headers().get("set-cookie").is_some());
    let response = post_order(&client, &app, Some("after-session"), MUG_ORDER).await;
    assert_eq!(response.status(), 201);
    assert_eq!(app.count("orders").await, 1);
}

/// The shop's queries are checked at compile time against a copy of the session store's
/// table (`scripts/sqlx-data.d/session-store.sql`); the store creates the real one when the
/// server starts. The copy, made in a schema of its own, must have the real one's columns.
#[tokio::test]
async fn the_table_the_queries_are_checked_against_is_the_session_stores_own() {
    let app = spawn_app().await;
    let copy = include_str!("../../../scripts/sqlx-data.d/session-store.sql")
        .replace("tower_sessions", "checked_copy");
    sqlx::raw_sql(&copy).execute(&app.db).await.unwrap();
    let columns = |schema: &'static str| {
        sqlx::query_as::<_, (String, String, String)>(
            "SELECT column_name::text, data_type::text, is_nullable::text
               FROM information_schema.columns
              WHERE table_schema = $1 AND table_name = 'session' ORDER BY column_name",
        )
        .bind(schema)
        .fetch_all(&app.db)
    };
    let real = columns("tower_sessions").await.unwrap();
    assert_eq!(real.len(), 3, "the store's table: {real:?}");
    assert_eq!(columns("checked_copy").await.unwrap(), real);
}

/// A reader without a cookie costs a session row only for a while: sessions that nothing
/// uses are forgotten after an hour unchanged; one with a cart (or an order) stays, and so
/// does one whose only trace is a key (a refused order: its repeat must still find it).
#[tokio::test]
async fn sessions_opened_by_reads_and_never_used_are_forgotten() {
    // No answer cache: the repeat below must ask the session store, which is what the
    // cache's own rule rests on (a session holding keys is never forgotten).
    let app = spawn_app_with(|c| c.answer_cache.max_bytes = 0).await;
    for _ in 0..3 {
        let reader = reqwest::Client::new();
        assert_eq!(reader.get(app.url("/")).send().await.unwrap().status(), 200);
    }
    app.add_to_cart(&app.client, "MUG-001", 1).await;
    let keyed = shopper();
    app.open_session(&keyed).await;
    let refused = r#"{"items":[{"sku":"NO-SUCH-SKU","quantity":1}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#;
    let refused = post_order(&keyed, &app, Some("refused-once"), refused).await;
    assert_eq!(
        refused.status(),
        422,
        "refused by the work: stored with its key"
    );
    let sessions = "tower_sessions.session";
    assert_eq!(app.count(sessions).await, 5);
    let hour = std::time::Duration::from_secs(3600);
    assert_eq!(
        server::session::forget_unused(&app.db, hour).await.unwrap(),
        0,
        "all fresh"
    );
    sqlx::query("UPDATE tower_sessions.session SET expiry_date = expiry_date - interval '2 hours'")
        .execute(&app.db)
        .await
        .unwrap();
    assert_eq!(
        server::session::forget_unused(&app.db, hour).await.unwrap(),
        3
    );
    assert_eq!(app.count(sessions).await, 2);
    assert_eq!(app.cart(&app.client).await["lines"][0]["quantity"], 1);
    let refused = r#"{"items":[{"sku":"NO-SUCH-SKU","quantity":1}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#;
    let again = post_order(&keyed, &app, Some("refused-once"), refused).await;
    assert_eq!(
        again.headers()["idempotent-replayed"],
        "true",
        "the key's session stayed"
    );
}
