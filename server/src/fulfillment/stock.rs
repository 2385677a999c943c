//! Taking an order's stock: all its lines or none, never below zero.

use sqlx::PgConnection;
use uuid::Uuid;

/// Locks, in sku order, every product the orders need. The fulfillment consumer takes these
/// locks for a whole batch before it applies any event of it, so two consumers applying
/// batches that share products wait for each other instead of deadlocking. The lock is `FOR
/// NO KEY UPDATE`, the level the stock update needs: it does not conflict with the key-share
/// locks a checkout's `order_items` foreign key takes, so checkouts neither wait for nor
/// deadlock with fulfillment.
pub async fn lock_products(tx: &mut PgConnection, order_ids: &[Uuid]) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "SELECT sku FROM products
          WHERE sku IN (SELECT sku FROM order_items WHERE order_id = ANY($1))
          ORDER BY sku FOR NO KEY UPDATE",
        order_ids
    )
    .fetch_all(tx)
    .await?;
    Ok(())
}

/// Takes the stock of every line of the order; false (and nothing taken) if any product has
/// too little. The products are locked first ([`lock_products`]: the batch holds the locks
/// already, so this waits for nothing), so the one statement that follows reads their
/// current stock, and takes it from all of them or from none. Its count is checked, and
/// `products_stock_not_negative` stands behind it. No savepoint: a batch of a hundred orders
/// must not open a hundred subtransactions.
pub async fn take(tx: &mut PgConnection, order_id: Uuid) -> Result<bool, sqlx::Error> {
    lock_products(tx, &[order_id]).await?;
    let taken = sqlx::query!(
        r#"WITH needed AS (
               SELECT sku, sum(quantity) AS quantity FROM order_items
                WHERE order_id = $1 GROUP BY sku),
           short AS (
               SELECT n.sku FROM needed n LEFT JOIN products p ON p.sku = n.sku
                WHERE p.sku IS NULL OR p.stock < n.quantity),
           taken AS (
               UPDATE products p SET stock = p.stock - n.quantity
                 FROM needed n
                WHERE p.sku = n.sku AND p.stock >= n.quantity
                  AND NOT EXISTS (SELECT 1 FROM short)
            RETURNING p.sku)
           SELECT (SELECT count(*) FROM needed) AS "needed!",
                  (SELECT count(*) FROM taken) AS "taken!""#,
        order_id
    )
    .fetch_one(&mut *tx)
    .await?;
    match (taken.taken, taken.needed) {
        (all, needed) if all == needed => Ok(true),
        (0, _) => Ok(false),
        // Cannot happen under the locks; if it did, the transaction must not commit.
        (some, needed) => Err(sqlx::Error::Protocol(format!(
            "order {order_id}: stock taken for {some} of {needed} products"
        ))),
    }
}
