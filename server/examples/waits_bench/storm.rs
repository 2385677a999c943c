//! A storm: one order held in its transaction at a test gate, and repeats of it that ask to
//! wait, sent together behind a barrier; the gate then opens and every repeat must get the
//! order's answer, replayed.

use std::{sync::Arc, time::Duration};

use tokio::{sync::Barrier, task::JoinHandle, time::Instant};
use uuid::Uuid;

use crate::{server::Server, STATS_SETTLE};

/// How long the counted storm waits, with every repeat registered, before its gate opens.
pub const WAITING: Duration = Duration::from_secs(3);
/// How many originals the 10,000 waiters are spread over (each holds a connection of the
/// server's pool while it is held).
const ORIGINALS: usize = 5;

const ORDER: &str = r#"{"items":[{"sku":"MUG-001","quantity":1}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#;

pub struct Storm<'s> {
    server: &'s Server,
    http: reqwest::Client,
    cookie: String,
}

/// An answer as the bench checks it: when it came, its status, replay flag and body.
struct Answer {
    at: Instant,
    status: u16,
    replayed: bool,
    body: Vec<u8>,
}

/// A storm under way: the held original's gate and answer, and its waiters' answers.
struct Pending {
    gate: String,
    original: JoinHandle<anyhow::Result<Answer>>,
    waiters: Vec<JoinHandle<anyhow::Result<Answer>>>,
}

/// Transactions on the shop's database in each phase of a counted storm.
pub struct Phases {
    pub arriving: i64,
    pub waiting: i64,
    /// How long the waiting phase lasted (its own wait and the counters' settling).
    pub waited_for: Duration,
    pub answered: i64,
}

impl<'s> Storm<'s> {
    pub async fn new(server: &'s Server) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(120))
            .build()?;
        let session = http
            .get(format!("{}/api/session", server.base))
            .send()
            .await?;
        let cookie = session
            .headers()
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.strip_prefix("once_session="))
            .and_then(|v| v.split(';').next())
            .ok_or_else(|| anyhow::anyhow!("no session cookie"))?;
        let cookie = format!("once_session={cookie}");
        let db = sqlx::PgPool::connect(&server.database_url()).await?;
        sqlx::query("UPDATE products SET stock = 100000000")
            .execute(&db)
            .await?;
        db.close().await;
        Ok(Self {
            server,
            http,
            cookie,
        })
    }

    /// One storm of `waiters`: each one's time from the gate's opening to its answer, in ms.
    pub async fn run(&self, waiters: usize) -> anyhow::Result<Vec<f64>> {
        let pending = self.begin(waiters).await?;
        self.until_waiting(waiters).await?;
        let opened = self.open(&pending.gate).await?;
        pending.finish(opened).await
    }

    /// One storm of `waiters`, with the shop's database transactions counted as it arrives,
    /// waits and is answered.
    pub async fn counted(&self, waiters: usize) -> anyhow::Result<Phases> {
        let hold = Uuid::new_v4().to_string();
        let original = self.send(&hold, &[("once-test-hold", &hold)]);
        self.until_held(&hold).await?;
        let start = self.settled().await?;
        let pending = Pending {
            waiters: self.waiters(&hold, waiters),
            gate: hold,
            original,
        };
        self.until_waiting(waiters).await?;
        let arrived = self.settled().await?;
        let since = Instant::now();
        tokio::time::sleep(WAITING).await;
        let waited = self.settled().await?;
        let waited_for = since.elapsed();
        let opened = self.open(&pending.gate).await?;
        pending.finish(opened).await?;
        let answered = self.settled().await?;
        Ok(Phases {
            arriving: arrived - start,
            waiting: waited - arrived,
            waited_for,
            answered: answered - waited,
        })
    }

    /// `many` waiters at once, over a few originals: the server's RSS (KiB) while they all
    /// wait. They are then answered and checked.
    pub async fn many(&self, many: usize) -> anyhow::Result<u64> {
        let mut storms = Vec::new();
        for n in 0..ORIGINALS {
            let share = many / ORIGINALS + usize::from(n < many % ORIGINALS);
            storms.push(self.begin(share).await?);
            self.until_waiting(storms.iter().map(|s| s.waiters.len()).sum())
                .await?;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        let rss = self.server.rss_kib()?;
        for storm in storms {
            let opened = self.open(&storm.gate).await?;
            storm.finish(opened).await?;
        }
        Ok(rss)
    }

    /// Sends an order held at a fresh gate (its key is the gate's name), then its waiters.
    async fn begin(&self, waiters: usize) -> anyhow::Result<Pending> {
        let key = Uuid::new_v4().to_string();
        let original = self.send(&key, &[("once-test-hold", &key)]);
        self.until_held(&key).await?;
        Ok(Pending {
            waiters: self.waiters(&key, waiters),
            gate: key,
            original,
        })
    }

    /// `n` repeats of `key`, asking to wait, sent together once all are ready.
    fn waiters(&self, key: &str, n: usize) -> Vec<JoinHandle<anyhow::Result<Answer>>> {
        let start = Arc::new(Barrier::new(n));
        (0..n)
            .map(|_| {
                let start = start.clone();
                let send = self.request(key, &[("prefer", "wait=50")]);
                tokio::spawn(async move {
                    start.wait().await;
                    Answer::read(send.send().await?).await
                })
            })
            .collect()
    }

    fn send(&self, key: &str, headers: &[(&str, &str)]) -> JoinHandle<anyhow::Result<Answer>> {
        let request = self.request(key, headers);
        tokio::spawn(async move { Answer::read(request.send().await?).await })
    }

    fn request(&self, key: &str, headers: &[(&str, &str)]) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .post(format!("{}/api/orders", self.server.base))
            .header("cookie", &self.cookie)
            .header("idempotency-key", key)
            .header("content-type", "application/json")
            .body(ORDER);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        request
    }

    async fn until_held(&self, gate: &str) -> anyhow::Result<()> {
        let url = format!("{}/_test/gates/{gate}", self.server.base);
        self.until(&url, 1).await
    }

    async fn until_waiting(&self, n: usize) -> anyhow::Result<()> {
        let url = format!("{}/_test/waiters", self.server.base);
        self.until(&url, n as u64).await
    }

    /// Polls `url` until its `waiting` reaches `n`.
    async fn until(&self, url: &str, n: u64) -> anyhow::Result<()> {
        for _ in 0..12_000 {
            let status: serde_json::Value = self.http.get(url).send().await?.json().await?;
            if status["waiting"].as_u64() >= Some(n) {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        anyhow::bail!("{url} never reached {n}")
    }

    /// Opens `gate`: the held original commits. When it was opened.
    async fn open(&self, gate: &str) -> anyhow::Result<Instant> {
        let url = format!("{}/_test/gates/{gate}/open", self.server.base);
        let opened = Instant::now();
        self.http.post(url).send().await?.error_for_status()?;
        Ok(opened)
    }

    /// The shop database's transactions so far, once its counters have settled.
    async fn settled(&self) -> anyhow::Result<i64> {
        tokio::time::sleep(STATS_SETTLE).await;
        self.server.transactions().await
    }
}

impl Answer {
    async fn read(response: reqwest::Response) -> anyhow::Result<Self> {
        let replayed = response.headers().get("idempotent-replayed").is_some();
        let status = response.status().as_u16();
        let body = response.bytes().await?.to_vec();
        Ok(Self {
            at: Instant::now(),
            status,
            replayed,
            body,
        })
    }
}

impl Pending {
    /// Every waiter's time from `opened` to its answer, in ms, once each is checked to be
    /// the original's answer, replayed.
    async fn finish(self, opened: Instant) -> anyhow::Result<Vec<f64>> {
        let original = self.original.await??;
        anyhow::ensure!(
            original.status == 201,
            "the original answered {}",
            original.status
        );
        let mut times = Vec::with_capacity(self.waiters.len());
        for waiter in self.waiters {
            let answer = waiter.await??;
            anyhow::ensure!(
                answer.status == 201 && answer.replayed && answer.body == original.body,
                "a waiter answered {} (replayed: {})",
                answer.status,
                answer.replayed
            );
            times.push(answer.at.duration_since(opened).as_secs_f64() * 1000.0);
        }
        Ok(times)
    }
}
