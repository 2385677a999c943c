//! `chaos [SECONDS] [--shoppers N] [--calm C] [--prefer-wait S] [--prove-checker] [--ha]`:
//! runs Once as it is deployed,
//! breaks it for SECONDS while shoppers retry, lets it settle, and checks that every promise
//! of "exactly once" held. With `--ha` the data tier is the failover deployment (PostgreSQL
//! primary and synchronous standby behind HAProxy, a three-node NATS cluster) and three
//! server instances sit behind HAProxy; its faults are failovers, and the run reports how
//! long each took and the longest time each shopper went without an answer. With
//! `--prove-checker`, it then plants faults in copies of the finished run's database and
//! shows that the checker reports each. Exits non-zero when anything is lost, duplicated or
//! unexpected. Started by `scripts/chaos`, which sets up the run's own PostgreSQL and the
//! binaries (docs/design.md, "Proving it under faults"; docs/scale.md). The shoppers' repeats
//! ask the server to wait up to S seconds (3 by default) for their key's running request
//! (`Prefer: wait`); `--prefer-wait 0` makes them poll after 409s instead, as before. The
//! same shoppers first shop for C seconds (10 by default) without faults: the run prints
//! intents per second in both stretches.

mod check;
mod deployment;
mod faults;
mod ha;
mod plant;
mod process;
mod settle;
mod shoppers;

use std::{collections::BTreeMap, io::Write, time::Duration};

use sqlx::PgPool;
use tokio::time::Instant;

use deployment::{Deployment, Settings};

struct Args {
    seconds: u64,
    shoppers: usize,
    prove_checker: bool,
    ha: bool,
    prefer_wait: u32,
    calm: u64,
}

fn args() -> anyhow::Result<Args> {
    let mut args = Args {
        seconds: 60,
        shoppers: 16,
        prove_checker: false,
        ha: false,
        prefer_wait: 3,
        calm: 10,
    };
    let mut given = std::env::args().skip(1);
    while let Some(arg) = given.next() {
        match arg.as_str() {
            "--prove-checker" => args.prove_checker = true,
            "--ha" => args.ha = true,
            "--shoppers" => args.shoppers = given.next().unwrap_or_default().parse()?,
            "--prefer-wait" => args.prefer_wait = given.next().unwrap_or_default().parse()?,
            "--calm" => args.calm = given.next().unwrap_or_default().parse()?,
            seconds => args.seconds = seconds.parse()?,
        }
    }
    Ok(args)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = args()?;
    let settings = Settings {
        ha: args.ha,
        ..Settings::from_env()?
    };
    deployment::ports_free(&settings)?;
    let mut deployment = Deployment::new(settings)?;
    // Whatever happens — an error, Ctrl-C, a SIGTERM from a CI timeout — every process the
    // harness started is stopped (resumed first if paused) before it exits.
    let outcome = tokio::select! {
        outcome = async {
            deployment.start().await?;
            run(&mut deployment, &args).await
        } => outcome,
        _ = interrupted() => Err(anyhow::anyhow!("interrupted")),
    };
    deployment.stop().await;
    let clean = outcome?;
    anyhow::ensure!(clean, "the run broke a promise: see the table above");
    Ok(())
}

async fn interrupted() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! { _ = int.recv() => {}, _ = term.recv() => {} }
}

async fn run(deployment: &mut Deployment, args: &Args) -> anyhow::Result<bool> {
    let shop = PgPool::connect(&deployment.settings.shop_db()).await?;
    let provider = PgPool::connect(&deployment.settings.provider_db()).await?;
    // Enough stock that every order but the lamp's is placed, at any rate the shoppers
    // reach (a sold-out shop answers 422 at once, and its intents would count for nothing);
    // the scarce lamp still sells out, so refusals and backorders happen too.
    sqlx::query("UPDATE products SET stock = 1000000 WHERE sku <> 'LAMP-008'")
        .execute(&shop)
        .await?;
    let stock_before: BTreeMap<String, i64> =
        sqlx::query_as::<_, (String, i64)>("SELECT sku, stock::bigint FROM products")
            .fetch_all(&shop)
            .await?
            .into_iter()
            .collect();

    println!(
        "chaos: {} shoppers (Prefer: wait={}) for {} s against {} servers and 4 workers{}, \
         with faults",
        args.shoppers,
        args.prefer_wait,
        args.seconds,
        deployment.servers.len(),
        if args.ha {
            " behind HAProxy, PostgreSQL with a standby, 3 NATS servers"
        } else {
            ""
        }
    );
    let entries = deployment.settings.entry_urls();
    let clients = shoppers::Clients {
        count: args.shoppers,
        prefer_wait: args.prefer_wait,
    };
    // The calm stretch: the rate the deployment sustains without faults, to compare with.
    let calm_tally = shoppers::Tally::default();
    let calm_deadlines = shoppers::Deadlines::after(Duration::from_secs(args.calm));
    let mut calm = shoppers::run(clients, &entries, calm_deadlines, &calm_tally).await;
    let last_intent = Instant::now() + Duration::from_secs(args.seconds);
    let deadlines = shoppers::Deadlines {
        last_intent,
        give_up: last_intent + Duration::from_secs(60),
    };
    let tally = shoppers::Tally::default();
    let (mut intents, faults) = {
        let shopping = shoppers::run(clients, &entries, deadlines, &tally);
        let breaking = async {
            let faults = faults::run(deployment, last_intent).await;
            // Whatever the faults left down or paused runs again for the intents in hand.
            deployment.heal().await.map(|()| faults)
        };
        tokio::join!(shopping, breaking)
    };
    let faults = faults??;
    let rates = Rates {
        calm: (answered(&calm), args.calm),
        faults: (answered(&intents), args.seconds),
    };
    intents.append(&mut calm);
    deployment.calm_provider().await?;
    settle::settle(&shop, &provider, Duration::from_secs(120)).await?;

    let answers = |t: &shoppers::Tally| t.statuses().values().sum::<u64>();
    let evidence = check::Evidence {
        shop: &shop,
        provider: &provider,
        intents: &intents,
        stock_before: &stock_before,
        answers: answers(&tally) + answers(&calm_tally),
        bad_5xx: tally.bad_5xx() + calm_tally.bad_5xx(),
    };
    let rows = check::check(&evidence).await?;
    summary(deployment, &intents, &faults, &tally)?;
    rates.print();
    check::print(&rows);
    let clean = rows.iter().all(check::Row::clean);

    if args.prove_checker {
        // Nothing may write while the database is copied; the data tier stays up.
        deployment.stop_app().await;
        shop.close().await;
        let pg_url = deployment.settings.shop_pg_url();
        let seen = plant::prove(&pg_url, "once_chaos", &evidence, &rows).await?;
        anyhow::ensure!(seen, "the checker missed a planted fault");
    }
    Ok(clean)
}

/// The intents whose order got a definitive answer (not given up, not cut off by the end).
fn answered(intents: &[shoppers::Intent]) -> usize {
    intents.iter().filter(|i| i.order_status != 0).count()
}

/// Intents begun and answered in each stretch, and its length in seconds.
struct Rates {
    calm: (usize, u64),
    faults: (usize, u64),
}

impl Rates {
    fn print(&self) {
        let rate = |(n, secs): (usize, u64)| n as f64 / secs.max(1) as f64;
        println!(
            "intents answered per second: {:.1} without faults ({} in {} s), {:.1} with faults \
             ({} in {} s)\n",
            rate(self.calm),
            self.calm.0,
            self.calm.1,
            rate(self.faults),
            self.faults.0,
            self.faults.1,
        );
    }
}

fn summary(
    deployment: &Deployment,
    intents: &[shoppers::Intent],
    faults: &faults::Done,
    tally: &shoppers::Tally,
) -> anyhow::Result<()> {
    let mut file = std::fs::File::create(deployment.settings.dir.join("intents.jsonl"))?;
    for intent in intents {
        writeln!(file, "{}", serde_json::to_string(intent)?)?;
    }
    let placed = intents.iter().filter(|i| i.order_status == 201).count();
    let paid = intents.iter().filter(|i| i.payment_status == 201).count();
    let unanswered = intents.len() - answered(intents);
    let payment_unanswered = intents
        .iter()
        .filter(|i| i.payment_key.is_some() && i.payment_status == 0)
        .count();
    println!(
        "\nintents (both stretches): {}, orders placed: {placed}, payments that succeeded: \
         {paid}; given up or cut off by the end: {unanswered} orders, {payment_unanswered} payments",
        intents.len()
    );
    for (fault, n) in &faults.counts {
        println!("faults: {n} × {}", fault.describe());
    }
    let answers: Vec<String> = tally
        .statuses()
        .iter()
        .map(|(s, n)| format!("{s}: {n}"))
        .collect();
    println!(
        "answers with faults: {}; no answer (reset, refused, timed out): {}\n",
        answers.join(", "),
        tally.no_answer.load(std::sync::atomic::Ordering::Relaxed)
    );
    if deployment.settings.ha {
        print_failovers(&faults.failovers);
        print_unavailability(tally);
    }
    Ok(())
}

/// Per kind of data node killed: how many times, and how long until writes went through
/// again and until the replicas were whole again (shortest, median, longest).
fn print_failovers(failovers: &[ha::Failover]) {
    let mut kinds: Vec<&str> = failovers.iter().map(|f| f.what).collect();
    kinds.sort();
    kinds.dedup();
    println!(
        "{:<22} {:>5} {:>32} {:>32}",
        "node killed",
        "times",
        "writes again after (min/med/max)",
        "in sync again after (min/med/max)"
    );
    for kind in kinds {
        let of_kind: Vec<&ha::Failover> = failovers.iter().filter(|f| f.what == kind).collect();
        let spread = |pick: fn(&ha::Failover) -> Duration| {
            let mut secs: Vec<f64> = of_kind.iter().map(|f| pick(f).as_secs_f64()).collect();
            secs.sort_by(f64::total_cmp);
            format!(
                "{:.1} / {:.1} / {:.1} s",
                secs[0],
                secs[secs.len() / 2],
                secs[secs.len() - 1]
            )
        };
        println!(
            "{kind:<22} {:>5} {:>32} {:>32}",
            of_kind.len(),
            spread(|f| f.unavailable),
            spread(|f| f.resync)
        );
    }
}

/// The longest stretch each shopper went without a useful answer, longest first.
fn print_unavailability(tally: &shoppers::Tally) {
    let mut longest = tally.longest_unavailable.lock().unwrap().clone();
    longest.sort_by(|a, b| b.cmp(a));
    let secs: Vec<String> = longest
        .iter()
        .map(|d| format!("{:.1}", d.as_secs_f64()))
        .collect();
    println!(
        "longest time without an answer, per shopper (s): {}\n",
        secs.join(" ")
    );
}
