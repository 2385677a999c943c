//! Building the application: database, migrations, sessions, routes, layers; and serving it
//! until a shutdown signal arrives.

use std::{future::Future, sync::Arc, time::Duration};

use axum::{
    extract::DefaultBodyLimit,
    http::{Request, StatusCode},
    middleware,
    routing::get,
    Router,
};
use sqlx::PgPool;
use tokio::net::TcpListener;
use tower::ServiceBuilder;
use tower_http::{
    request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer},
    timeout::TimeoutLayer,
    trace::TraceLayer,
};

use app::site_files::SiteFiles;
use once_axum::Waits;
use once_core::FingerprintKeys;
use once_events::bus;
use tokio_util::sync::CancellationToken;

use crate::{
    api, assets, checkout,
    config::{Config, ProviderChoice},
    connections, credentials, db,
    faults::Faults,
    fulfillment, headers, health, journal, openapi, operator, origin,
    payment_provider::Provider,
    refusals, retention, session, ssr,
    state::{AppState, Shared},
    telemetry, throttle, unread_body, workers,
};

/// How often the retention worker looks for expired idempotency keys.
const PURGE_EVERY: Duration = Duration::from_secs(600);
/// How long a session opened by a read is kept while nothing uses it.
const UNUSED_SESSIONS_KEPT: Duration = Duration::from_secs(3600);
/// How often the rate limiter forgets clients whose buckets are full again.
const FORGET_IDLE_CLIENTS_EVERY: Duration = Duration::from_secs(60);
/// How long a graceful stop waits for the workers to finish the message in hand.
const WORKERS_STOP_WITHIN: Duration = Duration::from_secs(15);

pub struct Application {
    listener: TcpListener,
    router: Router,
    state: AppState,
    throttle: Arc<throttle::Throttle>,
    repeat_writer: journal::RepeatWriter,
}

impl Application {
    /// Prepares the database (create, migrate), binds the listener (port 0 picks a free
    /// port, as tests do) and assembles the router.
    pub async fn build(mut config: Config) -> anyhow::Result<Self> {
        make_missing_secrets(&mut config);
        db::ensure_database(&config.database_url).await?;
        let answers = config.answer_cache.cache(config.idempotency_retention);
        let server_watch = db::ServerWatch::forgetting(answers.clone());
        let db = db::connect(
            &config.database_url,
            &config.db_limits,
            server_watch.clone(),
        )
        .await?;
        db::migrate(&db).await?;
        let listener = TcpListener::bind(config.listen_addr).await?;
        let bus = bus::connect(&config.events.bus(), &db).await?;
        let (repeats, repeat_writer) = journal::RepeatLog::start(db.clone());
        let state = AppState::new(Shared {
            bus,
            readers: db::Readers::new(
                (*db.connect_options()).clone(),
                config.db_limits.statement_timeout,
                server_watch,
            ),
            repeats,
            leptos: Arc::new(config.leptos.clone()),
            site: Arc::new(SiteFiles::of(&config.leptos)),
            metrics: Arc::default(),
            faults: Faults::new(config.fault_injection),
            provider: Provider::from_config(&config),
            fingerprints: FingerprintKeys::new(&config.fingerprint_secrets)?,
            waits: Waits::start(
                db.clone(),
                config.idempotency_waits.limits(),
                config.idempotency_waits.longest,
            ),
            answers,
            config: Arc::new(config),
            db,
        });
        let throttle = throttle::Throttle::new(&state.config.limits);
        let router = router(state.clone(), throttle.clone()).await?;
        Ok(Self {
            listener,
            router,
            state,
            throttle,
            repeat_writer,
        })
    }

    pub fn port(&self) -> u16 {
        self.listener
            .local_addr()
            .map(|a| a.port())
            .unwrap_or_default()
    }

    pub fn db(&self) -> &PgPool {
        &self.state.db
    }

    /// What the relay, the consumers and the mailer of this instance work with.
    pub fn worker_context(&self) -> workers::Context {
        workers::Context::of(&self.state)
    }

    /// Serves until `shutdown` resolves, then lets in-flight requests finish.
    pub async fn run_until_stopped(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        tracing::info!(addr = %self.listener.local_addr()?, "Once is listening");
        let stop = CancellationToken::new();
        let workers = if self.state.config.events.run_workers {
            workers::spawn(&workers::Context::of(&self.state), &workers::ALL, &stop)
                .await
                .map_err(std::io::Error::other)?
        } else {
            Vec::new()
        };
        // Started once the workers are: a start that fails leaves no task behind.
        let purge = tokio::spawn(once_axum::purge::run(
            self.state.db.clone(),
            self.state.config.idempotency_retention,
            PURGE_EVERY,
        ));
        let config = &self.state.config;
        let keep = retention::Retention {
            keys: config.idempotency_retention,
            unpaid_expiry: config.unpaid_order_expiry,
            personal_data: config.personal_data_retention,
        };
        let retention = tokio::spawn(retention::run_worker(
            self.state.db.clone(),
            keep,
            PURGE_EVERY,
        ));
        let samples = tokio::spawn(operator::samples::run_worker(
            self.state.db.clone(),
            self.state.bus.clone(),
        ));
        let unused_sessions = tokio::spawn(session::run_forgetting_unused(
            self.state.db.clone(),
            UNUSED_SESSIONS_KEPT,
            PURGE_EVERY,
        ));
        let forget = tokio::spawn(throttle::run_forgetting(
            self.throttle.clone(),
            FORGET_IDLE_CLIENTS_EVERY,
        ));
        let limits = &self.state.config.limits;
        // Waiting repeats are answered (503, retry) as the stop begins, not held until the
        // drain's end.
        let waits = self.state.waits.clone();
        let shutdown = async move {
            shutdown.await;
            waits.close();
        };
        let served = connections::serve(
            self.listener,
            self.router,
            connections::ConnectionLimits {
                header_read_timeout: limits.header_read_timeout,
                request_timeout: limits.request_timeout,
                max_connections: limits.max_connections,
                max_per_client: limits.max_connections_per_client,
                max_header_bytes: limits.max_header_bytes,
                trusted_proxies: limits.trusted_proxies.clone(),
            },
            shutdown,
        )
        .await;
        purge.abort();
        samples.abort();
        retention.abort();
        forget.abort();
        unused_sessions.abort();
        stop.cancel();
        let _ = tokio::time::timeout(WORKERS_STOP_WITHIN, futures::future::join_all(workers)).await;
        // The last repeats noted for the journal: the writer ends once the state, the last
        // holder of the log, is gone.
        drop(self.state);
        self.repeat_writer.finish(WORKERS_STOP_WITHIN).await;
        served
    }
}

async fn router(state: AppState, throttle: Arc<throttle::Throttle>) -> anyhow::Result<Router> {
    let https = state.config.served_over_https;
    let protection = match &state.config.payment_provider {
        ProviderChoice::Stripe(stripe) => {
            headers::Protection::for_stripe_js(https, &stripe.js_url)?
        }
        ProviderChoice::Sandbox => headers::Protection::new(https),
    };
    let sessions = session::layer(state.db.clone(), https).await?;
    let api::Documented {
        shop_api,
        callbacks,
        metrics,
        document,
    } = api::documented(state.provider.webhook_path());
    // Each stack is one `layer` call: a route clones its service for every request, and
    // every `Router::layer` call is a boxed service of its own to clone, call and drop. The
    // first layer listed is the outermost.
    let shop = shop_api
        .merge(checkout::router())
        .merge(fulfillment::email::router())
        .merge(ssr::router(&state))
        .layer(
            ServiceBuilder::new()
                .layer(middleware::from_fn(origin::same_origin_writes))
                .layer(middleware::from_fn(origin::same_origin_redirects))
                .layer(middleware::from_fn(session::no_cookie_from_writes))
                .layer(middleware::from_fn(session::store_away))
                .layer(sessions)
                .layer(middleware::from_fn_with_state(
                    throttle.clone(),
                    throttle::limit_session_writes,
                ))
                .layer(middleware::from_fn_with_state(
                    throttle.clone(),
                    session::open_session,
                )),
        );
    let console = operator::router()
        .layer(session::operator_layer(state.db.clone(), https).await?)
        .layer(middleware::from_fn(session::store_away))
        .layer(middleware::from_fn(origin::same_origin_writes));
    Ok(Router::new()
        .route("/healthz", get(health::healthz))
        // Outside the shop's sessions: a file every shopper shares, and any cache may keep,
        // never opens a session nor carries a cookie.
        .merge(assets::router(&state.leptos, &state.site))
        .merge(console)
        .merge(metrics)
        .merge(openapi::router(document))
        .merge(callbacks)
        .merge(state.faults.router())
        .merge(shop)
        .layer(
            ServiceBuilder::new()
                .layer(middleware::from_fn(unread_body::close_if_unread))
                .layer(middleware::from_fn_with_state(
                    protection,
                    headers::protective,
                ))
                // Every answer names its request, a refusal of the rate limit's too.
                .layer(SetRequestIdLayer::x_request_id(MakeRequestUuid))
                .layer(PropagateRequestIdLayer::x_request_id())
                .layer(middleware::from_fn_with_state(
                    throttle,
                    throttle::limit_clients,
                ))
                .layer(
                    TraceLayer::new_for_http()
                        .make_span_with(|req: &Request<_>| {
                            let request_id = req
                                .headers()
                                .get("x-request-id")
                                .and_then(|v| v.to_str().ok())
                                .unwrap_or("-");
                            // The path only: a query may hold a person's email (the
                            // console's search) or a one-time link's token.
                            let path = req.uri().path();
                            tracing::info_span!("request", method = %req.method(), path = %path, request_id)
                        })
                        .on_failure(telemetry::log_failed_response),
                )
                .layer(middleware::from_fn(refusals::framework_refusals))
                .layer(TimeoutLayer::with_status_code(
                    StatusCode::REQUEST_TIMEOUT,
                    state.config.limits.request_timeout,
                ))
                .layer(DefaultBodyLimit::max(state.config.max_body_bytes)),
        )
        .with_state(state))
}

/// The console's password and the metrics token, when the configuration sets none: made
/// for this run, printed once here and kept nowhere else. Nothing is open by default.
fn make_missing_secrets(config: &mut Config) {
    if config.operator_password.is_none() && config.operator_password_hash.is_none() {
        let password = credentials::random_secret(20);
        println!("operator console: /operator, password for this run: {password}");
        config.operator_password = Some(password);
    }
    if config.metrics_token.is_none() {
        let token = credentials::random_secret(32);
        println!("metrics: /metrics, bearer token for this run: {token}");
        config.metrics_token = Some(token);
    }
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
