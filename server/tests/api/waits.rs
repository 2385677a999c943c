//! `Prefer: wait` in the shop (docs/protocol.md, "Waiting for the original"): a repeat that
//! finds its order or payment running waits for it, on another instance too, and gets the
//! original's answer instead of 409; the key-status route is a long poll.

use std::time::Duration;

use crate::helpers::*;

/// A second instance of `app`'s shop, on the same database.
async fn second_instance(app: &TestApp) -> TestApp {
    start(app.config.clone(), app.db_name.clone()).await
}

/// Until a repeat waits for `key`: its row is marked, so its end will be announced.
async fn awaited(app: &TestApp, key: &str) {
    eventually("the key is waited for", || async {
        sqlx::query_scalar::<_, bool>("SELECT awaited FROM idempotency_keys WHERE key = $1")
            .bind(key)
            .fetch_optional(&app.db)
            .await
            .unwrap()
            .unwrap_or(false)
    })
    .await;
}

/// A repeat of the order under `key`, sent by `client` to the shop at `base` (an instance's
/// address), asking to wait 5 s.
fn spawn_waiting_repeat(
    client: &reqwest::Client,
    base: &str,
    key: &str,
) -> tokio::task::JoinHandle<reqwest::Response> {
    let repeat = client
        .post(format!("{base}/api/orders"))
        .header("content-type", "application/json")
        .header("idempotency-key", key)
        .header("prefer", "wait=5")
        .body(MUG_ORDER);
    tokio::spawn(async move { repeat.send().await.unwrap() })
}

async fn assert_replay_of(repeat: reqwest::Response, original: reqwest::Response) {
    assert_eq!(repeat.status(), original.status());
    assert_eq!(repeat.headers()["idempotent-replayed"], "true");
    assert_eq!(repeat.headers()["preference-applied"], "wait=5");
    assert_eq!(
        repeat.bytes().await.unwrap(),
        original.bytes().await.unwrap()
    );
}

#[tokio::test]
async fn a_repeated_order_on_another_instance_gets_the_originals_answer() {
    let a = spawn_app_with_faults(|_| {}).await;
    let b = second_instance(&a).await;
    let original = a.spawn_held_order("wait-1", "held");
    a.wait_until_held("held", 1).await;
    let repeat = spawn_waiting_repeat(&a.client, &b.address, "wait-1");
    awaited(&a, "wait-1").await;

    a.open_gate("held").await;
    let original = original.await.unwrap();
    assert_eq!(original.status(), 201);
    assert_replay_of(repeat.await.unwrap(), original).await;
    assert_eq!(a.count("orders").await, 1);
}

/// The route the shop's own checkout page posts to waits like the API's.
#[tokio::test]
async fn a_repeated_checkout_gets_the_originals_answer() {
    let app = spawn_app_with_faults(|_| {}).await;
    add_mugs(&app, &app.client).await;
    let key = page_key(&app, &app.client).await;
    let held = checkout_api_with(&app, &key, &[("once-test-hold", "checkout")]);
    let original = tokio::spawn(async move { held.send().await.unwrap() });
    app.wait_until_held("checkout", 1).await;
    let repeat = checkout_api_with(&app, &key, &[("prefer", "wait=5")]);
    let repeat = tokio::spawn(async move { repeat.send().await.unwrap() });
    awaited(&app, &key).await;

    app.open_gate("checkout").await;
    let original = original.await.unwrap();
    assert_eq!(original.status(), 201);
    assert_replay_of(repeat.await.unwrap(), original).await;
    assert_eq!(app.count("orders").await, 1);
}

#[tokio::test]
async fn a_repeated_payment_gets_the_originals_answer() {
    let (app, provider) = spawn_shop_and_provider().await;
    let order_id = place_order(&app).await;
    let original = spawn_pay(
        &app,
        &order_id,
        "pay-1",
        CARD_OK,
        &[("once-test-hold", "pay")],
    );
    app.wait_until_held("pay", 1).await;
    let repeat = spawn_pay(&app, &order_id, "pay-1", CARD_OK, &[("prefer", "wait=5")]);
    awaited(&app, "pay-1").await;

    app.open_gate("pay").await;
    let original = original.await.unwrap();
    assert_eq!(original.status(), 201);
    assert_replay_of(repeat.await.unwrap(), original).await;
    assert_eq!(provider.charges_for_order(&app, &order_id).await, 1);
}

#[tokio::test]
async fn at_the_longest_wait_a_repeat_is_told_409() {
    let app = spawn_app_with_faults(|c| c.idempotency_waits.longest = Duration::from_secs(1)).await;
    let original = app.spawn_held_order("late-1", "held");
    app.wait_until_held("held", 1).await;

    let repeat = post_order_with(
        &app.client,
        &app,
        Some("late-1"),
        MUG_ORDER,
        &[("prefer", "wait=60")],
    )
    .await;
    assert_eq!(repeat.headers()["preference-applied"], "wait=1");
    assert!(repeat.headers().contains_key("retry-after"));
    assert_problem(repeat, 409, "request-in-progress").await;

    app.open_gate("held").await;
    assert_eq!(original.await.unwrap().status(), 201);
}

#[tokio::test]
async fn the_key_status_route_answers_when_the_request_ends() {
    let app = spawn_app_with_faults(|_| {}).await;
    let original = app.spawn_held_order("poll-1", "held");
    app.wait_until_held("held", 1).await;
    let status = {
        let request = app
            .client
            .get(app.url("/api/idempotency-keys/poll-1"))
            .header("prefer", "wait=5");
        tokio::spawn(async move { request.send().await.unwrap() })
    };
    awaited(&app, "poll-1").await;

    app.open_gate("held").await;
    assert_eq!(original.await.unwrap().status(), 201);
    let status = status.await.unwrap();
    assert_eq!(status.headers()["preference-applied"], "wait=5");
    let state: serde_json::Value = status.json().await.unwrap();
    assert_eq!(state["state"], "completed");
}

#[tokio::test]
async fn a_graceful_stop_answers_a_waiting_repeat_503() {
    let a = spawn_app_with_faults(|_| {}).await;
    let b = server::startup::Application::build(a.config.clone())
        .await
        .unwrap();
    let b_base = format!("http://127.0.0.1:{}", b.port());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let b_running = tokio::spawn(b.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    let original = a.spawn_held_order("stop-1", "held");
    a.wait_until_held("held", 1).await;
    let repeat = spawn_waiting_repeat(&a.client, &b_base, "stop-1");
    awaited(&a, "stop-1").await;

    stop.send(()).unwrap();
    let repeat = tokio::time::timeout(Duration::from_secs(3), repeat)
        .await
        .expect("answered before its wait ends")
        .unwrap();
    assert!(repeat.headers().contains_key("retry-after"));
    assert_problem(repeat, 503, "server-stopping").await;
    b_running.await.unwrap().unwrap();
    a.open_gate("held").await;
    assert_eq!(original.await.unwrap().status(), 201);
}
