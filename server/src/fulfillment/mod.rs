//! The fulfillment consumer: ships each paid order exactly once, however often `order.paid`
//! arrives. Everything happens in the transaction the consumer runtime hands over, where the
//! event is recorded as consumed first (`once_events::consume_once`): a repeat finds the
//! record and is never applied, and a crash anywhere before the commit leaves nothing behind
//! to repeat. Several events may share that transaction. See docs/design.md, "Fulfillment".
//!
//! ```text
//! order.paid ─▶ consumed? ─yes─▶ nothing (ack)
//!                  │no
//!                  ▼
//!           order still paid? ─no─▶ outcome `not_paid` (fulfilled or cancelled already)
//!                  │yes
//!                  ▼
//!           all lines in stock? ─no─▶ fulfillment `backordered` (no stock taken)
//!                  │yes
//!                  ▼
//!           stock taken, fulfillment `shipped` + shipment number, order `fulfilled`,
//!           `order.fulfilled` in the outbox, confirmation email queued
//! ```

pub mod email;
mod stock;

use async_trait::async_trait;
use once_events::{
    outbox::{self, Event},
    Handler, HandlerError,
};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::db;

pub const CONSUMER: &str = "fulfillment";
pub const SUBJECT: &str = "order.paid";

/// How one `order.paid` event ended, as kept in `consumed_events.outcome`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Shipped,
    Backordered,
    /// The order was no longer `paid` (fulfilled by an earlier event, or cancelled).
    NotPaid,
    /// A fulfillment already exists for the order (an earlier event left it backordered).
    AlreadyFulfilled,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Shipped => "shipped",
            Self::Backordered => "backordered",
            Self::NotPaid => "not_paid",
            Self::AlreadyFulfilled => "already_fulfilled",
        }
    }
}

pub struct Fulfillment;

#[async_trait]
impl Handler for Fulfillment {
    fn name(&self) -> &'static str {
        CONSUMER
    }

    fn subject(&self) -> &'static str {
        SUBJECT
    }

    async fn apply(&self, tx: &mut PgConnection, event: &Event) -> Result<(), HandlerError> {
        let order_id = paid_order(event)?;
        let outcome = fulfill(tx, order_id).await?;
        set_outcome(tx, event.id, outcome).await?;
        tracing::info!(%order_id, event = %event.id, outcome = outcome.as_str(), "order.paid applied");
        Ok(())
    }

    /// Every product the batch's orders need, locked in sku order before any of them is
    /// applied (see `stock::lock_products`).
    async fn prepare(&self, tx: &mut PgConnection, events: &[&Event]) -> Result<(), HandlerError> {
        // A malformed event locks nothing here; `apply` refuses it.
        let orders: Vec<Uuid> = events.iter().filter_map(|e| paid_order(e).ok()).collect();
        stock::lock_products(tx, &orders).await?;
        Ok(())
    }

    /// A connection found dead tells the shop's pool to check its others before use.
    fn on_unavailable(&self, error: &sqlx::Error) {
        db::note_lost_connection(error);
    }
}

/// The order an `order.paid` event is about; anything else is poison.
fn paid_order(event: &Event) -> Result<Uuid, HandlerError> {
    if event.event_type != SUBJECT {
        return Err(HandlerError::Poison(format!(
            "unexpected event type {}",
            event.event_type
        )));
    }
    event
        .payload
        .get("order_id")
        .and_then(|v| v.as_str())
        .and_then(|s| Uuid::parse_str(s).ok())
        .ok_or_else(|| HandlerError::Poison("order.paid without a valid order_id".into()))
}

/// Keeps how the event ended on its `consumed_events` row, written by `consume_once` in
/// the same transaction.
async fn set_outcome(
    tx: &mut PgConnection,
    event_id: Uuid,
    outcome: Outcome,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE consumed_events SET outcome = $3 WHERE consumer = $1 AND event_id = $2",
        CONSUMER,
        event_id,
        outcome.as_str(),
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// The side effects for a paid order, under the order row's lock.
async fn fulfill(tx: &mut PgConnection, order_id: Uuid) -> Result<Outcome, HandlerError> {
    let status = sqlx::query_scalar!(
        "SELECT status FROM orders WHERE id = $1 FOR UPDATE",
        order_id
    )
    .fetch_optional(&mut *tx)
    .await?;
    match status.as_deref() {
        None => {
            return Err(HandlerError::Poison(format!(
                "order.paid for unknown order {order_id}"
            )))
        }
        Some("paid") => {}
        Some(_) => return Ok(Outcome::NotPaid),
    }
    let Some(fulfillment_id) = claim_fulfillment(tx, order_id).await? else {
        return Ok(Outcome::AlreadyFulfilled);
    };
    if !stock::take(tx, order_id).await? {
        return Ok(Outcome::Backordered);
    }
    let shipment = ship(tx, fulfillment_id).await?;
    sqlx::query!(
        "UPDATE orders SET status = 'fulfilled', updated_at = now() WHERE id = $1 AND status = 'paid'",
        order_id
    )
    .execute(&mut *tx)
    .await?;
    outbox::record(
        tx,
        "order",
        order_id,
        "order.fulfilled",
        serde_json::json!({ "order_id": order_id, "shipment_no": shipment }),
    )
    .await?;
    email::queue_confirmation(tx, order_id, &shipment).await?;
    Ok(Outcome::Shipped)
}

/// Inserts the order's one fulfillment, as `backordered` until stock is taken for it; `None`
/// if the order has one already (the unique constraint decides).
async fn claim_fulfillment(
    tx: &mut PgConnection,
    order_id: Uuid,
) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO fulfillments (id, order_id, status) VALUES ($1, $2, 'backordered')
         ON CONFLICT ON CONSTRAINT fulfillments_one_per_order DO NOTHING
         RETURNING id",
        Uuid::new_v4(),
        order_id,
    )
    .fetch_optional(tx)
    .await
}

/// Marks the fulfillment shipped with the next shipment number; returns its label.
async fn ship(tx: &mut PgConnection, fulfillment_id: Uuid) -> Result<String, sqlx::Error> {
    // `shipment_no` is nullable in the table (a backordered fulfillment has none); this
    // statement has just set it.
    let shipment_no = sqlx::query_scalar!(
        r#"UPDATE fulfillments SET status = 'shipped', shipment_no = nextval('shipment_no_seq')
          WHERE id = $1 RETURNING shipment_no AS "shipment_no!""#,
        fulfillment_id
    )
    .fetch_one(tx)
    .await?;
    Ok(shipment_label(shipment_no))
}

/// How a shipment number is shown to people: `S-001001`.
pub fn shipment_label(shipment_no: i64) -> String {
    format!("S-{shipment_no:06}")
}
