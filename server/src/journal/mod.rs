//! The order journal: everything that happened to one order, in order, for the operator who
//! reads it at `/operator/orders/{order_no}` (docs/design.md, "The order journal").
//!
//! Each entry is written in the transaction of the thing it records, so a rolled-back attempt
//! leaves none and a committed one always has its entry. Row changes (the order's status,
//! payments and their provider calls, callbacks' outcomes, outbox events and their
//! publication, first deliveries, dead letters, fulfillments, emails, findings, refunds) are
//! written by triggers (`migrations/0011_order_journal.sql`). What changes no row is written
//! here, by the code that sees it:
//!
//! * the request that completed, in the transaction that stores its answer with the key
//!   ([`request`], through the executor's `on_complete` hook);
//! * a repeat answered from the key table (replay, 409, 422), which has no transaction and
//!   costs one read: it is noted in memory and written a moment later, off its answer's
//!   path ([`RepeatLog`]). The repeats of one key, of one kind, in one minute are one
//!   entry that counts them, so a client retrying in a loop cannot flood the story;
//! * a duplicate callback ([`duplicate_callback`]) and a redelivery the consumer skipped
//!   ([`skipped_deliveries`]), in the transactions that found them to be duplicates.
//!
//! Stories are kept as long as idempotency keys are, from their last entry (the retention
//! worker): a story is forgotten whole, never cut.

mod read;
mod repeats;

use std::time::Duration;

use once_core::{IdempotentRequest, StoredResponse};
use once_events::outbox::Event;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

pub use read::{for_order, search, Entry, Found, Journal, OrderHeading, View, Window, PAGE};
pub use repeats::{RepeatLog, RepeatWriter, FLUSH_EVERY};

/// Who acts in a transaction, for its entries' `actor` (requests are the default, `shop`).
#[derive(Clone, Copy, Debug)]
pub enum Actor {
    Callback,
    Reconciler,
    Fulfillment,
    /// The shop cancelling an order nobody paid in time (`orders::expire_unpaid`).
    Expiry,
}

impl Actor {
    fn as_str(self) -> &'static str {
        match self {
            Self::Callback => "callback",
            Self::Reconciler => "reconciler",
            Self::Fulfillment => "fulfillment",
            Self::Expiry => "expiry",
        }
    }
}

/// Names the actor of every entry written in this transaction from here on.
pub async fn acting_as(tx: &mut PgConnection, actor: Actor) -> Result<(), sqlx::Error> {
    sqlx::query_scalar!("SELECT set_config('once.actor', $1, true)", actor.as_str())
        .fetch_one(tx)
        .await?;
    Ok(())
}

/// The order a request is about: named in its operation (`POST /api/orders/{id}/payments`),
/// or in the `Location` of the answer that made it (`/api/orders/{id}`).
pub fn order_of(operation: &str, answer: Option<&StoredResponse>) -> Option<Uuid> {
    let from_path = |path: &str| {
        path.strip_prefix("/api/orders/")
            .and_then(|rest| rest.split('/').next())
            .and_then(|id| Uuid::parse_str(id).ok())
    };
    operation
        .split_once(' ')
        .and_then(|(_, path)| from_path(path))
        .or_else(|| {
            answer
                .and_then(|a| a.header("location"))
                .and_then(from_path)
        })
}

/// The operation without the order's id, as an operator reads it.
fn operation_words(operation: &str) -> String {
    match order_of(operation, None) {
        Some(id) => operation.replace(&id.to_string(), "{id}"),
        None => operation.to_owned(),
    }
}

/// "201", or "422 out-of-stock": the status and, for a problem, its type.
fn answer_words(answer: &StoredResponse) -> String {
    // Only a refusal's body is read: a replayed order's is not parsed for nothing.
    let problem = (answer.status >= 400)
        .then(|| serde_json::from_slice::<serde_json::Value>(&answer.body).ok())
        .flatten()
        .and_then(|body| body.get("type")?.as_str().map(str::to_owned))
        .map(|kind| kind.rsplit('/').next().unwrap_or_default().to_owned());
    match problem {
        Some(kind) => format!("{} {kind}", answer.status),
        None => answer.status.to_string(),
    }
}

/// The request that completed, in the transaction that stores its answer with the key. A
/// request that made no order (an order refused for stock) is no order's story.
pub async fn request(
    tx: &mut PgConnection,
    req: &IdempotentRequest,
    answer: &StoredResponse,
) -> Result<(), sqlx::Error> {
    let Some(order_id) = order_of(&req.operation, Some(answer)) else {
        return Ok(());
    };
    let summary = format!(
        "{} answered {}: executed",
        operation_words(&req.operation),
        answer_words(answer)
    );
    // Only if the order is the session's: a request that names someone else's order (a
    // guessed id, a key reused on it) is no story's, and is not written.
    sqlx::query!(
        "INSERT INTO order_journal (order_id, kind, summary, scope_tag, idempotency_key)
         SELECT id, 'request', $2, journal_scope_tag($3), $4
           FROM orders WHERE id = $1 AND session_id = $3",
        order_id,
        summary,
        &req.scope,
        req.key.as_str(),
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// A provider callback whose transaction number was recorded before: nothing changed.
pub async fn duplicate_callback(
    tx: &mut PgConnection,
    tx_no: &str,
    event_type: &str,
    charge_id: Option<&str>,
    reference: Option<&str>,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO order_journal (order_id, kind, summary, charge_id)
         SELECT o, 'callback',
                'callback ' || $3 || ' (provider tx ' || $4 || '): duplicate, nothing changed', $2
           FROM journal_order_of_payment($1, $2) AS o WHERE o IS NOT NULL",
        reference,
        charge_id,
        event_type,
        tx_no,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// Deliveries of events `consumer` had consumed before: skipped, nothing applied.
pub async fn skipped_deliveries(
    tx: &mut PgConnection,
    consumer: &str,
    events: &[&Event],
) -> Result<(), sqlx::Error> {
    let events: Vec<&Event> = events
        .iter()
        .copied()
        .filter(|e| e.aggregate_type == "order")
        .collect();
    let ids: Vec<Uuid> = events.iter().map(|e| e.id).collect();
    let orders: Vec<Uuid> = events.iter().map(|e| e.aggregate_id).collect();
    let types: Vec<String> = events.iter().map(|e| e.event_type.clone()).collect();
    sqlx::query!(
        "INSERT INTO order_journal (order_id, kind, summary, event_id)
         SELECT o, 'dedup', ty || ' delivered to ' || $1 || ' again: consumed before, skipped', id
           FROM unnest($2::uuid[], $3::uuid[], $4::text[]) AS u (id, o, ty)",
        consumer,
        &ids,
        &orders,
        &types,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// Forgets what the retention lets go (docs/design.md, "The order journal"). A story's
/// changes (its order's, its money's: [`read::MONEY_KINDS`], and the events, deliveries and
/// letters that follow them) are forgotten together, once its last change is `retention`
/// old: a story is never cut. Its requests and repeats are forgotten with their keys, each
/// once it is `retention` old: they change nothing, so a shopper sending them cannot keep a
/// story alive, nor grow it past what their rate writes in one retention. A batch at a
/// time, so a large backlog never holds one long transaction. How many were forgotten.
pub async fn forget_old(db: &PgPool, retention: Duration) -> Result<u64, sqlx::Error> {
    let cutoff_ms = retention.as_millis() as i64;
    // Requests and repeats, by age alone (`order_journal_requests_at_idx`).
    let requests = in_batches(|| {
        sqlx::query!(
            "DELETE FROM order_journal WHERE id IN (
                 SELECT id FROM order_journal
                  WHERE kind IN ('request', 'replay', 'in_progress', 'key_reused')
                    AND at < now() - $1::bigint * interval '1 millisecond'
                  LIMIT 5000)",
            cutoff_ms,
        )
        .execute(db)
    })
    .await?;
    // The changes of stories whose last change is older than the retention.
    let changes = in_batches(|| {
        sqlx::query!(
            "WITH cutoff AS (SELECT now() - $1::bigint * interval '1 millisecond' AS at)
             DELETE FROM order_journal WHERE id IN (
                 SELECT j.id FROM order_journal j, cutoff
                  WHERE j.at < cutoff.at
                    AND j.kind NOT IN ('request', 'replay', 'in_progress', 'key_reused')
                    -- The same kinds as the money index's (migration 0014), read through it.
                    AND NOT EXISTS (SELECT 1 FROM order_journal n
                                     WHERE n.order_id = j.order_id AND n.at >= cutoff.at
                                       AND n.kind IN ('status', 'payment', 'provider_call',
                                                      'callback', 'refund', 'finding',
                                                      'fulfillment', 'email', 'dead_letter'))
                  LIMIT 5000)",
            cutoff_ms,
        )
        .execute(db)
    })
    .await?;
    Ok(requests + changes)
}

/// Runs a DELETE of at most 5,000 rows until it deletes fewer; how many it deleted in all.
async fn in_batches<F, Fut>(delete: F) -> Result<u64, sqlx::Error>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<sqlx::postgres::PgQueryResult, sqlx::Error>>,
{
    let mut deleted = 0;
    loop {
        let batch = delete().await?.rows_affected();
        deleted += batch;
        if batch < 5000 {
            return Ok(deleted);
        }
    }
}
