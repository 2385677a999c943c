//! Building the application: database, migrations, sessions, routes, layers; and serving it
//! until a shutdown signal arrives.

use std::future::Future;

use axum::{
    extract::{DefaultBodyLimit, FromRef},
    http::Request,
    middleware,
    routing::get,
    Router,
};
use leptos::config::LeptosOptions;
use sqlx::PgPool;
use tokio::net::TcpListener;
use tower_http::{
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    trace::TraceLayer,
};

use crate::{catalog, config::Config, db, error, health, session, ssr};

/// Everything a handler may need, cloned cheaply per request.
#[derive(Clone, FromRef)]
pub struct AppState {
    pub db: PgPool,
    pub config: Config,
    pub leptos: LeptosOptions,
}

pub struct Application {
    listener: TcpListener,
    router: Router,
    state: AppState,
}

impl Application {
    /// Prepares the database (create, migrate), binds the listener (port 0 picks a free
    /// port, as tests do) and assembles the router.
    pub async fn build(config: Config) -> anyhow::Result<Self> {
        db::ensure_database(&config.database_url).await?;
        let db = db::connect(&config.database_url).await?;
        db::migrate(&db).await?;
        let listener = TcpListener::bind(config.listen_addr).await?;
        let state = AppState { db, leptos: config.leptos.clone(), config };
        let router = router(state.clone()).await?;
        Ok(Self { listener, router, state })
    }

    pub fn port(&self) -> u16 {
        self.listener.local_addr().map(|a| a.port()).unwrap_or_default()
    }

    pub fn db(&self) -> &PgPool {
        &self.state.db
    }

    /// Serves until `shutdown` resolves, then lets in-flight requests finish.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()> + Send + 'static) -> std::io::Result<()> {
        tracing::info!(addr = %self.listener.local_addr()?, "Once is listening");
        axum::serve(self.listener, self.router).with_graceful_shutdown(shutdown).await
    }
}

async fn router(state: AppState) -> anyhow::Result<Router> {
    let sessions = session::layer(state.db.clone()).await?;
    let api = Router::new().merge(catalog::router()).fallback(error::api_not_found);
    let shop = Router::new()
        .nest("/api", api)
        .merge(ssr::router(&state))
        .layer(middleware::from_fn(session::open_session))
        .layer(sessions);
    Ok(Router::new()
        .route("/healthz", get(health::healthz))
        .merge(shop)
        .layer(DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(PropagateRequestIdLayer::x_request_id())
        .layer(TraceLayer::new_for_http().make_span_with(|req: &Request<_>| {
            let request_id = req.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("-");
            tracing::info_span!("request", method = %req.method(), uri = %req.uri(), request_id)
        }))
        .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
        .with_state(state))
}

/// Resolves on SIGINT or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = terminate => {} }
    tracing::info!("shutdown signal received; finishing in-flight requests");
}
