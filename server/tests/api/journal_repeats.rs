//! The journal's repeats (docs/design.md, "The order journal"): noted off the answer's
//! path and written a moment later, folded a key, a kind and a minute to an entry; the
//! checkout form's repeats, its own waiting left out; the last notes written at a stop.

use std::time::Duration;

use uuid::Uuid;

use crate::helpers::*;

#[tokio::test]
async fn a_retry_storm_is_one_entry_a_minute_that_counts_it() {
    let app = spawn_app().await;
    let key = Uuid::new_v4().to_string();
    let placed = post_order(&app.client, &app, Some(&key), MUG_ORDER).await;
    let order: serde_json::Value = placed.json().await.unwrap();
    let storm: Vec<_> = (0..40)
        .map(|_| post_order(&app.client, &app, Some(&key), MUG_ORDER))
        .collect();
    for replay in futures::future::join_all(storm).await {
        assert_eq!(replay.headers()["idempotent-replayed"], "true");
    }
    repeats_written(&app, "replay", 40).await;
    // Repeats of one key and kind fold into one entry per minute (two if the storm
    // straddled a minute's turn), counting every one.
    let (rows, counted): (i64, i64) =
        sqlx::query_as("SELECT count(*), sum(repeats) FROM order_journal WHERE kind = 'replay'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert!(rows <= 2, "{rows} rows");
    assert_eq!(counted, 40);
    let journal = server::journal::for_order(
        &app.db,
        order["order_no"].as_str().unwrap(),
        server::journal::View::All,
        server::journal::Window::First,
    )
    .await
    .unwrap()
    .unwrap();
    let shown: i32 = journal
        .entries
        .iter()
        .filter(|e| e.kind == "replay")
        .map(|e| e.repeats)
        .sum();
    assert_eq!(shown, 40);
    assert!(journal
        .entries
        .iter()
        .any(|e| e.kind == "replay" && e.last_at.is_some()));
}

#[tokio::test]
async fn a_checkout_submitted_twice_has_its_replay_in_the_story() {
    let app = spawn_app().await;
    add_mugs(&app, &app.client).await;
    let key = page_key(&app, &app.client).await;
    let placed = checkout_api(&app, &key).await;
    assert_eq!(placed.status(), 201);
    let order: serde_json::Value = placed.json().await.unwrap();
    // The cart has moved past the key: the second submit is answered from what it holds.
    let again = checkout_api(&app, &key).await;
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    repeats_written(&app, "replay", 1).await;
    let story = story(&app, order["id"].as_str().unwrap()).await;
    assert_in_order(
        &story,
        &[
            ("request", "POST /api/orders answered 201: executed"),
            ("replay", "POST /api/orders answered 201, replayed"),
        ],
    );
}

#[tokio::test]
async fn a_graceful_stop_writes_the_repeats_noted_before_it() {
    let app = spawn_app().await;
    let key = Uuid::new_v4().to_string();
    assert_eq!(
        post_order(&app.client, &app, Some(&key), MUG_ORDER)
            .await
            .status(),
        201
    );
    // A second instance answers the replay, and is stopped at once.
    let second = server::startup::Application::build(app.config.clone())
        .await
        .unwrap();
    let address = format!("http://127.0.0.1:{}", second.port());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(second.run_until_stopped(async {
        let _ = stopped.await;
    }));
    let replay = app
        .client
        .post(format!("{address}/api/orders"))
        .header("content-type", "application/json")
        .header("idempotency-key", &key)
        .body(MUG_ORDER)
        .send()
        .await
        .unwrap();
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    let written: Option<i64> =
        sqlx::query_scalar("SELECT sum(repeats) FROM order_journal WHERE kind = 'replay'")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!(written, Some(1), "written before the instance stopped");
}

#[tokio::test]
async fn a_form_waiting_for_the_first_submit_is_one_repeat_not_one_per_ask() {
    let app = spawn_app_with_faults(|_| {}).await;
    add_mugs(&app, &app.client).await;
    let key = page_key(&app, &app.client).await;
    let first = spawn_form(&app, &key, Some("first-submit"));
    app.wait_until_held("first-submit", 1).await;
    // The second click waits on the server, asking again every 200 ms; let it ask a few
    // times before the first submit ends.
    let second = spawn_form(&app, &key, None);
    tokio::time::sleep(Duration::from_millis(900)).await;
    app.open_gate("first-submit").await;
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    assert_eq!(location(&first), location(&second), "one order");
    // One 409 (the second submit's first answer) and one replay (its last): the asks in
    // between were the shop's own.
    // The replay was noted last: once it is written, so is every 409 before it.
    repeats_written(&app, "replay", 1).await;
    let in_progress: i64 = sqlx::query_scalar(
        "SELECT sum(repeats)::bigint FROM order_journal WHERE kind = 'in_progress'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(in_progress, 1);
}
