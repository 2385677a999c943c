//! Taking stock for a batch of orders: for each order all its lines or none, never below
//! zero, the orders served in the order their events came.

use std::collections::HashMap;

use once_events::HandlerError;
use sqlx::PgConnection;
use uuid::Uuid;

/// Takes the stock of every line of each order that can be served whole, in order; the
/// orders served. The products are locked first, in sku order (`FOR NO KEY UPDATE`, the
/// level the stock update needs: it does not conflict with the key-share locks a
/// checkout's `order_items` foreign key takes, so checkouts neither wait for nor deadlock
/// with fulfillment; two consumers wait for each other). Under those locks the stock read is
/// the stock there is, so the orders are served from it here, and one statement takes what
/// they took. Its count is checked, the decrement stays conditional, and
/// `products_stock_not_negative` stands behind both.
pub async fn take(tx: &mut PgConnection, orders: &[Uuid]) -> Result<Vec<Uuid>, HandlerError> {
    if orders.is_empty() {
        return Ok(Vec::new());
    }
    let mut stock: HashMap<String, i64> = sqlx::query!(
        "SELECT sku, stock FROM products
          WHERE sku IN (SELECT sku FROM order_items WHERE order_id = ANY($1))
          ORDER BY sku FOR NO KEY UPDATE",
        orders
    )
    .fetch_all(&mut *tx)
    .await?
    .into_iter()
    .map(|row| (row.sku, i64::from(row.stock)))
    .collect();
    let needs = needs(tx, orders).await?;
    let mut served = Vec::new();
    let mut taken: HashMap<String, i64> = HashMap::new();
    for order in orders {
        let need = needs.get(order).map(Vec::as_slice).unwrap_or_default();
        let enough = need
            .iter()
            .all(|(sku, quantity)| stock.get(sku).is_some_and(|left| left >= quantity));
        if enough {
            for (sku, quantity) in need {
                *stock.get_mut(sku).expect("checked above") -= quantity;
                *taken.entry(sku.clone()).or_default() += quantity;
            }
            served.push(*order);
        }
    }
    decrement(tx, &taken).await?;
    Ok(served)
}

/// What each order needs: its quantity of each sku (lines of one sku added up).
async fn needs(
    tx: &mut PgConnection,
    orders: &[Uuid],
) -> Result<HashMap<Uuid, Vec<(String, i64)>>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT order_id, sku, sum(quantity)::bigint AS "quantity!" FROM order_items
            WHERE order_id = ANY($1) GROUP BY order_id, sku"#,
        orders
    )
    .fetch_all(tx)
    .await?;
    let mut needs: HashMap<Uuid, Vec<(String, i64)>> = HashMap::new();
    for row in rows {
        needs
            .entry(row.order_id)
            .or_default()
            .push((row.sku, row.quantity));
    }
    Ok(needs)
}

/// Takes `taken` from the products' stock in one statement.
async fn decrement(
    tx: &mut PgConnection,
    taken: &HashMap<String, i64>,
) -> Result<(), HandlerError> {
    if taken.is_empty() {
        return Ok(());
    }
    let (skus, quantities): (Vec<&str>, Vec<i64>) =
        taken.iter().map(|(sku, n)| (sku.as_str(), *n)).unzip();
    let updated = sqlx::query!(
        "UPDATE products p SET stock = p.stock - t.quantity
           FROM unnest($1::text[], $2::bigint[]) AS t (sku, quantity)
          WHERE p.sku = t.sku AND p.stock >= t.quantity",
        &skus[..] as &[&str],
        &quantities[..],
    )
    .execute(tx)
    .await?
    .rows_affected();
    if updated as usize != skus.len() {
        // Cannot happen under the locks; if it did, the transaction must not commit, and
        // the events are retried (then dead letters), not waited on as an outage.
        return Err(HandlerError::Transient(anyhow::anyhow!(
            "stock taken from {updated} of {} products",
            skus.len()
        )));
    }
    Ok(())
}
