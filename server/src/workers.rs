//! The background workers: the outbox relay, the fulfillment consumer, the mailer and the
//! reconciler. By
//! default they run as tasks inside the server; `server worker <name>` runs one alone, for
//! deployments that scale them apart. Any number of each may run: every one of them claims
//! its work with `FOR UPDATE SKIP LOCKED` or a bus consumer, never from process memory.

use std::{str::FromStr, sync::Arc};

use once_events::{
    bus::Bus,
    consumer::{Consumer, RetryPolicy},
    relay::Relay,
    Handler,
};
use sqlx::PgPool;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::{
    config::Config, fulfillment::Fulfillment, mailer::Mailer, metrics::Metrics,
    payment_provider::Provider, payments::settle::SettleRules, reconcile::Reconciler,
    state::AppState,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Worker {
    Relay,
    Fulfillment,
    Mailer,
    Reconciler,
}

pub const ALL: [Worker; 4] = [
    Worker::Relay,
    Worker::Fulfillment,
    Worker::Mailer,
    Worker::Reconciler,
];

impl FromStr for Worker {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "relay" => Ok(Self::Relay),
            "fulfillment" => Ok(Self::Fulfillment),
            "mailer" => Ok(Self::Mailer),
            "reconciler" => Ok(Self::Reconciler),
            other => {
                anyhow::bail!("unknown worker {other}: relay, fulfillment, mailer or reconciler")
            }
        }
    }
}

/// What every worker needs.
#[derive(Clone)]
pub struct Context {
    pub db: PgPool,
    pub config: Config,
    pub bus: Arc<dyn Bus>,
    pub metrics: Arc<Metrics>,
}

impl Context {
    /// What the workers of this instance work with, from the state the handlers share.
    pub fn of(state: &AppState) -> Self {
        Self {
            db: state.db.clone(),
            config: (*state.config).clone(),
            bus: state.bus.clone(),
            metrics: state.metrics.clone(),
        }
    }

    pub fn retry_policy(&self) -> RetryPolicy {
        let events = &self.config.events;
        RetryPolicy {
            max_attempts: events.max_attempts,
            base: events.retry_base,
            cap: events.retry_cap,
        }
    }

    pub fn relay(&self) -> Relay {
        Relay {
            db: self.db.clone(),
            bus: self.bus.clone(),
            metrics: self.metrics.clone(),
        }
    }

    /// The fulfillment consumer, subscribed to the bus.
    pub async fn fulfillment(&self) -> anyhow::Result<Consumer> {
        let handler: Arc<dyn Handler> = Arc::new(Fulfillment);
        self.consumer(handler).await
    }

    /// The fulfillment consumer once the bus takes its subscription: a bus (or database)
    /// that is away at start delays the consumer, it does not stop it. `None` if stopped first.
    async fn subscribed_fulfillment(&self, stop: &CancellationToken) -> Option<Consumer> {
        loop {
            match self.fulfillment().await {
                Ok(consumer) => return Some(consumer),
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "cannot subscribe yet; trying again")
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(self.config.events.poll_every) => {}
                _ = stop.cancelled() => return None,
            }
        }
    }

    pub async fn consumer(&self, handler: Arc<dyn Handler>) -> anyhow::Result<Consumer> {
        let policy = self.retry_policy();
        let spec = Consumer::spec(handler.as_ref(), self.config.events.ack_wait);
        let pause_before_ack = if self.config.fault_injection {
            self.config.events.pause_before_ack
        } else {
            std::time::Duration::ZERO
        };
        Ok(Consumer {
            db: self.db.clone(),
            subscription: self.bus.subscribe(&spec).await?,
            handler,
            policy,
            metrics: self.metrics.clone(),
            pause_before_ack,
            batch: self.config.events.consumer_batch,
        })
    }

    pub fn reconciler(&self) -> Reconciler {
        Reconciler {
            db: self.db.clone(),
            provider: Provider::from_config(&self.config),
            rules: SettleRules {
                lease: self.config.idempotency_lease,
                grace: self.config.payment_settle_grace,
            },
            overlap: self.config.reconcile_overlap,
        }
    }

    pub fn mailer(&self) -> anyhow::Result<Mailer> {
        let events = &self.config.events;
        Mailer::new(
            self.db.clone(),
            events.smtp.as_ref(),
            &events.mail_from,
            self.metrics.clone(),
        )
    }
}

/// Starts `workers` as tasks that run until `stop`.
pub async fn spawn(
    context: &Context,
    workers: &[Worker],
    stop: &CancellationToken,
) -> anyhow::Result<Vec<JoinHandle<()>>> {
    let events = &context.config.events;
    let mut handles = Vec::new();
    for worker in workers {
        let stop = stop.clone();
        handles.push(match worker {
            Worker::Relay => tokio::spawn(context.relay().run(
                events.poll_every,
                events.retention,
                stop,
            )),
            Worker::Fulfillment => {
                let context = context.clone();
                tokio::spawn(async move {
                    if let Some(consumer) = context.subscribed_fulfillment(&stop).await {
                        consumer.run(context.config.events.poll_every, stop).await;
                    }
                })
            }
            Worker::Mailer => tokio::spawn(context.mailer()?.run(events.poll_every, stop)),
            Worker::Reconciler => tokio::spawn(
                context
                    .reconciler()
                    .run_worker(context.config.reconcile_every, stop),
            ),
        });
        tracing::info!(?worker, "worker started");
    }
    Ok(handles)
}
