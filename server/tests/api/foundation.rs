//! The foundation: health, migrations, the catalog API, sessions, problem answers.

use crate::helpers::{admin_url, assert_problem, shopper, spawn_app, start};

#[tokio::test]
async fn healthz_is_ok_while_the_database_answers() {
    let app = spawn_app().await;
    let response = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn healthz_is_503_while_the_database_is_down_and_recovers_after() {
    let app = spawn_app().await;
    app.take_database_down().await;
    let down = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(down.status(), 503);

    app.bring_database_up().await;
    let up = app.client.get(app.url("/healthz")).send().await.unwrap();
    assert_eq!(up.status(), 200, "the pool reconnects by itself");
}

#[tokio::test]
async fn migrations_are_idempotent_across_restarts() {
    let first = spawn_app().await;
    let products_before = first.count("products").await;
    // A second start on the same database runs the migrations again: nothing changes.
    let second = start(first.config.clone(), first.db_name.clone()).await;
    assert_eq!(second.count("products").await, products_before);
    let applied: i64 = sqlx::query_scalar("SELECT count(*) FROM _sqlx_migrations")
        .fetch_one(&second.db)
        .await
        .unwrap();
    let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../migrations"))
        .unwrap()
        .count() as i64;
    assert_eq!(applied, files);
    let response = second
        .client
        .get(second.url("/api/products"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn products_api_lists_the_seeded_catalog() {
    let app = spawn_app().await;
    let response = app
        .client
        .get(app.url("/api/products"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let products: Vec<serde_json::Value> = response.json().await.unwrap();
    assert!(
        products.len() >= 6,
        "at least six products, got {}",
        products.len()
    );
    for p in &products {
        let object = p.as_object().unwrap();
        let mut keys: Vec<&str> = object.keys().map(String::as_str).collect();
        keys.sort();
        assert!(
            ["currency", "name", "price_cents", "sku", "stock"]
                .iter()
                .all(|k| keys.contains(k)),
            "{keys:?}"
        );
        assert!(p["price_cents"].as_i64().unwrap() > 0);
        assert_eq!(p["currency"].as_str().unwrap().len(), 3);
        assert!(p["stock"].as_i64().unwrap() >= 0);
    }
    let mug = products
        .iter()
        .find(|p| p["sku"] == "MUG-001")
        .expect("the mug is seeded");
    assert_eq!(mug["price_cents"], 1800);
}

#[tokio::test]
async fn unknown_api_route_is_a_problem_json_404() {
    let app = spawn_app().await;
    let response = app.client.get(app.url("/api/nope")).send().await.unwrap();
    let body = assert_problem(response, 404, "not-found").await;
    assert_eq!(body["retryable"], false);
}

#[tokio::test]
async fn a_first_request_opens_a_session_with_a_safe_cookie() {
    let app = spawn_app().await;
    let client = shopper();
    let response = client.get(app.url("/api/products")).send().await.unwrap();
    let cookie = response
        .headers()
        .get("set-cookie")
        .expect("a session cookie")
        .to_str()
        .unwrap()
        .to_owned();
    assert!(cookie.starts_with("once_session="), "{cookie}");
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    // The cookie jar now carries the session: no new cookie on the next request.
    let again = client.get(app.url("/api/products")).send().await.unwrap();
    assert!(again.headers().get("set-cookie").is_none());
    let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM tower_sessions.session")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert_eq!(sessions, 2, "the harness's own shopper and this one");
}

#[tokio::test]
async fn home_page_is_rendered_on_the_server_with_the_catalog() {
    let app = spawn_app().await;
    let response = app.client.get(app.url("/")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let html = response.text().await.unwrap();
    assert!(
        html.contains("Stoneware mug"),
        "the catalog is in the server-rendered HTML"
    );
    assert!(html.contains("€18.00"));
    assert!(html.contains("Add to cart"));
}

#[tokio::test]
async fn add_to_cart_keeps_the_cart_in_the_session() {
    let app = spawn_app().await;
    // Server functions take form posts, as the no-wasm form does.
    app.add_to_cart(&app.client, "MUG-001", 2).await;
    let cart = app.cart(&app.client).await;
    assert_eq!(cart["lines"][0]["sku"], "MUG-001");
    assert_eq!(cart["lines"][0]["quantity"], 2);
}

#[tokio::test]
async fn sessions_survive_a_restart() {
    let first = spawn_app().await;
    first.add_to_cart(&first.client, "TEA-006", 3).await;
    // Another process on the same database, the same cookie jar (cookies ignore the port).
    let restarted = start(first.config.clone(), first.db_name.clone()).await;
    let cart = restarted.cart(&first.client).await;
    assert_eq!(cart["lines"][0]["sku"], "TEA-006");
    assert_eq!(cart["lines"][0]["quantity"], 3);
}

#[test]
fn the_server_refuses_to_start_without_a_webhook_secret() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_server"))
        .env_remove("PROVIDER_WEBHOOK_SECRETS")
        .env("LEPTOS_SITE_ADDR", "127.0.0.1:0")
        .env(
            "DATABASE_URL",
            format!("{}/once_never_created", admin_url()),
        )
        .output()
        .expect("the server binary runs");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("PROVIDER_WEBHOOK_SECRETS"), "{stderr}");
}

#[tokio::test]
async fn database_sessions_carry_bounded_waits() {
    let app = spawn_app().await;
    let show = |setting: &'static str| {
        let db = app.db.clone();
        async move {
            sqlx::query_scalar::<_, String>(&format!("SHOW {setting}"))
                .fetch_one(&db)
                .await
                .unwrap()
        }
    };
    assert_eq!(show("statement_timeout").await, "10s");
    assert_eq!(show("lock_timeout").await, "5s");
    assert_eq!(show("idle_in_transaction_session_timeout").await, "1min");
}
