//! Once as it is deployed apart: two server instances on one database, the relay, the
//! fulfillment consumer, the mailer and the reconciler each in a process of its own, the
//! sandbox provider with its chaos knobs on, and NATS JetStream as the bus. PostgreSQL and
//! NATS are instances of the harness's own (own ports, own data directories), never the
//! machine's shared ones, because the harness restarts them.

use std::{path::PathBuf, time::Duration};

use crate::process::{shell, Process};

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
        })
    }

    pub fn shop_db(&self) -> String {
        format!("{}/once_chaos", self.pg_url)
    }

    pub fn provider_db(&self) -> String {
        format!("{}/once_chaos_provider", self.pg_url)
    }
}

pub const SERVER_PORTS: [u16; 2] = [3961, 3962];
const PROVIDER_PORT: u16 = 3969;
const WEBHOOK_SECRET: &str = "chaos-run-webhook-secret";
/// Every instance keys fingerprints alike, or a retry on another one would look reused.
const FINGERPRINT_SECRET: &str = "chaos-run-fingerprint-secret";
/// Short, so that a paused process loses its lease within the pause.
pub const LEASE: Duration = Duration::from_millis(1500);

pub fn server_urls() -> Vec<String> {
    SERVER_PORTS
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect()
}

pub fn provider_url() -> String {
    format!("http://127.0.0.1:{PROVIDER_PORT}")
}

pub struct Deployment {
    pub settings: Settings,
    pub servers: Vec<Process>,
    pub workers: Vec<Process>,
    pub provider: Process,
    pub nats: Process,
}

fn env(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

impl Deployment {
    pub fn new(settings: Settings) -> Self {
        let dir = settings.dir.clone();
        let nats_url = format!("nats://127.0.0.1:{}", settings.nats_port);
        let shop = |extra: &[(&str, String)]| {
            let mut pairs = vec![
                ("DATABASE_URL", settings.shop_db()),
                ("RUN_WORKERS", "none".into()),
                ("NATS_URL", nats_url.clone()),
                ("PROVIDER_URL", provider_url()),
                ("PROVIDER_WEBHOOK_SECRETS", WEBHOOK_SECRET.into()),
                ("IDEMPOTENCY_FINGERPRINT_SECRETS", FINGERPRINT_SECRET.into()),
                ("PROVIDER_TIMEOUT_MS", "2000".into()),
                ("PAYMENT_SETTLE_GRACE_MS", "4000".into()),
                ("IDEMPOTENCY_LEASE_MS", LEASE.as_millis().to_string()),
                ("EVENTS_POLL_MS", "200".into()),
                ("BUS_ACK_WAIT_MS", "3000".into()),
                ("CONSUMER_RETRY_BASE_MS", "100".into()),
                ("CONSUMER_RETRY_CAP_MS", "2000".into()),
                ("RECONCILE_EVERY_SECS", "3".into()),
                ("OPERATOR_PASSWORD", "chaos-run-operator-password".into()),
                // Every shopper of the harness comes from this machine's one address.
                ("RATE_LIMIT_PER_CLIENT", "0".into()),
                ("MAX_CONNECTIONS_PER_CLIENT", "10000".into()),
                ("RUST_LOG", "warn".into()),
            ];
            pairs.extend_from_slice(extra);
            env(&pairs)
        };
        let servers = SERVER_PORTS
            .iter()
            .enumerate()
            .map(|(i, port)| {
                let addr = ("LEPTOS_SITE_ADDR", format!("127.0.0.1:{port}"));
                let name = format!("server-{}", ["a", "b"][i]);
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
                    format!("http://127.0.0.1:{}/webhooks/provider", SERVER_PORTS[0]),
                ),
                ("PROVIDER_WEBHOOK_SECRET", WEBHOOK_SECRET.into()),
                ("PROVIDER_CHAOS_DUPLICATES", "1".into()),
                ("PROVIDER_CHAOS_SHUFFLE", "true".into()),
                ("PROVIDER_CHAOS_DELAY_MS", "300".into()),
                ("PROVIDER_CHAOS_DROP_RATE", "0.2".into()),
                ("RUST_LOG", "warn".into()),
            ]),
            &dir,
        );
        let store = dir.join("nats").display().to_string();
        let port = settings.nats_port.to_string();
        let nats = Process::new(
            "nats",
            "nats-server",
            &["-js", "-a", "127.0.0.1", "-p", &port, "-sd", &store],
            vec![],
            &dir,
        );
        Self {
            settings,
            servers,
            workers,
            provider,
            nats,
        }
    }

    /// Starts everything and waits until both servers and the provider answer.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        self.nats.start()?;
        // The first server creates and migrates the database; the others start after it.
        self.servers[0].start()?;
        wait_healthy(&format!("{}/healthz", server_urls()[0])).await?;
        self.servers[1].start()?;
        self.provider.start()?;
        for worker in &mut self.workers {
            worker.start()?;
        }
        wait_healthy(&format!("{}/healthz", server_urls()[1])).await?;
        wait_healthy(&format!("{}/healthz", provider_url())).await?;
        Ok(())
    }

    /// Every process the harness may kill or pause, by index.
    pub fn killable(&mut self) -> Vec<&mut Process> {
        self.servers
            .iter_mut()
            .chain(self.workers.iter_mut())
            .collect()
    }

    /// PostgreSQL killed without a shutdown (`pg_ctl -m immediate`: crash recovery at the
    /// next start), down for `outage`.
    pub async fn crash_postgres(&self, outage: Duration) -> anyhow::Result<()> {
        shell(&self.settings.pg_crash).await?;
        tokio::time::sleep(outage).await;
        shell(&self.settings.pg_start).await
    }

    pub async fn crash_nats(&mut self, outage: Duration) -> anyhow::Result<()> {
        self.nats.kill().await;
        tokio::time::sleep(outage).await;
        self.nats.start()
    }

    /// After the faults: everything that is down or paused runs again.
    pub async fn heal(&mut self) -> anyhow::Result<()> {
        for p in self
            .servers
            .iter_mut()
            .chain(self.workers.iter_mut())
            .chain([&mut self.provider, &mut self.nats])
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
            .json(&serde_json::json!({}))
            .send()
            .await?
            .error_for_status()?;
        Ok(())
    }

    pub async fn stop(&mut self) {
        let grace = Duration::from_secs(10);
        for p in self.servers.iter_mut().chain(self.workers.iter_mut()) {
            p.stop(grace).await;
        }
        self.provider.stop(grace).await;
        self.nats.stop(grace).await;
    }
}

/// Refuses to start over anything that already listens on the deployment's ports (another
/// run, or a stopped leftover of one): its answers would be taken for ours.
pub fn ports_free(nats_port: u16) -> anyhow::Result<()> {
    let ports = SERVER_PORTS
        .iter()
        .copied()
        .chain([PROVIDER_PORT, nats_port]);
    for port in ports {
        std::net::TcpListener::bind(("127.0.0.1", port)).map_err(|e| {
            anyhow::anyhow!("port {port} is taken ({e}): is another chaos run going?")
        })?;
    }
    Ok(())
}

async fn wait_healthy(url: &str) -> anyhow::Result<()> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(2))
        .build()?;
    for _ in 0..600 {
        if let Ok(r) = client.get(url).send().await {
            if r.status().is_success() {
                return Ok(());
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("{url} did not answer within a minute")
}
