//! The connections kept for the first read of each idempotent request (server/src/db/
//! readers.rs) go back without the ping sqlx's pool sends, so one must never go back in an
//! unknown state, and one abandoned mid-statement must still count against the limit
//! until the database is done with it.

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
async fn an_abandoned_reader_is_never_lent_mid_statement_and_still_counts_until_it_settles() {
    let app = spawn_app().await;
    let readers = Readers::new(
        (*app.db.connect_options()).clone(),
        Duration::from_secs(10),
        server::db::ServerWatch::default(),
    );

    let mut reader = readers.acquire().await.unwrap();
    let first = backend_pid(reader.conn()).await;
    let limit: String = sqlx::query_scalar("SHOW statement_timeout")
        .fetch_one(reader.conn())
        .await
        .unwrap();
    assert_eq!(limit, "10s", "a reader carries the pool's limits");
    reader.done();
    let mut reader = readers.acquire().await.unwrap();
    assert_eq!(
        backend_pid(reader.conn()).await,
        first,
        "a clean reader is reused"
    );

    // A request cancelled mid-statement (the client went away).
    let abandoned = tokio::time::timeout(
        Duration::from_millis(200),
        sqlx::query("SELECT pg_sleep(6)").execute(reader.conn()),
    )
    .await;
    assert!(abandoned.is_err(), "the sleep was cut short");
    drop(reader);
    tokio::time::sleep(Duration::from_millis(100)).await; // whatever the drop does, is done

    // The next read does not wait behind the abandoned statement...
    let mut held = Vec::new();
    let mut next = readers.acquire().await.unwrap();
    let answered = tokio::time::timeout(Duration::from_secs(2), backend_pid(next.conn()))
        .await
        .expect("the next read is not stuck behind the abandoned statement");
    assert_ne!(answered, first, "the abandoned connection is not lent");
    held.push(next);
    // ...but the abandoned one still holds its permit: with 7 more lent, the 9th waits
    // and gets the pool's timeout (a 503), not a 9th backend.
    for _ in 0..6 {
        held.push(readers.acquire().await.unwrap());
    }
    match readers.acquire().await {
        Err(sqlx::Error::PoolTimedOut) => {}
        other => panic!("a 9th reader while one settles: {:?}", other.map(|_| ())),
    }
    for mut reader in held {
        backend_pid(reader.conn()).await;
        reader.done();
    }

    // Once its statement ends, the ping succeeds and the connection is reused.
    let mut pids = Vec::new();
    for _ in 0..20 {
        let mut lent = Vec::new();
        pids.clear();
        for _ in 0..8 {
            let mut reader = readers.acquire().await.unwrap();
            pids.push(backend_pid(reader.conn()).await);
            lent.push(reader);
        }
        lent.into_iter().for_each(|r| r.done());
        if pids.contains(&first) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    panic!("the settled connection never came back: {pids:?}");
}
