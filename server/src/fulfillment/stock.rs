//! Taking an order's stock: all its lines or none, never below zero.

use sqlx::{Acquire, PgConnection};
use uuid::Uuid;

/// Takes the stock of every line of the order; false (and nothing taken) if any product has
/// too little. Product rows are locked in sku order first, so two consumers taking stock for
/// orders that share products wait for each other instead of deadlocking. The lock is `FOR
/// NO KEY UPDATE`, the level the stock update needs: it does not conflict with the key-share
/// locks a checkout's `order_items` foreign key takes, so checkouts neither wait for nor
/// deadlock with fulfillment. The decrement is
/// conditional (`stock >= quantity`) and runs in a savepoint that is undone unless every
/// line was served; `products_stock_not_negative` stands behind both.
pub async fn take(tx: &mut PgConnection, order_id: Uuid) -> Result<bool, sqlx::Error> {
    sqlx::query!(
        "SELECT p.sku FROM products p JOIN order_items i ON i.sku = p.sku
          WHERE i.order_id = $1 ORDER BY p.sku FOR NO KEY UPDATE OF p",
        order_id
    )
    .fetch_all(&mut *tx)
    .await?;
    let mut savepoint = tx.begin().await?;
    let lines = sqlx::query_scalar!(
        r#"SELECT count(*) AS "lines!" FROM order_items WHERE order_id = $1"#,
        order_id
    )
    .fetch_one(&mut *savepoint)
    .await?;
    let served = sqlx::query!(
        "UPDATE products p SET stock = p.stock - i.quantity
           FROM order_items i
          WHERE i.order_id = $1 AND p.sku = i.sku AND p.stock >= i.quantity",
        order_id
    )
    .execute(&mut *savepoint)
    .await?
    .rows_affected();
    if served as i64 == lines {
        savepoint.commit().await?;
        Ok(true)
    } else {
        savepoint.rollback().await?;
        Ok(false)
    }
}
