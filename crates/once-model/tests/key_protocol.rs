mod common;

use once_model::key_protocol::{
    CompletionGuard, KeyAction, KeyProtocol, AT_MOST_ONCE, NO_STALE_COMPLETION,
};
use stateright::Checker;

/// Three clients, three claims each: takeovers of takeovers, and a retry after each kind of
/// answer. (Four clients take 15 s in a debug build.)
fn model() -> KeyProtocol {
    KeyProtocol::new(3, 3)
}

#[test]
fn fenced_protocol_completes_at_most_once() {
    let checker = common::check("key protocol (fenced)", model());
    checker.assert_properties();
    // A floor so that a model broken into triviality cannot pass.
    assert!(checker.unique_state_count() > 100_000);
}

#[test]
fn completion_without_any_guard_completes_twice() {
    let unguarded = model().with_guard(CompletionGuard::KeyOnly);
    let path = common::counterexample("key protocol (WHERE key only)", unguarded, AT_MOST_ONCE);
    assert_eq!(path.last_state().effects, 2);
    let actions = path.into_actions();
    let takeover = actions
        .iter()
        .position(|a| matches!(a, KeyAction::TakeOver(_)))
        .expect("a takeover");
    let completions = actions[takeover..]
        .iter()
        .filter(|a| matches!(a, KeyAction::Complete(_)))
        .count();
    assert_eq!(completions, 2, "{actions:?}");
}

/// Without the token a stale holder can complete, but only once: `state = 'processing'`
/// still lets a single completion through, so a double execution needs the guard gone.
#[test]
fn completion_guarded_on_state_only_lets_a_stale_holder_complete() {
    let state_only = model().with_guard(CompletionGuard::StateOnly);
    let path = common::counterexample(
        "key protocol (WHERE state only)",
        state_only.clone(),
        NO_STALE_COMPLETION,
    );
    assert!(path
        .into_actions()
        .iter()
        .any(|a| matches!(a, KeyAction::TakeOver(_))));
    common::check("key protocol (WHERE state only), full", state_only)
        .assert_no_discovery(AT_MOST_ONCE);
}
