//! The protocol's conformance suite (draft-ietf-httpapi-idempotency-key-header), for an
//! application's own tests against its own running server. The application describes its
//! keyed operations through a [`Subject`]; [`run_all`] then checks each of them, over HTTP:
//!
//! * 400 for a missing or malformed key, with nothing done;
//! * a repeat is replayed byte for byte with `Idempotent-Replayed: true`;
//! * the key reused with another body is 422 — a change of any one member of the body, and
//!   another resource of the same operation — and nothing more is done;
//! * 409 with `Retry-After` while the first request is in flight;
//! * a transient failure leaves the key retryable: the same key then succeeds, once;
//! * a database error met by the work, through the application's own error path, leaves
//!   the key open (not stored), with `Retry-After`;
//! * N requests with one key at the same instant execute once;
//! * a holder whose lease ran out is taken over, and its late completion is fenced; the
//!   stalled holder is released as soon as the taker has claimed the key, so work under a
//!   unique constraint (the taker waits for the holder's row) passes too;
//! * the key-status route answers the caller's own keys (processing, completed with the
//!   answer's status, failed) and no one else's;
//! * a refusal the work decides (a 4xx, 409 included) is stored and replayed, without
//!   `Retry-After`;
//! * a key past its retention ([`Subject::retention`]) and purged is a new request, never
//!   answered from a copy kept in memory;
//! * `Prefer: wait` ([`Subject::longest_wait`]): a repeat that waits for a held first
//!   request gets its answer replayed, not a 409; still running at its deadline, a 409;
//!   after the first request failed, the waiter runs the request itself, once. An
//!   application that does not take the preference answers such a repeat 409 at once.
//!
//! Each check panics with what it saw when the application breaks the protocol. Each uses
//! a scope of its own, so the count of effects in that scope is the check's own.
//!
//! Connections: the checks run one after another; the storm sends 8 requests at once, the
//! takeover holds one transaction open while a second request runs. A pool of 10
//! connections is enough.

use std::{future::Future, sync::Arc, time::Duration};

use futures::future::join_all;
use reqwest::{Response, StatusCode};
use serde_json::Value;
use tokio::sync::Barrier;

mod fingerprint;
mod gates;
mod retention;
mod waits;
pub use fingerprint::every_member_of_the_body_is_fingerprinted;
pub use gates::Gates;
pub use retention::a_key_past_retention_is_a_new_request;
pub use waits::{
    a_repeat_that_waits_gets_the_original_s_answer, a_wait_that_runs_out_is_409,
    a_waiter_whose_original_failed_runs_the_request,
};

/// What a request asks the application's test-time faults to do.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Fault {
    /// Nothing.
    None,
    /// Wait inside the work's open transaction, before the commit, until `open(gate)`.
    Hold(String),
    /// Fail with a transient error (5xx) after the work, before the commit.
    FailTransient,
    /// Run the work on a database that refuses every write ([`crate::faults::ReadOnlyWork`]):
    /// the error reaches the application through its own statements and error mapping.
    ReadOnly,
    /// Wait at the gate like [`Fault::Hold`], then fail like [`Fault::FailTransient`]: the
    /// original a waiting repeat sees fail.
    HoldThenFail(String),
}

/// One request the suite sends.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Call<'a> {
    /// Which of the subject's operations (0 to [`Subject::operations`] − 1).
    pub op: usize,
    /// For an operation on a resource ([`Subject::has_target`]): which of the scope's
    /// resources, made by the subject the first time it is named.
    pub target: u32,
    /// The `Idempotency-Key` header's raw value (`None`: no header).
    pub key: Option<&'a str>,
    /// The body.
    pub body: &'a Value,
    /// The test-time fault to apply.
    pub fault: Fault,
    /// How long the request asks to wait for its key's running request (`Prefer: wait=N`,
    /// in seconds); `None`: no `Prefer` header. See [`Call::prefer`].
    pub wait: Option<u32>,
}

impl Call<'_> {
    /// The `Prefer` header the request carries (`wait=N`), if any: a subject sends it.
    pub fn prefer(&self) -> Option<String> {
        self.wait.map(|seconds| format!("wait={seconds}"))
    }
}

/// The application under test, as the suite sees it.
pub trait Subject: Sync {
    /// The application's scope (a session, an API key): whatever the client needs.
    type Scope: Sync;

    /// How many keyed operations the suite checks; each is checked on its own.
    fn operations(&self) -> usize {
        1
    }
    /// Whether operation `op` acts on a resource its path names (`/bookings/{id}/cancel`).
    fn has_target(&self, _op: usize) -> bool {
        false
    }
    /// A new scope, with no keys and no effects yet.
    fn new_scope(&self) -> impl Future<Output = Self::Scope> + Send;
    /// A valid body for operation `op`; a different `n`, a different request.
    fn body(&self, op: usize, n: u32) -> Value;
    /// Sends `call` in `scope`.
    fn send(&self, scope: &Self::Scope, call: Call<'_>) -> impl Future<Output = Response> + Send;
    /// Asks the application's key-status route about `key`, as `scope`.
    fn key_status(&self, scope: &Self::Scope, key: &str) -> impl Future<Output = Response> + Send;
    /// A body for operation `op` that the work refuses with a 4xx of its own deciding (a room
    /// taken, an unknown product): the refusal is stored and replayed like a success.
    /// `None`: the suite does not check it for this operation.
    fn refusal(&self, _op: usize) -> Option<Value> {
        None
    }
    /// How many times a keyed write took effect in `scope` (rows it made, say).
    fn effects(&self, scope: &Self::Scope) -> impl Future<Output = u64> + Send;
    /// How many requests wait at `gate` now.
    fn waiting(&self, gate: &str) -> impl Future<Output = usize> + Send;
    /// Releases the requests waiting at `gate`.
    fn open(&self, gate: &str) -> impl Future<Output = ()> + Send;
    /// How many times requests of `key` have claimed it, if the application can tell
    /// ([`Gates::claims`]); `None`: the takeover check gives the taker a fixed two seconds.
    fn claims(&self, _key: &str) -> impl Future<Output = Option<usize>> + Send {
        async { None }
    }
    /// The lease the application runs with: the takeover check waits it out.
    fn lease(&self) -> Duration;
    /// The longest `Prefer: wait` the application grants (`Executor::with_waits`). `None`,
    /// the default: it does not take the preference, and the suite checks that a repeat
    /// asking to wait is still answered 409 at once, as the draft says.
    fn longest_wait(&self) -> Option<Duration> {
        None
    }
    /// How many requests wait for their key's running request now (`Waits::waiting`), if
    /// the application can tell; `None`: the suite gives a waiting repeat 300 ms to arrive.
    fn waiters(&self) -> impl Future<Output = Option<usize>> + Send {
        async { None }
    }
    /// How long the application keeps a finished key, when the suite may wait it out and
    /// then run the purge ([`Subject::purge`]); `None`, the default: the retention check is
    /// skipped. Keep it short (seconds): the check waits it out.
    fn retention(&self) -> Option<Duration> {
        None
    }
    /// Runs the application's purge now (`once_axum::purge`), as its purge task would.
    fn purge(&self) -> impl Future<Output = ()> + Send {
        async {}
    }
}

/// Every check, for every operation, one after another.
pub async fn run_all<S: Subject>(subject: &S) {
    assert!(
        subject.operations() > 0,
        "a subject has at least one operation"
    );
    for op in 0..subject.operations() {
        let s = &On { subject, op };
        missing_or_malformed_key_is_400(s).await;
        one_key_in_two_scopes_is_two_requests(s).await;
        a_repeat_is_replayed(s).await;
        a_key_reused_with_another_body_is_422(s).await;
        every_member_of_the_body_is_fingerprinted(s).await;
        one_key_on_two_resources_is_422(s).await;
        a_repeat_in_flight_is_409_with_retry_after(s).await;
        a_repeat_that_waits_gets_the_original_s_answer(s).await;
        a_wait_that_runs_out_is_409(s).await;
        a_waiter_whose_original_failed_runs_the_request(s).await;
        a_failed_key_is_retryable(s).await;
        a_database_error_in_the_work_leaves_the_key_open(s).await;
        a_refusal_the_work_decides_is_stored_and_replayed(s).await;
        a_storm_on_one_key_executes_once(s, 8).await;
        an_expired_lease_is_taken_over_and_the_stale_holder_fenced(s).await;
        the_key_status_route_answers_the_callers_own_keys(s).await;
        a_key_past_retention_is_a_new_request(s).await;
    }
}

/// One operation of a subject: what every check is given.
pub struct On<'s, S> {
    /// The application.
    pub subject: &'s S,
    /// The operation checked.
    pub op: usize,
}

impl<S: Subject> On<'_, S> {
    fn body(&self, n: u32) -> Value {
        self.subject.body(self.op, n)
    }

    async fn send(
        &self,
        scope: &S::Scope,
        key: Option<&str>,
        body: &Value,
        fault: Fault,
    ) -> Response {
        self.send_to(scope, 1, key, body, fault).await
    }

    async fn send_to(
        &self,
        scope: &S::Scope,
        target: u32,
        key: Option<&str>,
        body: &Value,
        fault: Fault,
    ) -> Response {
        let call = self.call(target, key, body, fault);
        self.subject.send(scope, call).await
    }

    /// The call of this operation on resource `target`, asking no wait.
    fn call<'a>(
        &self,
        target: u32,
        key: Option<&'a str>,
        body: &'a Value,
        fault: Fault,
    ) -> Call<'a> {
        Call {
            op: self.op,
            target,
            key,
            body,
            fault,
            wait: None,
        }
    }

    async fn effects(&self, scope: &S::Scope) -> u64 {
        self.subject.effects(scope).await
    }

    /// The key's state as the status route tells `scope` (`None`: 404).
    async fn state(&self, scope: &S::Scope, key: &str) -> Option<Value> {
        let answer = self.subject.key_status(scope, key).await;
        match answer.status() {
            StatusCode::NOT_FOUND => None,
            StatusCode::OK => Some(answer.json().await.expect("the key status is JSON")),
            other => panic!("op {}: the key-status route answered {other}", self.op),
        }
    }
}

fn fresh_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

type Answer = (StatusCode, Option<String>, Vec<u8>);

async fn answer(response: Response) -> Answer {
    let status = response.status();
    let replayed = header(&response, "idempotent-replayed");
    let body = response.bytes().await.expect("a readable body").to_vec();
    (status, replayed, body)
}

fn header(response: &Response, name: &str) -> Option<String> {
    response
        .headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// A missing, empty, spaced or badly quoted key is refused (400) and does nothing.
pub async fn missing_or_malformed_key_is_400<S: Subject>(on: &On<'_, S>) {
    let scope = on.subject.new_scope().await;
    let body = on.body(1);
    for key in [None, Some(""), Some("with space"), Some("\"unterminated")] {
        let status = on.send(&scope, key, &body, Fault::None).await.status();
        assert_eq!(status, StatusCode::BAD_REQUEST, "op {}: key {key:?}", on.op);
    }
    assert_eq!(on.effects(&scope).await, 0, "a refused key did something");
    // The control: the same scope and body with a valid key are accepted, so the 400s
    // above were about the key.
    let valid = on
        .send(&scope, Some(&fresh_key()), &body, Fault::None)
        .await;
    assert!(
        valid.status().is_success(),
        "a valid key: {}",
        valid.status()
    );
    assert_eq!(on.effects(&scope).await, 1);
}

/// Keys are scoped: the same key in another scope is another request, never a replay of
/// someone else's answer.
pub async fn one_key_in_two_scopes_is_two_requests<S: Subject>(on: &On<'_, S>) {
    let (mine, theirs) = (on.subject.new_scope().await, on.subject.new_scope().await);
    let (key, body) = (fresh_key(), on.body(1));
    for scope in [&mine, &theirs] {
        let (status, replayed, _) =
            answer(on.send(scope, Some(&key), &body, Fault::None).await).await;
        assert!(
            status.is_success(),
            "op {}: in its own scope: {status}",
            on.op
        );
        assert_eq!(replayed, None, "a key of another scope was replayed");
        assert_eq!(on.effects(scope).await, 1);
    }
}

/// The same request again gets the first answer, byte for byte, saying it is a replay.
pub async fn a_repeat_is_replayed<S: Subject>(on: &On<'_, S>) {
    let scope = on.subject.new_scope().await;
    let (key, body) = (fresh_key(), on.body(1));
    let first = answer(on.send(&scope, Some(&key), &body, Fault::None).await).await;
    assert!(
        first.0.is_success(),
        "op {}: first answer {}",
        on.op,
        first.0
    );
    assert_eq!(first.1, None, "a first execution said it was replayed");
    let again = answer(on.send(&scope, Some(&key), &body, Fault::None).await).await;
    assert_eq!(again.0, first.0);
    assert_eq!(again.1.as_deref(), Some("true"), "a replay must say so");
    assert_eq!(again.2, first.2, "a replay differs from the first answer");
    assert_eq!(on.effects(&scope).await, 1);
}

/// Sends `body` under the key of a completed request in `scope`, and checks that it is
/// refused, not answered with the completed request's reply, and does nothing.
async fn not_a_replay<S: Subject>(on: &On<'_, S>, scope: &S::Scope, sent: Response, what: &str) {
    let (status, replayed, _) = answer(sent).await;
    assert_eq!(
        replayed, None,
        "op {}: {what} was answered with another request's reply",
        on.op
    );
    assert!(status.is_client_error(), "op {}: {what}: {status}", on.op);
    assert_eq!(
        on.effects(scope).await,
        1,
        "op {}: {what} did something",
        on.op
    );
}

/// The key reused with another body is 422; the first request is still replayed after it.
pub async fn a_key_reused_with_another_body_is_422<S: Subject>(on: &On<'_, S>) {
    let scope = on.subject.new_scope().await;
    let key = fresh_key();
    let first = on.send(&scope, Some(&key), &on.body(1), Fault::None).await;
    assert!(
        first.status().is_success(),
        "op {}: first answer {}",
        on.op,
        first.status()
    );
    let first = answer(first).await;
    let other = on.send(&scope, Some(&key), &on.body(2), Fault::None).await;
    assert_eq!(
        other.status(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "op {}",
        on.op
    );
    assert_eq!(on.effects(&scope).await, 1);
    // The refusal changed nothing: the first request is still replayed.
    let again = answer(on.send(&scope, Some(&key), &on.body(1), Fault::None).await).await;
    assert_eq!(again.1.as_deref(), Some("true"));
    assert_eq!(again.2, first.2);
}

/// For an operation on a resource: the key of a completed request, sent to another
/// resource with the same body, is refused, not answered with the first resource's reply.
pub async fn one_key_on_two_resources_is_422<S: Subject>(on: &On<'_, S>) {
    if !on.subject.has_target(on.op) {
        return;
    }
    let scope = on.subject.new_scope().await;
    let (key, body) = (fresh_key(), on.body(1));
    let first = on.send_to(&scope, 1, Some(&key), &body, Fault::None).await;
    assert!(
        first.status().is_success(),
        "op {}: first answer {}",
        on.op,
        first.status()
    );
    let other = on.send_to(&scope, 2, Some(&key), &body, Fault::None).await;
    assert_eq!(
        other.status(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "op {}: another resource",
        on.op
    );
    not_a_replay(on, &scope, other, "the key sent to another resource").await;
}

/// Waits until `n` requests wait at `gate` (a request held by a test fault).
async fn until_waiting<S: Subject>(subject: &S, gate: &str, n: usize) {
    for _ in 0..400 {
        if subject.waiting(gate).await >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("no request arrived at gate {gate}");
}

/// A repeat while the first request runs is 409 with `Retry-After`, and the status route
/// says `processing`.
pub async fn a_repeat_in_flight_is_409_with_retry_after<S: Subject>(on: &On<'_, S>) {
    let scope = on.subject.new_scope().await;
    let (key, body, gate) = (fresh_key(), on.body(1), fresh_key());
    let first = on.send(&scope, Some(&key), &body, Fault::Hold(gate.clone()));
    let repeat = async {
        until_waiting(on.subject, &gate, 1).await;
        let repeat = on.send(&scope, Some(&key), &body, Fault::None).await;
        let status = repeat.status();
        let retry_after = header(&repeat, "retry-after");
        let state = on.state(&scope, &key).await;
        on.subject.open(&gate).await;
        (status, retry_after, state)
    };
    let (first, (status, retry_after, state)) = tokio::join!(first, repeat);
    assert_eq!(
        status,
        StatusCode::CONFLICT,
        "op {}: a repeat in flight",
        on.op
    );
    assert!(retry_after.is_some(), "a 409 must say when to retry");
    assert_eq!(
        state.map(|s| s["state"].clone()),
        Some("processing".into()),
        "status route, in flight"
    );
    assert!(
        first.status().is_success(),
        "the held request: {}",
        first.status()
    );
    assert_eq!(on.effects(&scope).await, 1);
}

/// Checks a request that failed transiently left nothing and its key open; the same key
/// with another body is still refused, and the retry executes once.
async fn left_open<S: Subject>(
    on: &On<'_, S>,
    scope: &S::Scope,
    key: &str,
    failed: Response,
    what: &str,
) {
    let status = failed.status();
    assert!(status.is_server_error(), "op {}: {what}: {status}", on.op);
    assert!(
        header(&failed, "retry-after").is_some(),
        "op {}: {what}: no Retry-After",
        on.op
    );
    assert_eq!(
        on.effects(scope).await,
        0,
        "op {}: {what} left its effect",
        on.op
    );
    let state = on.state(scope, key).await.map(|s| s["state"].clone());
    assert_eq!(
        state,
        Some("failed".into()),
        "op {}: {what}: the key must stay open",
        on.op
    );
    // The failed key is still this request's: another body under it is refused.
    let other = on.send(scope, Some(key), &on.body(2), Fault::None).await;
    assert_eq!(
        other.status(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "op {}: {what}, another body",
        on.op
    );
    let retried = answer(on.send(scope, Some(key), &on.body(1), Fault::None).await).await;
    assert!(
        retried.0.is_success(),
        "op {}: the retry after {what}: {}",
        on.op,
        retried.0
    );
    assert_eq!(retried.1, None, "the retry executed, it replays nothing");
    assert_eq!(on.effects(scope).await, 1);
}

/// A transient failure after the work leaves the key open; the retry executes once.
pub async fn a_failed_key_is_retryable<S: Subject>(on: &On<'_, S>) {
    let scope = on.subject.new_scope().await;
    let key = fresh_key();
    let failed = on
        .send(&scope, Some(&key), &on.body(1), Fault::FailTransient)
        .await;
    left_open(on, &scope, &key, failed, "a transient failure").await;
}

/// A database that refuses the work's writes, met through the application's own error
/// path, is a transient failure: the key is left open, never stored as a refusal.
pub async fn a_database_error_in_the_work_leaves_the_key_open<S: Subject>(on: &On<'_, S>) {
    let scope = on.subject.new_scope().await;
    let key = fresh_key();
    let failed = on
        .send(&scope, Some(&key), &on.body(1), Fault::ReadOnly)
        .await;
    left_open(on, &scope, &key, failed, "a database error in the work").await;
}

/// A 4xx the work decides (409 included) is the answer for good: sent without `Retry-After`,
/// stored with the key, replayed byte for byte, and the status route says `completed`.
pub async fn a_refusal_the_work_decides_is_stored_and_replayed<S: Subject>(on: &On<'_, S>) {
    let Some(body) = on.subject.refusal(on.op) else {
        return;
    };
    let scope = on.subject.new_scope().await;
    let key = fresh_key();
    let first = on.send(&scope, Some(&key), &body, Fault::None).await;
    let wait = header(&first, "retry-after");
    let first = answer(first).await;
    assert!(
        first.0.is_client_error(),
        "op {}: the refusal: {}",
        on.op,
        first.0
    );
    assert_eq!(
        wait, None,
        "op {}: a definitive refusal invites a retry",
        on.op
    );
    let again = answer(on.send(&scope, Some(&key), &body, Fault::None).await).await;
    assert_eq!(
        again.1.as_deref(),
        Some("true"),
        "op {}: the refusal was decided again, not replayed",
        on.op
    );
    assert_eq!(
        (again.0, &again.2),
        (first.0, &first.2),
        "op {}: the replay differs",
        on.op
    );
    let state = on.state(&scope, &key).await.expect("the caller's own key");
    assert_eq!(state["state"], "completed", "op {}: {state}", on.op);
    assert_eq!(
        state["response_status"],
        first.0.as_u16(),
        "op {}: {state}",
        on.op
    );
}

/// `n` requests with one key at the same instant (a barrier) execute once.
pub async fn a_storm_on_one_key_executes_once<S: Subject>(on: &On<'_, S>, n: usize) {
    let scope = on.subject.new_scope().await;
    let (key, body) = (fresh_key(), on.body(1));
    let start = Arc::new(Barrier::new(n));
    let sends = (0..n).map(|_| {
        let start = start.clone();
        let (scope, key, body) = (&scope, &key, &body);
        async move {
            start.wait().await;
            let sent = on.send(scope, Some(key), body, Fault::None).await;
            let retry_after = header(&sent, "retry-after");
            (answer(sent).await, retry_after)
        }
    });
    let (answers, waits): (Vec<Answer>, Vec<Option<String>>) =
        join_all(sends).await.into_iter().unzip();
    let executed = answers
        .iter()
        .filter(|a| a.0.is_success() && a.1.is_none())
        .count();
    assert!(
        executed <= 1,
        "op {}: {executed} of {n} requests executed",
        on.op
    );
    for ((status, _, _), wait) in answers.iter().zip(&waits) {
        assert!(
            status.is_success() || *status == StatusCode::CONFLICT,
            "a storm answer {status}"
        );
        // A stored 409 (the work's "no") says nothing of when to come back; the protocol's
        // "still running" does.
        assert!(
            status.is_success() || wait.is_some(),
            "op {}: a storm's 409 without Retry-After: the work ran twice and refused once?",
            on.op
        );
    }
    let last = answer(on.send(&scope, Some(&key), &body, Fault::None).await).await;
    assert!(
        last.0.is_success(),
        "op {}: after the storm: {}",
        on.op,
        last.0
    );
    let first = answers.iter().find(|a| a.0.is_success() && a.1.is_none());
    if let Some(first) = first {
        assert_eq!(
            last.2, first.2,
            "op {}: the replay is not the executed answer",
            on.op
        );
    }
    assert_eq!(on.effects(&scope).await, 1, "{n} requests at once");
}

/// Waits until `key` has been claimed `n` times, or a fixed two seconds when the subject
/// cannot tell.
async fn until_claimed<S: Subject>(subject: &S, key: &str, n: usize) {
    for _ in 0..200 {
        match subject.claims(key).await {
            None => break,
            Some(seen) if seen >= n => return,
            Some(_) => tokio::time::sleep(Duration::from_millis(25)).await,
        }
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
}

/// A holder whose lease ran out is taken over; the stale holder, released once the taker
/// has claimed the key, is fenced: its writes are rolled back.
pub async fn an_expired_lease_is_taken_over_and_the_stale_holder_fenced<S: Subject>(
    on: &On<'_, S>,
) {
    let scope = on.subject.new_scope().await;
    let (key, body, gate) = (fresh_key(), on.body(1), fresh_key());
    let stale = on.send(&scope, Some(&key), &body, Fault::Hold(gate.clone()));
    let takeover = async {
        until_waiting(on.subject, &gate, 1).await;
        tokio::time::sleep(on.subject.lease() + Duration::from_millis(500)).await;
        let taker = on.send(&scope, Some(&key), &body, Fault::None);
        let release = async {
            until_claimed(on.subject, &key, 2).await;
            on.subject.open(&gate).await;
        };
        let (taken, ()) = tokio::join!(taker, release);
        answer(taken).await
    };
    let (stale, taken) = tokio::join!(stale, takeover);
    assert!(
        taken.0.is_success(),
        "op {}: the takeover: {}",
        on.op,
        taken.0
    );
    assert_eq!(taken.1, None, "the takeover executed, it replays nothing");
    let stale_wait = header(&stale, "retry-after");
    let stale = answer(stale).await;
    // The stale holder's writes were rolled back: it answers with what the key holds (the
    // taker's answer, or "still running", which says when to come back).
    assert!(
        (stale.0 == StatusCode::CONFLICT && stale_wait.is_some())
            || stale.1.as_deref() == Some("true"),
        "the stale holder answered {} without a replay",
        stale.0
    );
    assert_eq!(
        on.effects(&scope).await,
        1,
        "the stale holder's effect landed"
    );
}

/// The status route tells a scope its own completed key (with the answer's status), and
/// another scope nothing.
pub async fn the_key_status_route_answers_the_callers_own_keys<S: Subject>(on: &On<'_, S>) {
    let (mine, theirs) = (on.subject.new_scope().await, on.subject.new_scope().await);
    let key = fresh_key();
    assert_eq!(
        on.state(&mine, &key).await,
        None,
        "op {}: an unused key",
        on.op
    );
    let done = on.send(&mine, Some(&key), &on.body(1), Fault::None).await;
    let status = done.status();
    assert!(status.is_success(), "op {}: {status}", on.op);
    let state = on.state(&mine, &key).await.expect("the caller's own key");
    assert_eq!(state["state"], "completed", "op {}: {state}", on.op);
    assert_eq!(
        state["response_status"],
        status.as_u16(),
        "op {}: {state}",
        on.op
    );
    assert_eq!(
        on.state(&theirs, &key).await,
        None,
        "op {}: another scope read the key",
        on.op
    );
}
