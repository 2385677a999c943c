//! The overlapped claim, an opt-in: work whose
//! only effects are the writes of the one transaction it hands back runs while the claim
//! of its key commits, and is committed only if that claim inserted our row. Everything
//! after the claim is the executor's own.

use std::{future::Future, pin::pin};

use axum::response::Response;
use once_core::IdempotentRequest;
use once_pg::store;
use sqlx::PgPool;
use uuid::Uuid;

use super::{in_own_task, wait, Executor, Worked};
use crate::answer_cache::Lifespan;
use crate::{hooks::Hooks, refusal::Refusal};

impl<H: Hooks> Executor<H> {
    /// Like [`Executor::execute`], for work whose only effects are the writes of the
    /// transaction it hands back (no call to another service, no commit of its own). Such
    /// work may start before the key is ours, because nothing it writes is seen unless the
    /// executor commits it, and the executor commits only under the lease the claim won: so
    /// the claim commits (a disk flush) while the work runs, instead of before it. When the
    /// claim finds the key taken, the work is rolled back and the request goes the way of
    /// [`Executor::execute`].
    pub async fn execute_in_one_tx<F, Fut>(&self, req: IdempotentRequest, work: F) -> Response
    where
        F: Fn(PgPool) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Worked<H::Error>> + Send + 'static,
    {
        let granted = self.granted_wait(&req);
        let to_claim = match self.read_first(&req).await {
            Ok(to_claim) => to_claim,
            Err(answer) => return wait::applied(granted, answer),
        };
        let lifespan = to_claim.lifespan;
        let this = self.clone();
        let answer = in_own_task::<H::Error>(async move {
            // Only a key nobody has used is claimed alongside the work: a failed or
            // abandoned one is known to be taken, and the sequential path reclaims it.
            if to_claim.unused {
                this.run_overlapped(req, lifespan, work).await
            } else {
                this.run(req, lifespan, &work).await
            }
        })
        .await;
        wait::applied(granted, answer)
    }

    async fn run_overlapped<F, Fut>(
        &self,
        req: IdempotentRequest,
        lifespan: Lifespan,
        work: F,
    ) -> Response
    where
        F: Fn(PgPool) -> Fut,
        Fut: Future<Output = Worked<H::Error>>,
    {
        let lease = Uuid::new_v4();
        let (claimed, worked) = self
            .claim_while_working(&req, lease, work(self.work_pool(&req)))
            .await;
        let claimed = match claimed {
            Ok(claimed) => claimed,
            Err(e) => {
                // Whether our row went in is unknown: the work is undone, and the key
                // marked failed if it is ours, as when the sequential claim fails.
                rollback(worked).await;
                return self.give_up(&req, lease, Refusal::Store(e).into()).await;
            }
        };
        if claimed {
            self.claimed(&req);
            let outcome = self.before_commit(&req, worked).await;
            return self.conclude(&req, lease, lifespan, outcome).await;
        }
        // Another request claimed the key first. What the work wrote is undone (and its
        // locks released) before the sequential path runs, which may wait for that
        // request's locks.
        rollback(worked).await;
        self.run(req, lifespan, &work).await
    }

    /// Runs the claim and the work side by side. The claim is polled first, so it asks the
    /// pool for its connection before the work does: the pool serves in order, so a work
    /// holding a connection never waits for a claim queued behind other works. The lease is
    /// renewed only once the claim has made it ours.
    async fn claim_while_working<T>(
        &self,
        req: &IdempotentRequest,
        lease: Uuid,
        work: impl Future<Output = T>,
    ) -> (Result<bool, sqlx::Error>, T) {
        let claim = store::claim_new(&self.db, req, lease, self.lease, self.keys_per_hour);
        let mut claim = pin!(claim);
        let mut working = pin!(work);
        tokio::select! {
            biased;
            claimed = &mut claim => match claimed {
                Ok(true) => (claimed, self.heartbeat(req, lease, working).await),
                _ => (claimed, working.await),
            },
            worked = &mut working => (claim.await, worked),
        }
    }
}

async fn rollback<E>(worked: Worked<E>) {
    if let Ok((tx, _)) = worked {
        let _ = tx.rollback().await;
    }
}
