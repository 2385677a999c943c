//! PostgreSQL that fails over: a pg_auto_failover monitor and two nodes, a primary and a
//! synchronous standby (`synchronous_standby_names = 'ANY 1 (…)'`, set by the monitor), each
//! node a keeper process (`pg_autoctl run`) that starts and stops its own postmaster. The
//! monitor's timers are short, so a dead primary is replaced within seconds.

use std::{path::PathBuf, time::Duration};

use sqlx::{Connection, PgConnection};
use tokio::time::Instant;

use crate::process::{shell, Process};

/// Below the kernel's range of ephemeral ports (32768 on), so that an outgoing connection
/// never takes a node's port while the node is down.
pub const MONITOR_PORT: u16 = 25450;
pub const NODE_PORTS: [u16; 2] = [25451, 25452];
const NODE_NAMES: [&str; 2] = ["node1", "node2"];

/// The monitor's timers: a node that misses a check for 2 s is unhealthy, and a primary
/// that cannot be reached is demoted after 3 s.
const MONITOR_TIMERS: &str = "
pgautofailover.health_check_period = 1000
pgautofailover.health_check_timeout = 1000
pgautofailover.health_check_retry_delay = 500
pgautofailover.health_check_max_retries = 1
pgautofailover.node_considered_unhealthy_timeout = 2000
pgautofailover.primary_demote_timeout = 3000
";

/// pg_autoctl sizes memory for a machine of its own (a quarter of RAM for shared buffers,
/// 8 GB of WAL kept); three instances share this one. Included after its own file, so
/// these win; a standby copies them with the data directory. A checkpoint is spread over
/// at most 30 s: a demoted primary that cannot rewind is copied again with pg_basebackup,
/// which waits for a spread checkpoint (it once took the 120 s the harness allows).
const OVERRIDES: &str = "
shared_buffers = '128MB'
effective_cache_size = '1GB'
maintenance_work_mem = '64MB'
work_mem = '8MB'
wal_keep_size = '256MB'
max_connections = 300
checkpoint_timeout = '30s'
";

/// Every node and the monitor: on loopback only, trusting local connections, without TLS.
const LOOPBACK_TRUST: [&str; 7] = [
    "--hostname",
    "127.0.0.1",
    "--listen",
    "127.0.0.1",
    "--auth",
    "trust",
    "--no-ssl",
];

/// How to run PostgreSQL's programs here: as the postgres user when we are root (the
/// server refuses to run as root), with the binaries of `bin` first on the path.
pub struct RunAs {
    pub prefix: Vec<String>,
    pub bin: String,
}

pub struct PgCluster {
    dir: PathBuf,
    run_as: RunAs,
    monitor: Process,
    pub nodes: Vec<Process>,
}

impl PgCluster {
    pub fn new(dir: PathBuf, run_as: RunAs) -> Self {
        let keeper = |name: &str| {
            let pgdata = dir.join(name).display().to_string();
            let args = autoctl_args(&dir, &run_as, &["run", "--pgdata", &pgdata]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            Process::new(&format!("pg-{name}"), args[0], &args[1..], vec![], &dir)
        };
        Self {
            monitor: keeper("monitor"),
            nodes: NODE_NAMES.iter().map(|n| keeper(n)).collect(),
            dir,
            run_as,
        }
    }

    /// A `pg_autoctl` command line whose output goes to the cluster's `create.log`.
    fn autoctl(&self, args: &[&str]) -> String {
        let command = autoctl_args(&self.dir, &self.run_as, args).join(" ");
        format!("{command} >>{}/create.log 2>&1", self.dir.display())
    }

    /// Creates the monitor and both nodes, starts them, and waits until the standby is in
    /// sync (about ten seconds).
    pub async fn create(&mut self) -> anyhow::Result<()> {
        std::fs::create_dir_all(&self.dir)?;
        if !self.run_as.prefix.is_empty() {
            shell(&format!("chown postgres {}", self.dir.display())).await?;
        }
        let monitor = self.dir.join("monitor").display().to_string();
        let port = MONITOR_PORT.to_string();
        let create = [
            &["create", "monitor", "--pgdata", &monitor, "--pgport", &port][..],
            &LOOPBACK_TRUST,
        ]
        .concat();
        shell(&self.autoctl(&create)).await?;
        append(&self.dir.join("monitor/postgresql.conf"), MONITOR_TIMERS)?;
        self.monitor.start()?;
        for i in 0..NODE_NAMES.len() {
            self.create_node(i).await?;
        }
        self.wait_in_sync(Duration::from_secs(120)).await?;
        Ok(())
    }

    async fn create_node(&mut self, i: usize) -> anyhow::Result<()> {
        let pgdata = self.dir.join(NODE_NAMES[i]).display().to_string();
        let port = NODE_PORTS[i].to_string();
        let monitor = monitor_url("autoctl_node", "pg_auto_failover");
        // The monitor may still be starting: creation is retried for a while.
        let name = ["--monitor", &monitor, "--name", NODE_NAMES[i]];
        let create = [
            &["create", "postgres", "--pgdata", &pgdata, "--pgport", &port][..],
            &LOOPBACK_TRUST,
            &name,
        ]
        .concat();
        let create = self.autoctl(&create);
        let mut tries = 0;
        while let Err(e) = shell(&create).await {
            tries += 1;
            anyhow::ensure!(tries < 30, "creating {}: {e}", NODE_NAMES[i]);
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        if i == 0 {
            // The standby is a copy of the primary's directory, overrides included.
            let conf = self.dir.join(NODE_NAMES[i]);
            std::fs::write(conf.join("once-overrides.conf"), OVERRIDES)?;
            append(
                &conf.join("postgresql.conf"),
                "\ninclude 'once-overrides.conf'\n",
            )?;
            shell(&format!("chown -R --reference={pgdata} {pgdata}")).await?;
        }
        self.nodes[i].start()
    }

    /// Which node the monitor holds as the primary, by index.
    pub async fn primary(&self) -> anyhow::Result<usize> {
        let mut monitor = connect_monitor().await?;
        let name: String = sqlx::query_scalar(
            "SELECT nodename FROM pgautofailover.node
              WHERE goalstate IN ('primary', 'wait_primary', 'single')
              ORDER BY nodeid LIMIT 1",
        )
        .fetch_one(&mut monitor)
        .await?;
        NODE_NAMES
            .iter()
            .position(|n| *n == name)
            .ok_or_else(|| anyhow::anyhow!("the monitor names an unknown primary {name}"))
    }

    /// Whether one node is a primary and the other a standby in sync: both as the monitor
    /// assigned them, and (the monitor may not have noticed a node that died a moment ago)
    /// the primary itself streaming to a synchronous standby.
    async fn in_sync(&self) -> anyhow::Result<bool> {
        let mut monitor = connect_monitor().await?;
        let (primaries, standbys): (i64, i64) = sqlx::query_as(
            "SELECT count(*) FILTER (WHERE reportedstate = 'primary' AND goalstate = 'primary'),
                    count(*) FILTER (WHERE reportedstate = 'secondary' AND goalstate = 'secondary')
               FROM pgautofailover.node",
        )
        .fetch_one(&mut monitor)
        .await?;
        if (primaries, standbys) != (1, 1) {
            return Ok(false);
        }
        let primary = format!(
            "postgres://postgres@127.0.0.1:{}/postgres",
            NODE_PORTS[self.primary().await?]
        );
        let mut primary = connect(&primary).await?;
        let streaming: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_replication
              WHERE state = 'streaming' AND sync_state IN ('sync', 'quorum')",
        )
        .fetch_one(&mut primary)
        .await?;
        Ok(streaming == 1)
    }

    /// Waits until a primary and a synchronous standby are back; returns how long it took.
    /// A keeper that exited meanwhile is started again.
    pub async fn wait_in_sync(&mut self, within: Duration) -> anyhow::Result<Duration> {
        let started = Instant::now();
        while started.elapsed() < within {
            if self.in_sync().await.unwrap_or(false) {
                return Ok(started.elapsed());
            }
            self.restart_exited()?;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        anyhow::bail!("PostgreSQL had no primary with a standby in sync within {within:?}")
    }

    /// Every keeper that has exited is started again.
    pub fn restart_exited(&mut self) -> anyhow::Result<()> {
        for p in std::iter::once(&mut self.monitor).chain(self.nodes.iter_mut()) {
            if p.restart_if_exited()? {
                println!("chaos: {} had exited; started again", p.name);
            }
        }
        Ok(())
    }

    /// Stops the nodes and the monitor (each keeper stops its postmaster on SIGTERM).
    pub async fn stop(&mut self) {
        for p in self
            .nodes
            .iter_mut()
            .chain(std::iter::once(&mut self.monitor))
        {
            p.stop(Duration::from_secs(20)).await;
        }
    }
}

/// `pg_autoctl ARGS`, as the user PostgreSQL runs as, keeping its files under `dir`.
fn autoctl_args(dir: &std::path::Path, run_as: &RunAs, args: &[&str]) -> Vec<String> {
    let d = dir.display();
    let mut all = run_as.prefix.clone();
    all.extend([
        "env".to_owned(),
        format!("PATH={}:/usr/local/bin:/usr/bin:/bin", run_as.bin),
        format!("XDG_CONFIG_HOME={d}/xdg/config"),
        format!("XDG_DATA_HOME={d}/xdg/data"),
        format!("XDG_RUNTIME_DIR={d}/xdg/run"),
        format!("HOME={d}"),
        "pg_autoctl".to_owned(),
    ]);
    all.extend(args.iter().map(|a| a.to_string()));
    all
}

fn append(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(path)?;
    file.write_all(text.as_bytes())?;
    Ok(())
}

pub fn monitor_url(user: &str, db: &str) -> String {
    format!("postgres://{user}@127.0.0.1:{MONITOR_PORT}/{db}")
}

async fn connect_monitor() -> anyhow::Result<PgConnection> {
    connect(&monitor_url("postgres", "pg_auto_failover")).await
}

async fn connect(url: &str) -> anyhow::Result<PgConnection> {
    Ok(tokio::time::timeout(Duration::from_secs(2), PgConnection::connect(url)).await??)
}
