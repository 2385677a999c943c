mod common;

use once_model::event_chain::{Dedup, EventChain, EXACTLY_ONCE, NEVER_TWICE};
use stateright::Checker;

/// Two events, three crashes (relay or consumer) and two spontaneous redeliveries: faults
/// rather than events, since a fault is what duplicates. (Three events with as many faults
/// take 16 s in a debug build.)
fn model() -> EventChain {
    EventChain::new(2, 3, 2)
}

#[test]
fn dedup_in_the_effect_transaction_applies_each_event_once() {
    let checker = common::check("event chain (dedup in effect tx)", model());
    checker.assert_properties();
    assert!(checker.unique_state_count() > 20_000);
}

#[test]
fn dedup_committed_before_the_effect_can_lose_it() {
    let before = model().with_dedup(Dedup::OwnTxBefore);
    let path = common::counterexample("event chain (dedup tx first)", before.clone(), EXACTLY_ONCE);
    assert!(path.last_state().applied.contains(&0));
    // It loses effects but never doubles one: the dedup row is claimed before the effect.
    common::check("event chain (dedup tx first), full", before).assert_no_discovery(NEVER_TWICE);
}

#[test]
fn dedup_committed_after_the_effect_can_double_it() {
    let after = model().with_dedup(Dedup::OwnTxAfter);
    let path = common::counterexample("event chain (dedup tx after)", after, NEVER_TWICE);
    assert!(path.last_state().applied.contains(&2));
}
