//! The faults, at random moments while the shoppers shop: a server or a worker killed with
//! SIGKILL and started again, one paused (SIGSTOP) past its lease and resumed; on single
//! data nodes, NATS killed and restarted and PostgreSQL crashed (immediate stop) and
//! restarted; on the failover deployment (`--ha`), the PostgreSQL primary or standby killed
//! whole, a NATS server killed (the stream's leader or a follower), and HAProxy cutting every
//! connection to the primary, one data node at a time.

use std::{collections::BTreeMap, time::Duration};

use rand::{seq::SliceRandom, Rng};
use tokio::time::Instant;

use crate::{
    deployment::{Deployment, LEASE},
    ha::Failover,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Fault {
    Kill,
    Pause,
    NatsRestart,
    PostgresCrash,
    PrimaryKill,
    StandbyKill,
    NatsLeaderKill,
    NatsFollowerKill,
    SessionsCut,
}

impl Fault {
    /// The faults picked at random, with their weights: on a failover deployment the
    /// application-side ones only (its data-node faults come in [`DATA_ROTATION`]).
    fn weighted(ha: bool) -> &'static [(Fault, u32)] {
        if ha {
            &[(Self::Kill, 30), (Self::Pause, 10), (Self::SessionsCut, 10)]
        } else {
            &[
                (Self::Kill, 50),
                (Self::Pause, 30),
                (Self::NatsRestart, 12),
                (Self::PostgresCrash, 8),
            ]
        }
    }

    fn pick(ha: bool, rng: &mut impl Rng) -> Self {
        let kinds = Self::weighted(ha);
        let total: u32 = kinds.iter().map(|(_, w)| w).sum();
        let mut at = rng.random_range(0..total);
        for (fault, weight) in kinds {
            if at < *weight {
                return *fault;
            }
            at -= weight;
        }
        unreachable!("the weights add up to the total")
    }

    pub fn describe(self) -> &'static str {
        match self {
            Self::Kill => "a server or worker SIGKILLed, then started again",
            Self::Pause => "a server or worker paused (SIGSTOP) past its lease, then resumed",
            Self::NatsRestart => "NATS killed, then started again",
            Self::PostgresCrash => "PostgreSQL crashed (immediate stop), then started again",
            Self::PrimaryKill => "the PostgreSQL primary killed whole (failover), then rejoined",
            Self::StandbyKill => "the synchronous standby killed whole, then rejoined",
            Self::NatsLeaderKill => "the NATS server leading the stream killed, then rejoined",
            Self::NatsFollowerKill => "a NATS server following the stream killed, then rejoined",
            Self::SessionsCut => "HAProxy cut every connection to the primary",
        }
    }
}

/// What the faults did: how many of each, and every data node's failover.
#[derive(Default)]
pub struct Done {
    pub counts: BTreeMap<Fault, u32>,
    pub failovers: Vec<Failover>,
}

/// The data-node faults of a failover deployment, in turn with application faults: the
/// primary first and the stream leader next, so that even a short run has both, and per
/// round two primary failovers, two NATS kills and one standby.
const DATA_ROTATION: [Fault; 5] = [
    Fault::PrimaryKill,
    Fault::NatsLeaderKill,
    Fault::StandbyKill,
    Fault::PrimaryKill,
    Fault::NatsFollowerKill,
];

/// Which fault comes next.
struct Schedule {
    ha: bool,
    /// Single nodes: every kind once, in a random order, before any kind at random.
    first: Vec<Fault>,
    turn: usize,
}

impl Schedule {
    fn new(ha: bool) -> Self {
        let mut first: Vec<Fault> = Fault::weighted(ha).iter().map(|(f, _)| *f).collect();
        first.shuffle(&mut rand::rng());
        Self { ha, first, turn: 0 }
    }

    fn next(&mut self) -> Fault {
        self.turn += 1;
        if self.ha && self.turn % 2 == 1 {
            return DATA_ROTATION[(self.turn / 2) % DATA_ROTATION.len()];
        }
        let random = || Fault::pick(self.ha, &mut rand::rng());
        if self.ha {
            random()
        } else {
            self.first.pop().unwrap_or_else(random)
        }
    }
}

/// Injects faults every 1 to 3 seconds until `until`; a data-node fault returns only once
/// its replacement is in sync.
pub async fn run(deployment: &mut Deployment, until: Instant) -> anyhow::Result<Done> {
    let mut schedule = Schedule::new(deployment.settings.ha);
    let mut done = Done::default();
    // Let the shoppers get going before the first fault.
    tokio::time::sleep(Duration::from_secs(2)).await;
    while Instant::now() < until {
        let fault = schedule.next();
        if let Some(failover) = inject(deployment, fault).await? {
            done.failovers.push(failover);
        }
        *done.counts.entry(fault).or_insert(0) += 1;
        let gap = rand::rng().random_range(1000..3000);
        tokio::time::sleep(Duration::from_millis(gap)).await;
    }
    Ok(done)
}

async fn inject(deployment: &mut Deployment, fault: Fault) -> anyhow::Result<Option<Failover>> {
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
        data => return inject_ha(deployment, data).await,
    }
    Ok(None)
}

/// A fault of the failover deployment's data tier; each returns once the replacement is
/// in sync, so that the next finds a whole tier.
async fn inject_ha(deployment: &mut Deployment, fault: Fault) -> anyhow::Result<Option<Failover>> {
    let ha = deployment
        .ha()
        .ok_or_else(|| anyhow::anyhow!("{fault:?} needs the failover deployment (--ha)"))?;
    Ok(Some(match fault {
        Fault::PrimaryKill => ha.kill_primary().await?,
        Fault::StandbyKill => ha.kill_standby().await?,
        Fault::NatsLeaderKill => ha.kill_nats_node(true).await?,
        Fault::NatsFollowerKill => ha.kill_nats_node(false).await?,
        Fault::SessionsCut => {
            ha.cut_postgres_sessions().await?;
            return Ok(None);
        }
        other => anyhow::bail!("{other:?} is not a data-tier fault"),
    }))
}
