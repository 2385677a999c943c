//! The key table against a real PostgreSQL. Every test gets a database of its own, created
//! from `TEST_DATABASE_ADMIN_URL` (default `postgres://postgres@127.0.0.1:5432`), with the
//! crate's `MIGRATION` applied; it is dropped when the test ends.

use std::time::Duration;

use http::Method;
use once_core::{FingerprintKeys, IdempotencyKey, IdempotentRequest, StoredResponse};
use once_pg::{store, Claimed, Existing};
use serde_json::{json, Value};
use sqlx::{Connection, PgConnection, PgPool};
use uuid::Uuid;

/// A lease no test outlives.
const LEASE: Duration = Duration::from_secs(60);
const NO_QUOTA: u32 = 0;
const SCOPE: &str = "session-a";

/// A database of the test's own, with the key table; dropped (`WITH (FORCE)`) with the
/// value, whether the test passed or not.
struct TestDb {
    pool: PgPool,
    admin: String,
    name: String,
}

impl TestDb {
    async fn new() -> Self {
        let admin = std::env::var("TEST_DATABASE_ADMIN_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".to_owned());
        let name = format!("once_test_pg_{}", Uuid::new_v4().simple());
        let mut conn = PgConnection::connect(&format!("{admin}/postgres"))
            .await
            .expect("connect to the admin database");
        let create = format!(r#"CREATE DATABASE "{name}""#);
        sqlx::raw_sql(&create)
            .execute(&mut conn)
            .await
            .expect("create the test database");
        conn.close().await.expect("close the admin connection");
        let test_db = Self {
            pool: PgPool::connect(&format!("{admin}/{name}"))
                .await
                .expect("connect to the test database"),
            admin,
            name,
        };
        sqlx::raw_sql(once_pg::MIGRATION)
            .execute(&test_db.pool)
            .await
            .expect("apply the crate's migration");
        test_db
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        // `drop` cannot await, and runs on the test's runtime: the DROP runs on a thread and
        // a runtime of its own. FORCE ends the pool's connections.
        let (admin, name) = (self.admin.clone(), self.name.clone());
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime to drop the test database");
            runtime.block_on(async {
                let mut conn = PgConnection::connect(&format!("{admin}/postgres")).await?;
                let drop = format!(r#"DROP DATABASE IF EXISTS "{name}" WITH (FORCE)"#);
                sqlx::raw_sql(&drop).execute(&mut conn).await?;
                conn.close().await
            })
        })
        .join()
        .expect("the thread dropping the test database");
        if let Err(e) = dropped {
            // Panicking again while a failed test unwinds would abort the whole run.
            if std::thread::panicking() {
                eprintln!("could not drop test database {}: {e}", self.name);
            } else {
                panic!("could not drop test database {}: {e}", self.name);
            }
        }
    }
}

/// `POST /things` with `body`, under `key` in `scope`.
fn request(scope: &str, key: &str, body: Value) -> IdempotentRequest {
    let fingerprints = FingerprintKeys::new(&["s".to_owned()]).unwrap();
    IdempotentRequest::new(
        &fingerprints,
        Method::POST,
        scope,
        IdempotencyKey::parse(key).unwrap(),
        "POST /things",
        &body,
    )
}

/// The answer the tests store.
fn created() -> StoredResponse {
    StoredResponse::new(
        201,
        vec![
            ("content-type".to_owned(), "application/json".to_owned()),
            ("location".to_owned(), "/things/1".to_owned()),
        ],
        br#"{"id":1}"#.to_vec(),
    )
}

/// Claims `req`'s key, which must be new; returns the lease.
async fn claim_fresh(db: &PgPool, req: &IdempotentRequest, lease: Duration) -> Uuid {
    match store::claim(db, req, lease, NO_QUOTA).await.unwrap() {
        Claimed::Fresh(token) => token,
        other => panic!("expected a fresh claim, got {other:?}"),
    }
}

/// A key's row as the table holds it (times as text: only whether they change matters).
#[derive(Debug, PartialEq, sqlx::FromRow)]
struct Row {
    state: String,
    lease_token: Option<Uuid>,
    locked_until: Option<String>,
    finished_at: Option<String>,
    response_status: Option<i16>,
    response_headers: Option<Value>,
    response_body: Option<Vec<u8>>,
}

async fn row(db: &PgPool, req: &IdempotentRequest) -> Option<Row> {
    sqlx::query_as(
        "SELECT state, lease_token, locked_until::text AS locked_until,
                finished_at::text AS finished_at, response_status, response_headers, response_body
           FROM idempotency_keys WHERE scope = $1 AND key = $2",
    )
    .bind(&req.scope)
    .bind(req.key.as_str())
    .fetch_optional(db)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_new_key_is_claimed_fresh_under_the_returned_lease() {
    let db = TestDb::new().await;
    let req = request(SCOPE, "k1", json!({"n": 1}));

    let lease = claim_fresh(&db.pool, &req, LEASE).await;

    let row = row(&db.pool, &req).await.expect("the claimed key's row");
    assert_eq!(row.state, "processing");
    assert_eq!(row.lease_token, Some(lease));
}

#[tokio::test]
async fn a_second_claim_while_the_lease_is_valid_is_in_progress() {
    let db = TestDb::new().await;
    let req = request(SCOPE, "k1", json!({"n": 1}));
    let lease = claim_fresh(&db.pool, &req, LEASE).await;

    let again = store::claim(&db.pool, &req, LEASE, NO_QUOTA).await.unwrap();

    assert!(
        matches!(again, Claimed::Existing(Existing::InProgress)),
        "got {again:?}"
    );
    assert_eq!(row(&db.pool, &req).await.unwrap().lease_token, Some(lease));
}

#[tokio::test]
async fn the_same_key_with_another_body_is_a_different_request() {
    let db = TestDb::new().await;
    claim_fresh(&db.pool, &request(SCOPE, "k1", json!({"n": 1})), LEASE).await;

    let other = request(SCOPE, "k1", json!({"n": 2}));
    let claimed = store::claim(&db.pool, &other, LEASE, NO_QUOTA)
        .await
        .unwrap();

    assert!(
        matches!(claimed, Claimed::Existing(Existing::DifferentRequest)),
        "got {claimed:?}"
    );
}

#[tokio::test]
async fn completion_under_the_lease_stores_the_answer_for_replay() {
    let db = TestDb::new().await;
    let req = request(SCOPE, "k1", json!({"n": 1}));
    let lease = claim_fresh(&db.pool, &req, LEASE).await;

    assert!(store::complete(&db.pool, &req, lease, &created())
        .await
        .unwrap());

    match store::existing(&db.pool, &req).await.unwrap() {
        Existing::Completed(stored) => assert_eq!(stored, created()),
        other => panic!("expected the stored answer, got {other:?}"),
    }
    let row = row(&db.pool, &req).await.unwrap();
    assert_eq!(row.state, "completed");
    assert_eq!(row.response_status, Some(201));
    assert_eq!(row.response_body.as_deref(), Some(&br#"{"id":1}"#[..]));
}

#[tokio::test]
async fn completion_under_a_wrong_lease_changes_nothing() {
    let db = TestDb::new().await;
    let req = request(SCOPE, "k1", json!({"n": 1}));
    claim_fresh(&db.pool, &req, LEASE).await;
    let before = row(&db.pool, &req).await;

    let completed = store::complete(&db.pool, &req, Uuid::new_v4(), &created())
        .await
        .unwrap();

    assert!(!completed);
    assert_eq!(row(&db.pool, &req).await, before);
}

#[tokio::test]
async fn a_failed_key_is_reclaimed_without_a_takeover() {
    let db = TestDb::new().await;
    let req = request(SCOPE, "k1", json!({"n": 1}));
    let first = claim_fresh(&db.pool, &req, LEASE).await;
    store::fail(&db.pool, &req, first).await.unwrap();
    assert_eq!(row(&db.pool, &req).await.unwrap().state, "failed");

    let claimed = store::claim(&db.pool, &req, LEASE, NO_QUOTA).await.unwrap();

    let Claimed::Reclaimed {
        lease,
        took_over: false,
    } = claimed
    else {
        panic!("expected a reclaim after failure, got {claimed:?}");
    };
    assert_ne!(lease, first);
    let row = row(&db.pool, &req).await.unwrap();
    assert_eq!(row.state, "processing");
    assert_eq!(row.lease_token, Some(lease));
}

/// Claims `req` under a 1 ms lease, lets it expire and takes it over: (old, new) lease.
async fn expired_and_taken_over(db: &PgPool, req: &IdempotentRequest) -> (Uuid, Uuid) {
    let old = claim_fresh(db, req, Duration::from_millis(1)).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    match store::claim(db, req, LEASE, NO_QUOTA).await.unwrap() {
        Claimed::Reclaimed {
            lease,
            took_over: true,
        } => (old, lease),
        other => panic!("expected a takeover of the expired lease, got {other:?}"),
    }
}

#[tokio::test]
async fn an_expired_lease_is_taken_over_and_its_old_holder_cannot_complete() {
    let db = TestDb::new().await;
    let req = request(SCOPE, "k1", json!({"n": 1}));
    let (old, new) = expired_and_taken_over(&db.pool, &req).await;

    let stale = store::complete(&db.pool, &req, old, &created())
        .await
        .unwrap();

    assert!(!stale, "the old holder completed a key taken over");
    let row = row(&db.pool, &req).await.unwrap();
    assert_eq!(row.state, "processing");
    assert_eq!(row.lease_token, Some(new));
    assert!(store::complete(&db.pool, &req, new, &created())
        .await
        .unwrap());
}

#[tokio::test]
async fn renewing_a_lease_that_was_taken_over_is_refused() {
    let db = TestDb::new().await;
    let req = request(SCOPE, "k1", json!({"n": 1}));
    let (old, new) = expired_and_taken_over(&db.pool, &req).await;

    assert!(!store::renew(&db.pool, &req, old, LEASE).await.unwrap());
    assert!(store::renew(&db.pool, &req, new, LEASE).await.unwrap());
}

#[tokio::test]
async fn the_hourly_quota_refuses_a_third_new_key() {
    let db = TestDb::new().await;
    let per_hour = 2;
    for key in ["k1", "k2"] {
        let req = request(SCOPE, key, json!({"n": 1}));
        let claimed = store::claim(&db.pool, &req, LEASE, per_hour).await.unwrap();
        assert!(
            matches!(claimed, Claimed::Fresh(_)),
            "{key}: got {claimed:?}"
        );
    }

    let third = request(SCOPE, "k3", json!({"n": 1}));
    let claimed = store::claim(&db.pool, &third, LEASE, per_hour)
        .await
        .unwrap();

    assert!(matches!(claimed, Claimed::OverQuota), "got {claimed:?}");
    assert_eq!(row(&db.pool, &third).await, None);
}

#[tokio::test]
async fn purge_deletes_a_completed_key_past_retention() {
    let db = TestDb::new().await;
    let req = request(SCOPE, "k1", json!({"n": 1}));
    let lease = claim_fresh(&db.pool, &req, LEASE).await;
    assert!(store::complete(&db.pool, &req, lease, &created())
        .await
        .unwrap());
    tokio::time::sleep(Duration::from_millis(20)).await;

    let within_retention = once_pg::purge(&db.pool, Duration::from_secs(3600))
        .await
        .unwrap();
    assert_eq!(within_retention, 0);
    let past_retention = once_pg::purge(&db.pool, Duration::ZERO).await.unwrap();
    assert_eq!(past_retention, 1);
    assert_eq!(row(&db.pool, &req).await, None);
}

#[tokio::test]
async fn purge_never_deletes_a_key_whose_lease_is_valid() {
    let db = TestDb::new().await;
    let req = request(SCOPE, "k1", json!({"n": 1}));
    claim_fresh(&db.pool, &req, LEASE).await;
    tokio::time::sleep(Duration::from_millis(20)).await;

    let purged = once_pg::purge(&db.pool, Duration::ZERO).await.unwrap();

    assert_eq!(purged, 0);
    assert_eq!(row(&db.pool, &req).await.unwrap().state, "processing");
}

#[tokio::test]
async fn key_state_is_none_in_another_scope() {
    let db = TestDb::new().await;
    let req = request(SCOPE, "k1", json!({"n": 1}));
    let lease = claim_fresh(&db.pool, &req, LEASE).await;
    assert!(store::complete(&db.pool, &req, lease, &created())
        .await
        .unwrap());

    let elsewhere = once_pg::key_state(&db.pool, "session-b", &req.key)
        .await
        .unwrap();
    assert_eq!(elsewhere, None);
    let own = once_pg::key_state(&db.pool, SCOPE, &req.key)
        .await
        .unwrap()
        .expect("the key's state in its own scope");
    assert_eq!(own.state, "completed");
    assert_eq!(own.response_status, Some(201));
    assert_eq!(own.location.as_deref(), Some("/things/1"));
}

/// The first read: nothing for an unused key, the stored answer for a completed one, and
/// the application's question about the scope answered in the same statement (NULL: no).
#[tokio::test]
async fn the_first_read_judges_the_key_and_answers_the_scope_question() {
    let db = TestDb::new().await;
    sqlx::raw_sql("CREATE TABLE callers (id text PRIMARY KEY, admitted boolean)")
        .execute(&db.pool)
        .await
        .unwrap();
    sqlx::raw_sql("INSERT INTO callers VALUES ('session-a', true), ('session-b', NULL)")
        .execute(&db.pool)
        .await
        .unwrap();
    let read = once_pg::FirstRead::with_scope_check("(SELECT admitted FROM callers WHERE id = $1)");
    let req = request(SCOPE, "k-first", json!({ "n": 1 }));
    let unused = read.run(&db.pool, &req).await.unwrap();
    assert!(unused.scope_known);
    assert!(matches!(unused.existing, Existing::Unused), "{unused:?}");
    let lease = claim_fresh(&db.pool, &req, LEASE).await;
    assert!(store::complete(&db.pool, &req, lease, &created())
        .await
        .unwrap());
    let done = read.run(&db.pool, &req).await.unwrap();
    assert!(
        matches!(done.existing, Existing::Completed(ref s) if *s == created()),
        "{done:?}"
    );
    let other_body = read
        .run(&db.pool, &request(SCOPE, "k-first", json!({ "n": 2 })))
        .await;
    assert!(matches!(
        other_body.unwrap().existing,
        Existing::DifferentRequest
    ));
    for (scope, known) in [("session-b", false), ("nobody", false)] {
        let row = read
            .run(&db.pool, &request(scope, "k", json!({})))
            .await
            .unwrap();
        assert_eq!(
            row.scope_known, known,
            "{scope}: NULL and no row both count as no"
        );
    }
}

/// What an application may ask: a request running (its lease valid, or lapsed less than the
/// slack ago), a scope holding keys (as part of its own statement), keys by state.
#[tokio::test]
async fn an_application_asks_what_it_needs_without_writing_sql_on_the_table() {
    let db = TestDb::new().await;
    let running = request(SCOPE, "k-running", json!({}));
    claim_fresh(&db.pool, &running, LEASE).await;
    let slack = Duration::from_secs(1);
    assert!(
        once_pg::inspect::is_running(&db.pool, SCOPE, "k-running", slack)
            .await
            .unwrap()
    );
    assert!(
        !once_pg::inspect::is_running(&db.pool, SCOPE, "k-none", slack)
            .await
            .unwrap()
    );
    let failed = request(SCOPE, "k-failed", json!({}));
    let lease = claim_fresh(&db.pool, &failed, LEASE).await;
    store::fail(&db.pool, &failed, lease).await.unwrap();
    assert!(
        !once_pg::inspect::is_running(&db.pool, SCOPE, "k-failed", slack)
            .await
            .unwrap()
    );

    let keyed = once_pg::inspect::scope_holds_keys("$1");
    let holds = |scope: &'static str| {
        let sql = format!("SELECT {keyed}");
        let pool = db.pool.clone();
        async move {
            sqlx::query_scalar::<_, bool>(&sql)
                .bind(scope)
                .fetch_one(&pool)
                .await
                .unwrap()
        }
    };
    assert!(holds(SCOPE).await);
    assert!(!holds("session-without-keys").await);

    let counts = once_pg::inspect::key_counts(&db.pool).await.unwrap();
    assert_eq!(
        counts,
        vec![("failed".to_owned(), 1), ("processing".to_owned(), 1)]
    );
}

/// The payload of the next notification on `listener`, within 10 s.
async fn next_payload(listener: &mut sqlx::postgres::PgListener) -> String {
    let next = tokio::time::timeout(Duration::from_secs(10), listener.recv());
    next.await
        .expect("a notification")
        .unwrap()
        .payload()
        .to_owned()
}

#[tokio::test]
async fn only_a_key_a_repeat_waits_for_is_announced_when_it_ends() {
    let db = TestDb::new().await;
    let mut listener = sqlx::postgres::PgListener::connect_with(&db.pool)
        .await
        .unwrap();
    listener.listen(once_pg::wake::CHANNEL).await.unwrap();
    let wakeups = once_pg::Wakeups::start(db.pool.clone(), once_pg::WaitLimits::default());
    let long_scope = "s".repeat(8000);
    let [quiet, awaited, failed, long] = [
        request(SCOPE, "k-quiet", json!({})),
        request(SCOPE, "k-awaited", json!({})),
        request(SCOPE, "k-failed", json!({})),
        request(&long_scope, "k-long", json!({})),
    ];
    let mut leases = vec![];
    for req in [&quiet, &awaited, &failed, &long] {
        leases.push(claim_fresh(&db.pool, req, LEASE).await);
    }
    let mut waiters = vec![];
    for req in [&awaited, &failed, &long] {
        waiters.push(
            wakeups
                .wait_for(&req.scope, req.key.as_str())
                .await
                .unwrap(),
        );
    }

    // Notifications arrive in commit order: the first one heard is the awaited key's.
    store::complete(&db.pool, &quiet, leases[0], &created())
        .await
        .unwrap();
    store::complete(&db.pool, &awaited, Uuid::new_v4(), &created())
        .await
        .unwrap();
    store::complete(&db.pool, &awaited, leases[1], &created())
        .await
        .unwrap();
    store::fail(&db.pool, &failed, leases[2]).await.unwrap();
    store::complete(&db.pool, &long, leases[3], &created())
        .await
        .unwrap();

    // The key's name alone: the scope (a session's token, say) stays out of the payload,
    // however long it is.
    assert_eq!(next_payload(&mut listener).await, "k-awaited");
    assert_eq!(next_payload(&mut listener).await, "k-failed");
    assert_eq!(next_payload(&mut listener).await, "k-long");
    assert_eq!(wakeups.waiting(), 3);
    drop(waiters);
    assert_eq!(wakeups.waiting(), 0);
}

/// Until an instance's key listener listens on `db`.
async fn listening(db: &PgPool) {
    for _ in 0..1000 {
        let listeners: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND query ILIKE 'listen%'",
        )
        .fetch_one(db)
        .await
        .unwrap();
        if listeners > 0 {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the key listener never listened");
}

#[tokio::test]
async fn a_waiter_whose_key_ended_before_it_registered_is_told_at_once() {
    let db = TestDb::new().await;
    // No fallback read during the test, and the listener's first read of every key done.
    let limits = once_pg::WaitLimits::new(10, 10, Duration::from_secs(600));
    let wakeups = once_pg::Wakeups::start(db.pool.clone(), limits);
    listening(&db.pool).await;
    let req = request(SCOPE, "k1", json!({"n": 1}));
    let lease = claim_fresh(&db.pool, &req, LEASE).await;
    // The repeat read the key running; the original completes before the repeat registers.
    store::complete(&db.pool, &req, lease, &created())
        .await
        .unwrap();

    let mut waiter = wakeups.wait_for(SCOPE, "k1").await.unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let woken = tokio::time::timeout(Duration::from_secs(10), waiter.next(deadline)).await;
    match woken.expect("told before the deadline") {
        once_pg::wake::Woken::Row(Some(row)) => assert_eq!(row.state, "completed"),
        other => panic!("expected the completed row, got {other:?}"),
    }
}

#[tokio::test]
async fn a_key_one_instance_marked_is_not_written_again_by_another() {
    let db = TestDb::new().await;
    let limits = once_pg::WaitLimits::new(10, 10, Duration::from_secs(600));
    let a = once_pg::Wakeups::start(db.pool.clone(), limits.clone());
    let b = once_pg::Wakeups::start(db.pool.clone(), limits);
    let req = request(SCOPE, "k1", json!({"n": 1}));
    let lease = claim_fresh(&db.pool, &req, LEASE).await;
    let version = || async {
        sqlx::query_scalar::<_, String>("SELECT xmin::text FROM idempotency_keys WHERE key = 'k1'")
            .fetch_one(&db.pool)
            .await
            .unwrap()
    };
    let _on_a = a.wait_for(SCOPE, "k1").await.unwrap();
    let marked = version().await;

    // B's first waiter finds the row marked: it reads it, and writes nothing (a write
    // would queue on the row lock the original needs to complete).
    let mut on_b = b.wait_for(SCOPE, "k1").await.unwrap();
    assert_eq!(version().await, marked, "the marked row was written again");
    store::complete(&db.pool, &req, lease, &created())
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let woken = tokio::time::timeout(Duration::from_secs(10), on_b.next(deadline)).await;
        match woken.expect("told before the deadline") {
            once_pg::wake::Woken::Row(Some(row)) if row.state == "processing" => continue,
            once_pg::wake::Woken::Row(Some(row)) => break assert_eq!(row.state, "completed"),
            other => panic!("expected the completed row, got {other:?}"),
        }
    }
}
