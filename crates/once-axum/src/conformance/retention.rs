//! Retention: a key the purge deleted is a new request, even where its answer was kept in
//! memory ([`crate::AnswerCache`]).

use std::time::Duration;

use super::{answer, fresh_key, Fault, On, Subject};

/// Past the retention ([`Subject::retention`]) and the purge ([`Subject::purge`]), the key's
/// request runs again as a new one: its answer was never given from a copy that outlived
/// the key's row. Before that, the repeat is a replay (the copy, where there is one, is
/// made). Skipped for a subject that does not say its retention.
pub async fn a_key_past_retention_is_a_new_request<S: Subject>(on: &On<'_, S>) {
    let Some(retention) = on.subject.retention() else {
        return;
    };
    let scope = on.subject.new_scope().await;
    let (key, body) = (fresh_key(), on.body(1));
    let first = answer(on.send(&scope, Some(&key), &body, Fault::None).await).await;
    assert!(
        first.0.is_success(),
        "op {}: first answer {}",
        on.op,
        first.0
    );
    let again = answer(on.send(&scope, Some(&key), &body, Fault::None).await).await;
    assert_eq!(
        again.1.as_deref(),
        Some("true"),
        "op {}: a repeat within the retention",
        on.op
    );
    // Past the retention by more than the database's clock could differ from ours within
    // one machine, the purge deletes the key.
    tokio::time::sleep(retention + Duration::from_millis(300)).await;
    on.subject.purge().await;
    let (status, replayed, _) = answer(on.send(&scope, Some(&key), &body, Fault::None).await).await;
    assert!(
        status.is_success(),
        "op {}: after the purge: {status}",
        on.op
    );
    assert_eq!(
        replayed, None,
        "op {}: a key past its retention and purged was answered as a replay (from memory?)",
        on.op
    );
    assert_eq!(
        on.effects(&scope).await,
        2,
        "op {}: the purged key's request ran again",
        on.op
    );
}
