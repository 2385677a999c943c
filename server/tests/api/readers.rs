//! The connections kept for the first read of each idempotent request (server/src/db/
//! readers.rs) go back without the ping sqlx's pool sends, so one must never go back in an
//! unknown state: only a reader whose statement completed is reused.

use std::time::Duration;

use server::db::Readers;
use sqlx::PgConnection;

use crate::helpers::*;

async fn backend_pid(conn: &mut PgConnection) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await
        .expect("a reader answers")
}

#[tokio::test]
async fn a_reader_is_reused_after_a_completed_statement_and_closed_after_a_cancelled_one() {
    let app = spawn_app().await;
    let readers = Readers::new((*app.db.connect_options()).clone());

    let mut reader = readers.acquire().await.unwrap();
    let first = backend_pid(reader.conn()).await;
    reader.done();
    let mut reader = readers.acquire().await.unwrap();
    assert_eq!(
        backend_pid(reader.conn()).await,
        first,
        "a clean reader is reused"
    );

    // A request cancelled mid-statement (the client went away): its reader must not be
    // handed to the next request, whose statement would wait behind the abandoned one.
    let abandoned = tokio::time::timeout(
        Duration::from_millis(200),
        sqlx::query("SELECT pg_sleep(5)").execute(reader.conn()),
    )
    .await;
    assert!(abandoned.is_err(), "the sleep was cut short");
    drop(reader);

    let mut next = readers.acquire().await.unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(2), backend_pid(next.conn()))
        .await
        .expect("the next read is not stuck behind the abandoned statement");
    assert_ne!(
        answered, first,
        "the abandoned connection was closed, not reused"
    );
    next.done();
}
