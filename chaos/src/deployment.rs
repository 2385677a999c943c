//! Once as it is deployed apart: server instances on one database, the relay, the
//! fulfillment consumer, the mailer and the reconciler each in a process of its own, the
//! sandbox provider with its chaos knobs on, and NATS JetStream as the bus. The data tier is
//! either one PostgreSQL and one NATS server, crashed and restarted on the same disk, or
//! (`--ha`) the failover deployment of [`crate::ha`], reached through HAProxy. All of it
//! runs on the harness's own ports and data directories, never the machine's shared ones.
//! The provider's database is always the single PostgreSQL: it stands for a third party,
//! outside our failover.

use std::{path::PathBuf, time::Duration};

use crate::{
    ha::{self, postgres::RunAs, Ha},
    process::{shell, Process},
};

/// Where things are, as `scripts/chaos` sets them up.
pub struct Settings {
    pub dir: PathBuf,
    /// The harness's PostgreSQL, without a database name.
    pub pg_url: String,
    pub pg_start: String,
    pub pg_crash: String,
    pub nats_port: u16,
    pub server_bin: String,
    pub provider_bin: String,
    /// The failover deployment (`--ha`) instead of single data nodes.
    pub ha: bool,
    /// PostgreSQL's programs, and the command prefix that runs them as its user.
    pub pg_bin: String,
    pub run_as: Vec<String>,
}

impl Settings {
    pub fn from_env() -> anyhow::Result<Self> {
        let var = |name: &str| {
            std::env::var(name)
                .map_err(|_| anyhow::anyhow!("{name} is not set (run scripts/chaos)"))
        };
        Ok(Self {
            dir: var("CHAOS_DIR")?.into(),
            pg_url: var("CHAOS_PG_URL")?,
            pg_start: var("CHAOS_PG_START")?,
            pg_crash: var("CHAOS_PG_CRASH")?,
            nats_port: var("CHAOS_NATS_PORT")?.parse()?,
            server_bin: var("CHAOS_SERVER_BIN")?,
            provider_bin: var("CHAOS_PROVIDER_BIN")?,
            ha: false,
            pg_bin: var("CHAOS_PG_BIN")?,
            run_as: var("CHAOS_RUN_AS")?
                .split_whitespace()
                .map(str::to_owned)
                .collect(),
        })
    }

    /// The PostgreSQL holding the shop's database, without a database name.
    pub fn shop_pg_url(&self) -> String {
        if self.ha {
            Ha::postgres_url()
        } else {
            self.pg_url.clone()
        }
    }

    pub fn shop_db(&self) -> String {
        format!("{}/once_chaos", self.shop_pg_url())
    }

    fn nats_url(&self) -> String {
        if self.ha {
            ha::nats::urls()
        } else {
            format!("nats://127.0.0.1:{}", self.nats_port)
        }
    }

    /// The server instances' ports: three behind HAProxy, else two.
    pub fn server_ports(&self) -> &'static [u16] {
        if self.ha {
            &SERVER_PORTS
        } else {
            &SERVER_PORTS[..2]
        }
    }

    /// Where shoppers and the provider's webhooks go: HAProxy, or any instance.
    pub fn entry_urls(&self) -> Vec<String> {
        let ports = if self.ha {
            &[ha::haproxy::HTTP_PORT][..]
        } else {
            self.server_ports()
        };
        ports
            .iter()
            .map(|p| format!("http://127.0.0.1:{p}"))
            .collect()
    }

    pub fn provider_db(&self) -> String {
        format!("{}/once_chaos_provider", self.pg_url)
    }
}

const SERVER_PORTS: [u16; 3] = [3961, 3962, 3963];
const PROVIDER_PORT: u16 = 3969;
const WEBHOOK_SECRET: &str = "chaos-run-webhook-secret";
/// The merchant's key the provider takes calls with.
const PROVIDER_API_KEY: &str = "chaos-run-provider-api-key";
/// Every instance keys fingerprints alike, or a retry on another one would look reused.
const FINGERPRINT_SECRET: &str = "chaos-run-fingerprint-secret";
/// Short, so that a paused process loses its lease within the pause.
pub const LEASE: Duration = Duration::from_millis(1500);

pub fn provider_url() -> String {
    format!("http://127.0.0.1:{PROVIDER_PORT}")
}

pub struct Deployment {
    pub settings: Settings,
    pub servers: Vec<Process>,
    pub workers: Vec<Process>,
    pub provider: Process,
    pub data: Data,
}

/// The data tier: single nodes, or the failover deployment.
pub enum Data {
    Single { nats: Box<Process> },
    Ha(Box<Ha>),
}

fn env(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

impl Deployment {
    pub fn new(settings: Settings) -> anyhow::Result<Self> {
        let dir = settings.dir.clone();
        let nats_url = settings.nats_url();
        let replicas = if settings.ha { "3" } else { "1" };
        let shop = |extra: &[(&str, String)]| {
            let mut pairs = vec![
                ("DATABASE_URL", settings.shop_db()),
                ("RUN_WORKERS", "none".into()),
                ("NATS_URL", nats_url.clone()),
                ("NATS_REPLICAS", replicas.into()),
                ("PROVIDER_URL", provider_url()),
                ("PROVIDER_WEBHOOK_SECRETS", WEBHOOK_SECRET.into()),
                ("PROVIDER_API_KEY", PROVIDER_API_KEY.into()),
                ("IDEMPOTENCY_FINGERPRINT_SECRETS", FINGERPRINT_SECRET.into()),
                ("PROVIDER_TIMEOUT_MS", "2000".into()),
                // Past the sandbox's slow charge (made within 4 s of its call, or never).
                ("PAYMENT_SETTLE_GRACE_MS", "10000".into()),
                ("IDEMPOTENCY_LEASE_MS", LEASE.as_millis().to_string()),
                ("EVENTS_POLL_MS", "200".into()),
                ("BUS_ACK_WAIT_MS", "3000".into()),
                ("CONSUMER_RETRY_BASE_MS", "100".into()),
                ("CONSUMER_RETRY_CAP_MS", "2000".into()),
                ("RECONCILE_EVERY_SECS", "3".into()),
                ("OPERATOR_PASSWORD", "chaos-run-operator-password".into()),
                // Every shopper of the harness comes from this machine's one address.
                ("RATE_LIMIT_PER_CLIENT", "0".into()),
                ("NEW_SESSIONS_PER_CLIENT_PER_HOUR", "0".into()),
                ("QUOTA_PENDING_ORDERS_PER_CLIENT", "0".into()),
                ("QUOTA_ORDERS_PER_CLIENT_PER_HOUR", "0".into()),
                ("MAX_CONNECTIONS_PER_CLIENT", "10000".into()),
                ("RUST_LOG", "warn".into()),
            ];
            pairs.extend_from_slice(extra);
            env(&pairs)
        };
        let servers = settings
            .server_ports()
            .iter()
            .enumerate()
            .map(|(i, port)| {
                let addr = ("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"));
                let name = format!("server-{}", ["a", "b", "c"][i]);
                Process::new(&name, &settings.server_bin, &[], shop(&[addr]), &dir)
            })
            .collect();
        let workers = ["relay", "fulfillment", "mailer", "reconciler"]
            .iter()
            .map(|w| Process::new(w, &settings.server_bin, &["worker", w], shop(&[]), &dir))
            .collect();
        let provider = Process::new(
            "provider",
            &settings.provider_bin,
            &[],
            env(&[
                ("PROVIDER_DATABASE_URL", settings.provider_db()),
                ("PROVIDER_ADDR", format!("127.0.0.1:{PROVIDER_PORT}")),
                (
                    "PROVIDER_WEBHOOK_URL",
                    format!("{}/webhooks/provider", settings.entry_urls()[0]),
                ),
                ("PROVIDER_WEBHOOK_SECRET", WEBHOOK_SECRET.into()),
                ("PROVIDER_API_KEY", PROVIDER_API_KEY.into()),
                ("PROVIDER_CHAOS_DUPLICATES", "1".into()),
                ("PROVIDER_CHAOS_SHUFFLE", "true".into()),
                ("PROVIDER_CHAOS_DELAY_MS", "300".into()),
                ("PROVIDER_CHAOS_DROP_RATE", "0.2".into()),
                ("RUST_LOG", "warn".into()),
            ]),
            &dir,
        );
        let data = if settings.ha {
            let run_as = RunAs {
                prefix: settings.run_as.clone(),
                bin: settings.pg_bin.clone(),
            };
            Data::Ha(Box::new(Ha::new(
                dir.join("ha"),
                run_as,
                settings.server_ports(),
            )?))
        } else {
            let store = dir.join("nats").display().to_string();
            let port = settings.nats_port.to_string();
            let args = ["-js", "-a", "127.0.0.1", "-p", &port, "-sd", &store];
            let nats = Process::new("nats", "nats-server", &args, vec![], &dir);
            Data::Single {
                nats: Box::new(nats),
            }
        };
        Ok(Self {
            settings,
            servers,
            workers,
            provider,
            data,
        })
    }

    /// Starts everything and waits until every server and the provider answer.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        match &mut self.data {
            Data::Single { nats } => nats.start()?,
            Data::Ha(ha) => ha.start().await?,
        }
        let ports = self.settings.server_ports();
        let health = |port: &u16| format!("http://127.0.0.1:{port}/healthz");
        // The first server creates and migrates the database; the others start after it.
        self.servers[0].start()?;
        wait_healthy(&health(&ports[0]), Some(&mut self.servers[0])).await?;
        for server in &mut self.servers[1..] {
            server.start()?;
        }
        self.provider.start()?;
        for worker in &mut self.workers {
            worker.start()?;
        }
        for (port, server) in ports[1..].iter().zip(&mut self.servers[1..]) {
            wait_healthy(&health(port), Some(server)).await?;
        }
        wait_healthy(&format!("{}/healthz", provider_url()), None).await?;
        for entry in self.settings.entry_urls() {
            wait_healthy(&format!("{entry}/healthz"), None).await?;
        }
        Ok(())
    }

    /// Every process the harness may kill or pause, by index.
    pub fn killable(&mut self) -> Vec<&mut Process> {
        self.servers
            .iter_mut()
            .chain(self.workers.iter_mut())
            .collect()
    }

    /// The failover deployment, when this is one.
    pub fn ha(&mut self) -> Option<&mut Ha> {
        match &mut self.data {
            Data::Ha(ha) => Some(ha),
            Data::Single { .. } => None,
        }
    }

    /// PostgreSQL killed without a shutdown (`pg_ctl -m immediate`: crash recovery at the
    /// next start), down for `outage`.
    pub async fn crash_postgres(&self, outage: Duration) -> anyhow::Result<()> {
        shell(&self.settings.pg_crash).await?;
        tokio::time::sleep(outage).await;
        shell(&self.settings.pg_start).await
    }

    /// The single NATS server killed and started again after `outage`.
    pub async fn crash_nats(&mut self, outage: Duration) -> anyhow::Result<()> {
        if let Data::Single { nats } = &mut self.data {
            nats.kill().await;
            tokio::time::sleep(outage).await;
            nats.start()?;
        }
        Ok(())
    }

    /// After the faults: everything that is down or paused runs again.
    pub async fn heal(&mut self) -> anyhow::Result<()> {
        match &mut self.data {
            Data::Single { nats } => {
                if nats.restart_if_exited()? {
                    println!("chaos: nats had exited; started again");
                }
            }
            Data::Ha(ha) => ha.heal().await?,
        }
        for p in self
            .servers
            .iter_mut()
            .chain(self.workers.iter_mut())
            .chain([&mut self.provider])
        {
            p.resume();
            if p.restart_if_exited()? {
                println!("chaos: {} had exited; started again", p.name);
            }
        }
        Ok(())
    }

    /// Turns the provider's chaos off, so that the webhooks still owed arrive.
    pub async fn calm_provider(&self) -> anyhow::Result<()> {
        reqwest::Client::new()
            .post(format!("{}/v1/admin/chaos", provider_url()))
            .bearer_auth(PROVIDER_API_KEY)
            .json(&serde_json::json!({}))
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }

    /// Stops the shop's processes and the provider; the data tier keeps running.
    pub async fn stop_app(&mut self) {
        let grace = Duration::from_secs(10);
        for p in self.servers.iter_mut().chain(self.workers.iter_mut()) {
            p.stop(grace).await;
        }
        self.provider.stop(grace).await;
    }

    /// Stops everything the harness started (the single PostgreSQL is scripts/chaos's).
    pub async fn stop(&mut self) {
        self.stop_app().await;
        match &mut self.data {
            Data::Single { nats } => nats.stop(Duration::from_secs(10)).await,
            Data::Ha(ha) => ha.stop().await,
        }
    }
}

/// Refuses to start over anything that already listens on the deployment's ports (another
/// run, or a stopped leftover of one): its answers would be taken for ours.
pub fn ports_free(settings: &Settings) -> anyhow::Result<()> {
    let data: Vec<u16> = if settings.ha {
        let pg = ha::postgres::NODE_PORTS.into_iter();
        pg.chain([ha::postgres::MONITOR_PORT, ha::haproxy::POSTGRES_PORT])
            .chain([ha::haproxy::HTTP_PORT])
            .chain(ha::nats::CLIENT_PORTS)
            .chain(ha::nats::ROUTE_PORTS)
            .collect()
    } else {
        vec![settings.nats_port]
    };
    let ports = SERVER_PORTS
        .iter()
        .copied()
        .chain([PROVIDER_PORT])
        .chain(data);
    for port in ports {
        std::net::TcpListener::bind(("127.0.0.1", port)).map_err(|e| {
            anyhow::anyhow!("port {port} is taken ({e}): is another chaos run going?")
        })?;
    }
    Ok(())
}

/// Waits until `url` answers 2xx; a `process` given is started again if it exited (a
/// server whose database connection drops while it migrates stops, as it should).
async fn wait_healthy(url: &str, mut process: Option<&mut Process>) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    for _ in 0..600 {
        if let Some(p) = process.as_deref_mut() {
            if p.restart_if_exited()? {
                println!("chaos: {} stopped while starting; started again", p.name);
            }
        }
        if let Ok(r) = client.get(url).send().await {
            if r.status().is_success() {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("{url} did not answer within a minute")
}
