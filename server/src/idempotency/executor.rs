//! The executor every write route goes through:
//!
//! 1. **claim** the key in its own short statement (so concurrent repeats see `processing`);
//! 2. run the business work, which ends in one open transaction holding its final writes
//!    (work that calls another service commits its own recovery points before that, so a
//!    retry resumes from the last one: see `payments`);
//! 3. **complete** the key in that same transaction, fenced on the lease token, and commit:
//!    the business rows and the stored response become visible together or not at all.
//!
//! An order needs nothing from its claim until step 3, and makes no effect outside its
//! transaction: [`super::overlap::execute_in_one_tx`] runs steps 1 and 2 side by side, and
//! commits only if the claim was ours (docs/decisions/0006-overlapped-claim.md).
//!
//! Definitive outcomes (2xx, deterministic 4xx) are stored and replayed; transient ones
//! (5xx, 409) mark the key `failed` so the same key can run again: the rule is in
//! [`super::outcome`].

use std::{future::Future, sync::Arc, time::Duration};

use axum::{
    extract::FromRef,
    response::{IntoResponse, Response},
};
use sqlx::{PgPool, Postgres, Transaction};
use uuid::Uuid;

use super::{
    fingerprint::FingerprintKeys,
    request::IdempotentRequest,
    response::{Reply, StoredResponse},
    store::{self, Claimed, Existing},
};
use crate::{db::Readers, error::ApiError, faults::Faults, metrics::Metrics, state::AppState};

pub type PgTx = Transaction<'static, Postgres>;

/// How many times a claim is retried when the key changes state between our statements.
const CLAIM_ATTEMPTS: usize = 3;

/// What the executor needs, taken from the application state.
#[derive(Clone)]
pub struct Idempotency {
    pub db: PgPool,
    pub readers: Readers,
    pub lease: Duration,
    pub metrics: Arc<Metrics>,
    pub faults: Faults,
    pub fingerprints: FingerprintKeys,
    /// Keys one scope may claim in an hour (`QUOTA_KEYS_PER_HOUR`; 0: no quota).
    pub keys_per_hour: u32,
}

impl FromRef<AppState> for Idempotency {
    fn from_ref(state: &AppState) -> Self {
        Self {
            db: state.db.clone(),
            readers: state.readers.clone(),
            lease: state.config.idempotency_lease,
            metrics: state.metrics.clone(),
            faults: state.faults.clone(),
            fingerprints: state.fingerprints.clone(),
            keys_per_hour: state.config.limits.keys_per_hour,
        }
    }
}

/// The `Retry-After` of a refusal by the hourly key quota: the oldest key of the hour
/// leaves the count within minutes at most for a session just over it.
const KEY_QUOTA_RETRY_AFTER_SECS: u64 = 300;

enum Start {
    Execute(Uuid),
    Replay(StoredResponse),
}

/// Runs `work` at most once per (scope, key) with effect. `work` gets the pool, opens the
/// business transaction and hands it back, uncommitted, with its reply; the executor
/// completes the key inside it and commits, or rolls everything back.
///
/// The execution runs in its own task, so a client that disconnects (a reload, a closed
/// tab) does not cancel it halfway: the outcome is still stored, and the client's retry is
/// a replay instead of a wait for the lease to expire.
pub async fn execute<F, Fut>(idem: &Idempotency, req: IdempotentRequest, work: F) -> Response
where
    F: FnOnce(PgPool) -> Fut + Send + 'static,
    Fut: Future<Output = Result<(PgTx, Reply), ApiError>> + Send + 'static,
{
    // A repeat is answered from the first read, here; only a request that goes on to claim
    // the key runs in a task of its own.
    if let Err(answer) = idem.read_first(&req).await {
        return answer;
    }
    let idem = idem.clone();
    in_own_task(async move { run(&idem, req, work).await }).await
}

/// Runs an execution in a task of its own (see [`execute`]); a panic answers 500.
pub(super) async fn in_own_task(
    execution: impl Future<Output = Response> + Send + 'static,
) -> Response {
    match tokio::spawn(execution).await {
        Ok(response) => response,
        Err(e) => ApiError::Internal(anyhow::anyhow!("idempotent execution panicked: {e}"))
            .into_response(),
    }
}

pub(super) async fn run<F, Fut>(idem: &Idempotency, req: IdempotentRequest, work: F) -> Response
where
    F: FnOnce(PgPool) -> Fut,
    Fut: Future<Output = Result<(PgTx, Reply), ApiError>>,
{
    let lease = match idem.start(&req).await {
        Ok(Start::Execute(lease)) => lease,
        Ok(Start::Replay(stored)) => return stored.into_response(true),
        Err(e) => return e.into_response(),
    };
    let outcome = idem.attempt(&req, lease, work(idem.db.clone())).await;
    idem.conclude(&req, lease, outcome).await
}

impl Idempotency {
    /// Read first: a repeat of a key we know (a replay, a 409, a 422) is answered from one
    /// indexed read, with no lock and no write (`Err` holds that answer); `Ok` sends a key
    /// that is new, failed or abandoned on to the claim, whose statements write, and says
    /// whether it is unused (docs/design.md, "The idempotency protocol"). The same read
    /// tells whether the session exists: a write never runs for a session the store does
    /// not know, and nothing is stored for it.
    pub(super) async fn read_first(&self, req: &IdempotentRequest) -> Result<bool, Response> {
        let first = store::read_first(&self.readers, req)
            .await
            .map_err(|e| ApiError::from(e).into_response())?;
        if !first.session_known {
            return Err(ApiError::SessionRequired.into_response());
        }
        let unused = matches!(first.existing, Existing::Unused);
        match self.answer(first.existing) {
            Some(Ok(stored)) => Err(stored.into_response(true)),
            Some(Err(e)) => Err(e.into_response()),
            None => Ok(unused),
        }
    }

    /// Becomes the executor of `req`, or learns what a request that raced us holds.
    async fn start(&self, req: &IdempotentRequest) -> Result<Start, ApiError> {
        for _ in 0..CLAIM_ATTEMPTS {
            match store::claim(&self.db, req, self.lease, self.keys_per_hour).await? {
                Claimed::Fresh(lease) => {
                    Metrics::inc(&self.metrics.executions);
                    return Ok(Start::Execute(lease));
                }
                Claimed::Reclaimed { lease, took_over } => {
                    if took_over {
                        tracing::warn!(key = %req.key, "lease expired; taking the request over");
                        Metrics::inc(&self.metrics.takeovers);
                    } else {
                        Metrics::inc(&self.metrics.retries_after_failure);
                    }
                    Metrics::inc(&self.metrics.executions);
                    return Ok(Start::Execute(lease));
                }
                Claimed::OverQuota => {
                    return Err(ApiError::TooManyRequests {
                        problem: "key-quota",
                        detail: "this session has made as many requests with new \
                                 Idempotency-Keys in the last hour as it may; nothing was done"
                            .to_owned(),
                        retry_after_secs: KEY_QUOTA_RETRY_AFTER_SECS,
                    })
                }
                Claimed::Existing(existing) => match self.answer(existing) {
                    Some(answer) => return answer.map(Start::Replay),
                    None => continue,
                },
            }
        }
        Err(ApiError::RequestInProgress)
    }

    /// Runs the work under the heartbeat, then [`Self::after_work`].
    async fn attempt(
        &self,
        req: &IdempotentRequest,
        lease: Uuid,
        work: impl Future<Output = Result<(PgTx, Reply), ApiError>>,
    ) -> Result<(PgTx, Reply), ApiError> {
        let worked = self.heartbeat(req, lease, work).await;
        self.after_work(req, worked).await
    }

    /// Where tests may hold the executing request, inside its open transaction, or fail it;
    /// a failure drops the transaction, which rolls the business writes back. A held
    /// request sends no heartbeat, like a stalled process: its lease runs out.
    pub(super) async fn after_work(
        &self,
        req: &IdempotentRequest,
        worked: Result<(PgTx, Reply), ApiError>,
    ) -> Result<(PgTx, Reply), ApiError> {
        let (tx, reply) = worked?;
        self.faults.inject(&req.faults).await?;
        Ok((tx, reply))
    }

    /// Ends a request whose key we hold: stores its outcome with the key and commits, or
    /// leaves the key open for the retry when the outcome is transient.
    pub(super) async fn conclude(
        &self,
        req: &IdempotentRequest,
        lease: Uuid,
        outcome: Result<(PgTx, Reply), ApiError>,
    ) -> Response {
        match outcome {
            Ok((tx, reply)) => {
                self.finish(tx, req, lease, StoredResponse::from_reply(reply))
                    .await
            }
            Err(e) if !e.is_stored() => self.give_up(req, lease, e).await,
            // A definitive refusal: its transaction (if any) is gone; store the refusal.
            Err(refusal) => match self.db.begin().await {
                Ok(tx) => {
                    self.finish(tx, req, lease, StoredResponse::from_error(&refusal))
                        .await
                }
                Err(e) => self.give_up(req, lease, e.into()).await,
            },
        }
    }

    /// Runs `work` while renewing our lease every third of its length, so work that
    /// legitimately outlives one lease (a slow provider) is not taken over while it is
    /// alive. Each renewal is bounded by the same third: a renewal that cannot land in time
    /// is dropped and the next one tries. Renewals stop when `work` ends, or when the lease
    /// turns out to be lost (completion is fenced on the token either way).
    pub(super) async fn heartbeat<T>(
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
    /// refusal); `None` when it may be claimed.
    fn answer(&self, existing: Existing) -> Option<Result<StoredResponse, ApiError>> {
        match existing {
            Existing::Completed(stored) => {
                Metrics::inc(&self.metrics.replays);
                Some(Ok(stored))
            }
            Existing::InProgress => {
                Metrics::inc(&self.metrics.in_progress);
                Some(Err(ApiError::RequestInProgress))
            }
            Existing::DifferentRequest => {
                Metrics::inc(&self.metrics.key_reused);
                Some(Err(ApiError::IdempotencyKeyReused))
            }
            Existing::Reclaimable | Existing::Unused => None,
        }
    }

    /// Stores the outcome with the key and commits, or rolls everything back when another
    /// request has taken the key over (fencing).
    async fn finish(
        &self,
        mut tx: PgTx,
        req: &IdempotentRequest,
        lease: Uuid,
        stored: StoredResponse,
    ) -> Response {
        match store::complete(&mut *tx, req, lease, &stored).await {
            Ok(true) => match tx.commit().await {
                Ok(()) => stored.into_response(false),
                Err(e) => self.give_up(req, lease, e.into()).await,
            },
            Ok(false) => {
                let _ = tx.rollback().await;
                Metrics::inc(&self.metrics.fenced);
                tracing::warn!(key = %req.key, "lease lost to another request; our writes were rolled back");
                self.current_answer(req).await
            }
            Err(e) => {
                let _ = tx.rollback().await;
                self.give_up(req, lease, e.into()).await
            }
        }
    }

    /// After losing the lease: answer with whatever the key holds now.
    async fn current_answer(&self, req: &IdempotentRequest) -> Response {
        match store::existing(&self.db, req).await {
            Ok(Existing::Completed(stored)) => stored.into_response(true),
            Ok(_) => ApiError::RequestInProgress.into_response(),
            Err(e) => ApiError::from(e).into_response(),
        }
    }

    /// A transient failure: mark the key `failed` (best effort; if even that fails, the
    /// lease expires by itself) and answer with the error, which says "retry".
    pub(super) async fn give_up(
        &self,
        req: &IdempotentRequest,
        lease: Uuid,
        error: ApiError,
    ) -> Response {
        if let Err(e) = store::fail(&self.db, req, lease).await {
            tracing::warn!(key = %req.key, error = %e, "could not mark the key failed; its lease will expire");
        }
        error.into_response()
    }
}
