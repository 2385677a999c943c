//! A TCP proxy a test can cut: everything through it is dropped at once, and nothing
//! connects until it is restored on the same port. It stands between the app and NATS to
//! make the bus unreachable without touching the shared NATS server.

use std::{net::SocketAddr, sync::Mutex};

use tokio::{
    net::{TcpListener, TcpStream},
    task::{JoinHandle, JoinSet},
};

pub struct Proxy {
    pub port: u16,
    target: SocketAddr,
    running: Mutex<Option<JoinHandle<()>>>,
}

impl Proxy {
    pub async fn start(target: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let proxy = Self {
            port,
            target,
            running: Mutex::new(None),
        };
        proxy.serve(listener);
        proxy
    }

    fn serve(&self, listener: TcpListener) {
        let target = self.target;
        let task = tokio::spawn(async move {
            // Dropped with the task: every connection through the proxy ends with it.
            let mut connections = JoinSet::new();
            while let Ok((mut inbound, _)) = listener.accept().await {
                connections.spawn(async move {
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        *self.running.lock().unwrap() = Some(task);
    }

    /// Drops every connection and stops listening.
    pub fn sever(&self) {
        if let Some(task) = self.running.lock().unwrap().take() {
            task.abort();
        }
    }

    /// Listens again on the same port.
    pub async fn restore(&self) {
        let listener = TcpListener::bind(("127.0.0.1", self.port)).await.unwrap();
        self.serve(listener);
    }
}
