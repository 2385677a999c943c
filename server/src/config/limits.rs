//! The bounds the configuration sets: on what one client, one session and all connections
//! may take, on failed console logins, and on every database wait.

use std::time::Duration;

use crate::client_addr::TrustedProxies;

/// Bounds on what one client, one session and all connections together may take
/// (docs/design.md, "Hostile traffic").
#[derive(Clone, Debug)]
pub struct Limits {
    /// Requests per second from one client address (`RATE_LIMIT_PER_CLIENT`, with
    /// `RATE_LIMIT_PER_CLIENT_BURST`); 0 turns the limit off.
    pub per_client: Rate,
    /// Writes per second from one session (`RATE_LIMIT_WRITES_PER_SESSION`, `…_BURST`).
    pub writes_per_session: Rate,
    /// Proxies whose `X-Forwarded-For` names the client (`TRUSTED_PROXIES`).
    pub trusted_proxies: TrustedProxies,
    /// Sessions one client may open in an hour, this instance's count
    /// (`NEW_SESSIONS_PER_CLIENT_PER_HOUR`; 0: no limit). A read that would open one past it
    /// is 429 `rate-limited`: a client's unused sessions are rows, kept an hour.
    pub new_sessions_per_client_per_hour: u32,
    /// Orders one session may have waiting for payment (`QUOTA_PENDING_ORDERS`; 0: no quota).
    pub pending_orders: u32,
    /// Orders one client may have waiting for payment, over all its sessions, counted by the
    /// database (`QUOTA_PENDING_ORDERS_PER_CLIENT`; 0: no quota).
    pub pending_orders_per_client: u32,
    /// Orders one client may make in an hour, over all its sessions and whatever became of
    /// them, counted by the database (`QUOTA_ORDERS_PER_CLIENT_PER_HOUR`; 0: no quota).
    /// Cancelling an order frees its pending place, never this.
    pub orders_per_client_per_hour: u32,
    /// Idempotency keys one session may claim in an hour (`QUOTA_KEYS_PER_HOUR`; 0: no
    /// quota).
    pub keys_per_hour: u32,
    /// "Add to cart" calls one session may make in an hour (`QUOTA_CART_ADDS_PER_HOUR`; 0:
    /// no quota).
    pub cart_adds_per_hour: u32,
    /// How long a connection may take to send a request's headers (`HEADER_READ_TIMEOUT_MS`).
    pub header_read_timeout: Duration,
    /// How long a request may take from its headers to its answer (`REQUEST_TIMEOUT_MS`).
    pub request_timeout: Duration,
    /// Connections served at once; past it a new one is answered 503 and closed
    /// (`MAX_CONNECTIONS`).
    pub max_connections: usize,
    /// Connections served at once from one client (an IPv4 address, an IPv6 /64), trusted
    /// proxies excepted (`MAX_CONNECTIONS_PER_CLIENT`).
    pub max_connections_per_client: usize,
    /// The most a request's line and headers may take, in bytes (`MAX_HEADER_BYTES`, at least
    /// 8192): what a connection may make the server hold before its request is complete.
    /// Past it the answer is 431 and the connection is closed.
    pub max_header_bytes: usize,
}

/// The console's login throttle (docs/design.md, "The operator console"). Failures are
/// counted in the database, per client address and for all clients together; past a
/// limit, logins are refused unchecked until the lock ends.
#[derive(Clone, Copy, Debug)]
pub struct LoginLimits {
    /// Failed logins one client address may make within `window` before it is locked out.
    pub max_failures: u32,
    pub window: Duration,
    /// The first lockout; each next one lasts twice as long, up to `lockout_cap`.
    pub lockout: Duration,
    pub lockout_cap: Duration,
    /// Failed logins all clients together may make within `global_window`; past it, every
    /// login is refused for `global_lockout` (guessing spread over many addresses).
    pub global_max_failures: u32,
    pub global_window: Duration,
    pub global_lockout: Duration,
}

/// Every database wait is bounded, so a stuck statement, a lock held by a stalled request or
/// a transaction left open by a paused process cannot hold a request (or a lease) forever.
#[derive(Clone, Copy, Debug)]
pub struct DbLimits {
    /// `statement_timeout`: the longest any one statement may run.
    pub statement_timeout: Duration,
    /// `lock_timeout`: the longest a statement may wait for a row or table lock.
    pub lock_timeout: Duration,
    /// `idle_in_transaction_session_timeout`: a transaction left idle this long (its
    /// process paused or gone) is ended by the server, releasing its locks.
    pub idle_in_transaction_timeout: Duration,
}

/// A sustained rate with a burst on top; a rate of 0 turns the limit off (`throttle`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rate {
    pub per_second: u32,
    pub burst: u32,
}
