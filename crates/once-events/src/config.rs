//! What the chain needs to reach its bus. The app fills it from its own configuration
//! (environment variables, a file).

use std::time::Duration;

/// Which bus carries the events, and how it is set up.
#[derive(Clone, Debug)]
pub struct BusConfig {
    /// NATS JetStream carries events when set; otherwise the PostgreSQL bus does. Several
    /// servers of one cluster are given comma-separated; the client moves between them.
    pub nats_url: Option<String>,
    /// The JetStream stream that holds the events.
    pub nats_stream: String,
    /// The subject prefix the events are published under: `<prefix>.<event type>`.
    pub nats_subject_prefix: String,
    /// How often a PostgreSQL subscription looks for messages when no notification woke it.
    pub poll_every: Duration,
    /// How long the JetStream stream keeps messages: the events' retention.
    pub retention: Duration,
    /// How long JetStream drops a second publish of a message id
    /// ([`crate::bus::nats::DUPLICATE_WINDOW`] unless a test wants it short).
    pub nats_duplicate_window: Duration,
    /// How many NATS servers keep a copy of the stream (1 on a single server; 3 on a
    /// three-node cluster, so that losing any one of them loses nothing acknowledged).
    pub nats_replicas: usize,
}
