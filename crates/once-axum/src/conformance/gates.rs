//! Test-time faults by key, for an application that has none of its own: [`Gates`] is a
//! [`Hooks`] whose `before_commit` holds or fails the requests of the keys a test names.
//! Build the application under test with it; production builds use their own hooks.

use std::{
    collections::HashMap,
    marker::PhantomData,
    sync::{Arc, Mutex},
};

use once_core::IdempotentRequest;
use tokio::sync::watch;

use crate::hooks::{Hooks, ProtocolError, Refusal};

/// How long a held request waits for its gate before going on by itself.
const HOLD_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Faults by key: hold a key's execution at a gate, or fail it once.
pub struct Gates<E> {
    inner: Arc<Mutex<State>>,
    error: PhantomData<fn() -> E>,
}

#[derive(Default)]
struct State {
    holds: HashMap<String, String>,
    fails: Vec<String>,
    gates: HashMap<String, (watch::Sender<bool>, usize)>,
}

impl<E> Clone for Gates<E> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            error: PhantomData,
        }
    }
}

impl<E> Default for Gates<E> {
    fn default() -> Self {
        Self {
            inner: Arc::default(),
            error: PhantomData,
        }
    }
}

impl<E> Gates<E> {
    /// The next execution of `key` waits at `gate`, before its commit.
    pub fn hold(&self, key: &str, gate: &str) {
        let mut state = self.inner.lock().expect("gates");
        state.holds.insert(key.to_owned(), gate.to_owned());
    }

    /// The next execution of `key` fails with a transient error.
    pub fn fail(&self, key: &str) {
        self.inner.lock().expect("gates").fails.push(key.to_owned());
    }

    pub fn waiting(&self, gate: &str) -> usize {
        let state = self.inner.lock().expect("gates");
        state.gates.get(gate).map_or(0, |g| g.1)
    }

    pub fn open(&self, gate: &str) {
        if let Some((open, _)) = self.inner.lock().expect("gates").gates.remove(gate) {
            open.send_replace(true);
        }
    }
}

impl<E: ProtocolError> Hooks for Gates<E> {
    type Error = E;

    async fn before_commit(&self, req: &IdempotentRequest) -> Result<(), E> {
        let key = req.key.as_str();
        let (mut open, fail) = {
            let mut state = self.inner.lock().expect("gates");
            let fail = state.fails.iter().position(|k| k == key);
            let fail = fail.map(|at| state.fails.remove(at));
            let open = state.holds.remove(key).map(|gate| {
                let entry = state
                    .gates
                    .entry(gate)
                    .or_insert_with(|| (watch::channel(false).0, 0));
                entry.1 += 1;
                entry.0.subscribe()
            });
            (open, fail)
        };
        if let Some(open) = open.as_mut() {
            // Bounded: a test that fails before opening its gate must not hold a
            // transaction and a connection for good.
            let _ = tokio::time::timeout(HOLD_LIMIT, open.wait_for(|is_open| *is_open)).await;
        }
        match fail {
            Some(_) => Err(Refusal::Store(sqlx::Error::PoolTimedOut).into()),
            None => Ok(()),
        }
    }
}
