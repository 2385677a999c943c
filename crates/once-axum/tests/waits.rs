//! `Prefer: wait` (docs/protocol.md, "Waiting for the original"): two instances of a small
//! app of notes on one real PostgreSQL, each with its own pool and its own [`Waits`]. The
//! original runs on instance A, held in its transaction by a gate; its repeats wait on B
//! (and on A), and are woken by the database.

use std::{sync::Arc, time::Duration};

use axum::{
    extract::{FromRef, State},
    http::StatusCode,
    response::Response,
    routing::post,
    Json, Router,
};
use once_axum::{
    conformance::Gates, Executor, FingerprintKeys, HeaderScope, Keyed, Problem, Reply, Scope,
    ScopeHeader, Scoped, WaitLimits, Waits,
};
use serde_json::{json, Value};
use sqlx::PgPool;
use tokio::{task::JoinHandle, time::Instant};

mod common;
use common::TestDb;

const LEASE: Duration = Duration::from_secs(2);
const SCHEMA: &str =
    "CREATE TABLE notes (id bigserial PRIMARY KEY, owner text NOT NULL, body jsonb NOT NULL);";
/// Never reached by a test that relies on the notification: a fallback read would hide it.
const NO_FALLBACK: Duration = Duration::from_secs(600);

struct Caller;
impl ScopeHeader for Caller {
    const NAME: &'static str = "x-caller";
}

#[derive(Clone, FromRef)]
struct App {
    executor: Executor,
    fingerprints: FingerprintKeys,
    db: PgPool,
    waits: Waits,
}

impl Scoped for App {
    type Scope = HeaderScope<Caller>;

    fn waits(&self) -> Option<Waits> {
        Some(self.waits.clone())
    }
}

async fn write(
    State(app): State<App>,
    keyed: Keyed<HeaderScope<Caller>>,
    Json(body): Json<Value>,
) -> Result<Response, Problem> {
    let owner = keyed.scope.scope().to_owned();
    let req = keyed.request("POST /notes", &body)?;
    let work = move |db: PgPool| async move {
        let mut tx = db.begin().await?;
        let id: i64 =
            sqlx::query_scalar("INSERT INTO notes (owner, body) VALUES ($1, $2) RETURNING id")
                .bind(&owner)
                .bind(&body)
                .fetch_one(&mut *tx)
                .await?;
        let reply = Reply::json(StatusCode::CREATED, &json!({ "id": id, "note": body }))?;
        Ok((tx, reply))
    };
    Ok(app.executor.execute(req, work).await)
}

/// One instance: its address and its waits.
struct Instance {
    base: String,
    waits: Waits,
}

async fn instance(db: PgPool, gates: &Gates, limits: WaitLimits, longest: Duration) -> Instance {
    let waits = Waits::start(db.clone(), limits, longest);
    let app = App {
        executor: Executor::new(db.clone(), LEASE)
            .with_faults(gates.clone())
            .with_waits(waits.clone()),
        fingerprints: FingerprintKeys::new(&["test".to_owned()]).unwrap(),
        db,
        waits: waits.clone(),
    };
    let routes = Router::new()
        .route("/notes", post(write))
        .merge(once_axum::status::router::<App>())
        .with_state(app);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, routes).await });
    Instance { base, waits }
}

/// Two instances on one database, sharing the test's gates.
struct Pair {
    test_db: TestDb,
    a: Instance,
    b: Instance,
    gates: Gates,
    http: reqwest::Client,
}

/// What a request was answered.
#[derive(Debug)]
struct Answer {
    status: StatusCode,
    headers: reqwest::header::HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

async fn start(limits: WaitLimits, longest: Duration) -> Arc<Pair> {
    let test_db = TestDb::create(SCHEMA).await;
    let gates = Gates::default();
    let a = instance(test_db.db.clone(), &gates, limits.clone(), longest).await;
    let b = instance(test_db.another_pool().await, &gates, limits, longest).await;
    Arc::new(Pair {
        test_db,
        a,
        b,
        gates,
        http: reqwest::Client::new(),
    })
}

fn limits(per_scope: usize, fallback: Duration) -> WaitLimits {
    WaitLimits::new(10_000, per_scope, fallback)
}

#[derive(Clone, Copy)]
enum On {
    A,
    B,
}

impl Pair {
    fn on(&self, on: On) -> &Instance {
        match on {
            On::A => &self.a,
            On::B => &self.b,
        }
    }

    /// `POST /notes` on `on` by `caller` with `key`, asking to wait `wait` seconds.
    fn post(self: &Arc<Self>, on: On, caller: &str, key: &str, wait: Option<u64>) -> Pending {
        let url = format!("{}/notes", self.on(on).base);
        let mut request = self
            .http
            .post(url)
            .header("x-caller", caller)
            .header("idempotency-key", key);
        if let Some(wait) = wait {
            request = request.header("prefer", format!("wait={wait}"));
        }
        let request = request.json(&json!({ "title": "groceries" }));
        tokio::spawn(async move { answer(request.send().await.unwrap()).await })
    }

    /// `GET /idempotency-keys/{key}` on `on`, asking to wait `wait` seconds.
    fn status(self: &Arc<Self>, on: On, caller: &str, key: &str, wait: u64) -> Pending {
        let url = format!("{}/idempotency-keys/{key}", self.on(on).base);
        let request = self
            .http
            .get(url)
            .header("x-caller", caller)
            .header("prefer", format!("wait={wait}"));
        tokio::spawn(async move { answer(request.send().await.unwrap()).await })
    }

    /// The original on A, held at `gate` in its transaction until the test opens it.
    async fn held_original(self: &Arc<Self>, caller: &str, key: &str, gate: &str) -> Pending {
        self.gates.hold(key, gate);
        let original = self.post(On::A, caller, key, None);
        let gates = self.gates.clone();
        eventually(|| gates.waiting(gate) == 1).await;
        original
    }

    async fn notes_of(&self, caller: &str) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM notes WHERE owner = $1")
            .bind(caller)
            .fetch_one(&self.test_db.db)
            .await
            .unwrap()
    }

    /// Until `waiters` wait on `on`, and the key they wait for is marked: from then on its
    /// completion notifies (before, the mark would find it completed and read it).
    async fn waiting_on(&self, on: On, waiters: usize, key: &str) {
        let waits = self.on(on).waits.clone();
        eventually(move || waits.waiting() == waiters).await;
        let until = Instant::now() + Duration::from_secs(10);
        let marked = || {
            sqlx::query_scalar::<_, bool>("SELECT awaited FROM idempotency_keys WHERE key = $1")
                .bind(key)
                .fetch_one(&self.test_db.db)
        };
        while !marked().await.unwrap() {
            assert!(Instant::now() < until, "{key} was never marked");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

type Pending = JoinHandle<Answer>;

async fn answer(response: reqwest::Response) -> Answer {
    Answer {
        status: response.status(),
        headers: response.headers().clone(),
        body: response.bytes().await.unwrap().to_vec(),
    }
}

/// Waits (up to 10 s) until `condition` holds: the state a step of a test waits for.
async fn eventually(condition: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < until, "the condition never held");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The answer of `pending`, which must come within `within` (the gate still shut).
async fn within(pending: Pending, within: Duration) -> Answer {
    let answered = tokio::time::timeout(within, pending).await;
    answered.expect("no answer in time").unwrap()
}

fn assert_replay_of(repeat: &Answer, original: &Answer) {
    assert_eq!(repeat.status, original.status, "{repeat:?}");
    assert_eq!(repeat.header("idempotent-replayed"), Some("true"));
    assert_eq!(repeat.body, original.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn repeats_on_both_instances_get_the_replay_when_the_original_commits() {
    let pair = start(limits(20, NO_FALLBACK), Duration::from_secs(30)).await;
    let original = pair.held_original("ann", "k-1", "commit").await;
    let on_b = [
        pair.post(On::B, "ann", "k-1", Some(20)),
        pair.post(On::B, "ann", "k-1", Some(20)),
    ];
    let on_a = pair.post(On::A, "ann", "k-1", Some(20));
    pair.waiting_on(On::B, 2, "k-1").await;
    pair.waiting_on(On::A, 1, "k-1").await;

    let opened = Instant::now();
    pair.gates.open("commit");
    let original = original.await.unwrap();
    assert_eq!(original.status, StatusCode::CREATED);
    for repeat in on_b.into_iter().chain([on_a]) {
        let repeat = repeat.await.unwrap();
        assert_replay_of(&repeat, &original);
        assert_eq!(repeat.header("preference-applied"), Some("wait=20"));
    }
    println!("commit to the last waiter's answer: {:?}", opened.elapsed());
    assert_eq!(pair.notes_of("ann").await, 1);
    assert_eq!(pair.gates.claims("k-1"), 1);
    assert_eq!((pair.a.waits.waiting(), pair.b.waits.waiting()), (0, 0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_waiter_whose_original_fails_runs_the_request_itself() {
    let pair = start(limits(20, NO_FALLBACK), Duration::from_secs(30)).await;
    pair.gates.fail("k-1");
    let original = pair.held_original("ann", "k-1", "commit").await;
    let repeat = pair.post(On::B, "ann", "k-1", Some(20));
    pair.waiting_on(On::B, 1, "k-1").await;

    pair.gates.open("commit");
    assert!(original.await.unwrap().status.is_server_error());
    let repeat = within(repeat, Duration::from_secs(10)).await;
    assert_eq!(repeat.status, StatusCode::CREATED, "{repeat:?}");
    assert_eq!(repeat.header("idempotent-replayed"), None);
    assert_eq!(pair.gates.claims("k-1"), 2);
    assert_eq!(pair.notes_of("ann").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn at_the_deadline_a_waiter_is_told_409_and_the_wait_is_capped() {
    let longest = Duration::from_secs(1);
    let pair = start(limits(20, NO_FALLBACK), longest).await;
    let original = pair.held_original("ann", "k-1", "commit").await;

    let asked = Instant::now();
    let repeat = within(
        pair.post(On::B, "ann", "k-1", Some(60)),
        Duration::from_secs(10),
    )
    .await;
    assert!(asked.elapsed() >= longest);
    assert_eq!(repeat.status, StatusCode::CONFLICT, "{repeat:?}");
    assert!(repeat.header("retry-after").is_some());
    assert_eq!(repeat.header("preference-applied"), Some("wait=1"));

    pair.gates.open("commit");
    assert_eq!(original.await.unwrap().status, StatusCode::CREATED);
}

/// RFC 7240's `wait` is in whole seconds: a grant under a second is waited out, but not
/// said as `wait=0`, which would tell the client that no wait was made.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_grant_under_a_second_is_waited_out_and_not_said() {
    let longest = Duration::from_millis(400);
    let pair = start(limits(20, NO_FALLBACK), longest).await;
    let original = pair.held_original("ann", "k-1", "commit").await;

    let asked = Instant::now();
    let repeat = within(
        pair.post(On::B, "ann", "k-1", Some(5)),
        Duration::from_secs(5),
    )
    .await;
    assert!(asked.elapsed() >= longest);
    assert_eq!(repeat.status, StatusCode::CONFLICT, "{repeat:?}");
    assert_eq!(repeat.header("preference-applied"), None);

    pair.gates.open("commit");
    assert_eq!(original.await.unwrap().status, StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn without_the_preference_a_repeat_is_told_409_at_once() {
    let pair = start(limits(20, NO_FALLBACK), Duration::from_secs(30)).await;
    let original = pair.held_original("ann", "k-1", "commit").await;
    for wait in [None, Some(0)] {
        let repeat = within(pair.post(On::B, "ann", "k-1", wait), Duration::from_secs(5)).await;
        assert_eq!(repeat.status, StatusCode::CONFLICT, "{repeat:?}");
        assert!(repeat.header("retry-after").is_some());
        assert_eq!(repeat.header("preference-applied"), None);
    }
    pair.gates.open("commit");
    assert_eq!(original.await.unwrap().status, StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn past_the_bound_of_its_scope_a_repeat_is_told_409_at_once() {
    let pair = start(limits(1, NO_FALLBACK), Duration::from_secs(30)).await;
    let original = pair.held_original("ann", "k-1", "commit").await;
    let first = pair.post(On::B, "ann", "k-1", Some(20));
    pair.waiting_on(On::B, 1, "k-1").await;

    let second = within(
        pair.post(On::B, "ann", "k-1", Some(20)),
        Duration::from_secs(5),
    )
    .await;
    assert_eq!(second.status, StatusCode::CONFLICT, "{second:?}");
    assert_eq!(second.header("preference-applied"), None);
    // Another scope has its own room.
    pair.gates.hold("k-2", "other");
    let bob = pair.post(On::A, "bob", "k-2", None);
    eventually(|| pair.gates.waiting("other") == 1).await;
    let bob_repeat = pair.post(On::B, "bob", "k-2", Some(20));
    pair.waiting_on(On::B, 2, "k-2").await;

    pair.gates.open("commit");
    pair.gates.open("other");
    assert_replay_of(&first.await.unwrap(), &original.await.unwrap());
    assert_replay_of(&bob_repeat.await.unwrap(), &bob.await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_graceful_stop_answers_waiters_503_and_takes_no_more() {
    let pair = start(limits(20, NO_FALLBACK), Duration::from_secs(30)).await;
    let original = pair.held_original("ann", "k-1", "commit").await;
    let repeat = pair.post(On::B, "ann", "k-1", Some(20));
    pair.waiting_on(On::B, 1, "k-1").await;

    pair.b.waits.close();
    for answered in [
        within(repeat, Duration::from_secs(5)).await,
        within(
            pair.post(On::B, "ann", "k-1", Some(20)),
            Duration::from_secs(5),
        )
        .await,
    ] {
        assert_eq!(
            answered.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{answered:?}"
        );
        assert!(answered.header("retry-after").is_some());
        // No wait was honoured: the stop cut it short, or refused it.
        assert_eq!(answered.header("preference-applied"), None);
        let problem: Value = serde_json::from_slice(&answered.body).unwrap();
        assert!(problem["type"]
            .as_str()
            .unwrap()
            .ends_with("server-stopping"));
    }
    assert_eq!(pair.b.waits.waiting(), 0);
    pair.gates.open("commit");
    assert_eq!(original.await.unwrap().status, StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_lost_notification_costs_one_fallback_read() {
    let pair = start(
        limits(20, Duration::from_millis(300)),
        Duration::from_secs(30),
    )
    .await;
    let original = pair.held_original("ann", "k-1", "commit").await;
    let repeat = pair.post(On::B, "ann", "k-1", Some(20));
    pair.waiting_on(On::B, 1, "k-1").await;
    // The completion will notify nobody, as if its notification were lost.
    sqlx::query("UPDATE idempotency_keys SET awaited = false WHERE key = 'k-1'")
        .execute(&pair.test_db.db)
        .await
        .unwrap();

    pair.gates.open("commit");
    let original = original.await.unwrap();
    assert_replay_of(&within(repeat, Duration::from_secs(10)).await, &original);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_listener_that_lost_its_connection_reads_again_when_back() {
    let pair = start(limits(20, NO_FALLBACK), Duration::from_secs(30)).await;
    let original = pair.held_original("ann", "k-1", "commit").await;
    let repeat = pair.post(On::B, "ann", "k-1", Some(20));
    pair.waiting_on(On::B, 1, "k-1").await;

    // The listeners go, and cannot come back until the original has committed: its
    // notification reaches nobody.
    pair.test_db.allow_connections(false).await;
    let killed: Vec<bool> = sqlx::query_scalar(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
          WHERE datname = current_database() AND query ILIKE 'listen%'",
    )
    .fetch_all(&pair.test_db.db)
    .await
    .unwrap();
    assert_eq!(killed, [true, true]);
    pair.gates.open("commit");
    let original = original.await.unwrap();
    assert_eq!(original.status, StatusCode::CREATED);
    pair.test_db.allow_connections(true).await;

    assert_replay_of(&within(repeat, Duration::from_secs(10)).await, &original);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_key_status_route_is_a_long_poll() {
    let pair = start(limits(20, NO_FALLBACK), Duration::from_secs(30)).await;
    let original = pair.held_original("ann", "k-1", "commit").await;
    let status = pair.status(On::B, "ann", "k-1", 20);
    pair.waiting_on(On::B, 1, "k-1").await;

    pair.gates.open("commit");
    assert_eq!(original.await.unwrap().status, StatusCode::CREATED);
    let status = within(status, Duration::from_secs(10)).await;
    assert_eq!(status.status, StatusCode::OK, "{status:?}");
    let state: Value = serde_json::from_slice(&status.body).unwrap();
    assert_eq!(state["state"], "completed");
    assert_eq!(status.header("preference-applied"), Some("wait=20"));
}
