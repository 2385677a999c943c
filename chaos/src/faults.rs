//! The faults, at random moments while the shoppers shop: a server or a worker killed with
//! SIGKILL and started again, one paused (SIGSTOP) past its lease and resumed, NATS killed
//! and restarted, PostgreSQL crashed (immediate stop) and restarted.

use std::{collections::BTreeMap, time::Duration};

use rand::{seq::SliceRandom, Rng};
use tokio::time::Instant;

use crate::deployment::{Deployment, LEASE};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    Kill,
    Pause,
    NatsRestart,
    PostgresCrash,
}

impl Fault {
    const ALL: [Fault; 4] = [
        Self::Kill,
        Self::Pause,
        Self::NatsRestart,
        Self::PostgresCrash,
    ];

    fn pick(rng: &mut impl Rng) -> Self {
        match rng.random_range(0..100) {
            0..50 => Self::Kill,
            50..80 => Self::Pause,
            80..92 => Self::NatsRestart,
            _ => Self::PostgresCrash,
        }
    }

    pub fn describe(self) -> &'static str {
        match self {
            Self::Kill => "a server or worker SIGKILLed, then started again",
            Self::Pause => "a server or worker paused (SIGSTOP) past its lease, then resumed",
            Self::NatsRestart => "NATS killed, then started again",
            Self::PostgresCrash => "PostgreSQL crashed (immediate stop), then started again",
        }
    }
}

/// Injects faults every 1 to 3 seconds until `until`; returns how many of each.
pub async fn run(
    deployment: &mut Deployment,
    until: Instant,
) -> anyhow::Result<BTreeMap<Fault, u32>> {
    let mut done = BTreeMap::new();
    // Every kind once, in a random order, then any kind at random.
    let mut first = Fault::ALL.to_vec();
    first.shuffle(&mut rand::rng());
    // Let the shoppers get going before the first fault.
    tokio::time::sleep(Duration::from_secs(2)).await;
    while Instant::now() < until {
        let fault = first.pop().unwrap_or_else(|| Fault::pick(&mut rand::rng()));
        inject(deployment, fault).await?;
        *done.entry(fault).or_insert(0) += 1;
        let gap = rand::rng().random_range(1000..3000);
        tokio::time::sleep(Duration::from_millis(gap)).await;
    }
    Ok(done)
}

async fn inject(deployment: &mut Deployment, fault: Fault) -> anyhow::Result<()> {
    let (down, victim) = {
        let mut rng = rand::rng();
        let down = Duration::from_millis(rng.random_range(300..1500));
        let victim = rng.random_range(0..deployment.killable().len());
        (down, victim)
    };
    match fault {
        Fault::Kill => {
            let mut procs = deployment.killable();
            let target = &mut procs[victim];
            println!("chaos: kill -9 {}", target.name);
            target.kill().await;
            tokio::time::sleep(down).await;
            target.start()?;
        }
        Fault::Pause => {
            let mut procs = deployment.killable();
            let target = &mut procs[victim];
            println!("chaos: pause {}", target.name);
            target.pause();
            tokio::time::sleep(LEASE + down).await;
            target.resume();
        }
        Fault::NatsRestart => {
            println!("chaos: restart NATS");
            deployment.crash_nats(down).await?;
        }
        Fault::PostgresCrash => {
            println!("chaos: crash PostgreSQL");
            deployment.crash_postgres(down).await?;
        }
    }
    Ok(())
}
