//! An order's statements run while the claim of its key commits (docs/decisions/
//! 0006-overlapped-claim.md). These tests make the claim lose after the order was written
//! in its open transaction: another transaction inserts the same key and holds it
//! uncommitted, so the request's first read sees nothing and its claim waits.

use std::{future::Future, time::Duration};

use axum::http::Method;
use once_core::FingerprintKeys;
use server::orders::CREATE_ORDER;
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

use crate::helpers::{
    add_mugs, assert_problem, checkout_api, page_key, post_order, spawn_app, TestApp, MUG_ORDER,
};

/// Inserts `key` for the test's one session in `state`, as another request's claim (or its
/// failure) would, and leaves the transaction open.
async fn rival_row(app: &TestApp, key: &str, state: &str) -> PgConnection {
    let mut rival = PgConnection::connect(&app.config.database_url)
        .await
        .expect("rival connection");
    let body: serde_json::Value = serde_json::from_str(MUG_ORDER).unwrap();
    let fingerprint = FingerprintKeys::new(&app.config.fingerprint_secrets)
        .unwrap()
        .of(&Method::POST, CREATE_ORDER, &body);
    sqlx::query("BEGIN").execute(&mut rival).await.unwrap();
    sqlx::query(
        "INSERT INTO idempotency_keys (scope, key, method, route, fingerprint, state, lease_token,
                                       locked_until, finished_at)
         SELECT id, $1, 'POST', $2, $3, $4, $5,
                CASE WHEN $4 = 'processing' THEN now() + interval '1 minute' END,
                CASE WHEN $4 = 'failed' THEN now() END
           FROM tower_sessions.session",
    )
    .bind(key)
    .bind(CREATE_ORDER)
    .bind(fingerprint.as_str())
    .bind(state)
    .bind(Uuid::new_v4())
    .execute(&mut rival)
    .await
    .expect("the rival's row");
    rival
}

/// The last statement of an API order without a cart (`cart::take_ordered` finds none).
const API_ORDER_LAST: &str = "SELECT 1 FROM carts";
/// The last statement of a checkout (`cart::take_ordered` ends the cart's intent).
const CHECKOUT_LAST: &str = "UPDATE carts SET checkout_key";

/// Waits until the request's order is written in its open transaction, whose last
/// statement starts with `last`, and its claim waits for the rival's row.
async fn wait_for_the_claim_to_wait(app: &TestApp, last: &str) {
    for _ in 0..200 {
        let (waiting, written): (i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'
                                       AND query LIKE 'INSERT INTO idempotency_keys%'),
                    count(*) FILTER (WHERE state = 'idle in transaction' AND query LIKE $1 || '%')
               FROM pg_stat_activity WHERE datname = current_database()",
        )
        .bind(last)
        .fetch_one(&app.db)
        .await
        .unwrap();
        if waiting == 1 && written == 1 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the order was not written while its claim waited");
}

/// Sends `request` under `key` while a rival transaction holds the same key in `state`,
/// uncommitted; the rival commits once the order is written (its transaction's last
/// statement starts with `last`) and its claim waits.
async fn racing_a_rival(
    app: &TestApp,
    key: &str,
    state: &str,
    last: &str,
    request: impl Future<Output = reqwest::Response>,
) -> reqwest::Response {
    let mut rival = rival_row(app, key, state).await;
    let rival_commits = async {
        wait_for_the_claim_to_wait(app, last).await;
        sqlx::query("COMMIT").execute(&mut rival).await.unwrap();
    };
    let (response, ()) = tokio::join!(request, rival_commits);
    response
}

/// An API order under `key`, racing a rival that holds the key in `state`.
async fn order_racing_a_rival(app: &TestApp, key: &str, state: &str) -> reqwest::Response {
    let order = post_order(&app.client, app, Some(key), MUG_ORDER);
    racing_a_rival(app, key, state, API_ORDER_LAST, order).await
}

#[tokio::test]
async fn an_order_made_before_its_claim_lost_never_lands() {
    let app = spawn_app().await;
    let response = order_racing_a_rival(&app, "raced-1", "processing").await;

    // The key is the rival's (running): the request is told to wait, and its order, written
    // before the claim lost, was rolled back without ever reaching the completion.
    assert_problem(response, 409, "request-in-progress").await;
    assert_eq!(app.count("orders").await, 0);
    assert_eq!(app.count("order_items").await, 0);
    assert_eq!(app.count("outbox_events").await, 0);
    assert_eq!(app.metric("once_idempotency_executions_total").await, 0);
    assert_eq!(
        app.metric("once_idempotency_fenced_total").await,
        0,
        "the lost claim's work is rolled back, not left to the fence"
    );
}

#[tokio::test]
async fn a_claim_that_finds_a_failed_key_takes_it_and_makes_the_order_once() {
    let app = spawn_app().await;
    let response = order_racing_a_rival(&app, "raced-2", "failed").await;

    // The first attempt's order is rolled back; the retry of a failed key runs again.
    assert_eq!(response.status(), 201);
    assert!(response.headers().get("idempotent-replayed").is_none());
    assert_eq!(app.count("orders").await, 1);
    assert_eq!(app.count("order_items").await, 1);
    assert_eq!(app.count("outbox_events").await, 1);
    assert_eq!(app.key_state("raced-2").await.as_deref(), Some("completed"));
    assert_eq!(app.metric("once_idempotency_executions_total").await, 1);
}

#[tokio::test]
async fn a_checkout_whose_claim_finds_a_failed_key_releases_the_cart_before_it_runs_again() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    let key = page_key(&app, &app.client).await;
    let checkout = checkout_api(&app, &key);
    let response = racing_a_rival(&app, &key, "failed", CHECKOUT_LAST, checkout).await;

    // The first attempt held the cart's row; its rollback released it before the second
    // attempt locked it again (without it, the second would wait for the first's lock until
    // it gave up: a 503).
    assert_eq!(response.status(), 201);
    assert_eq!(app.count("orders").await, 1);
    assert_eq!(app.count("cart_lines").await, 0);
    assert_eq!(app.key_state(&key).await.as_deref(), Some("completed"));
}
