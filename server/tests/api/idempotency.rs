//! Every row of the protocol table (docs/design.md, "The idempotency protocol"), each as its own test.

use std::time::Duration;

use crate::helpers::*;

#[tokio::test]
async fn missing_key_is_400_and_nothing_is_stored() {
    let app = spawn_app().await;
    let body = assert_problem(
        post_order(&app.client, &app, None, MUG_ORDER).await,
        400,
        "idempotency-key-missing",
    )
    .await;
    assert_eq!(body["retryable"], false);
    assert_eq!(app.count("orders").await, 0);
    assert_eq!(app.count("idempotency_keys").await, 0);
}

#[tokio::test]
async fn malformed_keys_are_400_and_nothing_is_stored() {
    let app = spawn_app().await;
    let long = "k".repeat(256);
    for key in [
        "",
        "\"\"",
        long.as_str(),
        "has space",
        "tab\tinside",
        "\"unterminated",
    ] {
        let response = post_order(&app.client, &app, Some(key), MUG_ORDER).await;
        let body = assert_problem(response, 400, "idempotency-key-malformed").await;
        assert_eq!(body["retryable"], false);
    }
    // Bytes outside ASCII are refused too.
    let response = app
        .client
        .post(app.url("/api/orders"))
        .header("content-type", "application/json")
        .header(
            "idempotency-key",
            reqwest::header::HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap(),
        )
        .body(MUG_ORDER)
        .send()
        .await
        .unwrap();
    assert_problem(response, 400, "idempotency-key-malformed").await;
    // Two keys on one request: which was meant is not for the server to guess (seen red:
    // the first one won, and an order was placed under it).
    let response = app
        .client
        .post(app.url("/api/orders"))
        .header("content-type", "application/json")
        .header("idempotency-key", "first-of-two")
        .header("idempotency-key", "second-of-two")
        .body(MUG_ORDER)
        .send()
        .await
        .unwrap();
    let body = assert_problem(response, 400, "idempotency-key-malformed").await;
    assert!(
        body["detail"].as_str().unwrap().contains("more than one"),
        "{body}"
    );
    assert_eq!(app.count("orders").await, 0);
    assert_eq!(app.count("idempotency_keys").await, 0);
}

#[tokio::test]
async fn first_request_executes_and_stores_its_outcome() {
    let app = spawn_app().await;
    let response = post_order(&app.client, &app, Some("first-1"), MUG_ORDER).await;
    assert_eq!(response.status(), 201);
    assert!(response.headers().get("idempotent-replayed").is_none());
    let location = response.headers()["location"].to_str().unwrap().to_owned();
    let order: serde_json::Value = response.json().await.unwrap();
    assert_eq!(
        location,
        format!("/api/orders/{}", order["id"].as_str().unwrap())
    );
    assert_eq!(order["status"], "pending_payment");
    assert_eq!(
        order["total_cents"], 3600,
        "2 × €18.00, priced by the database"
    );
    assert_eq!(app.count("orders").await, 1);
    assert_eq!(app.count("outbox_events").await, 1);
    assert_eq!(app.key_state("first-1").await.as_deref(), Some("completed"));
}

#[tokio::test]
async fn repeat_with_the_same_request_replays_the_stored_response_byte_for_byte() {
    let app = spawn_app().await;
    let first = post_order(&app.client, &app, Some("replay-1"), MUG_ORDER).await;
    let first_location = first.headers()["location"].clone();
    let first_body = first.bytes().await.unwrap();

    // Same request, other key order and whitespace, and the structured-field key form.
    let same = r#"{ "shipping_address": {"country":"GB","city":"London","postal_code":"SW1Y 4JH",
        "line1":"1 Main Street","name":"Ada Lovelace"}, "email": "ada@example.com",
        "items": [ { "quantity": 2, "sku": "MUG-001" } ] }"#;
    let again = post_order(&app.client, &app, Some("\"replay-1\""), same).await;
    assert_eq!(again.status(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.headers()["location"], first_location);
    assert_eq!(again.headers()["content-type"], "application/json");
    assert_eq!(again.bytes().await.unwrap(), first_body);
    assert_eq!(app.count("orders").await, 1);
    assert_eq!(app.metric("once_idempotency_replays_total").await, 1);
}

#[tokio::test]
async fn repeat_with_a_different_request_is_422_and_executes_nothing() {
    let app = spawn_app().await;
    post_order(&app.client, &app, Some("reuse-1"), MUG_ORDER).await;
    let other = r#"{"items":[{"sku":"MUG-001","quantity":3}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#;
    let response = post_order(&app.client, &app, Some("reuse-1"), other).await;
    let body = assert_problem(response, 422, "idempotency-key-reused").await;
    assert_eq!(body["retryable"], false);
    assert_eq!(app.count("orders").await, 1);
}

#[tokio::test]
async fn repeat_while_the_first_is_processing_is_409_with_retry_after() {
    let app = spawn_app_with_faults(|_| {}).await;
    let first = app.spawn_held_order("busy-1", "busy");
    app.wait_until_held("busy", 1).await;

    let repeat = post_order(&app.client, &app, Some("busy-1"), MUG_ORDER).await;
    assert_eq!(repeat.headers()["retry-after"], "1");
    let body = assert_problem(repeat, 409, "request-in-progress").await;
    assert_eq!(body["retryable"], true);

    let status: serde_json::Value = app
        .get_json(&app.client, "/api/idempotency-keys/busy-1")
        .await;
    assert_eq!(status["state"], "processing");

    app.open_gate("busy").await;
    assert_eq!(first.await.unwrap().status(), 201);
    let status: serde_json::Value = app
        .get_json(&app.client, "/api/idempotency-keys/busy-1")
        .await;
    assert_eq!(status["state"], "completed");
    assert_eq!(status["response_status"], 201);
    assert!(status["location"]
        .as_str()
        .unwrap()
        .starts_with("/api/orders/"));
    assert_eq!(app.count("orders").await, 1);
}

#[tokio::test]
async fn an_expired_lease_is_taken_over_and_the_stale_holder_is_fenced_out() {
    let app = spawn_app_with_faults(|c| c.idempotency_lease = Duration::from_millis(500)).await;
    let stale = app.spawn_held_order("lease-1", "paused");
    app.wait_until_held("paused", 1).await;
    // The holder's order rows exist inside its open transaction, invisible to others.
    tokio::time::sleep(Duration::from_millis(700)).await;

    // The takeover executes too, and is held before its commit: two holders at once.
    let takeover = app.spawn_held_order("lease-1", "second");
    app.wait_until_held("second", 1).await;

    // The stale holder tries to commit first: its completion is fenced on the lease token.
    app.open_gate("paused").await;
    let stale = stale.await.unwrap();
    assert_problem(stale, 409, "request-in-progress").await;

    app.open_gate("second").await;
    let takeover = takeover.await.unwrap();
    assert_eq!(
        takeover.status(),
        201,
        "the takeover's own execution commits"
    );
    assert!(takeover.headers().get("idempotent-replayed").is_none());
    let takeover_body: serde_json::Value = takeover.json().await.unwrap();

    let order_ids: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT id FROM orders")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(
        order_ids.len(),
        1,
        "the stale holder's order was rolled back"
    );
    assert_eq!(
        order_ids[0].to_string(),
        takeover_body["id"].as_str().unwrap()
    );
    assert_eq!(app.count("order_items").await, 1);
    assert_eq!(app.count("outbox_events").await, 1);
    assert_eq!(app.metric("once_idempotency_takeovers_total").await, 1);
    assert_eq!(app.metric("once_idempotency_fenced_total").await, 1);

    let replay = post_order(&app.client, &app, Some("lease-1"), MUG_ORDER).await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
}

#[tokio::test]
async fn a_stale_holder_that_fails_cannot_reopen_a_key_taken_over() {
    let app = spawn_app_with_faults(|c| c.idempotency_lease = Duration::from_millis(2000)).await;
    let client = app.client.clone();
    let request = client
        .post(app.url("/api/orders"))
        .header("content-type", "application/json")
        .header("idempotency-key", "fail-fence")
        .header("once-test-hold", "stale")
        .header("once-test-fail", "transient")
        .body(MUG_ORDER);
    let stale = tokio::spawn(async move { request.send().await.unwrap() });
    app.wait_until_held("stale", 1).await;
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let takeover = app.spawn_held_order("fail-fence", "second");
    app.wait_until_held("second", 1).await;

    // The stale holder fails: marking the key `failed` must be fenced on its lease too.
    app.open_gate("stale").await;
    assert_eq!(stale.await.unwrap().status(), 503);
    assert_eq!(
        app.key_state("fail-fence").await.as_deref(),
        Some("processing"),
        "the key still belongs to the takeover"
    );
    let third = post_order(&app.client, &app, Some("fail-fence"), MUG_ORDER).await;
    assert_problem(third, 409, "request-in-progress").await;

    app.open_gate("second").await;
    assert_eq!(takeover.await.unwrap().status(), 201);
    assert_eq!(app.count("orders").await, 1);
}

#[tokio::test]
async fn a_transient_failure_leaves_failed_and_the_same_key_then_succeeds() {
    let app = spawn_app_with_faults(|_| {}).await;
    let failed = post_order_with(
        &app.client,
        &app,
        Some("flaky-1"),
        MUG_ORDER,
        &[("once-test-fail", "transient")],
    )
    .await;
    assert!(failed.headers().contains_key("retry-after"));
    let body = assert_problem(failed, 503, "service-unavailable").await;
    assert_eq!(body["retryable"], true);
    assert_eq!(app.key_state("flaky-1").await.as_deref(), Some("failed"));
    assert_eq!(
        app.count("orders").await,
        0,
        "the failed attempt's writes were rolled back"
    );

    let retry = post_order(&app.client, &app, Some("flaky-1"), MUG_ORDER).await;
    assert_eq!(retry.status(), 201);
    assert!(
        retry.headers().get("idempotent-replayed").is_none(),
        "executed, not replayed"
    );
    assert_eq!(app.count("orders").await, 1);
    assert_eq!(app.key_state("flaky-1").await.as_deref(), Some("completed"));
}

#[tokio::test]
async fn a_definitive_business_refusal_is_stored_and_replayed() {
    let app = spawn_app().await;
    let unknown = r#"{"items":[{"sku":"NOPE-404","quantity":1}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#;
    let first = post_order(&app.client, &app, Some("refused-1"), unknown).await;
    let first = assert_problem(first, 422, "unknown-sku").await;
    let again = post_order(&app.client, &app, Some("refused-1"), unknown).await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again = assert_problem(again, 422, "unknown-sku").await;
    assert_eq!(first, again);
    assert_eq!(
        app.key_state("refused-1").await.as_deref(),
        Some("completed")
    );
    assert_eq!(app.count("orders").await, 0);

    let too_many = r#"{"items":[{"sku":"LAMP-008","quantity":99}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#;
    assert_problem(
        post_order(&app.client, &app, Some("refused-2"), too_many).await,
        422,
        "out-of-stock",
    )
    .await;
}

/// The purge's own rule, aged by editing the rows: an answer kept in memory cannot see
/// that, so this app keeps none. (With the cache, keys aged by the clock are checked by
/// `conformance::the_shop_answers_a_key_past_its_retention_as_a_new_request`.)
#[tokio::test]
async fn keys_past_the_retention_window_are_purged_and_reuse_is_a_new_request() {
    let app = spawn_app_with(|c| c.answer_cache.max_bytes = 0).await;
    post_order(&app.client, &app, Some("old-1"), MUG_ORDER).await;
    post_order(&app.client, &app, Some("fresh-1"), MUG_ORDER).await;
    sqlx::query(
        "UPDATE idempotency_keys SET created_at = now() - interval '26 hours',
                finished_at = now() - interval '25 hours' WHERE key = 'old-1'",
    )
    .execute(&app.db)
    .await
    .unwrap();

    let purged = once_pg::purge(&app.db, Duration::from_secs(24 * 3600))
        .await
        .unwrap();
    assert_eq!(purged, 1);
    assert_eq!(app.key_state("old-1").await, None);
    assert_eq!(app.key_state("fresh-1").await.as_deref(), Some("completed"));

    let reuse = post_order(&app.client, &app, Some("old-1"), MUG_ORDER).await;
    assert_eq!(reuse.status(), 201);
    assert!(reuse.headers().get("idempotent-replayed").is_none());
    assert_eq!(app.count("orders").await, 3);
}

#[tokio::test]
async fn purge_spares_running_requests_and_counts_retention_from_the_finish() {
    let app = spawn_app_with_faults(|_| {}).await;
    let day = Duration::from_secs(24 * 3600);
    // Started long ago, finished an hour ago: retention counts from the finish.
    post_order(&app.client, &app, Some("slow-finish"), MUG_ORDER).await;
    // Still running, holding a live lease, though it started long ago.
    let running = app.spawn_held_order("running-1", "purge");
    app.wait_until_held("purge", 1).await;
    sqlx::query(
        "UPDATE idempotency_keys SET created_at = now() - interval '30 hours',
                finished_at = CASE WHEN state = 'completed' THEN now() - interval '1 hour' END",
    )
    .execute(&app.db)
    .await
    .unwrap();

    let purged = once_pg::purge(&app.db, day).await.unwrap();
    assert_eq!(purged, 0, "nothing has been finished for a whole day");
    assert_eq!(
        app.key_state("running-1").await.as_deref(),
        Some("processing")
    );

    // A repeat of the running request still waits for it instead of executing beside it.
    let repeat = post_order(&app.client, &app, Some("running-1"), MUG_ORDER).await;
    assert_eq!(repeat.status(), 409);
    app.open_gate("purge").await;
    assert_eq!(running.await.unwrap().status(), 201);
    assert_eq!(app.count("orders").await, 2);
    assert_eq!(
        app.key_state("slow-finish").await.as_deref(),
        Some("completed")
    );
}

#[tokio::test]
async fn the_same_parameters_with_a_different_key_are_a_new_intent() {
    let app = spawn_app().await;
    let a: serde_json::Value = post_order(&app.client, &app, Some("cart-a"), MUG_ORDER)
        .await
        .json()
        .await
        .unwrap();
    let b: serde_json::Value = post_order(&app.client, &app, Some("cart-b"), MUG_ORDER)
        .await
        .json()
        .await
        .unwrap();
    assert_ne!(a["id"], b["id"]);
    assert_ne!(a["order_no"], b["order_no"]);
    assert_eq!(app.count("orders").await, 2);
}

#[tokio::test]
async fn an_unreachable_database_is_503_with_retry_after_and_the_pool_recovers() {
    let app = spawn_app().await;
    app.take_database_down().await;
    let down = post_order(&app.client, &app, Some("outage-1"), MUG_ORDER).await;
    assert!(down.headers().contains_key("retry-after"));
    assert_problem(down, 503, "service-unavailable").await;

    app.bring_database_up().await;
    let up = post_order(&app.client, &app, Some("outage-1"), MUG_ORDER).await;
    assert_eq!(up.status(), 201);
    assert_eq!(app.count("orders").await, 1);
}

#[tokio::test]
async fn connections_killed_mid_request_leave_no_half_written_order() {
    let app = spawn_app_with_faults(|_| {}).await;
    let held = app.spawn_held_order("killed-1", "kill");
    app.wait_until_held("kill", 1).await;
    app.kill_connections().await; // pg_terminate_backend on every connection of the app
    app.open_gate("kill").await;

    let response = held.await.unwrap();
    assert!(response.headers().contains_key("retry-after"));
    assert_problem(response, 503, "service-unavailable").await;
    assert_eq!(app.count("orders").await, 0, "nothing half-written");
    assert_eq!(app.count("order_items").await, 0);

    let retry = post_order(&app.client, &app, Some("killed-1"), MUG_ORDER).await;
    assert_eq!(
        retry.status(),
        201,
        "the pool recovered and the key could run again"
    );
    assert_eq!(app.count("orders").await, 1);
}
