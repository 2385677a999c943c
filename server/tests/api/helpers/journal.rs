//! Reading the order journal in tests (docs/design.md, "The order journal").

use crate::helpers::{eventually, TestApp};

/// The order's entries as (kind, summary), in the order they happened.
pub async fn story(app: &TestApp, order_id: &str) -> Vec<(String, String)> {
    sqlx::query_as(
        "SELECT kind, summary FROM order_journal WHERE order_id = $1::uuid ORDER BY at, id",
    )
    .bind(order_id)
    .fetch_all(&app.db)
    .await
    .unwrap()
}

/// Waits for the repeat writer (`journal::RepeatLog`, a moment behind the answers) to have
/// written `n` repeats of `kind`.
pub async fn repeats_written(app: &TestApp, kind: &str, n: i64) {
    eventually(&format!("{n} {kind} written"), || async {
        let written: Option<i64> =
            sqlx::query_scalar("SELECT sum(repeats) FROM order_journal WHERE kind = $1")
                .bind(kind)
                .fetch_one(&app.db)
                .await
                .unwrap();
        written == Some(n)
    })
    .await;
}

pub fn count(story: &[(String, String)], kind: &str) -> usize {
    story.iter().filter(|(k, _)| k == kind).count()
}

/// Each `(kind, words)` names an entry after the one before it.
pub fn assert_in_order(story: &[(String, String)], expected: &[(&str, &str)]) {
    let mut from = 0;
    for (kind, words) in expected {
        let found = story[from..]
            .iter()
            .position(|(k, s)| k == kind && s.contains(words));
        match found {
            Some(at) => from += at + 1,
            None => panic!("no {kind} entry with {words:?} after entry {from} in {story:#?}"),
        }
    }
}
