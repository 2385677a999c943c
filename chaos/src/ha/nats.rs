//! NATS as a cluster of three servers with JetStream, routes on loopback. The shop's stream
//! is created with three replicas (`NATS_REPLICAS=3`), so a stream or consumer leader that
//! dies is replaced by an election among the other two, and nothing acknowledged is lost.

use std::{path::Path, time::Duration};

use async_nats::jetstream;
use futures::StreamExt;

use super::poll_until;
use crate::process::Process;

pub const CLIENT_PORTS: [u16; 3] = [4334, 4335, 4336];
pub const ROUTE_PORTS: [u16; 3] = [6334, 6335, 6336];
pub const STREAM: &str = "ONCE_EVENTS";
/// Published to by the harness's probe only: no consumer of the shop listens to it.
const PROBE_SUBJECT: &str = "once.events.chaos-probe";

pub fn urls() -> String {
    CLIENT_PORTS
        .iter()
        .map(|p| format!("nats://127.0.0.1:{p}"))
        .collect::<Vec<_>>()
        .join(",")
}

pub fn node_name(i: usize) -> String {
    format!("nats-{}", i + 1)
}

/// The three servers, each with its own store under `dir`.
pub fn nodes(dir: &Path) -> Vec<Process> {
    (0..3)
        .map(|i| {
            let name = node_name(i);
            let store = dir.join(&name).display().to_string();
            let port = CLIENT_PORTS[i].to_string();
            let cluster = format!("nats://127.0.0.1:{}", ROUTE_PORTS[i]);
            let routes: Vec<String> = (0..3)
                .filter(|j| *j != i)
                .map(|j| format!("nats://127.0.0.1:{}", ROUTE_PORTS[j]))
                .collect();
            let routes = routes.join(",");
            let args = [
                "-js",
                "-n",
                &name,
                "-a",
                "127.0.0.1",
                "-p",
                &port,
                "-sd",
                &store,
                "--cluster_name",
                "once-chaos",
                "--cluster",
                &cluster,
                "--routes",
                &routes,
            ];
            Process::new(&name, "nats-server", &args, vec![], dir)
        })
        .collect()
}

pub async fn connect() -> anyhow::Result<jetstream::Context> {
    let servers: Vec<async_nats::ServerAddr> = urls()
        .split(',')
        .map(str::parse)
        .collect::<Result<_, _>>()?;
    let client = async_nats::ConnectOptions::new()
        .retry_on_initial_connect()
        .connect(servers)
        .await?;
    Ok(jetstream::new(client))
}

/// The server leading the shop's stream, by index (`None` until the stream exists and
/// has a leader).
pub async fn stream_leader(js: &jetstream::Context) -> Option<usize> {
    let mut stream = js.get_stream(STREAM).await.ok()?;
    let leader = stream.info().await.ok()?.cluster.as_ref()?.leader.clone()?;
    (0..3).find(|i| node_name(*i) == leader)
}

/// Whether the stream and each of its consumers have a leader and two current replicas.
async fn in_sync(js: &jetstream::Context) -> anyhow::Result<bool> {
    let mut stream = js.get_stream(STREAM).await?;
    let info = stream.info().await?;
    let mut clusters = vec![info.cluster.clone()];
    let mut names = stream.consumer_names();
    while let Some(name) = names.next().await {
        let consumer: jetstream::consumer::PullConsumer = stream
            .get_consumer(&name?)
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        clusters.push(consumer.cached_info().cluster.clone());
    }
    Ok(clusters.iter().all(|c| {
        c.as_ref().is_some_and(|c| {
            c.leader.is_some()
                && c.replicas.len() == 2
                && c.replicas.iter().all(|r| r.current && !r.offline)
        })
    }))
}

/// Waits until the stream and its consumers are whole again; returns how long it took.
pub async fn wait_in_sync(js: &jetstream::Context, within: Duration) -> anyhow::Result<Duration> {
    let whole = || async { in_sync(js).await.unwrap_or(false) };
    let what = "the NATS stream had no leader with two current replicas";
    poll_until(within, Duration::from_millis(200), what, whole).await
}

/// Publishes to the stream until a publish is acknowledged; returns how long that took.
pub async fn wait_writable(js: &jetstream::Context, within: Duration) -> anyhow::Result<Duration> {
    let publish = || async {
        let probe = async {
            let ack = js.publish(PROBE_SUBJECT, "probe".into()).await?;
            ack.await.map_err(anyhow::Error::from)
        };
        matches!(
            tokio::time::timeout(Duration::from_millis(500), probe).await,
            Ok(Ok(_))
        )
    };
    let what = "no publish to the NATS stream was acknowledged";
    poll_until(within, Duration::from_millis(50), what, publish).await
}
