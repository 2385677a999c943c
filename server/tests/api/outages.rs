//! After the database drops its connections (a restart), the pool hands out a connection
//! used within the last second without a ping (server/src/db/mod.rs). The request that meets a
//! dead one answers 503, retryable, never a 500; from then on every connection is checked,
//! so the retry succeeds.

use std::time::Duration;

use crate::helpers::*;

#[tokio::test]
async fn a_write_that_meets_a_dead_connection_answers_503_and_its_retry_succeeds() {
    let app = spawn_app().await;
    let warm = post_order(&app.client, &app, Some("warm-1"), MUG_ORDER).await;
    assert_eq!(warm.status(), 201);
    app.kill_connections().await; // what a database restart does to the pool
    tokio::time::sleep(Duration::from_millis(100)).await;

    let first = post_order(&app.client, &app, Some("after-1"), MUG_ORDER).await;
    if first.status() != 201 {
        let body = assert_problem(first, 503, "service-unavailable").await;
        assert_eq!(body["retryable"], true);
    }
    let retry = post_order(&app.client, &app, Some("after-1"), MUG_ORDER).await;
    assert_eq!(retry.status(), 201);
    assert_eq!(app.count("orders").await, 2);
}

#[tokio::test]
async fn a_server_function_that_meets_a_dead_connection_answers_503_not_500() {
    let app = spawn_app().await;
    let client = shopper();
    app.open_session(&client).await;
    app.cart(&client).await;
    app.kill_connections().await;
    tokio::time::sleep(Duration::from_millis(100)).await;

    let call = || client.post(app.url("/_fn/get_cart")).send();
    let first = call().await.unwrap();
    assert!(
        [200, 503].contains(&first.status().as_u16()),
        "{}",
        first.status()
    );
    assert_eq!(call().await.unwrap().status(), 200);
}

/// During a failover a connection can lead to a node that does not take writes: a standby,
/// or a new primary not yet open for them (pg_auto_failover holds it read-only until the
/// old primary is demoted). Such a write answers 503, retryable, and stores nothing; the
/// retry with the same key, once writes go through again, is the first execution.
#[tokio::test]
async fn a_write_that_reaches_a_read_only_node_answers_503_and_stores_nothing() {
    let app = spawn_app().await;
    let warm = post_order(&app.client, &app, Some("warm-1"), MUG_ORDER).await;
    assert_eq!(warm.status(), 201);
    let db = &app.db_name;
    app.admin(&format!(
        "ALTER DATABASE {db} SET default_transaction_read_only = on"
    ))
    .await;
    app.kill_connections().await; // new sessions start read-only, as on a standby

    // The first may meet a killed connection (also a 503); the pool checks the rest, so
    // the later ones reach the read-only node itself.
    for key in ["during-1", "during-2", "during-3"] {
        let refused = post_order(&app.client, &app, Some(key), MUG_ORDER).await;
        let body = assert_problem(refused, 503, "service-unavailable").await;
        assert_eq!(body["retryable"], true);
    }
    assert_eq!(app.count("orders").await, 1);

    app.admin(&format!(
        "ALTER DATABASE {db} RESET default_transaction_read_only"
    ))
    .await;
    app.kill_connections().await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut retry = post_order(&app.client, &app, Some("during-1"), MUG_ORDER).await;
    if retry.status() == 503 {
        retry = post_order(&app.client, &app, Some("during-1"), MUG_ORDER).await;
    }
    assert_eq!(retry.status(), 201);
    assert_eq!(app.count("orders").await, 2);
}

/// The session layer saves a session after the handler ran; when the store's database is
/// away at that moment (a failover cut the connection), the layer's own answer is a bare
/// 500. The shop answers it as the outage it is: 503, `Retry-After`, a problem body.
#[tokio::test]
async fn a_session_the_store_cannot_save_answers_503_not_500() {
    let app = spawn_app().await;
    // Opening a session stores it (an insert); the layer then saves it once more after the
    // handler (an update), and that is the save the database refuses here.
    sqlx::query(
        "CREATE FUNCTION refuse_sessions() RETURNS trigger LANGUAGE plpgsql AS
         $$ BEGIN RAISE EXCEPTION 'the connection was cut' USING ERRCODE = '08006'; END $$",
    )
    .execute(&app.db)
    .await
    .unwrap();
    sqlx::query(
        "CREATE TRIGGER refuse_sessions BEFORE UPDATE ON tower_sessions.session
         FOR EACH ROW EXECUTE FUNCTION refuse_sessions()",
    )
    .execute(&app.db)
    .await
    .unwrap();

    let opened = shopper().get(app.url("/api/session")).send().await.unwrap();
    assert!(opened.headers().contains_key("retry-after"));
    let body = assert_problem(opened, 503, "service-unavailable").await;
    assert_eq!(body["retryable"], true);
}

/// A 503 the shop answers by design (the database away, `Retry-After` sent) is logged as a
/// warning, not as an error: an operator's alerting on errors then sees faults, not a
/// failover the shop rode out (seen red: the request trace logged it at ERROR).
#[tokio::test]
async fn a_designed_503_is_a_warning_in_the_log_not_an_error() {
    let (logs, _hearing) = Logs::capture();
    let app = spawn_app().await;
    app.take_database_down().await;
    let refused = post_order(&app.client, &app, Some("while-down"), MUG_ORDER).await;
    assert_problem(refused, 503, "service-unavailable").await;
    app.bring_database_up().await;
    let failed: Vec<String> = logs
        .at(tracing::Level::ERROR)
        .into_iter()
        .filter(|line| line.contains("response failed"))
        .collect();
    assert_eq!(failed, Vec::<String>::new());
    assert!(
        logs.at(tracing::Level::WARN)
            .iter()
            .any(|line| line.contains("answered 503")),
        "{:?}",
        logs.at(tracing::Level::WARN)
    );
}
