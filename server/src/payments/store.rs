//! The SQL of payment attempts.

use std::time::Duration;

use serde::Serialize;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use crate::db::OnConstraint;

/// The idempotency key of the request that made an attempt: the attempt's identity.
pub struct AttemptKey {
    pub scope: String,
    pub key: String,
}

#[derive(Debug)]
pub struct Attempt {
    pub id: Uuid,
    pub order_id: Uuid,
    pub amount_cents: i64,
    pub currency: String,
    /// `pending` unless something settled it since (a callback, or a lookup at the
    /// provider when another intent found it blocking the order).
    pub status: String,
    pub failure_code: Option<String>,
    /// The provider's object recorded for it before it was confirmed (a Stripe
    /// PaymentIntent); none with the sandbox, or before the first try recorded it.
    pub provider_intent_id: Option<String>,
    /// Recorded by this call, with its first charge call stamped in the same commit: that
    /// call needs no stamp of its own (see [`begin_attempt`]).
    pub stamped_now: bool,
}

/// What the API shows of a payment.
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct PaymentView {
    pub id: Uuid,
    pub order_id: Uuid,
    /// `pending` (the provider's answer is not known yet), `succeeded`, `failed`, or
    /// `refund_due` / `refunded` (charged for an order that could not take it).
    #[schema(example = "succeeded")]
    pub status: String,
    pub amount_cents: i64,
    pub currency: String,
    pub provider_charge_id: Option<String>,
    pub failure_code: Option<String>,
    /// A pending payment whose bank asks the shopper to confirm it (3-D Secure, with
    /// Stripe): the browser finishes it through
    /// `POST /api/orders/{id}/payments/{payment_id}/authentication`.
    pub needs_authentication: bool,
}

impl PaymentView {
    /// What `attempt` shows once `charge_id` succeeded for it.
    pub fn succeeded(attempt: &Attempt, charge_id: String) -> Self {
        Self {
            id: attempt.id,
            order_id: attempt.order_id,
            status: "succeeded".into(),
            amount_cents: attempt.amount_cents,
            currency: attempt.currency.clone(),
            provider_charge_id: Some(charge_id),
            failure_code: None,
            needs_authentication: false,
        }
    }
}

/// Why [`begin_attempt`] recorded no attempt.
#[derive(Debug, thiserror::Error)]
pub enum AttemptRefused {
    /// Another attempt of the order is still pending (another key):
    /// `payments_one_pending_per_order` refused this one.
    #[error("another payment attempt of the order is pending")]
    InProgress,
    /// The session has no such order.
    #[error("no such order in this session")]
    UnknownOrder,
    /// The order takes no payment any more; its status (`paid`, `cancelled`, …).
    #[error("the order is {0}, not payable")]
    NotPayable(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// The partial unique index that keeps one attempt per order pending.
const ONE_PENDING_PER_ORDER: &str = "payments_one_pending_per_order";

/// Recovery point 1: records the attempt (amount from the order, never from the client), or
/// finds the one an earlier try of the same request recorded. Commits on its own. Another
/// attempt of the order still pending (another key) → [`AttemptRefused::InProgress`].
///
/// The order's row is locked (`FOR NO KEY UPDATE`) while the attempt is inserted, so the
/// "still payable" test is made on its latest version: an attempt that began while another
/// attempt's success was committing waits for that commit, then finds the order paid and
/// inserts nothing. Without the lock, its snapshot would still show the order payable while
/// the other attempt is no longer pending, and the provider would charge the order twice.
/// Every path that pays an order locks the order before its payment (see `apply`).
///
/// A new attempt is recorded with `charge_requested_at` set: it is recorded only to be
/// charged at once, so its first charge call is stamped in the same commit and costs no
/// statement of its own (`Attempt::stamped_now`). The stamp is the time the row is written,
/// after the wait for the order's lock (a trigger, migration 0021), as a stamp made just
/// before the call was: a settle finds the attempt quiet only once the grace has passed
/// since then.
pub async fn begin_attempt(
    db: &PgPool,
    session_id: &str,
    order_id: Uuid,
    attempt: &AttemptKey,
) -> Result<Attempt, AttemptRefused> {
    // One round trip: the new attempt, or the one an earlier try committed. The second half
    // reads the statement's snapshot, so a row committed while the INSERT waited on it is
    // not in it: then nothing comes back and the plain SELECT below, a new snapshot, finds it.
    let begun = sqlx::query_as!(
        Attempt,
        r#"WITH new AS (
            INSERT INTO payments (id, order_id, idempotency_scope, idempotency_key, amount_cents,
                                  currency, charge_requested_at)
            SELECT $1, o.id, $3, $4, o.total_cents, o.currency, now() FROM orders o
             WHERE o.id = $2 AND o.session_id = $5 AND o.status = 'pending_payment'
               FOR NO KEY UPDATE OF o
            ON CONFLICT ON CONSTRAINT payments_attempt_key DO NOTHING
            RETURNING id, order_id, amount_cents, currency, status, failure_code, provider_intent_id)
         SELECT id AS "id!", order_id AS "order_id!", amount_cents AS "amount_cents!",
                currency AS "currency!", status AS "status!", failure_code, provider_intent_id,
                true AS "stamped_now!"
           FROM new
         UNION ALL
         SELECT id, order_id, amount_cents, currency, status, failure_code, provider_intent_id,
                false FROM payments
          WHERE idempotency_scope = $3 AND idempotency_key = $4 AND order_id = $2"#,
        Uuid::new_v4(),
        order_id,
        attempt.scope,
        attempt.key,
        session_id,
    )
    .fetch_optional(db)
    .await
    .on_constraint(ONE_PENDING_PER_ORDER, || AttemptRefused::InProgress)?;
    if let Some(attempt) = begun {
        return Ok(attempt);
    }
    let found = sqlx::query_as!(
        Attempt,
        r#"SELECT id, order_id, amount_cents, currency, status, failure_code,
                  provider_intent_id, false AS "stamped_now!" FROM payments
          WHERE idempotency_scope = $1 AND idempotency_key = $2 AND order_id = $3"#,
        attempt.scope,
        attempt.key,
        order_id,
    )
    .fetch_optional(db)
    .await?;
    match found {
        Some(attempt) => Ok(attempt),
        None => Err(why_not_payable(db, session_id, order_id).await?),
    }
}

async fn why_not_payable(
    db: &PgPool,
    session_id: &str,
    order_id: Uuid,
) -> Result<AttemptRefused, sqlx::Error> {
    let status = sqlx::query_scalar!(
        "SELECT status FROM orders WHERE id = $1 AND session_id = $2",
        order_id,
        session_id,
    )
    .fetch_optional(db)
    .await?;
    Ok(match status {
        None => AttemptRefused::UnknownOrder,
        Some(status) => AttemptRefused::NotPayable(status),
    })
}

/// An order's pending attempt, as another intent sees it when it blocks the order.
#[derive(Debug)]
pub struct Blocker {
    pub id: Uuid,
    /// The provider's object recorded for it, if any (see [`Attempt::provider_intent_id`]).
    pub intent_id: Option<String>,
    /// Its request may still be running: the key is leased, or its lease ended less than
    /// one more lease ago (a stalled holder may wake up and call the provider).
    pub running: bool,
    /// No call to charge it started within the grace period.
    pub quiet: bool,
}

/// `grace` is how long an attempt must be quiet; `bank_step` how long, when it waits for
/// the shopper's bank.
pub async fn blocker(
    db: &PgPool,
    order_id: Uuid,
    lease: Duration,
    (grace, bank_step): (Duration, Duration),
) -> Result<Option<Blocker>, sqlx::Error> {
    // The millisecond counts are bigint, as bound (Postgres alone would infer a float).
    let pending = sqlx::query!(
        r#"SELECT p.id, p.idempotency_scope, p.idempotency_key, p.provider_intent_id,
                coalesce(p.charge_requested_at, p.created_at) < now()
                  - CASE WHEN p.needs_authentication THEN $3::bigint ELSE $2::bigint END
                    * interval '1 millisecond' AS "quiet!"
           FROM payments p WHERE p.order_id = $1 AND p.status = 'pending'"#,
        order_id,
        (grace.as_millis() as i64),
        (bank_step.as_millis() as i64),
    )
    .fetch_optional(db)
    .await?;
    let Some(pending) = pending else {
        return Ok(None);
    };
    let running = once_pg::inspect::is_running(
        db,
        &pending.idempotency_scope,
        &pending.idempotency_key,
        lease,
    )
    .await?;
    Ok(Some(Blocker {
        id: pending.id,
        intent_id: pending.provider_intent_id,
        running,
        quiet: pending.quiet,
    }))
}

/// Stamps the start of a charge call, on a pending attempt only: `false` means the attempt
/// was closed meanwhile, and must not be charged. Commits on its own, before the call.
pub async fn stamp_charge_call(db: &PgPool, payment_id: Uuid) -> Result<bool, sqlx::Error> {
    let stamped = sqlx::query!(
        "UPDATE payments SET charge_requested_at = now() WHERE id = $1 AND status = 'pending'",
        payment_id,
    )
    .execute(db)
    .await?;
    Ok(stamped.rows_affected() == 1)
}

/// Records the provider's object for an attempt before it is confirmed, unless one was
/// recorded before (an earlier try's): returns the one the attempt keeps. Commits on its own,
/// before the confirming call: it is the point a lost answer resumes from.
pub async fn record_intent(
    db: &PgPool,
    payment_id: Uuid,
    intent_id: &str,
) -> Result<String, sqlx::Error> {
    sqlx::query_scalar!(
        r#"UPDATE payments SET provider_intent_id = coalesce(provider_intent_id, $2)
            WHERE id = $1 RETURNING provider_intent_id AS "intent_id!""#,
        payment_id,
        intent_id,
    )
    .fetch_one(db)
    .await
}

/// Closes a pending attempt the provider never charged, if it is still quiet: the
/// condition is checked again on the row's latest version, so a charge call stamped in
/// the meantime keeps it open. `false` when it was not closed.
pub async fn close_never_charged(
    tx: &mut PgConnection,
    payment_id: Uuid,
    grace: Duration,
    code: &str,
) -> Result<bool, sqlx::Error> {
    let closed = sqlx::query!(
        "UPDATE payments SET status = 'failed', failure_code = $3, updated_at = now()
          WHERE id = $1 AND status = 'pending'
            AND coalesce(charge_requested_at, created_at) < now() - $2::bigint * interval '1 millisecond'",
        payment_id,
        (grace.as_millis() as i64),
        code,
    )
    .execute(tx)
    .await?;
    Ok(closed.rows_affected() == 1)
}

pub async fn view(tx: &mut PgConnection, payment_id: Uuid) -> Result<PaymentView, sqlx::Error> {
    sqlx::query_as!(
        PaymentView,
        r#"SELECT id, order_id, status, amount_cents, currency, provider_charge_id, failure_code,
                  status = 'pending' AND needs_authentication AS "needs_authentication!"
             FROM payments WHERE id = $1"#,
        payment_id,
    )
    .fetch_one(tx)
    .await
}

/// The payments of one of the session's orders, oldest first; `None` if the order is not theirs.
pub async fn for_order(
    db: &PgPool,
    session_id: &str,
    order_id: Uuid,
) -> Result<Option<Vec<PaymentView>>, sqlx::Error> {
    let owned = sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM orders WHERE id = $1 AND session_id = $2) AS "owned!""#,
        order_id,
        session_id,
    )
    .fetch_one(db)
    .await?;
    if !owned {
        return Ok(None);
    }
    let payments = sqlx::query_as!(
        PaymentView,
        r#"SELECT id, order_id, status, amount_cents, currency, provider_charge_id, failure_code,
                  status = 'pending' AND needs_authentication AS "needs_authentication!"
             FROM payments WHERE order_id = $1 ORDER BY created_at"#,
        order_id,
    )
    .fetch_all(db)
    .await?;
    Ok(Some(payments))
}

/// Marks a pending attempt as waiting for the shopper's authentication.
pub async fn await_authentication(
    tx: &mut PgConnection,
    payment_id: Uuid,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE payments SET needs_authentication = true WHERE id = $1 AND status = 'pending'",
        payment_id,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// The session's attempt `payment_id` of order `order_id`, if it is theirs.
pub async fn attempt_of(
    db: &PgPool,
    session_id: &str,
    order_id: Uuid,
    payment_id: Uuid,
) -> Result<Option<Attempt>, sqlx::Error> {
    sqlx::query_as!(
        Attempt,
        r#"SELECT p.id, p.order_id, p.amount_cents, p.currency, p.status, p.failure_code,
                  p.provider_intent_id, false AS "stamped_now!"
             FROM payments p JOIN orders o ON o.id = p.order_id
            WHERE p.id = $1 AND p.order_id = $2 AND o.session_id = $3"#,
        payment_id,
        order_id,
        session_id,
    )
    .fetch_optional(db)
    .await
}

/// Whether the continue route may ask the provider about `payment_id`'s bank step now.
#[derive(Debug, PartialEq, Eq)]
pub enum AuthenticationTurn {
    /// The attempt waits for the bank, and this call took its turn.
    Taken,
    /// The attempt waits for the bank, and it was asked about less than a second ago.
    TooSoon,
    /// The attempt waits for no bank: nothing to ask.
    NotWaiting,
}

/// Takes the attempt's turn to ask the provider about its bank step: one ask a second.
pub async fn authentication_turn(
    db: &PgPool,
    payment_id: Uuid,
) -> Result<AuthenticationTurn, sqlx::Error> {
    // The outer SELECT reads the row as it was before the UPDATE (one snapshot).
    let turn = sqlx::query!(
        r#"WITH turn AS (
             UPDATE payments SET authentication_checked_at = now()
              WHERE id = $1 AND status = 'pending' AND needs_authentication
                AND (authentication_checked_at IS NULL
                     OR authentication_checked_at <= now() - interval '1 second')
          RETURNING id)
         SELECT p.status = 'pending' AND p.needs_authentication AS "waiting!",
                EXISTS (SELECT 1 FROM turn) AS "taken!"
           FROM payments p WHERE p.id = $1"#,
        payment_id,
    )
    .fetch_one(db)
    .await?;
    Ok(match (turn.waiting, turn.taken) {
        (true, true) => AuthenticationTurn::Taken,
        (true, false) => AuthenticationTurn::TooSoon,
        (false, _) => AuthenticationTurn::NotWaiting,
    })
}
