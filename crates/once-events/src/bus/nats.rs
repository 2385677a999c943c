//! The NATS JetStream bus. One stream holds every event under `<prefix>.<event type>`;
//! publishing sets `Nats-Msg-Id` to the event id, so JetStream drops a repeat within its
//! duplicate window (minutes: the consumers' `consume_once` remains the guarantee).
//! Each consumer is a durable pull consumer with explicit acks and `max_deliver` as a far
//! backstop (see [`MAX_DELIVER`]: only our consumer gives up on a message, once its
//! dead letter is written). The backoff is the consumer's own (a nak with a jittered delay),
//! not a JetStream `backoff` list: on NATS 2.9 such a list also overrides the delay of every
//! nak (a test saw a 30 s wait where 20 ms was asked), and a timed-out delivery comes back
//! after the ack wait anyway. Only what NATS 2.9 supports is used (one filter subject).
//! The stream is created on first use, not at start: a server whose NATS is away still
//! starts, and its outbox keeps the events until NATS is back.

use std::{future::IntoFuture, time::Duration};

use async_nats::jetstream::{
    self,
    consumer::{pull, AckPolicy, Consumer},
    message::PublishMessage,
    stream, AckKind,
};
use async_trait::async_trait;
use futures::StreamExt;
use tokio::sync::OnceCell;

use super::contract::{
    Acker, Bus, ConsumerSpec, Delivery, Message, Published, Subscription, MAX_DELIVER,
};
use crate::config::BusConfig;

/// How long JetStream remembers a message id to drop a repeated publish, unless the
/// configuration says otherwise.
pub const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);
const MSG_ID: &str = "Nats-Msg-Id";

/// The NATS JetStream bus: one stream, one durable pull consumer per consumer.
pub struct NatsBus {
    js: jetstream::Context,
    stream: String,
    prefix: String,
    /// How long the stream keeps messages (the events' retention).
    max_age: Duration,
    duplicate_window: Duration,
    replicas: usize,
    ready: OnceCell<()>,
}

impl NatsBus {
    /// Connects to any of the servers in `url` (comma-separated); while none answers the
    /// client keeps trying in the background.
    pub async fn connect(url: &str, config: &BusConfig) -> anyhow::Result<Self> {
        let servers = url
            .split(',')
            .map(|u| u.trim().parse::<async_nats::ServerAddr>())
            .collect::<Result<Vec<_>, _>>()?;
        let client = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .connect(servers)
            .await?;
        Ok(Self {
            js: jetstream::new(client),
            stream: config.nats_stream.clone(),
            prefix: config.nats_subject_prefix.clone(),
            max_age: config.retention,
            duplicate_window: config.nats_duplicate_window,
            replicas: config.nats_replicas,
            ready: OnceCell::new(),
        })
    }

    /// Creates the stream if it is missing (once per process).
    async fn ensure_stream(&self) -> anyhow::Result<()> {
        self.ready
            .get_or_try_init(|| async {
                self.js
                    .get_or_create_stream(stream::Config {
                        name: self.stream.clone(),
                        subjects: vec![format!("{}.>", self.prefix)],
                        duplicate_window: self.duplicate_window,
                        max_age: self.max_age,
                        num_replicas: self.replicas,
                        ..Default::default()
                    })
                    .await
                    .map(|_| ())
                    .map_err(nats_error)
            })
            .await?;
        Ok(())
    }

    /// Deletes the stream and everything in it (tests clean up with this).
    pub async fn delete_stream(&self) -> anyhow::Result<()> {
        self.ensure_stream().await?;
        self.js.delete_stream(&self.stream).await?;
        Ok(())
    }
}

#[async_trait]
impl Bus for NatsBus {
    /// Pipelined: every message is sent before any PubAck is awaited, and the answer waits
    /// for all of them. One PubAck missing fails the whole batch, which the relay then
    /// publishes again; the message ids make the repeats duplicates.
    async fn publish_all(&self, messages: &[Message]) -> anyhow::Result<Vec<Published>> {
        self.ensure_stream().await?;
        let mut pending = Vec::with_capacity(messages.len());
        for message in messages {
            let subject = format!("{}.{}", self.prefix, message.subject);
            let publish = PublishMessage::build()
                .message_id(message.id.as_str())
                .payload(message.body.clone().into());
            pending.push(self.js.send_publish(subject, publish).await?);
        }
        let acks =
            futures::future::try_join_all(pending.into_iter().map(IntoFuture::into_future)).await?;
        Ok(acks
            .iter()
            .map(|ack| Published::new_unless(ack.duplicate))
            .collect())
    }

    /// JetStream's own count: messages not delivered yet plus those delivered and unacked.
    async fn waiting(&self, consumer: &str) -> anyhow::Result<Option<u64>> {
        self.ensure_stream().await?;
        let stream = self.js.get_stream(&self.stream).await?;
        let info = stream.consumer_info(consumer).await?;
        Ok(Some(info.num_pending + info.num_ack_pending as u64))
    }

    async fn subscribe(&self, spec: &ConsumerSpec) -> anyhow::Result<Box<dyn Subscription>> {
        self.ensure_stream().await?;
        let stream = self.js.get_stream(&self.stream).await?;
        // Created, or updated to this configuration when it exists already (a changed ack wait).
        let consumer: Consumer<pull::Config> = stream
            .create_consumer(pull::Config {
                durable_name: Some(spec.name.to_owned()),
                filter_subject: format!("{}.{}", self.prefix, spec.subject),
                ack_policy: AckPolicy::Explicit,
                ack_wait: spec.ack_wait,
                max_deliver: i64::from(MAX_DELIVER),
                ..Default::default()
            })
            .await?;
        Ok(Box::new(NatsSubscription {
            consumer,
            prefix: format!("{}.", self.prefix),
        }))
    }
}

struct NatsSubscription {
    consumer: Consumer<pull::Config>,
    prefix: String,
}

#[async_trait]
impl Subscription for NatsSubscription {
    async fn fetch(&mut self, max: usize, wait: Duration) -> anyhow::Result<Vec<Delivery>> {
        let mut batch = self
            .consumer
            .fetch()
            .max_messages(max)
            .expires(wait)
            .messages()
            .await?;
        let mut deliveries = Vec::new();
        while let Some(message) = batch.next().await {
            deliveries.push(self.delivery(message.map_err(nats_error)?)?);
        }
        Ok(deliveries)
    }
}

impl NatsSubscription {
    fn delivery(&self, message: jetstream::Message) -> anyhow::Result<Delivery> {
        let info = message.info().map_err(|e| anyhow::anyhow!("{e}"))?;
        let delivered = info.delivered.max(1) as u32;
        let id = message
            .headers
            .as_ref()
            .and_then(|h| h.get(MSG_ID))
            .map(|v| v.to_string())
            .unwrap_or_else(|| format!("stream-seq-{}", info.stream_sequence));
        let subject = message.subject.as_str();
        let subject = subject
            .strip_prefix(&self.prefix)
            .unwrap_or(subject)
            .to_owned();
        Ok(Delivery {
            message: Message {
                id,
                subject,
                body: message.payload.to_vec(),
            },
            delivered,
            acker: Box::new(NatsAcker(message)),
        })
    }
}

struct NatsAcker(jetstream::Message);

fn nats_error(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("{e}")
}

#[async_trait]
impl Acker for NatsAcker {
    /// A double ack: JetStream confirms it, so an ack lost on the way is an error here
    /// rather than a silent redelivery later.
    async fn ack(&self) -> anyhow::Result<()> {
        self.0.double_ack().await.map_err(nats_error)
    }

    async fn nak(&self, delay: Duration) -> anyhow::Result<()> {
        self.0
            .ack_with(AckKind::Nak(Some(delay)))
            .await
            .map_err(nats_error)
    }

    async fn term(&self) -> anyhow::Result<()> {
        self.0.ack_with(AckKind::Term).await.map_err(nats_error)
    }
}
