//! Paid → fulfilled, end to end: the time from a payment's commit (as its payer sees it) to
//! the commit of its fulfillment (as a listener sees it: the fulfillment writes
//! `order.fulfilled` to the outbox, whose trigger notifies at commit). Both times are read
//! on this process's clock, so the figure includes every hop: relay, bus, consumer.

use std::{
    collections::HashMap,
    fmt,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use server::workers::{self, Context, Worker};
use sqlx::{postgres::PgListener, PgPool};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::orders::pay_one;

/// Concurrent payers in the run at the highest rate.
pub const PAYERS: usize = 4;

pub struct Steady {
    pub orders: usize,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
    pub lag: Samples,
}

pub struct FlatOut {
    pub rate: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub lag: Samples,
    pub waiting: Samples,
}

/// Orders paid at `rate` a second for `seconds`, the relay and fulfillment running.
pub async fn steady(context: &Context, rate: u32, seconds: u64) -> anyhow::Result<Steady> {
    let chain = Chain::start(context).await?;
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / f64::from(rate)));
    let mut payments = JoinSet::new();
    let orders = rate as usize * seconds as usize;
    for _ in 0..orders {
        tick.tick().await;
        let (db, clock) = (context.db.clone(), chain.clock.clone());
        payments.spawn(async move {
            clock.paid(pay_one(&db).await?);
            anyhow::Ok(())
        });
    }
    while let Some(paid) = payments.join_next().await {
        paid??;
    }
    let (latencies, lag, _) = chain.finish(orders).await?;
    Ok(Steady {
        orders,
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        max_ms: percentile(&latencies, 1.0),
        lag,
    })
}

/// [`PAYERS`] payers paying as fast as the database lets them for `seconds`.
pub async fn flat_out(context: &Context, seconds: u64) -> anyhow::Result<FlatOut> {
    let chain = Chain::start(context).await?;
    let until = Instant::now() + Duration::from_secs(seconds);
    let mut payers = JoinSet::new();
    for _ in 0..PAYERS {
        let (db, clock) = (context.db.clone(), chain.clock.clone());
        payers.spawn(async move {
            let mut paid = 0;
            while Instant::now() < until {
                clock.paid(pay_one(&db).await?);
                paid += 1;
            }
            anyhow::Ok(paid)
        });
    }
    let mut orders = 0;
    while let Some(paid) = payers.join_next().await {
        orders += paid??;
    }
    let (latencies, lag, waiting) = chain.finish(orders).await?;
    Ok(FlatOut {
        rate: orders as f64 / seconds as f64,
        p50_ms: percentile(&latencies, 0.50),
        p99_ms: percentile(&latencies, 0.99),
        lag,
        waiting,
    })
}

/// The relay and the fulfillment consumer as the server runs them, a listener that notes
/// when each order's fulfillment commits, and a sampler of the backlogs.
struct Chain {
    clock: Clock,
    stop: CancellationToken,
    workers: Vec<tokio::task::JoinHandle<()>>,
    watcher: tokio::task::JoinHandle<anyhow::Result<()>>,
    sampler: tokio::task::JoinHandle<anyhow::Result<(Samples, Samples)>>,
}

impl Chain {
    async fn start(context: &Context) -> anyhow::Result<Self> {
        let stop = CancellationToken::new();
        let workers = workers::spawn(context, &[Worker::Relay, Worker::Fulfillment], &stop).await?;
        let clock = Clock::default();
        let watcher = tokio::spawn(watch(context.db.clone(), clock.clone(), stop.clone()));
        let sampler = tokio::spawn(sample(context.db.clone(), stop.clone()));
        Ok(Self {
            clock,
            stop,
            workers,
            watcher,
            sampler,
        })
    }

    /// Waits until all `orders` are fulfilled, stops everything; the latencies in ms and
    /// the samples of unpublished events and of orders waiting for fulfillment.
    async fn finish(self, orders: usize) -> anyhow::Result<(Vec<f64>, Samples, Samples)> {
        let deadline = Instant::now() + Duration::from_secs(120);
        while self.clock.fulfilled() < orders {
            anyhow::ensure!(
                Instant::now() < deadline,
                "orders still unfulfilled after 2 min"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.stop.cancel();
        for worker in self.workers {
            worker.await?;
        }
        self.watcher.await??;
        let (lag, waiting) = self.sampler.await??;
        Ok((self.clock.latencies_ms(), lag, waiting))
    }
}

/// When an order was paid and when it was fulfilled, as this process saw them.
type Times = (Option<Instant>, Option<Instant>);

/// The times of every order of a run.
#[derive(Clone, Default)]
struct Clock(Arc<Mutex<HashMap<Uuid, Times>>>);

impl Clock {
    fn paid(&self, order: Uuid) {
        self.0.lock().unwrap().entry(order).or_default().0 = Some(Instant::now());
    }

    fn fulfilled_now(&self, orders: &[Uuid]) {
        let now = Instant::now();
        let mut times = self.0.lock().unwrap();
        for order in orders {
            times.entry(*order).or_default().1.get_or_insert(now);
        }
    }

    fn fulfilled(&self) -> usize {
        self.0
            .lock()
            .unwrap()
            .values()
            .filter(|t| t.1.is_some())
            .count()
    }

    /// Sorted; a fulfillment seen before its payer noted the payment counts as 0.
    fn latencies_ms(&self) -> Vec<f64> {
        let times = self.0.lock().unwrap();
        let mut ms: Vec<f64> = times
            .values()
            .filter_map(|&(paid, done)| Some(done?.saturating_duration_since(paid?)))
            .map(|d| d.as_secs_f64() * 1000.0)
            .collect();
        ms.sort_by(f64::total_cmp);
        ms
    }
}

/// Notes fulfillments as they commit: woken by the outbox's notification, and every 50 ms
/// in case one was missed.
async fn watch(db: PgPool, clock: Clock, stop: CancellationToken) -> anyhow::Result<()> {
    let mut listener = PgListener::connect_with(&db).await?;
    listener.listen("outbox_events").await?;
    // Only the fulfillments of this run.
    let mut last_seen: i64 =
        sqlx::query_scalar("SELECT coalesce(max(shipment_no), 0) FROM fulfillments")
            .fetch_one(&db)
            .await?;
    while !stop.is_cancelled() {
        let _ = tokio::time::timeout(Duration::from_millis(50), listener.recv()).await;
        let fulfilled: Vec<(Uuid, i64)> = sqlx::query_as(
            "SELECT order_id, shipment_no FROM fulfillments WHERE shipment_no > $1 ORDER BY shipment_no",
        )
        .bind(last_seen)
        .fetch_all(&db)
        .await?;
        if let Some((_, no)) = fulfilled.last() {
            last_seen = *no;
        }
        let orders: Vec<Uuid> = fulfilled.into_iter().map(|(order, _)| order).collect();
        clock.fulfilled_now(&orders);
    }
    Ok(())
}

/// Once a second: events not yet published, and paid orders not yet fulfilled.
async fn sample(db: PgPool, stop: CancellationToken) -> anyhow::Result<(Samples, Samples)> {
    let (mut lag, mut waiting) = (Samples::default(), Samples::default());
    let mut every = tokio::time::interval(Duration::from_secs(1));
    while !stop.is_cancelled() {
        tokio::select! {
            _ = every.tick() => {}
            _ = stop.cancelled() => break,
        }
        let (unpublished, paid): (i64, i64) = sqlx::query_as(
            "SELECT (SELECT count(*) FROM outbox_events WHERE published_at IS NULL),
                    (SELECT count(*) FROM orders WHERE status = 'paid')",
        )
        .fetch_one(&db)
        .await?;
        lag.0.push(unpublished);
        waiting.0.push(paid);
    }
    Ok((lag, waiting))
}

/// A backlog sampled each second: flat when its second half is no higher than its first.
#[derive(Default)]
pub struct Samples(Vec<i64>);

impl fmt::Display for Samples {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let half = self.0.len() / 2;
        let mean = |s: &[i64]| s.iter().sum::<i64>() as f64 / s.len().max(1) as f64;
        let max = self.0.iter().max().copied().unwrap_or(0);
        write!(
            f,
            "mean {:.1} in the first half, {:.1} in the second, max {max} ({} samples)",
            mean(&self.0[..half]),
            mean(&self.0[half..]),
            self.0.len()
        )
    }
}

/// The `p` quantile of sorted values (nearest rank).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (p * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}
