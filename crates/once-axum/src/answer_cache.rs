//! Completed answers kept in memory, so a repeat of a completed key is answered with no
//! database statement (an opt-in: [`crate::Executor::with_answer_cache`]).
//!
//! Why it is safe: a completed key's row never changes until the purge deletes it
//! (`once_pg::store`: nothing writes a completed row but the purge), so its stored answer
//! and its fingerprint are facts that may be copied anywhere, for as long as the row is
//! kept. Every entry is therefore given the shortest of three lives, each measured from an
//! instant taken *before* the database could have measured its own, so it never outlives
//! the row:
//!
//! * the key's remaining retention: the retention less how long ago the key finished, by
//!   the database's clock (for a key this process completed, the retention from the
//!   request's start, which precedes the commit that stamped its end);
//! * the scope's remaining life, when the application's first read says how long its scope
//!   stays known (a session's expiry): a scope it cannot vouch for keeps nothing;
//! * the cache's own time to live.
//!
//! Only completed keys enter it: a running, failed or abandoned key changes, and is always
//! read from the table. Several instances may each keep their own cache on one database:
//! each only ever holds copies of rows that cannot change.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use moka::{sync::Cache, Expiry};
use once_core::{IdempotentRequest, StoredResponse};
use once_pg::Existing;

/// A bounded, expiring store of completed answers, shared by the clones of an executor.
///
/// ```
/// use std::time::Duration;
/// // Keys are kept for a day; at most 64 MiB of answers, none kept longer than ten minutes.
/// let cache = once_axum::AnswerCache::new(Duration::from_secs(86_400), 64 << 20)
///     .with_time_to_live(Duration::from_secs(600));
/// assert_eq!(cache.time_to_live(), Duration::from_secs(600));
/// ```
#[derive(Clone)]
pub struct AnswerCache {
    entries: Cache<String, Arc<Entry>>,
    retention: Duration,
    time_to_live: Duration,
}

/// One completed key: whose request it answered, and the answer.
struct Entry {
    fingerprint: String,
    stored: StoredResponse,
    until: Instant,
}

/// Each entry leaves at its own `until`, never later.
struct UntilItsEnd;

impl Expiry<String, Arc<Entry>> for UntilItsEnd {
    fn expire_after_create(
        &self,
        _: &String,
        entry: &Arc<Entry>,
        now: Instant,
    ) -> Option<Duration> {
        Some(entry.until.saturating_duration_since(now))
    }

    fn expire_after_update(
        &self,
        _: &String,
        entry: &Arc<Entry>,
        now: Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        Some(entry.until.saturating_duration_since(now))
    }
}

impl AnswerCache {
    /// A cache for keys kept `retention` (what the application's purge is given: no entry
    /// outlives it), holding at most `max_bytes` of answers (bodies, headers, fingerprints
    /// and keys). When full, moka's admission policy (TinyLFU) decides: a new answer
    /// replaces the least recently used one unless that one is asked for more often.
    pub fn new(retention: Duration, max_bytes: u64) -> Self {
        let entries = Cache::builder()
            .max_capacity(max_bytes)
            .weigher(|id: &String, entry: &Arc<Entry>| weight(id, entry))
            .expire_after(UntilItsEnd)
            .build();
        Self {
            entries,
            retention,
            time_to_live: retention,
        }
    }

    /// The same cache, keeping no entry longer than `ttl` (at most the retention).
    pub fn with_time_to_live(mut self, ttl: Duration) -> Self {
        self.time_to_live = ttl.min(self.retention);
        self
    }

    /// The longest an entry is kept.
    pub fn time_to_live(&self) -> Duration {
        self.time_to_live
    }

    /// Forgets every answer. For an application that learns its database may have lost
    /// commits (a failover to a standby that was behind, a restore): an answer kept from
    /// before may name work the database no longer holds, and from then on only the
    /// database may say what a key holds.
    pub fn clear(&self) {
        self.entries.invalidate_all();
    }

    /// How many answers it holds now (approximately: evictions are applied lazily).
    pub fn len(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.entry_count()
    }

    /// Whether it holds no answer.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many bytes of answers it holds now, as weighed against its bound.
    pub fn bytes(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.weighted_size()
    }

    /// What the table would say of `req`'s key, if the cache knows: its stored answer, or
    /// that the key answered another request.
    pub(crate) fn existing(&self, req: &IdempotentRequest) -> Option<Existing> {
        let entry = self.entries.get(&id(req))?;
        if entry.until <= Instant::now() {
            return None;
        }
        Some(match req.fingerprint.matches(&entry.fingerprint) {
            true => Existing::Completed(entry.stored.clone()),
            false => Existing::DifferentRequest,
        })
    }

    /// Keeps `stored`, the completed answer of `req`'s key, for the shortest of: the
    /// retention left (`retention - finished_ago`), the scope's life, and the time to
    /// live, all counted from the instant `read` was taken.
    pub(crate) fn keep(
        &self,
        req: &IdempotentRequest,
        stored: &StoredResponse,
        read: &Lifespan,
        finished_ago: Duration,
    ) {
        let life = self
            .retention
            .saturating_sub(finished_ago)
            .min(read.scope_lasts.unwrap_or(Duration::MAX))
            .min(self.time_to_live)
            .saturating_sub(clock_margin(self.retention));
        let Some(until) = read.since.checked_add(life) else {
            return;
        };
        if until <= Instant::now() {
            return;
        }
        let entry = Entry {
            fingerprint: req.fingerprint.as_str().to_owned(),
            stored: stored.clone(),
            until,
        };
        self.entries.insert(id(req), Arc::new(entry));
    }
}

/// Taken off every entry's life: the database's clock, which stamps a key's finish and
/// runs the purge, may step ahead of ours (a correction, a failover to another host).
fn clock_margin(retention: Duration) -> Duration {
    (retention / 10).min(Duration::from_secs(1))
}

/// What a request's first read said about how long its answers may be kept: the scope's
/// remaining life, measured by the database after `since`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Lifespan {
    pub(crate) since: Instant,
    pub(crate) scope_lasts: Option<Duration>,
}

/// The entry's name: scope and key, the scope's length first so no two pairs share one.
fn id(req: &IdempotentRequest) -> String {
    format!("{}:{}{}", req.scope.len(), req.scope, req.key.as_str())
}

/// An entry's own bookkeeping, beside what it holds (the allocations, the cache's node).
const ENTRY_OVERHEAD: usize = 160;

fn weight(id: &str, entry: &Entry) -> u32 {
    let headers: usize = entry
        .stored
        .headers
        .iter()
        .map(|(n, v)| n.len() + v.len())
        .sum();
    let held = id.len() + entry.fingerprint.len() + entry.stored.body.len() + headers;
    let bytes = held + ENTRY_OVERHEAD;
    u32::try_from(bytes).unwrap_or(u32::MAX)
}
