//! The data tier on several machines, as it fails in production: PostgreSQL as a
//! pg_auto_failover primary and synchronous standby behind HAProxy, NATS as a three-node
//! JetStream cluster. Its faults take down one data node at a time and wait until the
//! replacement is in sync before the next, and time what the shop's clients lived through.

pub mod haproxy;
pub mod nats;
pub mod postgres;

use std::{path::PathBuf, time::Duration};

use rand::Rng;
use sqlx::{Connection, PgConnection};
use tokio::time::Instant;

use crate::process::Process;
use postgres::{PgCluster, RunAs};

/// How long a failover or a resync may take before the run is called broken.
const WITHIN: Duration = Duration::from_secs(120);

/// One data node taken down, and what it took to get back.
#[derive(Clone, Debug)]
pub struct Failover {
    pub what: &'static str,
    /// From the kill to the first write that went through again.
    pub unavailable: Duration,
    /// From the node's restart to a full set of replicas in sync.
    pub resync: Duration,
}

pub struct Ha {
    dir: PathBuf,
    pub pg: PgCluster,
    pub haproxy: Process,
    pub nats: Vec<Process>,
    js: Option<async_nats::jetstream::Context>,
}

impl Ha {
    pub fn new(dir: PathBuf, run_as: RunAs, server_ports: &[u16]) -> anyhow::Result<Self> {
        Ok(Self {
            pg: PgCluster::new(dir.join("pg"), run_as),
            haproxy: haproxy::prepare(&dir.join("haproxy"), server_ports)?,
            nats: nats::nodes(&dir.join("nats")),
            js: None,
            dir,
        })
    }

    /// The shop's database, through HAProxy.
    pub fn postgres_url() -> String {
        format!("postgres://postgres@127.0.0.1:{}", haproxy::POSTGRES_PORT)
    }

    pub async fn start(&mut self) -> anyhow::Result<()> {
        for node in &mut self.nats {
            node.start()?;
        }
        self.pg.create().await?;
        self.haproxy.start()?;
        let started = Instant::now();
        while create_probe_table().await.is_err() {
            anyhow::ensure!(started.elapsed() < WITHIN, "no primary through HAProxy");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        self.js = Some(nats::connect().await?);
        Ok(())
    }

    fn js(&self) -> anyhow::Result<&async_nats::jetstream::Context> {
        self.js
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("NATS is not connected"))
    }

    /// The whole primary node (keeper, postmaster, backends) SIGKILLed; started again once
    /// the standby has taken over, then rejoins as the new standby.
    pub async fn kill_primary(&mut self) -> anyhow::Result<Failover> {
        let node = self.pg.primary().await?;
        self.kill_pg_node(node, "PostgreSQL primary").await
    }

    /// The synchronous standby SIGKILLed: commits wait until the monitor lets the primary
    /// go on alone.
    pub async fn kill_standby(&mut self) -> anyhow::Result<Failover> {
        let node = 1 - self.pg.primary().await?;
        self.kill_pg_node(node, "PostgreSQL standby").await
    }

    /// Kills PostgreSQL node `node` whole, times until a write goes through again, starts
    /// it again and times until it is in sync.
    async fn kill_pg_node(&mut self, node: usize, what: &'static str) -> anyhow::Result<Failover> {
        println!("chaos: kill -9 the {what} ({})", self.pg.nodes[node].name);
        self.pg.nodes[node].kill_tree().await;
        let unavailable = wait_writable(WITHIN).await?;
        pause_a_little().await;
        self.pg.nodes[node].start()?;
        let resync = self.pg.wait_in_sync(WITHIN).await?;
        Ok(Failover {
            what,
            unavailable,
            resync,
        })
    }

    /// A NATS server SIGKILLed (the stream's leader when `leader`); started again after
    /// the stream takes publishes again.
    pub async fn kill_nats_node(&mut self, leader: bool) -> anyhow::Result<Failover> {
        let js = self.js()?.clone();
        let current = nats::stream_leader(&js).await;
        let node = match (leader, current) {
            (true, Some(l)) => l,
            (_, Some(l)) => (l + rand::rng().random_range(1..3)) % 3,
            (_, None) => rand::rng().random_range(0..3),
        };
        let what = if Some(node) == current {
            "NATS stream leader"
        } else {
            "NATS follower"
        };
        println!("chaos: kill -9 {} ({what})", self.nats[node].name);
        self.nats[node].kill().await;
        let unavailable = nats::wait_writable(&js, WITHIN).await?;
        pause_a_little().await;
        self.nats[node].start()?;
        let resync = nats::wait_in_sync(&js, WITHIN).await?;
        Ok(Failover {
            what,
            unavailable,
            resync,
        })
    }

    /// HAProxy cuts every connection to the primary; nothing else fails.
    pub async fn cut_postgres_sessions(&mut self) -> anyhow::Result<()> {
        let node = self.pg.primary().await?;
        println!("chaos: HAProxy cuts every connection to the primary");
        haproxy::cut_postgres_sessions(&self.dir.join("haproxy"), node).await?;
        Ok(())
    }

    /// After the faults: whatever has exited runs again, and every replica is in sync.
    pub async fn heal(&mut self) -> anyhow::Result<()> {
        for p in self
            .nats
            .iter_mut()
            .chain(std::iter::once(&mut self.haproxy))
        {
            if p.restart_if_exited()? {
                println!("chaos: {} had exited; started again", p.name);
            }
        }
        self.pg.restart_exited()?;
        self.pg.wait_in_sync(WITHIN).await?;
        nats::wait_in_sync(self.js()?, WITHIN).await?;
        Ok(())
    }

    pub async fn stop(&mut self) {
        let grace = Duration::from_secs(10);
        self.haproxy.stop(grace).await;
        for node in &mut self.nats {
            node.stop(grace).await;
        }
        self.pg.stop().await;
    }
}

/// The killed node stays down a little longer than the takeover took.
async fn pause_a_little() {
    let ms = rand::rng().random_range(200..2000);
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

/// Asks `ready` every `step` until it says yes; returns how long that took, or fails with
/// `what` was not reached within `within`.
pub async fn poll_until<F, Fut>(
    within: Duration,
    step: Duration,
    what: &str,
    mut ready: F,
) -> anyhow::Result<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while started.elapsed() < within {
        if ready().await {
            return Ok(started.elapsed());
        }
        tokio::time::sleep(step).await;
    }
    anyhow::bail!("{what} within {within:?}")
}

/// Inserts a row through HAProxy until one commits; returns how long that took. A real
/// write: it waits for the synchronous standby as the shop's commits do. Each try gets a
/// fresh connection, as a client whose connection was cut would make, and up to 10 s to
/// commit (a commit waiting for a standby is slow, not failed).
pub async fn wait_writable(within: Duration) -> anyhow::Result<Duration> {
    let url = format!("{}/postgres", Ha::postgres_url());
    let insert = || async {
        let write = async {
            let mut conn = PgConnection::connect(&url).await?;
            sqlx::query("INSERT INTO chaos_probe DEFAULT VALUES")
                .execute(&mut conn)
                .await?;
            conn.close().await
        };
        matches!(
            tokio::time::timeout(Duration::from_secs(10), write).await,
            Ok(Ok(()))
        )
    };
    let step = Duration::from_millis(50);
    poll_until(within, step, "no write through HAProxy committed", insert).await
}

/// The probe's table, in the `postgres` database (never the shop's).
async fn create_probe_table() -> anyhow::Result<()> {
    let mut conn = PgConnection::connect(&format!("{}/postgres", Ha::postgres_url())).await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS chaos_probe (at timestamptz NOT NULL DEFAULT now())")
        .execute(&mut conn)
        .await?;
    Ok(conn.close().await?)
}
