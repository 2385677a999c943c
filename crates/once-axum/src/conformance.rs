//! The protocol's conformance suite (draft-ietf-httpapi-idempotency-key-header), for an
//! application's own tests against its own running server. The application describes how to
//! reach one keyed write through a [`Subject`]; [`run_all`] then checks, over HTTP:
//!
//! * 400 for a missing or malformed key, with nothing done;
//! * a repeat is replayed byte for byte with `Idempotent-Replayed: true`;
//! * the key reused with another body is 422, and nothing more is done;
//! * 409 with `Retry-After` while the first request is in flight;
//! * a transient failure leaves the key retryable: the same key then succeeds, once;
//! * N requests with one key at the same instant execute once;
//! * a holder whose lease ran out is taken over, and its late completion is fenced.
//!
//! Each check panics with what it saw when the application breaks the protocol. Each uses
//! a scope of its own, so the count of effects in that scope is the check's own.

use std::{sync::Arc, time::Duration};

use futures::future::join_all;
use reqwest::{Response, StatusCode};
use serde_json::Value;
use tokio::sync::Barrier;

mod gates;
pub use gates::Gates;

/// What a request asks the application's test-time faults to do.
#[derive(Clone, Debug)]
pub enum Fault {
    None,
    /// Wait inside the work's open transaction, before the commit, until `open(gate)`.
    Hold(String),
    /// Fail with a transient error (5xx) after the work, before the commit.
    FailTransient,
}

/// The application under test, as the suite sees it.
pub trait Subject: Sync {
    /// The application's scope (a session, an API key): whatever the client needs.
    type Scope: Sync;

    /// A new scope, with no keys and no effects yet.
    fn new_scope(&self) -> impl std::future::Future<Output = Self::Scope> + Send;
    /// A valid body for the keyed write; different `n`, different request.
    fn body(&self, n: u32) -> Value;
    /// Sends the keyed write with `key` as the raw header value (`None`: no header).
    fn send(
        &self,
        scope: &Self::Scope,
        key: Option<&str>,
        body: &Value,
        fault: Fault,
    ) -> impl std::future::Future<Output = Response> + Send;
    /// How many times the write took effect in `scope` (rows it made, say).
    fn effects(&self, scope: &Self::Scope) -> impl std::future::Future<Output = u64> + Send;
    /// How many requests wait at `gate` now.
    fn waiting(&self, gate: &str) -> impl std::future::Future<Output = usize> + Send;
    /// Releases the requests waiting at `gate`.
    fn open(&self, gate: &str) -> impl std::future::Future<Output = ()> + Send;
    /// The lease the application runs with: the takeover check waits it out.
    fn lease(&self) -> Duration;
}

/// Every check, one after another.
pub async fn run_all<S: Subject>(subject: &S) {
    missing_or_malformed_key_is_400(subject).await;
    one_key_in_two_scopes_is_two_requests(subject).await;
    a_repeat_is_replayed(subject).await;
    a_key_reused_with_another_body_is_422(subject).await;
    a_repeat_in_flight_is_409_with_retry_after(subject).await;
    a_failed_key_is_retryable(subject).await;
    a_storm_on_one_key_executes_once(subject, 8).await;
    an_expired_lease_is_taken_over_and_the_stale_holder_fenced(subject).await;
}

fn fresh_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

async fn answer(response: Response) -> (StatusCode, Option<String>, Vec<u8>) {
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

pub async fn missing_or_malformed_key_is_400<S: Subject>(subject: &S) {
    let scope = subject.new_scope().await;
    let body = subject.body(1);
    for key in [None, Some(""), Some("with space"), Some("\"unterminated")] {
        let status = subject.send(&scope, key, &body, Fault::None).await.status();
        assert_eq!(status, StatusCode::BAD_REQUEST, "key {key:?}");
    }
    assert_eq!(
        subject.effects(&scope).await,
        0,
        "a refused key did something"
    );
    // The control: the same scope and body with a valid key are accepted, so the 400s
    // above were about the key.
    let valid = subject
        .send(&scope, Some(&fresh_key()), &body, Fault::None)
        .await;
    assert!(
        valid.status().is_success(),
        "a valid key: {}",
        valid.status()
    );
    assert_eq!(subject.effects(&scope).await, 1);
}

/// Keys are scoped: the same key in another scope is another request, never a replay of
/// someone else's answer.
pub async fn one_key_in_two_scopes_is_two_requests<S: Subject>(subject: &S) {
    let (mine, theirs) = (subject.new_scope().await, subject.new_scope().await);
    let (key, body) = (fresh_key(), subject.body(1));
    for scope in [&mine, &theirs] {
        let sent = subject.send(scope, Some(&key), &body, Fault::None).await;
        let (status, replayed, _) = answer(sent).await;
        assert!(status.is_success(), "in its own scope: {status}");
        assert_eq!(replayed, None, "a key of another scope was replayed");
        assert_eq!(subject.effects(scope).await, 1);
    }
}

pub async fn a_repeat_is_replayed<S: Subject>(subject: &S) {
    let scope = subject.new_scope().await;
    let (key, body) = (fresh_key(), subject.body(1));
    let first = answer(subject.send(&scope, Some(&key), &body, Fault::None).await).await;
    assert!(first.0.is_success(), "first answer {}", first.0);
    assert_eq!(first.1, None, "a first execution said it was replayed");
    let again = answer(subject.send(&scope, Some(&key), &body, Fault::None).await).await;
    assert_eq!(again.0, first.0);
    assert_eq!(again.1.as_deref(), Some("true"), "a replay must say so");
    assert_eq!(again.2, first.2, "a replay differs from the first answer");
    assert_eq!(subject.effects(&scope).await, 1);
}

pub async fn a_key_reused_with_another_body_is_422<S: Subject>(subject: &S) {
    let scope = subject.new_scope().await;
    let key = fresh_key();
    let first = subject
        .send(&scope, Some(&key), &subject.body(1), Fault::None)
        .await;
    assert!(
        first.status().is_success(),
        "first answer {}",
        first.status()
    );
    let first = answer(first).await;
    let other = subject
        .send(&scope, Some(&key), &subject.body(2), Fault::None)
        .await;
    assert_eq!(other.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(subject.effects(&scope).await, 1);
    // The refusal changed nothing: the first request is still replayed.
    let again = subject
        .send(&scope, Some(&key), &subject.body(1), Fault::None)
        .await;
    let again = answer(again).await;
    assert_eq!(again.1.as_deref(), Some("true"));
    assert_eq!(again.2, first.2);
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

pub async fn a_repeat_in_flight_is_409_with_retry_after<S: Subject>(subject: &S) {
    let scope = subject.new_scope().await;
    let (key, body, gate) = (fresh_key(), subject.body(1), fresh_key());
    let first = subject.send(&scope, Some(&key), &body, Fault::Hold(gate.clone()));
    let repeat = async {
        until_waiting(subject, &gate, 1).await;
        let repeat = subject.send(&scope, Some(&key), &body, Fault::None).await;
        let status = repeat.status();
        let retry_after = header(&repeat, "retry-after");
        subject.open(&gate).await;
        (status, retry_after)
    };
    let (first, (status, retry_after)) = tokio::join!(first, repeat);
    assert_eq!(status, StatusCode::CONFLICT, "a repeat in flight");
    assert!(retry_after.is_some(), "a 409 must say when to retry");
    assert!(
        first.status().is_success(),
        "the held request: {}",
        first.status()
    );
    assert_eq!(subject.effects(&scope).await, 1);
}

pub async fn a_failed_key_is_retryable<S: Subject>(subject: &S) {
    let scope = subject.new_scope().await;
    let (key, body) = (fresh_key(), subject.body(1));
    let failed = subject
        .send(&scope, Some(&key), &body, Fault::FailTransient)
        .await;
    assert!(
        failed.status().is_server_error(),
        "failed: {}",
        failed.status()
    );
    assert_eq!(
        subject.effects(&scope).await,
        0,
        "a failure left its effect"
    );
    // The failed key is still this request's: another body under it is refused.
    let other = subject
        .send(&scope, Some(&key), &subject.body(2), Fault::None)
        .await;
    assert_eq!(
        other.status(),
        StatusCode::UNPROCESSABLE_ENTITY,
        "a failed key, another body"
    );
    let retried = answer(subject.send(&scope, Some(&key), &body, Fault::None).await).await;
    assert!(retried.0.is_success(), "the retry: {}", retried.0);
    assert_eq!(retried.1, None, "the retry executed, it replays nothing");
    assert_eq!(subject.effects(&scope).await, 1);
}

pub async fn a_storm_on_one_key_executes_once<S: Subject>(subject: &S, n: usize) {
    let scope = subject.new_scope().await;
    let (key, body) = (fresh_key(), subject.body(1));
    let start = Arc::new(Barrier::new(n));
    let sends = (0..n).map(|_| {
        let start = start.clone();
        let (scope, key, body) = (&scope, &key, &body);
        async move {
            start.wait().await;
            answer(subject.send(scope, Some(key), body, Fault::None).await).await
        }
    });
    let answers = join_all(sends).await;
    let executed = answers
        .iter()
        .filter(|a| a.0.is_success() && a.1.is_none())
        .count();
    assert!(executed <= 1, "{executed} of {n} requests executed");
    for (status, _, _) in &answers {
        assert!(
            status.is_success() || *status == StatusCode::CONFLICT,
            "a storm answer {status}"
        );
    }
    let last = subject.send(&scope, Some(&key), &body, Fault::None).await;
    assert!(last.status().is_success());
    assert_eq!(subject.effects(&scope).await, 1, "{n} requests at once");
}

pub async fn an_expired_lease_is_taken_over_and_the_stale_holder_fenced<S: Subject>(subject: &S) {
    let scope = subject.new_scope().await;
    let (key, body, gate) = (fresh_key(), subject.body(1), fresh_key());
    let stale = subject.send(&scope, Some(&key), &body, Fault::Hold(gate.clone()));
    let takeover = async {
        until_waiting(subject, &gate, 1).await;
        tokio::time::sleep(subject.lease() + Duration::from_millis(500)).await;
        let taken = answer(subject.send(&scope, Some(&key), &body, Fault::None).await).await;
        subject.open(&gate).await;
        taken
    };
    let (stale, taken) = tokio::join!(stale, takeover);
    assert!(taken.0.is_success(), "the takeover: {}", taken.0);
    assert_eq!(taken.1, None, "the takeover executed, it replays nothing");
    let stale = answer(stale).await;
    // The stale holder's writes were rolled back: it answers with what the key holds.
    assert!(
        stale.0 == StatusCode::CONFLICT || stale.1.as_deref() == Some("true"),
        "the stale holder answered {} without a replay",
        stale.0
    );
    assert_eq!(
        subject.effects(&scope).await,
        1,
        "the stale holder's effect landed"
    );
}
