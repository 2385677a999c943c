//! The executor, run by a small app of notes on a real PostgreSQL, passes the conformance
//! suite; and each of the suite's checks fails on an app broken the way integrations go
//! wrong (a fingerprint that leaves out a field, a status route with another scope, every
//! database error stored as a refusal, a path parameter left out, writes on the pool).

use std::{sync::Arc, time::Duration};

use axum::{
    extract::{FromRef, FromRequestParts, Path, State},
    http::{request::Parts, StatusCode},
    response::Response,
    routing::{get, post},
    Json, Router,
};
use once_axum::{
    conformance::{self, Call, Fault, Gates, On, Subject},
    AnswerCache, Executor, FingerprintKeys, Keyed, Problem, Reply, Scope, Scoped, WaitLimits,
    Waits,
};
use serde_json::{json, Value};
use sqlx::PgPool;

mod common;
use common::TestDb;

const LEASE: Duration = Duration::from_secs(2);
/// How long the app keeps a finished key: its purge's, and its answer cache's.
const RETENTION: Duration = Duration::from_secs(3);
/// The longest `Prefer: wait` the app grants.
const LONGEST_WAIT: Duration = Duration::from_secs(2);

/// How the app under test is broken.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Break {
    Nothing,
    /// The fingerprint leaves out the note's text.
    FieldLeftOut,
    /// The status route reads every caller's keys under one scope.
    StatusScope,
    /// Every database error of the work is answered as a definitive 422.
    DatabaseErrorsStored,
    /// Pinning a note fingerprints the body, not the note it names.
    ParamLeftOut,
    /// The note is written on the pool, outside the work's transaction.
    WritesOnThePool,
    /// A refusal the work decides is left open, as if it were "not now".
    RefusalsLeftOpen,
    /// The fingerprint takes the first of the note's tags only.
    FirstTagOnly,
    /// The executor is not given its waits, while the app says it grants `Prefer: wait`.
    WaitsLeftOut,
    /// The answer cache is told a retention of an hour, while the purge keeps keys for
    /// seconds.
    CacheOutlivesRetention,
}

#[derive(Clone, FromRef)]
struct App {
    executor: Executor,
    fingerprints: FingerprintKeys,
    db: PgPool,
    broken: Break,
}

impl Scoped for App {
    type Scope = Caller;
}

struct Caller(String);

impl Scope for Caller {
    fn scope(&self) -> &str {
        &self.0
    }
}

impl<S: Sync> FromRequestParts<S> for Caller {
    type Rejection = Problem;
    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Problem> {
        let caller = parts.headers.get("x-caller").and_then(|v| v.to_str().ok());
        let caller = caller.ok_or(Problem::new(StatusCode::UNAUTHORIZED, "caller", "who?"))?;
        Ok(Caller(caller.to_owned()))
    }
}

fn router(app: App) -> Router {
    let routes = Router::new()
        .route("/notes", post(write))
        .route("/notes/{id}/pin", post(pin));
    let routes = match app.broken {
        Break::StatusScope => routes.route("/idempotency-keys/{key}", get(status_of_everyone)),
        _ => routes.merge(once_axum::status::router::<App>()),
    };
    routes.with_state(app)
}

async fn status_of_everyone(
    State(app): State<App>,
    Path(key): Path<String>,
) -> Result<Json<once_axum::status::KeyState>, Problem> {
    let status = once_axum::status::key_status(&app.db, "everyone", &key).await;
    Ok(Json(status?))
}

/// The work's database errors, as the app maps them.
fn mapped(broken: Break) -> impl Fn(sqlx::Error) -> Problem + Send + Copy {
    move |e| match broken {
        Break::DatabaseErrorsStored => Problem::new(StatusCode::UNPROCESSABLE_ENTITY, "no", "no"),
        _ => e.into(),
    }
}

async fn write(
    State(app): State<App>,
    keyed: Keyed<Caller>,
    Json(body): Json<Value>,
) -> Result<Response, Problem> {
    let scope = keyed.scope.0.clone();
    let req = match app.broken {
        Break::FieldLeftOut => keyed.request("POST /notes", &json!({ "title": body["title"] }))?,
        Break::FirstTagOnly => {
            let first =
                json!({ "title": body["title"], "text": body["text"], "tags": [body["tags"][0]] });
            keyed.request("POST /notes", &first)?
        }
        _ => keyed.request("POST /notes", &body)?,
    };
    let (broken, map) = (app.broken, mapped(app.broken));
    Ok(app
        .executor
        .execute(req, move |db| async move {
            if body["title"] == "taken" {
                let taken = Problem::new(StatusCode::CONFLICT, "title-taken", "taken");
                return Err(match broken {
                    Break::RefusalsLeftOpen => taken.transient(),
                    _ => taken,
                });
            }
            let mut tx = db.begin().await.map_err(map)?;
            let insert = sqlx::query("INSERT INTO notes (owner, body) VALUES ($1, $2)")
                .bind(&scope)
                .bind(&body);
            match broken {
                Break::WritesOnThePool => insert.execute(&db).await.map_err(map)?,
                _ => insert.execute(&mut *tx).await.map_err(map)?,
            };
            Ok((tx, Reply::json(StatusCode::CREATED, &body)?))
        })
        .await)
}

async fn pin(
    State(app): State<App>,
    keyed: Keyed<Caller>,
    Path(id): Path<i64>,
    Json(body): Json<Value>,
) -> Result<Response, Problem> {
    let scope = keyed.scope.0.clone();
    let req = match app.broken {
        Break::ParamLeftOut => keyed.request("POST /notes/{id}/pin", &body)?,
        _ => keyed.request_on("POST /notes/{id}/pin", &[("id", &id.to_string())], &body)?,
    };
    Ok(app
        .executor
        .execute(req, move |db| async move {
            let mut tx = db.begin().await?;
            sqlx::query("INSERT INTO pins (note, owner, body) VALUES ($1, $2, $3)")
                .bind(id)
                .bind(&scope)
                .bind(&body)
                .execute(&mut *tx)
                .await?;
            Ok((
                tx,
                Reply::json(StatusCode::OK, &json!({ "note": id, "pin": body }))?,
            ))
        })
        .await)
}

const SCHEMA: &str = "
    CREATE TABLE notes (id bigserial PRIMARY KEY, owner text NOT NULL, body jsonb NOT NULL);
    CREATE TABLE pins (note bigint NOT NULL, owner text NOT NULL, body jsonb NOT NULL);";

/// The app on port 0, on a database of its own, with its faults.
struct Notes {
    base: String,
    db: PgPool,
    _test_db: TestDb,
    gates: Gates,
    waits: Waits,
    http: reqwest::Client,
}

async fn start(broken: Break) -> Arc<Notes> {
    let test_db = TestDb::create(SCHEMA).await;
    let db = test_db.db.clone();
    let gates = Gates::default();
    let waits = Waits::start(db.clone(), WaitLimits::default(), LONGEST_WAIT);
    let mut executor = Executor::new(db.clone(), LEASE).with_faults(gates.clone());
    if broken != Break::WaitsLeftOut {
        executor = executor.with_waits(waits.clone());
    }
    let cache_retention = match broken {
        Break::CacheOutlivesRetention => Duration::from_secs(3600),
        _ => RETENTION,
    };
    executor = executor.with_answer_cache(AnswerCache::new(cache_retention, 1 << 20));
    let app = App {
        executor,
        fingerprints: FingerprintKeys::new(&["test".to_owned()]).unwrap(),
        db: db.clone(),
        broken,
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, router(app)).await });
    Arc::new(Notes {
        base,
        db,
        _test_db: test_db,
        gates,
        waits,
        http: reqwest::Client::new(),
    })
}

impl Subject for Notes {
    type Scope = String;

    fn operations(&self) -> usize {
        2
    }

    fn has_target(&self, op: usize) -> bool {
        op == 1
    }

    async fn new_scope(&self) -> String {
        uuid::Uuid::new_v4().to_string()
    }

    fn body(&self, op: usize, n: u32) -> Value {
        match op {
            0 => {
                json!({ "title": format!("note {n}"), "text": format!("text {n}"), "tags": ["a", "b"] })
            }
            _ => json!({ "color": format!("color {n}") }),
        }
    }

    fn refusal(&self, op: usize) -> Option<Value> {
        (op == 0).then(|| json!({ "title": "taken", "text": "" }))
    }

    async fn send(&self, caller: &String, call: Call<'_>) -> reqwest::Response {
        if let Some(key) = call.key {
            match &call.fault {
                Fault::Hold(gate) => self.gates.hold(key, gate),
                Fault::FailTransient => self.gates.fail(key),
                Fault::ReadOnly => self.gates.read_only(key),
                Fault::HoldThenFail(gate) => {
                    self.gates.hold(key, gate);
                    self.gates.fail(key);
                }
                _ => {}
            }
        }
        let path = match call.op {
            0 => "/notes".to_owned(),
            _ => format!("/notes/{}/pin", call.target),
        };
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("x-caller", caller);
        if let Some(key) = call.key {
            request = request.header("idempotency-key", key);
        }
        if let Some(prefer) = call.prefer() {
            request = request.header("prefer", prefer);
        }
        request.json(call.body).send().await.unwrap()
    }

    async fn key_status(&self, caller: &String, key: &str) -> reqwest::Response {
        let url = format!("{}/idempotency-keys/{key}", self.base);
        self.http
            .get(url)
            .header("x-caller", caller)
            .send()
            .await
            .unwrap()
    }

    async fn effects(&self, caller: &String) -> u64 {
        let count: i64 = sqlx::query_scalar(
            "SELECT (SELECT count(*) FROM notes WHERE owner = $1) + (SELECT count(*) FROM pins WHERE owner = $1)",
        )
        .bind(caller)
        .fetch_one(&self.db)
        .await
        .unwrap();
        count as u64
    }

    async fn waiting(&self, gate: &str) -> usize {
        self.gates.waiting(gate)
    }

    async fn open(&self, gate: &str) {
        self.gates.open(gate)
    }

    async fn claims(&self, key: &str) -> Option<usize> {
        Some(self.gates.claims(key))
    }

    fn lease(&self) -> Duration {
        LEASE
    }

    fn longest_wait(&self) -> Option<Duration> {
        Some(LONGEST_WAIT)
    }

    async fn waiters(&self) -> Option<usize> {
        Some(self.waits.waiting())
    }

    fn retention(&self) -> Option<Duration> {
        Some(RETENTION)
    }

    async fn purge(&self) {
        once_pg::purge(&self.db, RETENTION).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_correct_app_passes_every_check_for_both_operations() {
    let notes = start(Break::Nothing).await;
    conformance::run_all(&*notes).await;
}

/// Whether `check` fails (panics) on operation `op` of an app broken as `broken`.
async fn fails<F, Fut>(broken: Break, op: usize, check: F) -> bool
where
    F: FnOnce(Arc<Notes>, usize) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let notes = start(broken).await;
    let failed = tokio::spawn(check(notes.clone(), op)).await.is_err();
    failed
}

macro_rules! check {
    ($name:ident) => {
        |notes: Arc<Notes>, op: usize| async move {
            conformance::$name(&On {
                subject: &*notes,
                op,
            })
            .await
        }
    };
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fingerprint_that_leaves_out_a_field_is_found() {
    assert!(
        fails(
            Break::FieldLeftOut,
            0,
            check!(every_member_of_the_body_is_fingerprinted)
        )
        .await
    );
    assert!(
        !fails(
            Break::Nothing,
            0,
            check!(every_member_of_the_body_is_fingerprinted)
        )
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fingerprint_of_one_element_of_an_array_is_found() {
    assert!(
        fails(
            Break::FirstTagOnly,
            0,
            check!(every_member_of_the_body_is_fingerprinted)
        )
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_status_route_with_another_scope_is_found() {
    assert!(
        fails(
            Break::StatusScope,
            0,
            check!(the_key_status_route_answers_the_callers_own_keys)
        )
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn database_errors_stored_as_refusals_are_found() {
    assert!(
        fails(
            Break::DatabaseErrorsStored,
            0,
            check!(a_database_error_in_the_work_leaves_the_key_open)
        )
        .await
    );
    assert!(
        !fails(
            Break::Nothing,
            0,
            check!(a_database_error_in_the_work_leaves_the_key_open)
        )
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_path_parameter_left_out_of_the_fingerprint_is_found() {
    assert!(
        fails(
            Break::ParamLeftOut,
            1,
            check!(one_key_on_two_resources_is_422)
        )
        .await
    );
    assert!(!fails(Break::Nothing, 1, check!(one_key_on_two_resources_is_422)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refusal_left_open_is_found() {
    assert!(
        fails(
            Break::RefusalsLeftOpen,
            0,
            check!(a_refusal_the_work_decides_is_stored_and_replayed)
        )
        .await
    );
    assert!(
        !fails(
            Break::Nothing,
            0,
            check!(a_refusal_the_work_decides_is_stored_and_replayed)
        )
        .await
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn writes_outside_the_works_transaction_are_found() {
    assert!(fails(Break::WritesOnThePool, 0, check!(a_failed_key_is_retryable)).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn waits_left_out_are_found() {
    let waited = check!(a_repeat_that_waits_gets_the_original_s_answer);
    assert!(fails(Break::WaitsLeftOut, 0, waited).await);
    assert!(fails(Break::WaitsLeftOut, 0, check!(a_wait_that_runs_out_is_409)).await);
    let failed = check!(a_waiter_whose_original_failed_runs_the_request);
    assert!(fails(Break::WaitsLeftOut, 1, failed).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_answer_cache_that_outlives_the_retention_is_found() {
    let past = check!(a_key_past_retention_is_a_new_request);
    assert!(fails(Break::CacheOutlivesRetention, 0, past).await);
    let past = check!(a_key_past_retention_is_a_new_request);
    assert!(!fails(Break::Nothing, 0, past).await);
}
