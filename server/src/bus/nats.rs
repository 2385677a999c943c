//! The NATS JetStream bus. One stream holds every event under `<prefix>.<event type>`;
//! publishing sets `Nats-Msg-Id` to the event id, so JetStream drops a repeat within its
//! duplicate window (minutes: the consumers' `consumed_events` remains the guarantee).
//! Each consumer is a durable pull consumer with explicit acks, `max_deliver`, and a backoff
//! for deliveries that time out. Only what NATS 2.9 supports is used (one filter subject).

use std::time::Duration;

use async_nats::jetstream::{
    self,
    consumer::{pull, AckPolicy, Consumer},
    message::PublishMessage,
    stream, AckKind,
};
use async_trait::async_trait;
use futures::StreamExt;

use super::{Acker, Bus, ConsumerSpec, Delivery, Message, Published, Subscription};

/// How long JetStream remembers a message id to drop a repeated publish.
const DUPLICATE_WINDOW: Duration = Duration::from_secs(120);
const MSG_ID: &str = "Nats-Msg-Id";

pub struct NatsBus {
    js: jetstream::Context,
    stream: String,
    prefix: String,
}

impl NatsBus {
    /// Connects (retrying in the background while NATS is away) and creates the stream if
    /// it is missing.
    pub async fn connect(url: &str, stream: &str, prefix: &str) -> anyhow::Result<Self> {
        let client = async_nats::ConnectOptions::new()
            .retry_on_initial_connect()
            .connect(url)
            .await?;
        let js = jetstream::new(client);
        js.get_or_create_stream(stream::Config {
            name: stream.to_owned(),
            subjects: vec![format!("{prefix}.>")],
            duplicate_window: DUPLICATE_WINDOW,
            ..Default::default()
        })
        .await?;
        Ok(Self {
            js,
            stream: stream.to_owned(),
            prefix: prefix.to_owned(),
        })
    }

    /// Deletes the stream and everything in it (tests clean up with this).
    pub async fn delete_stream(&self) -> anyhow::Result<()> {
        self.js.delete_stream(&self.stream).await?;
        Ok(())
    }
}

#[async_trait]
impl Bus for NatsBus {
    async fn publish(&self, message: &Message) -> anyhow::Result<Published> {
        let subject = format!("{}.{}", self.prefix, message.subject);
        let publish = PublishMessage::build()
            .message_id(message.id.as_str())
            .payload(message.body.clone().into());
        let ack = self.js.send_publish(subject, publish).await?.await?;
        Ok(if ack.duplicate {
            Published::Duplicate
        } else {
            Published::New
        })
    }

    async fn subscribe(&self, spec: &ConsumerSpec) -> anyhow::Result<Box<dyn Subscription>> {
        let stream = self.js.get_stream(&self.stream).await?;
        // Deliveries that time out (a consumer died) come back after growing waits.
        let backoff_steps = (spec.max_deliver.saturating_sub(1) as usize).min(3);
        let backoff = (0..backoff_steps)
            .map(|i| spec.ack_wait * 2u32.pow(i as u32))
            .collect();
        let consumer = stream
            .get_or_create_consumer(
                spec.name,
                pull::Config {
                    durable_name: Some(spec.name.to_owned()),
                    filter_subject: format!("{}.{}", self.prefix, spec.subject),
                    ack_policy: AckPolicy::Explicit,
                    ack_wait: spec.ack_wait,
                    max_deliver: i64::from(spec.max_deliver),
                    backoff,
                    ..Default::default()
                },
            )
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

fn nats_error(e: async_nats::Error) -> anyhow::Error {
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
