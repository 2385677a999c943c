//! A mail catcher for tests: speaks just enough SMTP to accept messages, and keeps each
//! message's raw text.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    net::TcpListener,
};

#[derive(Clone, Default)]
pub struct MailCatcher {
    pub port: u16,
    pub messages: Arc<Mutex<Vec<String>>>,
}

impl MailCatcher {
    pub async fn start() -> Self {
        Self::start_slow(Duration::ZERO).await
    }

    /// A catcher that takes `delay` to accept each message (a slow mail server).
    pub async fn start_slow(delay: Duration) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let catcher = Self {
            port: listener.local_addr().unwrap().port(),
            messages: Arc::default(),
        };
        let messages = catcher.messages.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(session(stream, messages.clone(), delay));
            }
        });
        catcher
    }

    pub fn url(&self) -> String {
        format!("smtp://127.0.0.1:{}", self.port)
    }

    pub fn received(&self) -> Vec<String> {
        self.messages.lock().unwrap().clone()
    }
}

async fn session(
    stream: tokio::net::TcpStream,
    messages: Arc<Mutex<Vec<String>>>,
    delay: Duration,
) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    let _ = write.write_all(b"220 catcher ESMTP\r\n").await;
    while let Ok(Some(line)) = lines.next_line().await {
        let verb = line
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        let reply: &[u8] = match verb.as_str() {
            "EHLO" | "HELO" => b"250 catcher\r\n",
            "DATA" => {
                let _ = write.write_all(b"354 go ahead\r\n").await;
                let mut body = String::new();
                while let Ok(Some(line)) = lines.next_line().await {
                    if line == "." {
                        break;
                    }
                    body.push_str(&line);
                    body.push('\n');
                }
                tokio::time::sleep(delay).await;
                messages.lock().unwrap().push(body);
                b"250 queued\r\n"
            }
            "QUIT" => {
                let _ = write.write_all(b"221 bye\r\n").await;
                return;
            }
            _ => b"250 ok\r\n",
        };
        if write.write_all(reply).await.is_err() {
            return;
        }
    }
}
