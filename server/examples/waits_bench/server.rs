//! The shop under measure: the release server as a process of its own (so its memory is
//! its own), on a fresh database, with the test gates on and the waits' bounds raised
//! past what the bench asks of one session.

use std::{process::Stdio, time::Duration};

use sqlx::PgPool;
use tokio::process::{Child, Command};
use uuid::Uuid;

pub struct Server {
    pub base: String,
    pub database: String,
    /// The `postgres` database of the same cluster: the statistics are read from there, so
    /// reading them adds nothing to the shop's database.
    pub admin: PgPool,
    admin_url: String,
    child: Child,
}

impl Server {
    pub async fn start(binary: &str, many: usize) -> anyhow::Result<Self> {
        let admin_url = std::env::var("BENCH_DATABASE_ADMIN_URL")
            .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432".into());
        let admin = PgPool::connect(&format!("{admin_url}/postgres")).await?;
        let database = format!("once_bench_waits_{}", Uuid::new_v4().simple());
        sqlx::query(&format!("CREATE DATABASE {database}"))
            .execute(&admin)
            .await?;
        let port = free_port()?;
        let base = format!("http://127.0.0.1:{port}");
        let waiters = (many + 1000).to_string();
        let huge = "1000000000";
        let child = Command::new(binary)
            .envs([
                ("DATABASE_URL", format!("{admin_url}/{database}").as_str()),
                ("LEPTOS_SITE_ADDR", &format!("127.0.0.1:{port}")),
                ("LEPTOS_SITE_ROOT", "target/site"),
                ("PROVIDER_URL", "http://127.0.0.1:9"),
                ("PROVIDER_WEBHOOK_SECRETS", "bench-only-webhook-secret"),
                ("PROVIDER_API_KEY", "bench-only-provider-api-key"),
                (
                    "IDEMPOTENCY_FINGERPRINT_SECRETS",
                    "bench-only-fingerprint-secret",
                ),
                ("OPERATOR_PASSWORD", &Uuid::new_v4().to_string()),
                ("RUN_WORKERS", "none"),
                ("RUST_LOG", "error"),
                ("ONCE_FAULT_INJECTION", "on"),
                // One bench session sends every request: the per-client and per-session
                // bounds are raised past it, so what is measured is the wait.
                ("IDEMPOTENCY_WAIT_MAX_MS", "50000"),
                // The counted storm holds its original for about 40 s: past the lease, a
                // waiter's fallback read would find it lapsed and rightly take it over.
                ("IDEMPOTENCY_LEASE_MS", "120000"),
                ("IDEMPOTENCY_WAITERS", &waiters),
                ("IDEMPOTENCY_WAITERS_PER_SCOPE", &waiters),
                ("RATE_LIMIT_PER_CLIENT", huge),
                ("RATE_LIMIT_PER_CLIENT_BURST", huge),
                ("RATE_LIMIT_WRITES_PER_SESSION", huge),
                ("RATE_LIMIT_WRITES_PER_SESSION_BURST", huge),
                ("QUOTA_PENDING_ORDERS", "0"),
                ("QUOTA_PENDING_ORDERS_PER_CLIENT", "0"),
                ("QUOTA_ORDERS_PER_CLIENT_PER_HOUR", "0"),
                ("QUOTA_KEYS_PER_HOUR", "0"),
                ("MAX_CONNECTIONS", "100000"),
                ("MAX_CONNECTIONS_PER_CLIENT", "100000"),
            ])
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        let server = Self {
            base,
            database,
            admin,
            admin_url,
            child,
        };
        server.until_healthy().await?;
        Ok(server)
    }

    async fn until_healthy(&self) -> anyhow::Result<()> {
        let url = format!("{}/healthz", self.base);
        for _ in 0..300 {
            if reqwest::get(&url)
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!("the server did not start")
    }

    /// The shop's database, for the bench's own set-up.
    pub fn database_url(&self) -> String {
        format!("{}/{}", self.admin_url, self.database)
    }

    /// The server's resident memory, in KiB.
    pub fn rss_kib(&self) -> anyhow::Result<u64> {
        let pid = self
            .child
            .id()
            .ok_or_else(|| anyhow::anyhow!("no server"))?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"));
        let kib = line.and_then(|l| l.split_whitespace().nth(1)?.parse().ok());
        kib.ok_or_else(|| anyhow::anyhow!("no VmRSS"))
    }

    /// Transactions committed and rolled back on the shop's database so far.
    pub async fn transactions(&self) -> anyhow::Result<i64> {
        let count = sqlx::query_scalar(
            "SELECT (xact_commit + xact_rollback)::bigint FROM pg_stat_database WHERE datname = $1",
        )
        .bind(&self.database)
        .fetch_one(&self.admin)
        .await?;
        Ok(count)
    }

    pub async fn stop(mut self) -> anyhow::Result<()> {
        self.child.kill().await?;
        let drop = format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.database);
        sqlx::query(&drop).execute(&self.admin).await?;
        Ok(())
    }
}

fn free_port() -> anyhow::Result<u16> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}
