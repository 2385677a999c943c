//! The executor every keyed write goes through:
//!
//! 1. **claim** the key in its own short statement (so concurrent repeats see `processing`);
//! 2. run the work, which ends in one open transaction holding its final writes (work that
//!    calls another service commits its own recovery points before that, so a retry resumes
//!    from the last one);
//! 3. **complete** the key in that same transaction, fenced on the lease token, and commit:
//!    the business rows and the stored answer become visible together or not at all.
//!
//! Definitive outcomes (2xx, and any 4xx the work decided) are stored and replayed;
//! transient ones (5xx, 408, 429, or an error that says so through
//! [`ProtocolError::is_stored`]) mark the key `failed` so the same key can run again, and
//! are answered with `Retry-After`. [`overlap`] runs steps 1 and 2 side by side, for
//! work whose only effects are its transaction's writes.
//!
//! ```no_run
//! use std::time::Duration;
//! use axum::{http::StatusCode, response::Response};
//! use once_axum::{Executor, IdempotentRequest, Problem, Reply};
//!
//! async fn book(executor: &Executor, req: IdempotentRequest, room: i64) -> Response {
//!     executor
//!         .execute(req, move |db| async move {
//!             let mut tx = db.begin().await?;
//!             let taken = sqlx::query("INSERT INTO nights (room) VALUES ($1) ON CONFLICT DO NOTHING")
//!                 .bind(room)
//!                 .execute(&mut *tx)
//!                 .await?
//!                 .rows_affected()
//!                 == 0;
//!             if taken {
//!                 // Definitive: stored with the key, replayed to every repeat.
//!                 return Err(Problem::new(StatusCode::CONFLICT, "room-taken", "That room is booked."));
//!             }
//!             Ok((tx, Reply::json(StatusCode::CREATED, &room)?))
//!         })
//!         .await
//! }
//! # async fn make(db: sqlx::PgPool) -> Executor { Executor::new(db, Duration::from_secs(30)) }
//! ```

use std::{
    future::Future,
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{
    http::{header, HeaderValue},
    response::{IntoResponse, Response},
};
use once_core::{is_stored, IdempotencyKey, IdempotentRequest, KeyedOperation, StoredResponse};
use once_pg::{store, Claimed, Existing, Held};
use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

pub mod overlap;
pub mod wait;

use crate::{
    answer_cache::{AnswerCache, Lifespan},
    faults::Faults,
    hooks::{Counted, Hooks, KeyRead, NoHooks, Repeat},
    problem::ProtocolError,
    problem::DEFAULT_RETRY_AFTER_SECS,
    refusal::Refusal,
    reply::{respond, stored_from, Reply},
};

/// The work's transaction, as it hands it back to the executor uncommitted.
pub type PgTx = Transaction<'static, Postgres>;

/// How many times a claim is retried when the key changes state between our statements.
const CLAIM_ATTEMPTS: usize = 3;

/// The `Retry-After` of a refusal by the hourly key quota: the oldest key of the hour
/// leaves the count within minutes at most for a scope just over it.
const KEY_QUOTA_RETRY_AFTER_SECS: u64 = 300;

/// Runs keyed requests, at most once per (scope, key) with effect. `H` is the
/// application's [`Hooks`]; without any, answers are [`crate::Problem`]s.
#[derive(Clone)]
#[non_exhaustive]
pub struct Executor<H = NoHooks> {
    /// The database of the key table and of the work.
    pub db: PgPool,
    /// How long a claim holds its key without a renewal; work renews it every third.
    pub lease: Duration,
    /// Keys one scope may claim in an hour (0: no quota).
    pub keys_per_hour: u32,
    /// The application's hooks.
    pub hooks: H,
    faults: Option<Arc<dyn Faults>>,
    waits: Option<wait::Waits>,
    answers: Option<AnswerCache>,
}

/// A request that its first read sent on to the claim.
pub(crate) struct ToClaim {
    /// Nobody has used its key.
    pub(crate) unused: bool,
    /// How long its answer may be kept in memory.
    pub(crate) lifespan: Lifespan,
}

pub(crate) enum Start {
    Execute(Uuid),
    Replay(StoredResponse),
}

/// What work hands back: its open transaction and its answer, or an error.
pub type Worked<E> = Result<(PgTx, Reply), E>;

impl Executor {
    /// An executor on `db`, whose claims hold a key for `lease` between renewals, with no
    /// hooks and no key quota.
    pub fn new(db: PgPool, lease: Duration) -> Self {
        Self {
            db,
            lease,
            keys_per_hour: 0,
            hooks: NoHooks::default(),
            faults: None,
            waits: None,
            answers: None,
        }
    }
}

impl<H: Hooks> Executor<H> {
    /// The same executor with the application's hooks.
    pub fn with_hooks<H2: Hooks>(self, hooks: H2) -> Executor<H2> {
        Executor {
            db: self.db,
            lease: self.lease,
            keys_per_hour: self.keys_per_hour,
            hooks,
            faults: self.faults,
            waits: self.waits,
            answers: self.answers,
        }
    }

    /// The same executor, answering repeats of completed keys from `cache` with no
    /// database statement, and keeping there the answers it completes and reads (see
    /// [`crate::answer_cache`]). Only answers whose key and scope the first read can vouch
    /// for are kept: see [`Hooks::read_key`].
    pub fn with_answer_cache(mut self, cache: AnswerCache) -> Self {
        self.answers = Some(cache);
        self
    }

    /// The executor's answer cache, if it has one.
    pub fn answer_cache(&self) -> Option<&AnswerCache> {
        self.answers.as_ref()
    }

    /// The same executor, refusing a scope's new keys past `keys` in an hour (0: no quota).
    pub fn with_keys_per_hour(mut self, keys: u32) -> Self {
        self.keys_per_hour = keys;
        self
    }

    /// The same executor, running every request with test-time `faults`.
    pub fn with_faults(mut self, faults: impl Faults) -> Self {
        self.faults = Some(Arc::new(faults));
        self
    }

    /// Runs `work` at most once per (scope, key) with effect. `work` gets the pool, opens
    /// the business transaction and hands it back, uncommitted, with its reply; the
    /// executor completes the key inside it and commits, or rolls everything back.
    ///
    /// The execution runs in its own task, so a client that disconnects (a reload, a closed
    /// tab) does not cancel it halfway: the outcome is still stored, and the client's retry
    /// is a replay instead of a wait for the lease to expire.
    pub async fn execute<F, Fut>(&self, req: IdempotentRequest, work: F) -> Response
    where
        F: FnOnce(PgPool) -> Fut + Send + 'static,
        Fut: Future<Output = Worked<H::Error>> + Send + 'static,
    {
        // A repeat is answered from the first read, here; only a request that goes on to
        // claim the key runs in a task of its own.
        let granted = self.granted_wait(&req);
        let lifespan = match self.read_first(&req).await {
            Ok(to_claim) => to_claim.lifespan,
            Err(answer) => return wait::applied(granted, answer),
        };
        let this = self.clone();
        let answer =
            in_own_task::<H::Error>(async move { this.run(req, lifespan, work).await }).await;
        wait::applied(granted, answer)
    }

    /// Read first: a repeat of a key we know (a replay, a 409, a 422) is answered from one
    /// read, with no lock and no write, or from the answer cache with none (`Err` holds
    /// that answer); `Ok` sends a key that is new, failed or abandoned on to the claim.
    pub(crate) async fn read_first(&self, req: &IdempotentRequest) -> Result<ToClaim, Response> {
        if let Some(remembered) = self.answers.as_ref().and_then(|c| c.existing(req)) {
            self.hooks.count(Counted::Remembered);
            return Err(self.known_answer(req, remembered).await);
        }
        let since = Instant::now();
        let read = self.hooks.read_key(&self.db, req).await.map_err(|e| {
            let open = !e.is_stored();
            let response = e.into_response();
            match open {
                true => with_retry_after(response),
                false => response,
            }
        })?;
        let lifespan = Lifespan {
            since,
            scope_lasts: read.scope_lasts,
        };
        self.keep_read(req, &read, &lifespan);
        let unused = matches!(read.existing, Existing::Unused);
        match self.answer(req, read.existing).await {
            Some(Ok(stored)) => Err(respond(stored, true)),
            Some(Err(answer)) => Err(answer),
            None => Ok(ToClaim { unused, lifespan }),
        }
    }

    /// The answer to a repeat whose key's state is known for sure (completed, or used for
    /// another request).
    async fn known_answer(&self, req: &IdempotentRequest, existing: Existing) -> Response {
        match self.answer(req, existing).await {
            Some(Ok(stored)) => respond(stored, true),
            Some(Err(answer)) => answer,
            None => refused::<H::Error>(Refusal::InProgress),
        }
    }

    /// Keeps a completed answer the first read found, when the read says for how long.
    fn keep_read(&self, req: &IdempotentRequest, read: &KeyRead, lifespan: &Lifespan) {
        if let (Some(cache), Existing::Completed(stored), Some(ago)) =
            (&self.answers, &read.existing, read.finished_ago)
        {
            cache.keep(req, stored, lifespan, ago);
        }
    }

    pub(crate) async fn run<F, Fut>(
        &self,
        req: IdempotentRequest,
        lifespan: Lifespan,
        work: F,
    ) -> Response
    where
        F: FnOnce(PgPool) -> Fut,
        Fut: Future<Output = Worked<H::Error>>,
    {
        let lease = match self.start(&req).await {
            Ok(Start::Execute(lease)) => lease,
            Ok(Start::Replay(stored)) => return respond(stored, true),
            Err(answer) => return answer,
        };
        let worked = self
            .heartbeat(&req, lease, work(self.work_pool(&req)))
            .await;
        let outcome = self.before_commit(&req, worked).await;
        self.conclude(&req, lease, lifespan, outcome).await
    }

    /// The pool `req`'s work gets: the executor's, unless a test fault swaps it.
    pub(crate) fn work_pool(&self, req: &IdempotentRequest) -> PgPool {
        let swapped = self
            .faults
            .as_ref()
            .and_then(|f| f.work_pool(req, &self.db));
        swapped.unwrap_or_else(|| self.db.clone())
    }

    /// Told to the test faults once the key is ours.
    pub(crate) fn claimed(&self, req: &IdempotentRequest) {
        self.hooks.count(Counted::Execution);
        if let Some(faults) = &self.faults {
            faults.claimed(req);
        }
    }

    /// Becomes the executor of `req`, or learns what a request that raced us holds (`Err`:
    /// the answer).
    async fn start(&self, req: &IdempotentRequest) -> Result<Start, Response> {
        for _ in 0..CLAIM_ATTEMPTS {
            let claimed = match store::claim(&self.db, req, self.lease, self.keys_per_hour).await {
                Ok(claimed) => claimed,
                Err(e) => return Err(refused::<H::Error>(Refusal::Store(e))),
            };
            match claimed {
                Claimed::Fresh(lease) => {
                    self.claimed(req);
                    return Ok(Start::Execute(lease));
                }
                Claimed::Reclaimed { lease, took_over } => {
                    if took_over {
                        tracing::warn!(key = %req.key, "lease expired; taking the request over");
                        self.hooks.count(Counted::Takeover);
                    } else {
                        self.hooks.count(Counted::RetryAfterFailure);
                    }
                    self.claimed(req);
                    return Ok(Start::Execute(lease));
                }
                Claimed::OverQuota => {
                    return Err(refused::<H::Error>(Refusal::KeyQuota {
                        retry_after_secs: KEY_QUOTA_RETRY_AFTER_SECS,
                    }))
                }
                Claimed::Existing(existing) => match self.answer(req, existing).await {
                    Some(answer) => return answer.map(Start::Replay),
                    None => continue,
                },
                // A state this version does not know: claim again, the table decides.
                _ => continue,
            }
        }
        Err(refused::<H::Error>(Refusal::InProgress))
    }

    /// The application's last word before the commit (see [`Hooks::before_commit`]), then
    /// the test faults'; an error drops the transaction, which rolls the work back.
    pub(crate) async fn before_commit(
        &self,
        req: &IdempotentRequest,
        worked: Worked<H::Error>,
    ) -> Worked<H::Error> {
        let (tx, reply) = worked?;
        self.hooks.before_commit(req).await?;
        if let Some(faults) = &self.faults {
            faults.before_commit(req).await?;
        }
        Ok((tx, reply))
    }

    /// Ends a request whose key we hold: stores its outcome with the key and commits, or
    /// leaves the key open for the retry when the outcome is transient.
    pub(crate) async fn conclude(
        &self,
        req: &IdempotentRequest,
        lease: Uuid,
        lifespan: Lifespan,
        outcome: Worked<H::Error>,
    ) -> Response {
        let finishing = Finishing {
            req,
            lease,
            lifespan,
        };
        match outcome {
            Ok((tx, reply)) => self.finish(tx, &finishing, reply.into_stored()).await,
            Err(e) if !e.is_stored() => self.give_up(req, lease, e).await,
            // A definitive refusal: its transaction (if any) is gone; store the refusal as
            // it is sent.
            Err(refusal) => {
                let stored = stored_from(refusal.into_response(), self.lease / 3).await;
                match (stored, self.db.begin().await) {
                    (Ok(stored), Ok(tx)) => self.finish(tx, &finishing, stored).await,
                    (Err(e), _) => {
                        let e = Refusal::Panicked(format!("unreadable refusal: {e}"));
                        self.give_up(req, lease, e.into()).await
                    }
                    (_, Err(e)) => self.give_up(req, lease, Refusal::Store(e).into()).await,
                }
            }
        }
    }

    /// Runs `work` while renewing our lease every third of its length, so work that
    /// legitimately outlives one lease (a slow provider) is not taken over while it is
    /// alive. Each renewal is bounded by the same third: a renewal that cannot land in time
    /// is dropped and the next one tries. Renewals stop when `work` ends, or when the lease
    /// turns out to be lost (completion is fenced on the token either way).
    pub(crate) async fn heartbeat<T>(
        &self,
        req: &IdempotentRequest,
        lease: Uuid,
        work: impl Future<Output = T>,
    ) -> T {
        let every = self.lease / 3;
        let renewals = async {
            let mut tick = tokio::time::interval(every);
            tick.tick().await;
            loop {
                tick.tick().await;
                let renewal = store::renew(&self.db, req, lease, self.lease);
                match tokio::time::timeout(every, renewal).await {
                    Ok(Ok(true)) => {}
                    Ok(Ok(false)) => {
                        tracing::warn!(key = %req.key, "lease lost while working; completion will be fenced");
                        std::future::pending::<()>().await;
                    }
                    Ok(Err(e)) => {
                        tracing::warn!(key = %req.key, error = %e, "lease renewal failed")
                    }
                    Err(_) => tracing::warn!(key = %req.key, "lease renewal timed out"),
                }
            }
        };
        tokio::select! {
            out = work => out,
            _ = renewals => unreachable!("lease renewals never end"),
        }
    }

    /// The answer for a key someone else holds (a stored response to replay, or a
    /// refusal's response); `None` when it may be claimed. A request that asked to wait
    /// for a running key is answered once the key changes (see [`wait`]).
    async fn answer(
        &self,
        req: &IdempotentRequest,
        existing: Existing,
    ) -> Option<Result<StoredResponse, Response>> {
        let (existing, waited) = match existing {
            Existing::InProgress => match self.wait_for_original(req).await {
                wait::Waited::Changed(changed) => (changed, true),
                wait::Waited::Running => (Existing::InProgress, true),
                wait::Waited::Refused => (Existing::InProgress, false),
                wait::Waited::Stopping => {
                    let stopping = refused::<H::Error>(Refusal::Stopping);
                    return Some(Err(wait::not_applied(stopping)));
                }
            },
            other => (other, true),
        };
        match existing {
            Existing::Completed(stored) => {
                self.hooks.count(Counted::Replay);
                self.hooks
                    .on_repeat(req.keyed_operation(), Repeat::Replay(&stored))
                    .await;
                Some(Ok(stored))
            }
            Existing::InProgress => {
                self.hooks.count(Counted::InProgress);
                self.hooks
                    .on_repeat(req.keyed_operation(), Repeat::InProgress)
                    .await;
                let answer = refused::<H::Error>(Refusal::InProgress);
                Some(Err(if waited {
                    answer
                } else {
                    wait::not_applied(answer)
                }))
            }
            Existing::DifferentRequest => {
                self.hooks.count(Counted::KeyReused);
                self.hooks
                    .on_repeat(req.keyed_operation(), Repeat::KeyReused)
                    .await;
                Some(Err(refused::<H::Error>(Refusal::KeyReused)))
            }
            // Reclaimable, unused, or a state this version does not know: the claim decides.
            _ => None,
        }
    }

    /// Stores the outcome with the key and commits, or rolls everything back when another
    /// request has taken the key over (fencing).
    async fn finish(&self, mut tx: PgTx, at: &Finishing<'_>, stored: StoredResponse) -> Response {
        let (req, lease) = (at.req, at.lease);
        // What is stored must be what the rule stores: work that answers a transient
        // status (a 503 it built itself) leaves the key open, like an error would.
        if !stored_status_is_definitive(&stored) {
            let _ = tx.rollback().await;
            return self.give_up_with(req, lease, respond(stored, false)).await;
        }
        if let Err(e) = self.hooks.on_complete(&mut tx, req, &stored).await {
            let _ = tx.rollback().await;
            return self.give_up(req, lease, Refusal::Store(e).into()).await;
        }
        match store::complete(&mut *tx, req, lease, &stored).await {
            Ok(true) => match tx.commit().await {
                Ok(()) => {
                    // Stamped finished inside the work's transaction, which began after
                    // the request's first read: its retention runs from no earlier.
                    if let Some(cache) = &self.answers {
                        cache.keep(req, &stored, &at.lifespan, Duration::ZERO);
                    }
                    respond(stored, false)
                }
                Err(e) => self.give_up(req, lease, Refusal::Store(e).into()).await,
            },
            Ok(false) => {
                let _ = tx.rollback().await;
                self.hooks.count(Counted::Fenced);
                tracing::warn!(key = %req.key, "lease lost to another request; our writes were rolled back");
                self.current_answer(req).await
            }
            Err(e) => {
                let _ = tx.rollback().await;
                self.give_up(req, lease, Refusal::Store(e).into()).await
            }
        }
    }

    /// For a caller that names a key without its request's body (a form whose cart has moved
    /// on): what `operation` holds under `key` in `scope`, answered as a repeat of it would
    /// be (the stored answer replayed, 409 while it runs, 422 when the key was used for
    /// another operation) and told to the hooks as a repeat. `None`: nothing to answer with
    /// (unused, failed or abandoned).
    pub async fn held_answer(
        &self,
        scope: &str,
        key: &IdempotencyKey,
        operation: &str,
    ) -> Result<Option<Response>, H::Error> {
        let held = store::held(&self.db, scope, key, operation)
            .await
            .map_err(Refusal::Store)?;
        let at = KeyedOperation::new(scope, key, operation);
        let (repeat, answer) = match &held {
            Held::Completed(stored) => (Repeat::Replay(stored), respond(stored.clone(), true)),
            Held::Running => (Repeat::InProgress, refused::<H::Error>(Refusal::InProgress)),
            Held::OtherOperation => (Repeat::KeyReused, refused::<H::Error>(Refusal::KeyReused)),
            _ => return Ok(None),
        };
        self.hooks.on_repeat(at, repeat).await;
        Ok(Some(answer))
    }

    /// After losing the lease: answer with whatever the key holds now.
    async fn current_answer(&self, req: &IdempotentRequest) -> Response {
        match store::existing(&self.db, req).await {
            Ok(Existing::Completed(stored)) => respond(stored, true),
            Ok(_) => refused::<H::Error>(Refusal::InProgress),
            Err(e) => refused::<H::Error>(Refusal::Store(e)),
        }
    }

    /// A transient failure: mark the key `failed` (best effort; if even that fails, the
    /// lease expires by itself) and answer with the error, which says "retry".
    pub(crate) async fn give_up(
        &self,
        req: &IdempotentRequest,
        lease: Uuid,
        error: H::Error,
    ) -> Response {
        self.give_up_with(req, lease, error.into_response()).await
    }

    async fn give_up_with(
        &self,
        req: &IdempotentRequest,
        lease: Uuid,
        answer: Response,
    ) -> Response {
        if let Err(e) = store::fail(&self.db, req, lease).await {
            tracing::warn!(key = %req.key, error = %e, "could not mark the key failed; its lease will expire");
        }
        with_retry_after(answer)
    }
}

/// A request whose key we hold, as its outcome is stored.
struct Finishing<'a> {
    req: &'a IdempotentRequest,
    lease: Uuid,
    lifespan: Lifespan,
}

/// The response of one of the protocol's refusals, in the application's error type; one
/// that leaves the key open says when to come back, whatever that type renders.
pub(crate) fn refused<E: ProtocolError>(refusal: Refusal) -> Response {
    let open = refusal.leaves_key_open();
    let wait = refusal.retry_after_secs();
    let response = E::from(refusal).into_response();
    match open {
        true => with_retry_after_secs(response, wait.unwrap_or(DEFAULT_RETRY_AFTER_SECS)),
        false => response,
    }
}

/// `response` with a `Retry-After`, unless it names one already: every answer that leaves
/// a key open tells the client when the same request may be sent again.
fn with_retry_after(response: Response) -> Response {
    with_retry_after_secs(response, DEFAULT_RETRY_AFTER_SECS)
}

fn with_retry_after_secs(mut response: Response, secs: u64) -> Response {
    let headers = response.headers_mut();
    if !headers.contains_key(header::RETRY_AFTER) {
        headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
    }
    response
}

fn stored_status_is_definitive(stored: &StoredResponse) -> bool {
    axum::http::StatusCode::from_u16(stored.status).is_ok_and(is_stored)
}

/// Runs an execution in a task of its own (see [`Executor::execute`]); a panic answers 500.
pub(crate) async fn in_own_task<E: ProtocolError>(
    execution: impl Future<Output = Response> + Send + 'static,
) -> Response {
    match tokio::spawn(execution).await {
        Ok(response) => response,
        Err(e) => refused::<E>(Refusal::Panicked(format!(
            "idempotent execution panicked: {e}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;

    /// An application's error that says nothing of when to come back.
    struct Bare(StatusCode);

    impl IntoResponse for Bare {
        fn into_response(self) -> Response {
            self.0.into_response()
        }
    }

    impl From<Refusal> for Bare {
        fn from(refusal: Refusal) -> Self {
            Self(refusal.status())
        }
    }

    impl ProtocolError for Bare {
        fn status(&self) -> StatusCode {
            self.0
        }
    }

    fn retry_after(response: &Response) -> Option<&str> {
        response.headers().get(header::RETRY_AFTER)?.to_str().ok()
    }

    #[test]
    fn a_refusal_that_leaves_the_key_open_says_retry_after_whatever_the_app_renders() {
        for open in [
            Refusal::InProgress,
            Refusal::Store(sqlx::Error::PoolTimedOut),
        ] {
            assert_eq!(retry_after(&refused::<Bare>(open)), Some("1"));
        }
        let quota = refused::<Bare>(Refusal::KeyQuota {
            retry_after_secs: 300,
        });
        assert_eq!(
            retry_after(&quota),
            Some("300"),
            "its own wait, whatever the app renders"
        );
        for settled in [Refusal::KeyReused, Refusal::KeyMissing, Refusal::KeyUnknown] {
            assert_eq!(retry_after(&refused::<Bare>(settled)), None);
        }
    }
}
