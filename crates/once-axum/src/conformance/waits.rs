//! The checks of `Prefer: wait` (docs/protocol.md, "Waiting for the original"): a repeat
//! that asks to wait for its key's running request is answered as a repeat after that
//! request would be, never with a stale or another execution's answer.

use std::time::{Duration, Instant};

use reqwest::{Response, StatusCode};
use serde_json::Value;

use super::{answer, fresh_key, header, until_waiting, Answer, Fault, On, Subject};

/// Sends the operation's `body` under `key`, asking to wait up to `seconds`.
async fn send_waiting<S: Subject>(
    on: &On<'_, S>,
    scope: &S::Scope,
    key: &str,
    body: &Value,
    seconds: u32,
) -> Response {
    let mut call = on.call(1, Some(key), body, Fault::None);
    call.wait = Some(seconds);
    on.subject.send(scope, call).await
}

/// The wait a check asks for: the longest the application grants, in whole seconds (at
/// least one), so the application's cap decides how long the repeat waits.
fn asked(longest: Duration) -> u32 {
    let seconds = longest.as_secs() + u64::from(longest.subsec_nanos() > 0);
    seconds.clamp(1, 3600) as u32
}

/// Waits until `n` requests wait for their key on the application, or 300 ms when it cannot
/// tell. It does not fail: a repeat answered at once is what the check then reports.
async fn until_waiters<S: Subject>(subject: &S, n: usize) {
    for _ in 0..200 {
        match subject.waiters().await {
            None => break,
            Some(seen) if seen >= n => return,
            Some(_) => tokio::time::sleep(Duration::from_millis(25)).await,
        }
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
}

/// Sends the first request under `key` with `fault` (it holds at `gate`), and once it is
/// held, a repeat asking to wait the longest `longest` allows; opens the gate once the
/// repeat waits. The first request's answer, and the repeat's with its
/// `Preference-Applied`.
async fn held_and_awaited<S: Subject>(
    on: &On<'_, S>,
    scope: &S::Scope,
    (key, body, gate): (&str, &Value, &str),
    fault: Fault,
    longest: Duration,
) -> (Response, (Answer, Option<String>)) {
    let first = on.send(scope, Some(key), body, fault);
    let repeat = async {
        until_waiting(on.subject, gate, 1).await;
        let repeat = send_waiting(on, scope, key, body, asked(longest));
        let release = async {
            until_waiters(on.subject, 1).await;
            on.subject.open(gate).await;
        };
        let (repeat, ()) = tokio::join!(repeat, release);
        let applied = header(&repeat, "preference-applied");
        (answer(repeat).await, applied)
    };
    tokio::join!(first, repeat)
}

/// A repeat asking to wait while the first request is held in its transaction waits, and
/// once the first request commits gets its answer replayed byte for byte, saying
/// `Preference-Applied`: not a 409. An application that does not take the preference
/// answers the repeat 409 at once, without `Preference-Applied`.
pub async fn a_repeat_that_waits_gets_the_original_s_answer<S: Subject>(on: &On<'_, S>) {
    let Some(longest) = on.subject.longest_wait() else {
        return a_repeat_asking_to_wait_is_409_at_once(on).await;
    };
    let scope = on.subject.new_scope().await;
    let (key, body, gate) = (fresh_key(), on.body(1), fresh_key());
    let request = (key.as_str(), &body, gate.as_str());
    let hold = Fault::Hold(gate.clone());
    let (first, (repeat, applied)) = held_and_awaited(on, &scope, request, hold, longest).await;
    let first = answer(first).await;
    assert!(
        first.0.is_success(),
        "op {}: the held request: {}",
        on.op,
        first.0
    );
    assert_eq!(
        (repeat.0, repeat.1.as_deref()),
        (first.0, Some("true")),
        "op {}: a repeat that waited for the held request was not given its answer \
         (does the subject's send carry Call::prefer?)",
        on.op
    );
    assert_eq!(
        repeat.2, first.2,
        "op {}: the waiter's replay differs",
        on.op
    );
    let applied = applied.unwrap_or_default();
    assert!(
        applied.starts_with("wait="),
        "op {}: the waiter's answer says Preference-Applied {applied:?}",
        on.op
    );
    assert_eq!(on.effects(&scope).await, 1);
}

/// Without the preference taken: a repeat asking to wait gets today's 409 + `Retry-After`
/// while the first request is held, and no `Preference-Applied`.
async fn a_repeat_asking_to_wait_is_409_at_once<S: Subject>(on: &On<'_, S>) {
    let scope = on.subject.new_scope().await;
    let (key, body, gate) = (fresh_key(), on.body(1), fresh_key());
    let first = on.send(&scope, Some(&key), &body, Fault::Hold(gate.clone()));
    let repeat = async {
        until_waiting(on.subject, &gate, 1).await;
        let repeat = send_waiting(on, &scope, &key, &body, 5).await;
        on.subject.open(&gate).await;
        repeat
    };
    let (first, repeat) = tokio::join!(first, repeat);
    assert_eq!(repeat.status(), StatusCode::CONFLICT, "op {}", on.op);
    assert!(
        header(&repeat, "retry-after").is_some(),
        "a 409 must say when to retry"
    );
    assert_eq!(
        header(&repeat, "preference-applied"),
        None,
        "op {}: the application took Prefer: wait, but the subject's longest_wait says it \
         does not",
        on.op
    );
    assert!(
        first.status().is_success(),
        "the held request: {}",
        first.status()
    );
}

/// A repeat whose wait runs out while the first request is still held is answered 409 +
/// `Retry-After`, after waiting what it was granted, and the status route still says
/// `processing`; the first request then completes, once.
pub async fn a_wait_that_runs_out_is_409<S: Subject>(on: &On<'_, S>) {
    let Some(longest) = on.subject.longest_wait() else {
        return;
    };
    let scope = on.subject.new_scope().await;
    let (key, body, gate) = (fresh_key(), on.body(1), fresh_key());
    let first = on.send(&scope, Some(&key), &body, Fault::Hold(gate.clone()));
    let repeat = async {
        until_waiting(on.subject, &gate, 1).await;
        let started = Instant::now();
        let repeat = send_waiting(on, &scope, &key, &body, 1).await;
        let waited = started.elapsed();
        let state = on.state(&scope, &key).await;
        on.subject.open(&gate).await;
        (repeat, waited, state)
    };
    let (first, (repeat, waited, state)) = tokio::join!(first, repeat);
    assert_eq!(
        repeat.status(),
        StatusCode::CONFLICT,
        "op {}: the wait ran out",
        on.op
    );
    assert!(
        header(&repeat, "retry-after").is_some(),
        "a 409 must say when to retry"
    );
    let granted = longest.min(Duration::from_secs(1));
    assert!(
        waited >= granted,
        "op {}: the repeat was answered after {waited:?}, before its wait of {granted:?} ran \
         out",
        on.op
    );
    assert_eq!(
        state.map(|s| s["state"].clone()),
        Some("processing".into()),
        "op {}: status route, at the waiter's deadline",
        on.op
    );
    assert!(
        first.status().is_success(),
        "the held request: {}",
        first.status()
    );
    assert_eq!(on.effects(&scope).await, 1);
}

/// A repeat waiting while the first request fails is answered as a repeat after the
/// failure would be: it runs the request itself (not a replay, not the failure), once, and
/// its answer is the one replayed after.
pub async fn a_waiter_whose_original_failed_runs_the_request<S: Subject>(on: &On<'_, S>) {
    let Some(longest) = on.subject.longest_wait() else {
        return;
    };
    let scope = on.subject.new_scope().await;
    let (key, body, gate) = (fresh_key(), on.body(1), fresh_key());
    let request = (key.as_str(), &body, gate.as_str());
    let fail = Fault::HoldThenFail(gate.clone());
    let (first, (repeat, _)) = held_and_awaited(on, &scope, request, fail, longest).await;
    assert!(
        first.status().is_server_error(),
        "op {}: the first request was to fail (does the subject's send apply \
         Fault::HoldThenFail?): {}",
        on.op,
        first.status()
    );
    assert!(
        repeat.0.is_success() && repeat.1.is_none(),
        "op {}: the waiter of a failed request must run it: {} replayed {:?}",
        on.op,
        repeat.0,
        repeat.1
    );
    assert_eq!(
        on.effects(&scope).await,
        1,
        "op {}: after the waiter ran it",
        on.op
    );
    let after = answer(on.send(&scope, Some(&key), &body, Fault::None).await).await;
    assert_eq!(
        after.1.as_deref(),
        Some("true"),
        "op {}: after the waiter",
        on.op
    );
    assert_eq!(
        after.2, repeat.2,
        "op {}: the replay is not the waiter's answer",
        on.op
    );
}
