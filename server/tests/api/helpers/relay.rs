//! A real SMTP relay for the mailer's TLS tests: aiosmtpd (`tests/smtp-relay.py`), which
//! demands TLS and a login before it takes a message, with a certificate made at run time.

use std::{
    process::Stdio,
    sync::{Arc, Mutex},
};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

/// Where `scripts/setup` installs aiosmtpd's Python (`AIOSMTPD_PYTHON` names another).
fn python() -> String {
    std::env::var("AIOSMTPD_PYTHON").unwrap_or_else(|_| "/opt/aiosmtpd/bin/python3".into())
}

/// How the relay wants its connections protected.
#[derive(Clone, Copy)]
pub enum Mode {
    StartTls,
    Implicit,
    /// No STARTTLS offered, the login taken in clear: a relay whose offer was stripped.
    Clear,
}

/// A running relay; killed when dropped.
pub struct Relay {
    pub port: u16,
    taken: Arc<Mutex<Vec<Value>>>,
    _process: tokio::process::Child,
}

/// The login the relay accepts.
pub const LOGIN: (&str, &str) = ("shop@once.test", "relay password: 7 words, 1 colon");

impl Relay {
    /// A relay on `port` (0: a free one) presenting `pem` (certificate then key).
    pub async fn start(mode: Mode, pem: &str, port: u16) -> Self {
        let port = if port == 0 { free_port() } else { port };
        let dir = &super::tls::authorities().dir;
        let file = dir.join(format!("relay-{port}.pem"));
        std::fs::write(&file, pem).unwrap();
        let mut process = tokio::process::Command::new(python())
            .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/smtp-relay.py"))
            .arg(port.to_string())
            .args([&file, &file])
            .arg(match mode {
                Mode::StartTls => "starttls",
                Mode::Implicit => "implicit",
                Mode::Clear => "clear",
            })
            .args([LOGIN.0, LOGIN.1])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("aiosmtpd runs (scripts/setup installs it)");
        let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
        let ready = tokio::time::timeout(std::time::Duration::from_secs(20), lines.next_line())
            .await
            .expect("the relay starts")
            .unwrap();
        assert_eq!(ready.as_deref(), Some("ready"));
        let taken = Arc::new(Mutex::new(Vec::new()));
        let keep = taken.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                keep.lock()
                    .unwrap()
                    .push(serde_json::from_str(&line).unwrap());
            }
        });
        Self {
            port,
            taken,
            _process: process,
        }
    }

    /// The messages the relay took: login, encrypted, from, to, message.
    pub fn taken(&self) -> Vec<Value> {
        self.taken.lock().unwrap().clone()
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}
