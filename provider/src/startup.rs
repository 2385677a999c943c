//! Building and serving the provider.

use std::future::Future;

use axum::{middleware, routing::get, Router};
use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    ConnectOptions, Connection, PgPool,
};
use tokio::net::TcpListener;

use crate::{
    auth::{self, ApiKey},
    charges,
    config::Config,
    ledger, refunds,
    settings::{self, Settings, SharedSettings},
    state::ProviderState,
    webhooks,
};

pub struct Application {
    listener: TcpListener,
    state: ProviderState,
    secret: String,
    api_key: ApiKey,
}

impl Application {
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        create_database_if_missing(&config.database_url).await?;
        let db = PgPoolOptions::new()
            .max_connections(10)
            .connect(&config.database_url)
            .await?;
        sqlx::migrate!("./migrations").run(&db).await?;
        let listener = TcpListener::bind(config.addr).await?;
        let settings = SharedSettings::new(Settings {
            webhook_url: config.webhook_url,
            chaos: config.chaos,
        });
        Ok(Self {
            listener,
            state: ProviderState { db, settings },
            secret: config.webhook_secret,
            api_key: ApiKey::new(&config.api_key),
        })
    }

    pub fn port(&self) -> u16 {
        self.listener
            .local_addr()
            .map(|a| a.port())
            .unwrap_or_default()
    }

    /// The live settings (webhook URL, chaos), changeable while the provider runs.
    pub fn settings(&self) -> SharedSettings {
        self.state.settings.clone()
    }

    pub fn db(&self) -> &PgPool {
        &self.state.db
    }

    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        tracing::info!(addr = %self.listener.local_addr()?, "sandbox provider listening");
        let worker = tokio::spawn(webhooks::run_worker(
            self.state.db.clone(),
            self.state.settings.clone(),
            self.secret,
        ));
        let api = Router::new()
            .merge(charges::router())
            .merge(ledger::router())
            .merge(refunds::router())
            .merge(settings::router())
            .route_layer(middleware::from_fn_with_state(
                self.api_key,
                auth::require_key,
            ));
        let router = Router::new()
            .route("/healthz", get(|| async { "ok" }))
            .merge(api)
            .with_state(self.state);
        let served = axum::serve(self.listener, router)
            .with_graceful_shutdown(shutdown)
            .await;
        worker.abort();
        served
    }
}

async fn create_database_if_missing(url: &str) -> anyhow::Result<()> {
    let options: PgConnectOptions = url.parse()?;
    let name = options.get_database().unwrap_or("once_provider").to_owned();
    let mut admin = options.database("postgres").connect().await?;
    // Run-time SQL on purpose: the database's name comes from the configured URL, and an
    // identifier cannot be a bound parameter (nor is there a schema to check it against yet).
    let created = sqlx::query(&format!(
        "CREATE DATABASE \"{}\"",
        name.replace('"', "\"\"")
    ))
    .execute(&mut admin)
    .await;
    match created {
        // 42P04: it exists already, which is the usual case.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() != Some("42P04") => {
            return Err(e.into())
        }
        Err(e @ (sqlx::Error::Io(_) | sqlx::Error::Protocol(_))) => return Err(e.into()),
        _ => {}
    }
    admin.close().await?;
    Ok(())
}
