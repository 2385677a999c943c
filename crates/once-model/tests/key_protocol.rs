mod common;

use once_model::key_protocol::{
    CompletionGuard, KeyAction, KeyProtocol, WakeUp, ANSWERS_ARE_STORED, AT_MOST_ONCE,
    NO_STALE_COMPLETION,
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
    // Waits change nothing in completion: checked without them, in a seventh of the time.
    let state_only = state_only.with_wake_up(WakeUp::NoWaits);
    common::check("key protocol (WHERE state only), full", state_only)
        .assert_no_discovery(AT_MOST_ONCE);
}

/// A waiter that takes its notification for "the request I waited for completed" is given
/// an outcome the key never stored: the original's, after it failed or was taken over.
#[test]
fn a_waiter_that_trusts_the_notice_is_answered_with_an_outcome_never_stored() {
    let trusting = model().with_wake_up(WakeUp::TrustsTheNotice);
    let path = common::counterexample(
        "key protocol (waiter trusts the notice)",
        trusting,
        ANSWERS_ARE_STORED,
    );
    let last = path.last_state().clone();
    assert!(path
        .into_actions()
        .iter()
        .any(|a| matches!(a, KeyAction::Woken(_))));
    let given: Vec<_> = last.clients.iter().filter_map(|c| c.answer).collect();
    assert!(given.iter().any(|a| last.stored != Some(*a)), "{last:?}");
}

/// Without waits the protocol is the one the draft describes, and every safety property
/// holds in it too.
#[test]
fn without_waits_every_safety_property_holds() {
    let checker = common::check(
        "key protocol (no waits)",
        model().with_wake_up(WakeUp::NoWaits),
    );
    for property in [AT_MOST_ONCE, NO_STALE_COMPLETION, ANSWERS_ARE_STORED] {
        checker.assert_no_discovery(property);
    }
}
