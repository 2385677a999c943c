//! Paid orders, made the way the shop makes them: an order and its payment, then the real
//! apply path (`payments::apply::charge_succeeded`), which writes `order.paid`.

use server::payments::apply::{self, ChargeFacts};
use sqlx::PgPool;
use uuid::Uuid;

/// One order for a mug, paid; returns its id once the payment has committed.
pub async fn pay_one(db: &PgPool) -> anyhow::Result<Uuid> {
    let (order_id, payment_id) = (Uuid::new_v4(), Uuid::new_v4());
    let mut tx = db.begin().await?;
    sqlx::query("INSERT INTO orders (id, session_id, currency, total_cents) VALUES ($1, 'bench', 'EUR', 1800)")
        .bind(order_id)
        .execute(&mut *tx)
        .await?;
    sqlx::query(
        "INSERT INTO order_items (order_id, line_no, sku, name, quantity, unit_price_cents)
         VALUES ($1, 1, 'MUG-001', 'Stoneware mug', 1, 1800)",
    )
    .bind(order_id)
    .execute(&mut *tx)
    .await?;
    sqlx::query(
        "INSERT INTO payments (id, order_id, idempotency_scope, idempotency_key, amount_cents, currency)
         VALUES ($1, $2, 'bench', $1::text, 1800, 'EUR')",
    )
    .bind(payment_id)
    .bind(order_id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    let mut tx = db.begin().await?;
    let charge = ChargeFacts {
        charge_id: format!("ch_{payment_id}"),
        amount_cents: 1800,
        currency: "EUR".into(),
    };
    apply::charge_succeeded(&mut tx, payment_id, &charge).await?;
    tx.commit().await?;
    Ok(order_id)
}
