//! HAProxy in front of both tiers. For PostgreSQL (TCP) it sends every connection to the
//! node that takes writes (`transaction_read_only` off, as libpq's
//! `target_session_attrs=read-write` asks: not a standby, and not a new primary that
//! pg_auto_failover still holds read-only), checked every 500 ms, and cuts the
//! connections of a node it marks down, so that clients reconnect to the new primary:
//! sqlx takes one host and cannot follow a failover itself. For the shop (HTTP) it spreads
//! requests over the server instances that pass `/healthz`. When no instance can answer,
//! it says 503 with `Retry-After`, as the shop does, never 502 or 504: a shopper's client
//! retries the same request with the same key.

use std::{path::Path, time::Duration};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::postgres::NODE_PORTS;
use crate::process::Process;

pub const POSTGRES_PORT: u16 = 25455;
pub const HTTP_PORT: u16 = 3960;

/// Asks a node whether it takes writes; HAProxy passes the node's address and port as the
/// third and fourth arguments. A standby is read-only too (`pg_is_in_recovery()` alone
/// would pass a promoted node before it is open for writes).
const PRIMARY_CHECK: &str = "#!/bin/sh
[ \"$(PGCONNECT_TIMEOUT=1 psql -XAtq -h \"$3\" -p \"$4\" -U postgres -d postgres \\
    -c 'show transaction_read_only' 2>/dev/null)\" = off ]
";

/// What HAProxy answers when no instance could: the shop's own 503 problem.
const UNAVAILABLE: &str = "HTTP/1.1 503 Service Unavailable\r
content-type: application/problem+json\r
retry-after: 1\r
cache-control: no-store\r
connection: close\r
\r
{\"type\":\"about:blank\",\"title\":\"Service Unavailable\",\"status\":503,\
\"detail\":\"no server instance could answer; retry the same request with the same key\"}
";

fn config(dir: &Path, server_ports: &[u16]) -> String {
    let d = dir.display();
    let nodes: String = NODE_PORTS
        .iter()
        .enumerate()
        .map(|(i, port)| format!("  server node{} 127.0.0.1:{port} check\n", i + 1))
        .collect();
    let servers: String = server_ports
        .iter()
        .enumerate()
        .map(|(i, port)| format!("  server shop{} 127.0.0.1:{port} check\n", i + 1))
        .collect();
    format!(
        "global
  external-check
  insecure-fork-wanted
  stats socket {d}/haproxy.sock mode 600 level admin
  maxconn 4000

defaults
  timeout connect 1s
  timeout client 1h
  timeout server 1h
  log stdout format iso local0 notice

listen postgres
  mode tcp
  bind 127.0.0.1:{POSTGRES_PORT}
  balance first
  option external-check
  timeout check 2s
  external-check path \"/usr/bin:/bin\"
  external-check command {d}/primary-check
  default-server inter 500ms fall 2 rise 1 on-marked-down shutdown-sessions
{nodes}
listen shop
  mode http
  bind 127.0.0.1:{HTTP_PORT}
  timeout client 30s
  timeout server 30s
  option httpchk GET /healthz
  retries 2
  option redispatch
  default-server inter 500ms fall 2 rise 1
  errorfile 502 {d}/unavailable.http
  errorfile 503 {d}/unavailable.http
  errorfile 504 {d}/unavailable.http
{servers}"
    )
}

/// Writes HAProxy's configuration and check script under `dir`; the process runs it.
pub fn prepare(dir: &Path, server_ports: &[u16]) -> anyhow::Result<Process> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::create_dir_all(dir)?;
    let check = dir.join("primary-check");
    std::fs::write(&check, PRIMARY_CHECK)?;
    std::fs::set_permissions(&check, std::fs::Permissions::from_mode(0o755))?;
    std::fs::write(dir.join("unavailable.http"), UNAVAILABLE)?;
    let cfg = dir.join("haproxy.cfg");
    std::fs::write(&cfg, config(dir, server_ports))?;
    let cfg = cfg.display().to_string();
    Ok(Process::new(
        "haproxy",
        "haproxy",
        &["-db", "-f", &cfg],
        vec![],
        dir,
    ))
}

/// Cuts every connection HAProxy holds to PostgreSQL node `i` (the node stays up): each
/// server instance loses its pooled connections at once, as on a network blip.
pub async fn cut_postgres_sessions(dir: &Path, node: usize) -> anyhow::Result<String> {
    admin(
        dir,
        &format!("shutdown sessions server postgres/node{}", node + 1),
    )
    .await
}

async fn admin(dir: &Path, command: &str) -> anyhow::Result<String> {
    let mut socket = tokio::net::UnixStream::connect(dir.join("haproxy.sock")).await?;
    socket.write_all(format!("{command}\n").as_bytes()).await?;
    let mut answer = String::new();
    tokio::time::timeout(Duration::from_secs(5), socket.read_to_string(&mut answer)).await??;
    Ok(answer)
}
