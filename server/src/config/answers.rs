//! Repeats of completed keys answered from memory (docs/protocol.md, "Repeats from memory").

use std::time::Duration;

use once_axum::AnswerCache;

#[derive(Clone, Debug)]
pub struct AnswerCacheSettings {
    /// The most bytes of answers one instance keeps (`ANSWER_CACHE_BYTES`, 64 MiB; 0: no
    /// cache, every repeat reads the key table).
    pub max_bytes: u64,
    /// The longest an answer is kept (`ANSWER_CACHE_TTL_SECS`, 3600): at most the
    /// retention, and never past its key's retention or its session's expiry either.
    pub time_to_live: Duration,
}

impl AnswerCacheSettings {
    /// The cache these settings describe for keys kept `retention`, if any.
    pub fn cache(&self, retention: Duration) -> Option<AnswerCache> {
        (self.max_bytes > 0).then(|| {
            AnswerCache::new(retention, self.max_bytes).with_time_to_live(self.time_to_live)
        })
    }
}
