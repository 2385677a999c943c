//! All configuration in one struct, read from the environment once in `main` and passed
//! down. Every value has a default that runs on a developer machine.

use std::{net::SocketAddr, time::Duration};

use app::site_files::beside_binary;
use leptos::config::{Env, LeptosOptions};

mod answers;
mod limits;
mod payment;
mod smtp;
mod waits;

pub use answers::AnswerCacheSettings;
pub use limits::{DbLimits, Limits, LoginLimits, Rate};
pub use payment::{ProviderChoice, StripeSettings};
pub use smtp::{Security, SmtpRelay};
pub use waits::IdempotencyWaits;

use crate::client_addr::TrustedProxies;

#[derive(Clone, Debug)]
pub struct Config {
    /// Where the shop database lives; created at start if missing.
    pub database_url: String,
    /// Address the HTTP server listens on (`LEPTOS_SITE_ADDR`, as cargo-leptos sets it).
    pub listen_addr: SocketAddr,
    /// How long a claimed idempotency key stays locked to its first request.
    pub idempotency_lease: Duration,
    /// The waits of repeats for their key's running request (`Prefer: wait`).
    pub idempotency_waits: IdempotencyWaits,
    /// How long completed keys are kept before the purge worker deletes them.
    pub idempotency_retention: Duration,
    /// Completed answers kept in memory for repeats.
    pub answer_cache: AnswerCacheSettings,
    /// How long a finished order (fulfilled or cancelled) keeps its shopper's email and
    /// address before the shop forgets them (`PERSONAL_DATA_RETENTION_DAYS`, docs/operations.md).
    pub personal_data_retention: Duration,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// The provider payments go through (`PAYMENT_PROVIDER`: the sandbox, or Stripe).
    pub payment_provider: ProviderChoice,
    /// The sandbox provider's base URL.
    pub provider_url: String,
    /// The key the shop calls the sandbox provider with (`PROVIDER_API_KEY`, the one the
    /// provider was started with). Required with the sandbox, with no built-in default.
    pub provider_api_key: String,
    /// How long one call to the provider may take before it counts as lost.
    pub provider_timeout: Duration,
    /// How long a pending attempt must have been quiet (no charge call) before another
    /// intent may close it as never charged, once the provider reports no charge for it.
    pub payment_settle_grace: Duration,
    /// How long an order may wait for its payment before the shop cancels it
    /// (`UNPAID_ORDER_EXPIRY_SECS`, two hours; `orders::cancel::expire_unpaid`).
    pub unpaid_order_expiry: Duration,
    /// Secrets that may sign the sandbox provider's callbacks; several, so a secret can be
    /// rotated. Required with the sandbox: there is no built-in default anyone could read in
    /// the source.
    pub webhook_secrets: Vec<String>,
    /// Secrets that key request fingerprints (`idempotency::fingerprint`), newest first;
    /// several, so a secret can be rotated. Required, like the webhook secrets.
    pub fingerprint_secrets: Vec<String>,
    /// Bounds on every database wait (see [`DbLimits`]).
    pub db_limits: DbLimits,
    /// Test-only fault injection (hold points, forced failures); off unless asked for.
    pub fault_injection: bool,
    /// The outbox relay, the bus, the consumers and the mailer (see [`Events`]).
    pub events: Events,
    /// The operator console's password, in plain text (for development); when neither it
    /// nor the hash is set, one is generated and printed at start.
    pub operator_password: Option<String>,
    /// The shop is reached over HTTPS (TLS ended in front of it): `Secure` cookies and HSTS
    /// (`SERVED_OVER_HTTPS`).
    pub served_over_https: bool,
    /// What one client or session may ask of this server (see [`Limits`]).
    pub limits: Limits,
    /// The console's password as an argon2 PHC string (`server hash-password` makes one),
    /// so the configuration holds no password. Not together with `operator_password`.
    pub operator_password_hash: Option<String>,
    /// How failed console logins are throttled (see [`LoginLimits`]).
    pub login_limits: LoginLimits,
    /// The bearer token `/metrics` asks for; when unset, one is generated and printed at
    /// start, so the counters are never public.
    pub metrics_token: Option<String>,
    /// How often the reconciler compares our payments with the provider's ledger.
    pub reconcile_every: Duration,
    /// How far before the last run's latest ledger entry a run starts reading: longer than
    /// any charge's transaction at the provider, so a late commit is still seen.
    pub reconcile_overlap: Duration,
    pub leptos: LeptosOptions,
}

/// How events travel from the outbox to their consumers, and how emails leave.
#[derive(Clone, Debug)]
pub struct Events {
    /// Run the relay, the fulfillment consumer and the mailer as tasks inside the server
    /// (`RUN_WORKERS=all`, the default) or not at all (`none`: they run as `server worker …`).
    pub run_workers: bool,
    /// NATS JetStream carries events when set; otherwise the PostgreSQL bus does.
    pub nats_url: Option<String>,
    /// The JetStream stream, and the subject prefix its events are published under.
    pub nats_stream: String,
    pub nats_subject_prefix: String,
    /// Copies of the stream a NATS cluster keeps (`NATS_REPLICAS`, 1 to 5).
    pub nats_replicas: usize,
    /// The relay the mailer delivers through (`SMTP_URL`); without it emails are kept in
    /// the database.
    pub smtp: Option<SmtpRelay>,
    pub mail_from: String,
    /// How often the relay and the workers look for work when no notification woke them.
    pub poll_every: Duration,
    /// How long published events (and settled bus messages) are kept.
    pub retention: Duration,
    /// A handler's tries before its message becomes a dead letter.
    pub max_attempts: u32,
    /// Deliveries a consumer fetches and applies in one transaction.
    pub consumer_batch: usize,
    /// Backoff between tries: `retry_base * 2^(try-1)`, capped, with full jitter.
    pub retry_base: Duration,
    pub retry_cap: Duration,
    /// How long a delivered message may go unanswered before the bus delivers it again.
    pub ack_wait: Duration,
    /// Test-only (with fault injection on): how long the consumer waits between committing
    /// its side effects and acknowledging the message, so a test can kill it in between.
    pub pause_before_ack: Duration,
}

impl Events {
    /// What the event chain's bus needs of this (`once_events::bus::connect`).
    pub fn bus(&self) -> once_events::BusConfig {
        once_events::BusConfig {
            nats_url: self.nats_url.clone(),
            nats_stream: self.nats_stream.clone(),
            nats_subject_prefix: self.nats_subject_prefix.clone(),
            poll_every: self.poll_every,
            retention: self.retention,
            nats_duplicate_window: once_events::bus::nats::DUPLICATE_WINDOW,
            nats_replicas: self.nats_replicas,
        }
    }
}

/// Whether the site was built with content hashes in its file names: cargo-leptos
/// (`hash-files`) then writes the names to `hash.txt` beside the server binary, where Leptos
/// reads them to link the pages to the script, bundle and stylesheet. `LEPTOS_HASH_FILES`
/// says so explicitly; `true` without the file is refused (every page would fail).
fn hashed_names(setting: Option<String>, hash_file: &str) -> anyhow::Result<bool> {
    let names = beside_binary(hash_file).is_some_and(|names| names.exists());
    match setting.map(|on| on.parse::<bool>()).transpose()? {
        Some(true) if !names => {
            anyhow::bail!(
                "LEPTOS_HASH_FILES=true, but there is no {hash_file} beside the server binary"
            )
        }
        Some(on) => Ok(on),
        None => Ok(names),
    }
}

/// The file cargo-leptos writes the hashed names to (Leptos's default name for it).
const HASH_FILE: &str = "hash.txt";

/// The smallest read buffer hyper accepts; `MAX_HEADER_BYTES` may not be less.
pub const MIN_HEADER_BYTES: usize = 8192;

/// The smallest lease the heartbeat can keep alive: it renews every third of the lease.
pub const MIN_LEASE: Duration = Duration::from_millis(300);
/// A lease longer than this holds a key hostage for too long after its holder dies.
pub const MAX_LEASE: Duration = Duration::from_secs(600);

impl Config {
    pub fn from_env() -> anyhow::Result<Self> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// The configuration from any source of variables (the environment, or a test's map).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let var_or = |name: &str, default: &str| var(name).unwrap_or_else(|| default.to_owned());
        let millis = |name: &str, default: &str| -> anyhow::Result<Duration> {
            Ok(Duration::from_millis(var_or(name, default).parse()?))
        };
        let listen_addr: SocketAddr = var_or("LEPTOS_SITE_ADDR", "127.0.0.1:3000").parse()?;
        // cargo-leptos names it when it runs the server (`cargo leptos watch`, `serve`).
        let hash_file = var_or("LEPTOS_HASH_FILE_NAME", HASH_FILE);
        let leptos = LeptosOptions::builder()
            .output_name(var_or("LEPTOS_OUTPUT_NAME", "once"))
            .site_root(var_or("LEPTOS_SITE_ROOT", "target/site"))
            .site_pkg_dir(var_or("LEPTOS_SITE_PKG_DIR", "pkg"))
            .site_addr(listen_addr)
            .reload_port(var_or("LEPTOS_RELOAD_PORT", "3001").parse::<u32>()?)
            .hash_file(std::sync::Arc::from(&*hash_file))
            .hash_files(hashed_names(var("LEPTOS_HASH_FILES"), &hash_file)?)
            .env(
                match var_or("LEPTOS_ENV", "PROD").to_ascii_lowercase().as_str() {
                    "dev" | "development" => Env::DEV,
                    _ => Env::PROD,
                },
            )
            .build();
        let secrets = |name: &str| -> Vec<String> {
            var_or(name, "")
                .split(',')
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
                .collect()
        };
        let webhook_secrets = secrets("PROVIDER_WEBHOOK_SECRETS");
        let fingerprint_secrets = secrets("IDEMPOTENCY_FINGERPRINT_SECRETS");
        let config = Self {
            database_url: var_or("DATABASE_URL", "postgres://postgres@localhost:5432/once"),
            listen_addr,
            idempotency_lease: millis("IDEMPOTENCY_LEASE_MS", "30000")?,
            idempotency_waits: IdempotencyWaits {
                longest: millis("IDEMPOTENCY_WAIT_MAX_MS", "5000")?,
                fallback: millis("IDEMPOTENCY_WAIT_FALLBACK_MS", "2000")?,
                per_instance: var_or("IDEMPOTENCY_WAITERS", "10000").parse()?,
                per_scope: var_or("IDEMPOTENCY_WAITERS_PER_SCOPE", "20").parse()?,
            },
            idempotency_retention: Duration::from_secs(
                var_or("IDEMPOTENCY_RETENTION_SECS", "86400").parse()?,
            ),
            personal_data_retention: Duration::from_secs(
                86_400 * var_or("PERSONAL_DATA_RETENTION_DAYS", "90").parse::<u64>()?,
            ),
            answer_cache: AnswerCacheSettings {
                max_bytes: var_or("ANSWER_CACHE_BYTES", "67108864").parse()?,
                time_to_live: Duration::from_secs(var_or("ANSWER_CACHE_TTL_SECS", "3600").parse()?),
            },
            max_body_bytes: var_or("MAX_BODY_BYTES", "65536").parse()?,
            payment_provider: ProviderChoice::from_vars(&var, &secrets)?,
            provider_url: var_or("PROVIDER_URL", "http://127.0.0.1:3100"),
            provider_api_key: var_or("PROVIDER_API_KEY", ""),
            provider_timeout: millis("PROVIDER_TIMEOUT_MS", "10000")?,
            payment_settle_grace: millis("PAYMENT_SETTLE_GRACE_MS", "60000")?,
            unpaid_order_expiry: Duration::from_secs(
                var_or("UNPAID_ORDER_EXPIRY_SECS", "7200").parse()?,
            ),
            webhook_secrets,
            fingerprint_secrets,
            db_limits: DbLimits {
                statement_timeout: millis("DB_STATEMENT_TIMEOUT_MS", "10000")?,
                lock_timeout: millis("DB_LOCK_TIMEOUT_MS", "5000")?,
                idle_in_transaction_timeout: millis("DB_IDLE_IN_TRANSACTION_TIMEOUT_MS", "60000")?,
            },
            fault_injection: matches!(
                var_or("ONCE_FAULT_INJECTION", "off").as_str(),
                "on" | "1" | "true"
            ),
            events: Events {
                run_workers: var_or("RUN_WORKERS", "all") != "none",
                nats_url: var("NATS_URL").filter(|u| !u.is_empty()),
                nats_stream: var_or("NATS_STREAM", "ONCE_EVENTS"),
                nats_subject_prefix: var_or("NATS_SUBJECT_PREFIX", "once.events"),
                nats_replicas: var_or("NATS_REPLICAS", "1").parse()?,
                smtp: var("SMTP_URL")
                    .filter(|u| !u.is_empty())
                    .map(|u| SmtpRelay::parse(&u))
                    .transpose()?,
                mail_from: var_or("MAIL_FROM", "Once <orders@once.test>"),
                poll_every: millis("EVENTS_POLL_MS", "1000")?,
                retention: Duration::from_secs(var_or("EVENTS_RETENTION_SECS", "604800").parse()?),
                max_attempts: var_or("CONSUMER_MAX_ATTEMPTS", "5").parse()?,
                consumer_batch: var_or("CONSUMER_BATCH", "100").parse()?,
                retry_base: millis("CONSUMER_RETRY_BASE_MS", "500")?,
                retry_cap: millis("CONSUMER_RETRY_CAP_MS", "60000")?,
                ack_wait: millis("BUS_ACK_WAIT_MS", "30000")?,
                pause_before_ack: millis("ONCE_FAULT_PAUSE_BEFORE_ACK_MS", "0")?,
            },
            served_over_https: matches!(
                var_or("SERVED_OVER_HTTPS", "false").as_str(),
                "true" | "1" | "on"
            ),
            limits: Limits {
                per_client: Rate {
                    per_second: var_or("RATE_LIMIT_PER_CLIENT", "100").parse()?,
                    burst: var_or("RATE_LIMIT_PER_CLIENT_BURST", "400").parse()?,
                },
                writes_per_session: Rate {
                    per_second: var_or("RATE_LIMIT_WRITES_PER_SESSION", "10").parse()?,
                    burst: var_or("RATE_LIMIT_WRITES_PER_SESSION_BURST", "40").parse()?,
                },
                trusted_proxies: TrustedProxies::parse(&var_or("TRUSTED_PROXIES", ""))?,
                new_sessions_per_client_per_hour: var_or("NEW_SESSIONS_PER_CLIENT_PER_HOUR", "300")
                    .parse()?,
                pending_orders: var_or("QUOTA_PENDING_ORDERS", "20").parse()?,
                pending_orders_per_client: var_or("QUOTA_PENDING_ORDERS_PER_CLIENT", "200")
                    .parse()?,
                orders_per_client_per_hour: var_or("QUOTA_ORDERS_PER_CLIENT_PER_HOUR", "300")
                    .parse()?,
                keys_per_hour: var_or("QUOTA_KEYS_PER_HOUR", "1000").parse()?,
                cart_adds_per_hour: var_or("QUOTA_CART_ADDS_PER_HOUR", "500").parse()?,
                header_read_timeout: millis("HEADER_READ_TIMEOUT_MS", "10000")?,
                request_timeout: millis("REQUEST_TIMEOUT_MS", "60000")?,
                max_connections: var_or("MAX_CONNECTIONS", "2000").parse()?,
                max_connections_per_client: var_or("MAX_CONNECTIONS_PER_CLIENT", "100").parse()?,
                max_header_bytes: var_or("MAX_HEADER_BYTES", "16384").parse()?,
            },
            operator_password: var("OPERATOR_PASSWORD").filter(|p| !p.is_empty()),
            operator_password_hash: var("OPERATOR_PASSWORD_HASH").filter(|h| !h.is_empty()),
            login_limits: LoginLimits {
                max_failures: var_or("OPERATOR_LOGIN_MAX_FAILURES", "5").parse()?,
                window: millis("OPERATOR_LOGIN_WINDOW_MS", "900000")?,
                lockout: millis("OPERATOR_LOCKOUT_MS", "300000")?,
                lockout_cap: millis("OPERATOR_LOCKOUT_MAX_MS", "3600000")?,
                global_max_failures: var_or("OPERATOR_LOGIN_GLOBAL_MAX_FAILURES", "100").parse()?,
                global_window: millis("OPERATOR_LOGIN_GLOBAL_WINDOW_MS", "60000")?,
                global_lockout: millis("OPERATOR_LOGIN_GLOBAL_LOCKOUT_MS", "60000")?,
            },
            metrics_token: var("METRICS_TOKEN").filter(|t| !t.is_empty()),
            reconcile_every: Duration::from_secs(var_or("RECONCILE_EVERY_SECS", "300").parse()?),
            reconcile_overlap: Duration::from_secs(
                var_or("RECONCILE_OVERLAP_SECS", "600").parse()?,
            ),
            leptos,
        };
        config.validate()?;
        Ok(config)
    }

    /// Refuses combinations that would break a defence rather than run with them.
    pub fn validate(&self) -> anyhow::Result<()> {
        self.payment_provider
            .validate(&self.webhook_secrets, self.served_over_https)?;
        anyhow::ensure!(
            !self.fingerprint_secrets.is_empty(),
            "IDEMPOTENCY_FINGERPRINT_SECRETS is not set: request fingerprints are keyed with a \
             secret, so that the key table tells nothing of a request's body, such as a card \
             number (scripts/run generates one)"
        );
        anyhow::ensure!(
            self.fingerprint_secrets.iter().all(|s| s.len() >= 16),
            "every IDEMPOTENCY_FINGERPRINT_SECRETS entry must be at least 16 characters"
        );
        anyhow::ensure!(
            (MIN_LEASE..=MAX_LEASE).contains(&self.idempotency_lease),
            "IDEMPOTENCY_LEASE_MS must be between {} and {} ms: the heartbeat renews the \
             lease every third of it",
            MIN_LEASE.as_millis(),
            MAX_LEASE.as_millis()
        );
        anyhow::ensure!(
            self.idempotency_retention > self.idempotency_lease,
            "IDEMPOTENCY_RETENTION_SECS must be longer than the lease"
        );
        anyhow::ensure!(
            self.idempotency_waits.longest < self.limits.request_timeout,
            "IDEMPOTENCY_WAIT_MAX_MS must be below REQUEST_TIMEOUT_MS: a wait ends in an answer"
        );
        // Each fallback read reads every key waited for: a few a second at most.
        anyhow::ensure!(
            self.idempotency_waits.fallback >= Duration::from_millis(100),
            "IDEMPOTENCY_WAIT_FALLBACK_MS must be at least 100"
        );
        anyhow::ensure!(
            !self.provider_timeout.is_zero()
                && self.payment_settle_grace >= 2 * self.provider_timeout,
            "PAYMENT_SETTLE_GRACE_MS must be at least twice PROVIDER_TIMEOUT_MS: a charge call \
             still under way must never look abandoned"
        );
        anyhow::ensure!(
            self.unpaid_order_expiry > self.payment_settle_grace,
            "UNPAID_ORDER_EXPIRY_SECS must be longer than PAYMENT_SETTLE_GRACE_MS: an order is \
             never cancelled while its payment may still be settling"
        );
        let limits = &self.db_limits;
        anyhow::ensure!(
            !limits.lock_timeout.is_zero()
                && !limits.statement_timeout.is_zero()
                && !limits.idle_in_transaction_timeout.is_zero(),
            "database timeouts must be positive: zero means no bound at all"
        );
        anyhow::ensure!(
            limits.lock_timeout <= limits.statement_timeout,
            "DB_LOCK_TIMEOUT_MS must not exceed DB_STATEMENT_TIMEOUT_MS"
        );
        anyhow::ensure!(
            limits.idle_in_transaction_timeout > limits.statement_timeout,
            "DB_IDLE_IN_TRANSACTION_TIMEOUT_MS must exceed DB_STATEMENT_TIMEOUT_MS"
        );
        let limits = &self.limits;
        anyhow::ensure!(
            !limits.header_read_timeout.is_zero()
                && limits.max_connections > 0
                && limits.max_connections_per_client > 0,
            "HEADER_READ_TIMEOUT_MS, MAX_CONNECTIONS and MAX_CONNECTIONS_PER_CLIENT must be positive"
        );
        anyhow::ensure!(
            limits.max_header_bytes >= MIN_HEADER_BYTES,
            "MAX_HEADER_BYTES must be at least {MIN_HEADER_BYTES} (the HTTP server's own minimum)"
        );
        anyhow::ensure!(
            limits.request_timeout > self.provider_timeout,
            "REQUEST_TIMEOUT_MS must exceed PROVIDER_TIMEOUT_MS: a payment waits for the provider"
        );
        let events = &self.events;
        anyhow::ensure!(
            events.max_attempts >= 1
                && !events.poll_every.is_zero()
                && (1..=1000).contains(&events.consumer_batch),
            "CONSUMER_MAX_ATTEMPTS and EVENTS_POLL_MS must be positive, CONSUMER_BATCH 1 to 1000"
        );
        anyhow::ensure!(
            (1..=5).contains(&events.nats_replicas),
            "NATS_REPLICAS must be 1 to 5 (JetStream keeps at most five copies)"
        );
        anyhow::ensure!(
            events.ack_wait > events.pause_before_ack && events.retry_base <= events.retry_cap,
            "BUS_ACK_WAIT_MS must exceed the pause before an ack, and CONSUMER_RETRY_BASE_MS \
             must not exceed CONSUMER_RETRY_CAP_MS"
        );
        if let ProviderChoice::Sandbox = self.payment_provider {
            anyhow::ensure!(
                self.provider_api_key.len() >= 16,
                "PROVIDER_API_KEY is not set (or shorter than 16 characters): the sandbox \
                 provider takes calls with its merchant's key only (scripts/run generates one)"
            );
            anyhow::ensure!(
                self.provider_api_key.bytes().all(|b| b.is_ascii_graphic()),
                "PROVIDER_API_KEY must be printable ASCII without spaces (it is sent in a \
                 header; a stray line ending from an env file would make every call a 401)"
            );
        }
        self.validate_console()
    }

    /// The console's password, its login throttle, and the metrics token.
    fn validate_console(&self) -> anyhow::Result<()> {
        anyhow::ensure!(
            self.operator_password.is_none() || self.operator_password_hash.is_none(),
            "set OPERATOR_PASSWORD or OPERATOR_PASSWORD_HASH, not both: which one would count \
             is not obvious"
        );
        if let Some(hash) = &self.operator_password_hash {
            crate::credentials::check_password_hash(hash).map_err(|e| {
                anyhow::anyhow!(
                    "OPERATOR_PASSWORD_HASH is not an argon2 PHC string ({e}): make one with \
                     `server hash-password`"
                )
            })?;
        }
        let limits = &self.login_limits;
        anyhow::ensure!(
            limits.max_failures >= 1 && limits.global_max_failures >= 1,
            "OPERATOR_LOGIN_MAX_FAILURES and OPERATOR_LOGIN_GLOBAL_MAX_FAILURES must be positive"
        );
        anyhow::ensure!(
            [
                limits.window,
                limits.lockout,
                limits.global_window,
                limits.global_lockout
            ]
            .iter()
            .all(|d| !d.is_zero()),
            "the login windows and lockouts must be positive: zero would lock no one out"
        );
        anyhow::ensure!(
            limits.lockout <= limits.lockout_cap,
            "OPERATOR_LOCKOUT_MS must not exceed OPERATOR_LOCKOUT_MAX_MS"
        );
        anyhow::ensure!(
            self.metrics_token.as_ref().is_none_or(|t| t.len() >= 16),
            "METRICS_TOKEN must be at least 16 characters"
        );
        Ok(())
    }
}

/// Whether `url` names this machine (a loopback address, or `localhost`).
fn on_this_machine(url: &reqwest::Url) -> bool {
    match url.host_str() {
        Some("localhost") => true,
        Some(host) => host
            .trim_matches(|c| c == '[' || c == ']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback()),
        None => false,
    }
}

#[cfg(test)]
mod tests;
