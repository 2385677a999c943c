//! What the chain counts. The app owns the counters, their names and how they are shown (on a
//! Prometheus `/metrics` page, say); the chain only says what happened.

/// One thing that happened in the chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Counter {
    /// The relay published an event the bus did not have.
    Published,
    /// The relay published an event the bus recognised as one it had.
    Republished,
    /// A message was delivered to a consumer (repeats included).
    Delivery,
    /// A delivery of an event consumed before: nothing was done.
    DuplicateSkipped,
    /// A handler failure sent back to the bus for a later try.
    Retry,
    /// A message given up on, its dead letter written.
    DeadLetter,
    /// A batch whose transaction failed, so its events were applied one at a time.
    BatchSplit,
}

/// Where the chain reports what happened: the app's metrics.
pub trait Counters: Send + Sync {
    /// Counts one `counter` more. Called on the chain's hot path: keep it cheap.
    fn count(&self, counter: Counter);
}

/// Counting nothing, for an app without metrics.
impl Counters for () {
    fn count(&self, _: Counter) {}
}
