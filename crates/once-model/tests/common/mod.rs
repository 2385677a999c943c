//! Runs the checker and prints what it explored, for the figures in docs/model-checking.md.

use std::collections::BTreeSet;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::Instant;

use stateright::{Checker, CheckerBuilder, HasDiscoveries, Model, Path};

/// Explores the whole (bounded) state space: needed before claiming a property holds.
pub fn check<M>(label: &str, model: M) -> impl Checker<M>
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq,
{
    run(label, model.checker())
}

/// Explores only until `property` is violated. Stopping early also keeps the path short:
/// stateright 0.31 replaces a discovery with every later violating state it meets, so a full
/// run reports the deepest counterexample rather than the shortest.
pub fn counterexample<M>(label: &str, model: M, property: &'static str) -> Path<M::State, M::Action>
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq,
{
    let until = HasDiscoveries::AnyOf(BTreeSet::from([property]));
    let checker = run(label, model.checker().finish_when(until));
    let found = checker
        .discovery(property)
        .unwrap_or_else(|| panic!("no counterexample to \"{property}\""));
    let path = up_to_violation(checker.model(), found, property);
    println!("{label}: counterexample to \"{property}\": {path}");
    path
}

/// The path cut at its first state that breaks `property`, since the checker may have kept a
/// later state of the same breadth-first block.
fn up_to_violation<M>(
    model: &M,
    path: Path<M::State, M::Action>,
    property: &'static str,
) -> Path<M::State, M::Action>
where
    M: Model,
    M::State: Clone + PartialEq,
    M::Action: Clone + PartialEq,
{
    let holds = model.property(property).condition;
    let steps = path.into_vec();
    let init = steps[0].0.clone();
    let actions: Vec<M::Action> = steps
        .iter()
        .take_while(|(state, _)| holds(model, state))
        .filter_map(|(_, action)| action.clone())
        .collect();
    Path::from_actions(model, init, &actions).expect("a prefix of a path is a path")
}

fn run<M>(label: &str, builder: CheckerBuilder<M>) -> impl Checker<M>
where
    M: Model + Send + Sync + 'static,
    M::State: Clone + Debug + Hash + PartialEq + Send + Sync + 'static,
    M::Action: Clone + Debug + PartialEq,
{
    let started = Instant::now();
    // One thread: breadth-first order, and the same counts on every run.
    let checker = builder.spawn_bfs().join();
    println!(
        "{label}: {} states ({} unique), depth {}, {:.2?}",
        checker.state_count(),
        checker.unique_state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker
}
