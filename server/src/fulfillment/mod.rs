//! The fulfillment consumer: ships each paid order exactly once, however often `order.paid`
//! arrives. Everything happens in the transaction the consumer runtime hands over, where the
//! events are recorded as consumed first (`once_events::consume_once`): a repeat finds the
//! record and is never applied, and a crash anywhere before the commit leaves nothing behind
//! to repeat. A batch of events is fulfilled together in a few set-based statements, with
//! the same outcome for each event as if they had come one by one, in order. See
//! docs/design.md, "Fulfillment".
//!
//! ```text
//! order.paid ─▶ consumed? ─yes─▶ nothing (ack)
//!                  │no
//!                  ▼
//!           order still paid? ─no─▶ outcome `not_paid` (fulfilled or cancelled already)
//!                  │yes
//!                  ▼
//!           held by the reconciler? ─yes─▶ outcome `held` (nothing shipped; released when
//!                  │no                      an operator resolves the finding)
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
use std::collections::{HashMap, HashSet};

use once_events::{
    outbox::{self, Event, NewEvent},
    Handler, HandlerError,
};
use sqlx::PgConnection;
use uuid::Uuid;

use crate::{
    db,
    journal::{self, Actor},
};

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
    /// The reconciler found the order's charge is for another amount than the order, or
    /// unknown to the provider (`reconcile::Kind::HOLDING`, an open finding): nothing shipped
    /// until an operator resolves the finding, which announces the order paid again.
    Held,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Shipped => "shipped",
            Self::Backordered => "backordered",
            Self::NotPaid => "not_paid",
            Self::AlreadyFulfilled => "already_fulfilled",
            Self::Held => "held",
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

    async fn apply(&self, tx: &mut PgConnection, events: &[&Event]) -> Result<(), HandlerError> {
        journal::acting_as(tx, Actor::Fulfillment).await?;
        let paid = events
            .iter()
            .map(|event| Ok((event.id, paid_order(event)?)))
            .collect::<Result<Vec<_>, HandlerError>>()?;
        let outcomes = fulfill(tx, &paid).await?;
        set_outcomes(tx, &outcomes).await?;
        for ((event, order), (_, outcome)) in paid.iter().zip(&outcomes) {
            tracing::info!(order_id = %order, %event, outcome = outcome.as_str(),
                "order.paid applied (commits with its batch)");
        }
        Ok(())
    }

    /// A redelivery skipped by the dedup: the order's journal says so.
    async fn skipped(&self, tx: &mut PgConnection, events: &[&Event]) -> Result<(), HandlerError> {
        journal::acting_as(tx, Actor::Fulfillment).await?;
        Ok(journal::skipped_deliveries(tx, CONSUMER, events).await?)
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

/// Keeps how each event ended on its consumption record, written by the runtime in the
/// same transaction.
async fn set_outcomes(
    tx: &mut PgConnection,
    outcomes: &[(Uuid, Outcome)],
) -> Result<(), sqlx::Error> {
    let words: Vec<(Uuid, &str)> = outcomes.iter().map(|(e, o)| (*e, o.as_str())).collect();
    once_events::record_outcomes(tx, CONSUMER, &words).await
}

/// The side effects for a batch of `(event, order)`, under the orders' row locks (taken in
/// id order); each event's outcome.
async fn fulfill(
    tx: &mut PgConnection,
    paid: &[(Uuid, Uuid)],
) -> Result<Vec<(Uuid, Outcome)>, HandlerError> {
    let orders: Vec<Uuid> = paid.iter().map(|(_, order)| *order).collect();
    let statuses = lock_orders(tx, &orders).await?;
    // Read under the orders' locks, which the reconciler takes to hold one.
    let held = held_orders(tx, &orders).await?;
    // Orders still paid and not held, each once, in the order their events came.
    let (mut candidates, mut seen) = (Vec::new(), HashSet::new());
    for (_, order) in paid {
        match statuses.get(order).map(String::as_str) {
            None => {
                return Err(HandlerError::Poison(format!(
                    "order.paid for unknown order {order}"
                )))
            }
            Some("paid") if !held.contains(order) && seen.insert(*order) => candidates.push(*order),
            Some(_) => {}
        }
    }
    let claimed = claim_fulfillments(tx, &candidates).await?;
    let claimed_orders: Vec<Uuid> = candidates
        .iter()
        .filter(|order| claimed.contains_key(order))
        .copied()
        .collect();
    let shipped_orders = stock::take(tx, &claimed_orders).await?;
    let shipments = ship(tx, &shipped_orders, &claimed).await?;
    announce(tx, &shipments).await?;
    email::queue_confirmations(tx, &shipments).await?;
    Ok(outcomes(paid, &statuses, &held, &claimed, &shipments))
}

/// Each event's outcome, as if the events had come one at a time: the first event of an
/// order decides; a later one of the same order finds it fulfilled (`not_paid`) or its
/// fulfillment waiting for stock (`already_fulfilled`).
fn outcomes(
    paid: &[(Uuid, Uuid)],
    statuses: &HashMap<Uuid, String>,
    held: &HashSet<Uuid>,
    claimed: &HashMap<Uuid, Uuid>,
    shipments: &[(Uuid, String)],
) -> Vec<(Uuid, Outcome)> {
    let shipped: HashSet<Uuid> = shipments.iter().map(|(order, _)| *order).collect();
    let mut decided: HashMap<Uuid, Outcome> = HashMap::new();
    paid.iter()
        .map(|(event, order)| {
            let outcome = match decided.get(order) {
                Some(Outcome::Shipped) => Outcome::NotPaid,
                Some(Outcome::Held) => Outcome::Held,
                Some(_) if statuses[order] == "paid" => Outcome::AlreadyFulfilled,
                Some(earlier) => *earlier,
                None if statuses[order] != "paid" => Outcome::NotPaid,
                None if held.contains(order) => Outcome::Held,
                None if !claimed.contains_key(order) => Outcome::AlreadyFulfilled,
                None if shipped.contains(order) => Outcome::Shipped,
                None => Outcome::Backordered,
            };
            decided.entry(*order).or_insert(outcome);
            (*event, outcome)
        })
        .collect()
}

/// Locks the orders, in id order; their statuses. `FOR NO KEY UPDATE`: fulfillment changes
/// an order's status, never its key, so rows that refer to the order (a payment's foreign
/// key) need not wait for a batch.
async fn lock_orders(
    tx: &mut PgConnection,
    orders: &[Uuid],
) -> Result<HashMap<Uuid, String>, sqlx::Error> {
    let rows = sqlx::query!(
        "SELECT id, status FROM orders WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE",
        orders
    )
    .fetch_all(tx)
    .await?;
    Ok(rows.into_iter().map(|row| (row.id, row.status)).collect())
}

/// The orders held by the reconciler: paid by a charge the provider lists for another
/// amount or does not know, with that finding still open (`reconcile::Kind::HOLDING`,
/// docs/design.md, "Reconciliation"). The kinds are written out, not bound, so that the
/// planner matches the partial index `reconcile_findings_open_holds_idx` in every plan.
async fn held_orders(tx: &mut PgConnection, orders: &[Uuid]) -> Result<HashSet<Uuid>, sqlx::Error> {
    let held = sqlx::query_scalar!(
        "SELECT p.order_id FROM payments p
           JOIN reconcile_findings f
             ON f.payment_id = p.id AND f.provider_charge_id = p.provider_charge_id
          WHERE p.order_id = ANY($1) AND p.status = 'succeeded'
            AND f.kind IN ('amount_mismatch', 'unknown_to_provider') AND f.status = 'open'",
        orders,
    )
    .fetch_all(tx)
    .await?;
    Ok(held.into_iter().collect())
}

/// Inserts each order's one fulfillment, as `backordered` until stock is taken for it; the
/// orders that had none, with their new fulfillment's id (the unique constraint decides).
async fn claim_fulfillments(
    tx: &mut PgConnection,
    orders: &[Uuid],
) -> Result<HashMap<Uuid, Uuid>, sqlx::Error> {
    let ids: Vec<Uuid> = orders.iter().map(|_| Uuid::new_v4()).collect();
    let rows = sqlx::query!(
        "INSERT INTO fulfillments (id, order_id, status)
         SELECT id, order_id, 'backordered' FROM unnest($1::uuid[], $2::uuid[]) AS f (id, order_id)
         ON CONFLICT ON CONSTRAINT fulfillments_one_per_order DO NOTHING
         RETURNING order_id, id",
        &ids[..],
        orders,
    )
    .fetch_all(tx)
    .await?;
    Ok(rows.into_iter().map(|row| (row.order_id, row.id)).collect())
}

/// Marks the orders' fulfillments shipped, each with the next shipment number, and the
/// orders fulfilled; each order with its shipment's label.
async fn ship(
    tx: &mut PgConnection,
    orders: &[Uuid],
    fulfillments: &HashMap<Uuid, Uuid>,
) -> Result<Vec<(Uuid, String)>, sqlx::Error> {
    if orders.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<Uuid> = orders.iter().map(|order| fulfillments[order]).collect();
    // Numbers drawn in the order of `ids` (the order the events came), as one event at a
    // time would draw them. `shipment_no` is nullable in the table (a backordered
    // fulfillment has none); this statement has just set it.
    let rows = sqlx::query!(
        r#"UPDATE fulfillments f SET status = 'shipped', shipment_no = s.no
             FROM (SELECT id, nextval('shipment_no_seq') AS no
                     FROM unnest($1::uuid[]) WITH ORDINALITY AS u (id, n)) s
            WHERE f.id = s.id
        RETURNING f.order_id, f.shipment_no AS "shipment_no!""#,
        &ids[..]
    )
    .fetch_all(&mut *tx)
    .await?;
    sqlx::query!(
        "UPDATE orders SET status = 'fulfilled', updated_at = now()
          WHERE id = ANY($1) AND status = 'paid'",
        orders
    )
    .execute(&mut *tx)
    .await?;
    let labels: HashMap<Uuid, String> = rows
        .into_iter()
        .map(|row| (row.order_id, shipment_label(row.shipment_no)))
        .collect();
    Ok(orders.iter().map(|o| (*o, labels[o].clone())).collect())
}

/// `order.fulfilled` for each shipped order, in the outbox.
async fn announce(tx: &mut PgConnection, shipments: &[(Uuid, String)]) -> Result<(), sqlx::Error> {
    if shipments.is_empty() {
        return Ok(());
    }
    let events: Vec<NewEvent> = shipments
        .iter()
        .map(|(order_id, shipment)| NewEvent {
            aggregate_type: "order",
            aggregate_id: *order_id,
            event_type: "order.fulfilled",
            payload: serde_json::json!({ "order_id": order_id, "shipment_no": shipment }),
        })
        .collect();
    outbox::record_all(tx, &events).await?;
    Ok(())
}

/// How a shipment number is shown to people: `S-001001`.
pub fn shipment_label(shipment_no: i64) -> String {
    format!("S-{shipment_no:06}")
}

#[cfg(test)]
mod tests {
    /// The kinds written out in `held_orders` are the reconciler's holding kinds.
    #[test]
    fn the_held_kinds_are_the_reconcilers() {
        let [a, b] = crate::reconcile::Kind::HOLDING;
        let written = format!("f.kind IN ('{a}', '{b}')");
        assert!(include_str!("mod.rs").contains(&written), "{written}");
    }
}
