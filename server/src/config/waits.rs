//! How repeats wait for their key's running request (`Prefer: wait`, docs/protocol.md,
//! "Waiting for the original").

use std::time::Duration;

use once_axum::executor::wait::WaitLimits;

#[derive(Clone, Debug)]
pub struct IdempotencyWaits {
    /// The longest a repeat waits, whatever it asks (`IDEMPOTENCY_WAIT_MAX_MS`, 5000): below
    /// the request timeout.
    pub longest: Duration,
    /// The longest a waiter goes without a read of its key (`IDEMPOTENCY_WAIT_FALLBACK_MS`,
    /// 2000): what a lost notification or a lapsed lease can cost it.
    pub fallback: Duration,
    /// Waiters on one instance (`IDEMPOTENCY_WAITERS`, 10000).
    pub per_instance: usize,
    /// Waiters of one session on one instance (`IDEMPOTENCY_WAITERS_PER_SCOPE`, 20).
    pub per_scope: usize,
}

impl IdempotencyWaits {
    pub fn limits(&self) -> WaitLimits {
        WaitLimits::new(self.per_instance, self.per_scope, self.fallback)
    }
}
