//! Test-time faults by key, for an application that has none of its own: [`Gates`] is a
//! [`Faults`] that holds, fails or starves the requests of the keys a test names. Plug it
//! into the application's executor under test with `Executor::with_faults`; production
//! builds leave it out, and the application's types do not change.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
};

use once_core::IdempotentRequest;
use sqlx::PgPool;
use tokio::sync::watch;

use crate::{
    faults::{FaultFuture, Faults, ReadOnlyWork},
    refusal::Refusal,
};

/// How long a held request waits for its gate before going on by itself.
const HOLD_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// Faults by key: hold a key's execution at a gate, fail it once, or give its work a
/// database that refuses every write.
#[derive(Clone, Default)]
pub struct Gates {
    inner: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    holds: HashMap<String, String>,
    fails: Vec<String>,
    read_only: Vec<String>,
    claims: HashMap<String, usize>,
    gates: HashMap<String, (watch::Sender<bool>, usize)>,
    read_only_work: ReadOnlyWork,
}

impl Gates {
    /// The next execution of `key` waits at `gate`, before its commit.
    pub fn hold(&self, key: &str, gate: &str) {
        let mut state = self.inner.lock().expect("gates");
        state.holds.insert(key.to_owned(), gate.to_owned());
    }

    /// The next execution of `key` fails with a transient error, after its work.
    pub fn fail(&self, key: &str) {
        self.inner.lock().expect("gates").fails.push(key.to_owned());
    }

    /// The next execution of `key` runs its work on a database that refuses every write
    /// (as a primary turned standby does): the work meets the error through its own
    /// statements and its own error mapping.
    pub fn read_only(&self, key: &str) {
        let mut state = self.inner.lock().expect("gates");
        state.read_only.push(key.to_owned());
    }

    /// How many requests wait at `gate` now.
    pub fn waiting(&self, gate: &str) -> usize {
        let state = self.inner.lock().expect("gates");
        state.gates.get(gate).map_or(0, |g| g.1)
    }

    /// How many times a request of `key` has claimed it (taken it over included).
    pub fn claims(&self, key: &str) -> usize {
        let state = self.inner.lock().expect("gates");
        state.claims.get(key).copied().unwrap_or(0)
    }

    /// Releases the requests waiting at `gate`.
    pub fn open(&self, gate: &str) {
        if let Some((open, _)) = self.inner.lock().expect("gates").gates.remove(gate) {
            open.send_replace(true);
        }
    }
}

fn take(list: &mut Vec<String>, key: &str) -> bool {
    let at = list.iter().position(|k| k == key);
    at.map(|at| list.remove(at)).is_some()
}

impl Faults for Gates {
    fn claimed(&self, req: &IdempotentRequest) {
        let mut state = self.inner.lock().expect("gates");
        *state.claims.entry(req.key.as_str().to_owned()).or_default() += 1;
    }

    fn work_pool(&self, req: &IdempotentRequest, db: &PgPool) -> Option<PgPool> {
        let mut state = self.inner.lock().expect("gates");
        take(&mut state.read_only, req.key.as_str()).then(|| state.read_only_work.pool(db))
    }

    fn before_commit<'a>(&'a self, req: &'a IdempotentRequest) -> FaultFuture<'a> {
        Box::pin(async move {
            let key = req.key.as_str();
            let (mut open, fail) = {
                let mut state = self.inner.lock().expect("gates");
                let fail = take(&mut state.fails, key);
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
                true => Err(Refusal::Store(sqlx::Error::PoolTimedOut)),
                false => Ok(()),
            }
        })
    }
}
