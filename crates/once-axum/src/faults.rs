//! Test-time faults, plugged into an [`crate::Executor`] with
//! [`crate::Executor::with_faults`] instead of through its type: an application under test
//! keeps its production types (no `App<H>` generic only so tests can hold a request).
//! `conformance::Gates` (feature `conformance`) is the ready implementation.

use std::{
    future::Future,
    pin::Pin,
    sync::{Arc, OnceLock},
};

use once_core::IdempotentRequest;
use sqlx::{postgres::PgPoolOptions, PgPool};

use crate::refusal::Refusal;

/// What [`Faults::before_commit`] returns.
pub type FaultFuture<'a> = Pin<Box<dyn Future<Output = Result<(), Refusal>> + Send + 'a>>;

/// Faults an executor runs a request with. Every method has a default that does nothing.
pub trait Faults: Send + Sync + 'static {
    /// Called once the request's key is ours, before its work starts.
    fn claimed(&self, _req: &IdempotentRequest) {}

    /// The pool the work of `req` gets instead of the executor's `db` (`None`: `db`). A
    /// pool whose connections refuse every write makes the work meet a database error
    /// through its own statements and its own error mapping, as a failover would.
    fn work_pool(&self, _req: &IdempotentRequest, _db: &PgPool) -> Option<PgPool> {
        None
    }

    /// Runs between the work and its commit, with the work's transaction open and its lease
    /// no longer renewed: where a request is held (its lease then runs out, as a stalled
    /// process's does) or failed. An error rolls the work back and answers as a transient
    /// failure.
    fn before_commit<'a>(&'a self, _req: &'a IdempotentRequest) -> FaultFuture<'a> {
        Box::pin(async { Ok(()) })
    }
}

impl<F: Faults + ?Sized> Faults for Arc<F> {
    fn claimed(&self, req: &IdempotentRequest) {
        (**self).claimed(req)
    }

    fn work_pool(&self, req: &IdempotentRequest, db: &PgPool) -> Option<PgPool> {
        (**self).work_pool(req, db)
    }

    fn before_commit<'a>(&'a self, req: &'a IdempotentRequest) -> FaultFuture<'a> {
        (**self).before_commit(req)
    }
}

/// A fault for every request it runs: the work gets a database that refuses every write
/// (`default_transaction_read_only`, SQLSTATE 25006, what a primary turned standby answers).
/// Work whose error path maps such an error to a stored refusal instead of a transient one
/// is found out: its key ends completed, and the retry replays the refusal.
#[derive(Clone, Default)]
pub struct ReadOnlyWork {
    pool: Arc<OnceLock<PgPool>>,
}

impl ReadOnlyWork {
    /// The read-only pool, made on first use from `db`'s connection options.
    pub fn pool(&self, db: &PgPool) -> PgPool {
        let make = || {
            let options = db.connect_options().as_ref().clone();
            let options = options.options([("default_transaction_read_only", "on")]);
            PgPoolOptions::new()
                .max_connections(2)
                .connect_lazy_with(options)
        };
        self.pool.get_or_init(make).clone()
    }
}

impl Faults for ReadOnlyWork {
    fn work_pool(&self, _req: &IdempotentRequest, db: &PgPool) -> Option<PgPool> {
        Some(self.pool(db))
    }
}
