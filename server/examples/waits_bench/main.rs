//! Prints figures for `Prefer: wait` (docs/protocol.md, "Waiting for the original"):
//! storms of repeats, released at once by a barrier, on one original held in its
//! transaction by the shop's test gate. Figures only: nothing is asserted but the answers
//! (every waiter must get the original's answer, replayed). Run by `scripts/bench waits`.
//!
//! 1. Commit → answer: from the gate's opening (the original then commits) to each waiter's
//!    answer, and to the last waiter's of each storm (p50, p99, max over the storms).
//! 2. Database work: transactions on the shop's database (`pg_stat_database`, after its
//!    counters settle) while one storm arrives, while it waits, and once it is answered.
//! 3. Memory: the server's RSS before and while 10,000 repeats wait (each on a connection
//!    of its own).
//!
//! Usage: waits_bench SERVER_BINARY [STORMS] [WAITERS] [MANY]
//!        (defaults 20 storms of 100 waiters, then 10000 waiters at once)

mod server;
mod storm;

use std::time::Duration;

use server::Server;
use storm::Storm;

struct Args {
    binary: String,
    storms: usize,
    waiters: usize,
    many: usize,
}

impl Args {
    fn parse() -> anyhow::Result<Self> {
        let mut args = std::env::args().skip(1);
        let binary = args
            .next()
            .unwrap_or_else(|| "target/release/server".into());
        let mut next = |default: usize| -> anyhow::Result<usize> {
            Ok(args
                .next()
                .map(|a| a.parse())
                .transpose()?
                .unwrap_or(default))
        };
        Ok(Self {
            binary,
            storms: next(20)?,
            waiters: next(100)?,
            many: next(10_000)?,
        })
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse()?;
    let server = Server::start(&args.binary, args.many).await?;
    let outcome = bench(&server, &args).await;
    server.stop().await?;
    outcome
}

async fn bench(server: &Server, args: &Args) -> anyhow::Result<()> {
    let storm = Storm::new(server).await?;
    println!(
        "waits: {} storms of {} repeats (Prefer: wait) on one held original each",
        args.storms, args.waiters
    );
    let (mut last, mut every) = (Vec::new(), Vec::new());
    for _ in 0..args.storms {
        let answered = storm.run(args.waiters).await?;
        last.push(answered.iter().copied().fold(0.0, f64::max));
        every.extend(answered);
    }
    print_latency("commit → each waiter's answer", &mut every);
    print_latency("commit → a storm's last answer", &mut last);

    let phases = storm.counted(args.waiters).await?;
    println!(
        "waits: database transactions for {} waiters: {} arriving ({:.2} each), {} during {:.0} s \
         of waiting (fallback reads of the key, one per {} s), {} once answered (the original's \
         commit included)",
        args.waiters,
        phases.arriving,
        phases.arriving as f64 / args.waiters as f64,
        phases.waiting,
        phases.waited_for.as_secs_f64(),
        FALLBACK_S,
        phases.answered,
    );

    let before = server.rss_kib()?;
    let during = storm.many(args.many).await?;
    println!(
        "waits: server RSS {} MiB before, {} MiB while {} repeats wait: {:.1} KiB per waiting \
         repeat (its connection included)",
        before / 1024,
        during / 1024,
        args.many,
        (during.saturating_sub(before)) as f64 / args.many as f64,
    );
    Ok(())
}

fn print_latency(what: &str, samples: &mut [f64]) {
    samples.sort_by(f64::total_cmp);
    let at = |q: f64| samples[((samples.len() as f64 * q) as usize).min(samples.len() - 1)];
    println!(
        "waits: {what}: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} samples)",
        at(0.5),
        at(0.99),
        samples[samples.len() - 1],
        samples.len()
    );
}

/// The server's fallback read interval (`IDEMPOTENCY_WAIT_FALLBACK_MS`, default 2000).
const FALLBACK_S: u64 = 2;

/// How long to let `pg_stat_database` catch up: a backend reports its counters when idle,
/// at most every 10 s (PostgreSQL's `PGSTAT_IDLE_INTERVAL`).
const STATS_SETTLE: Duration = Duration::from_millis(11_500);
