//! A repeat of a key the table knows is answered from one read: no write, so no lock that
//! a write needs (docs/design.md, "The idempotency protocol"). The tests hold the key table
//! in SHARE mode, which lets reads through and stops every INSERT and UPDATE: a repeat
//! that tried to write would wait for the lock and time out with a 503.

use std::time::Duration;

use sqlx::{PgPool, Postgres, Transaction};

use crate::helpers::*;

/// Short lock waits, so that a repeat that does try to write fails fast.
async fn app_with_short_lock_waits(faults: bool) -> TestApp {
    let customize =
        |c: &mut server::config::Config| c.db_limits.lock_timeout = Duration::from_millis(500);
    if faults {
        spawn_app_with_faults(customize).await
    } else {
        spawn_app_with(customize).await
    }
}

/// Another session holds the key table against every write until the transaction ends.
async fn writes_stopped(db: &PgPool) -> Transaction<'static, Postgres> {
    let mut tx = db.begin().await.unwrap();
    sqlx::query("LOCK TABLE idempotency_keys IN SHARE MODE")
        .execute(&mut *tx)
        .await
        .unwrap();
    tx
}

#[tokio::test]
async fn a_replay_and_a_reused_key_are_answered_without_writing() {
    let app = app_with_short_lock_waits(false).await;
    assert_eq!(
        post_order(&app.client, &app, Some("read-1"), MUG_ORDER)
            .await
            .status(),
        201
    );
    let lock = writes_stopped(&app.db).await;

    let replay = post_order(&app.client, &app, Some("read-1"), MUG_ORDER).await;
    assert_eq!(replay.status(), 201);
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let other = r#"{"items":[{"sku":"MUG-001","quantity":3}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#;
    let reused = post_order(&app.client, &app, Some("read-1"), other).await;
    assert_problem(reused, 422, "idempotency-key-reused").await;

    lock.rollback().await.unwrap();
    assert_eq!(app.count("orders").await, 1);
}

#[tokio::test]
async fn a_repeat_while_the_first_runs_is_answered_without_writing() {
    let app = app_with_short_lock_waits(true).await;
    let first = app.spawn_held_order("read-2", "read");
    app.wait_until_held("read", 1).await;
    let lock = writes_stopped(&app.db).await;

    let repeat = post_order(&app.client, &app, Some("read-2"), MUG_ORDER).await;
    assert_problem(repeat, 409, "request-in-progress").await;

    lock.rollback().await.unwrap();
    app.open_gate("read").await;
    assert_eq!(first.await.unwrap().status(), 201);
    assert_eq!(app.count("orders").await, 1);
}
