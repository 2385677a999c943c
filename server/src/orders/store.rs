//! The SQL of orders. Prices and totals are read from the catalog inside the transaction;
//! nothing the client sends is trusted as money.

use serde_json::json;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use app::dto::{Fulfillment, Order, OrderItem, OrderStatus, StatusChange};

use super::NewOrder;
use crate::{
    cart,
    error::ApiError,
    fulfillment::shipment_label,
    idempotency::{executor::PgTx, Reply},
    outbox,
};

#[derive(sqlx::FromRow)]
struct PricedProduct {
    sku: String,
    name: String,
    price_cents: i64,
    currency: String,
    stock: i32,
}

/// The door an order comes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Door {
    /// `POST /api/orders`: the client names the lines.
    Api,
    /// The checkout (`/api/checkout`, the form): the cart is ordered, and only while its
    /// checkout key is still the request's key.
    Checkout,
}

/// Opens the business transaction and creates the order in it, for the idempotency
/// executor to complete and commit. The same transaction takes the ordered lines out of
/// the session's cart. A definitive refusal (unknown product, out of stock) is returned
/// with a transaction too, one that ends the cart's checkout intent, so the refusal and
/// the end of the intent are stored together.
pub async fn create_in_new_tx(
    db: PgPool,
    session_id: String,
    key: String,
    new: NewOrder,
    door: Door,
) -> Result<(PgTx, Reply), ApiError> {
    let mut tx = db.begin().await?;
    // The checkout checked the key before it read the cart; checked again here, under the
    // cart's lock and in the order's transaction, a cart changed in between (another tab)
    // cannot be ordered under its old key. The refusal is stored with the key.
    if door == Door::Checkout
        && cart::lock_key(&mut tx, &session_id).await?.as_deref() != Some(key.as_str())
    {
        return Ok((tx, Reply::refusal(&ApiError::CartChanged)));
    }
    match create(&mut tx, &session_id, &new).await {
        Ok(reply) => {
            let quantities: Vec<i32> = new.lines.iter().map(|l| l.quantity).collect();
            cart::take_ordered(&mut tx, &session_id, &new.skus(), &quantities).await?;
            Ok((tx, reply))
        }
        Err(e) if !e.is_stored() => Err(e),
        Err(refusal) => {
            tx.rollback().await?;
            let mut tx = db.begin().await?;
            cart::end_intent(&mut tx, &session_id, &key).await?;
            Ok((tx, Reply::refusal(&refusal)))
        }
    }
}

/// Creates the order, its lines and its `order.created` event in the caller's transaction.
pub async fn create(
    tx: &mut PgConnection,
    session_id: &str,
    new: &NewOrder,
) -> Result<Reply, ApiError> {
    let products: Vec<PricedProduct> = sqlx::query_as(
        "SELECT sku, name, price_cents, currency, stock FROM products WHERE sku = ANY($1)",
    )
    .bind(new.skus())
    .fetch_all(&mut *tx)
    .await?;
    let mut items = Vec::with_capacity(new.lines.len());
    for line in &new.lines {
        let product = products.iter().find(|p| p.sku == line.sku).ok_or_else(|| {
            ApiError::unprocessable("unknown-sku", format!("there is no product {}", line.sku))
        })?;
        if product.stock < line.quantity {
            return Err(ApiError::unprocessable(
                "out-of-stock",
                out_of_stock(product),
            ));
        }
        items.push(OrderItem {
            sku: product.sku.clone(),
            name: product.name.clone(),
            quantity: line.quantity,
            unit_price_cents: product.price_cents,
        });
    }
    let currency = single_currency(&products)?;
    let total: i64 = items
        .iter()
        .map(|i| i.unit_price_cents * i64::from(i.quantity))
        .sum();

    let id = Uuid::new_v4();
    let (order_no, created_at): (String, chrono::DateTime<chrono::Utc>) = sqlx::query_as(
        "INSERT INTO orders (id, session_id, currency, total_cents) VALUES ($1, $2, $3, $4)
         RETURNING order_no, created_at",
    )
    .bind(id)
    .bind(session_id)
    .bind(&currency)
    .bind(total)
    .fetch_one(&mut *tx)
    .await?;
    insert_items(tx, id, &items).await?;

    let order = Order {
        id,
        order_no,
        status: OrderStatus::PendingPayment,
        currency,
        total_cents: total,
        items,
        created_at: created_at.to_rfc3339(),
        fulfillment: None,
        // What the `orders_status_created` trigger has just written.
        history: vec![StatusChange {
            status: OrderStatus::PendingPayment,
            at: created_at.to_rfc3339(),
        }],
    };
    outbox::record(tx, "order", id, "order.created", json!({ "order": &order })).await?;
    Reply::created(format!("/api/orders/{id}"), &order)
}

/// What a shopper reads when a line asks for more than the shop has: the product by name,
/// and what to do about it.
fn out_of_stock(product: &PricedProduct) -> String {
    match product.stock {
        stock if stock <= 0 => format!(
            "{} is sold out. Remove it from your cart to order the rest.",
            product.name
        ),
        stock => format!(
            "Only {stock} of {} are in stock. Lower the quantity in your cart, then order again.",
            product.name
        ),
    }
}

fn single_currency(products: &[PricedProduct]) -> Result<String, ApiError> {
    let first = products
        .first()
        .map(|p| p.currency.clone())
        .unwrap_or_default();
    if products.iter().any(|p| p.currency != first) {
        return Err(ApiError::unprocessable(
            "mixed-currencies",
            "all items of an order must share one currency",
        ));
    }
    Ok(first)
}

async fn insert_items(
    tx: &mut PgConnection,
    order_id: Uuid,
    items: &[OrderItem],
) -> Result<(), sqlx::Error> {
    let line_nos: Vec<i32> = (1..=items.len() as i32).collect();
    let skus: Vec<&str> = items.iter().map(|i| i.sku.as_str()).collect();
    let names: Vec<&str> = items.iter().map(|i| i.name.as_str()).collect();
    let quantities: Vec<i32> = items.iter().map(|i| i.quantity).collect();
    let prices: Vec<i64> = items.iter().map(|i| i.unit_price_cents).collect();
    sqlx::query(
        "INSERT INTO order_items (order_id, line_no, sku, name, quantity, unit_price_cents)
         SELECT $1, * FROM UNNEST($2::int[], $3::text[], $4::text[], $5::int[], $6::bigint[])",
    )
    .bind(order_id)
    .bind(line_nos)
    .bind(skus)
    .bind(names)
    .bind(quantities)
    .bind(prices)
    .execute(tx)
    .await?;
    Ok(())
}

/// An order with its lines (aggregated as JSON) and its fulfillment, in one query.
const SELECT_ORDERS: &str = "
    SELECT o.id, o.order_no, o.status, o.currency, o.total_cents, o.created_at,
           coalesce(json_agg(json_build_object('sku', i.sku, 'name', i.name, 'quantity', i.quantity,
                                               'unit_price_cents', i.unit_price_cents) ORDER BY i.line_no)
                    FILTER (WHERE i.order_id IS NOT NULL), '[]') AS items,
           f.status AS fulfillment_status, f.shipment_no,
           EXISTS (SELECT 1 FROM emails e WHERE e.order_id = o.id AND e.kind = 'order_confirmation') AS has_email,
           (SELECT coalesce(json_agg(json_build_object('status', h.status,
                                        'at', to_char(h.at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"+00:00\"')) ORDER BY h.id), '[]')
              FROM order_status_changes h WHERE h.order_id = o.id) AS history
      FROM orders o LEFT JOIN order_items i ON i.order_id = o.id
                    LEFT JOIN fulfillments f ON f.order_id = o.id";

#[derive(sqlx::FromRow)]
struct OrderRow {
    id: Uuid,
    order_no: String,
    status: String,
    currency: String,
    total_cents: i64,
    created_at: chrono::DateTime<chrono::Utc>,
    items: sqlx::types::Json<Vec<OrderItem>>,
    fulfillment_status: Option<String>,
    shipment_no: Option<i64>,
    has_email: bool,
    history: sqlx::types::Json<Vec<StatusChange>>,
}

impl From<OrderRow> for Order {
    fn from(row: OrderRow) -> Self {
        Order {
            id: row.id,
            order_no: row.order_no,
            status: OrderStatus::parse(&row.status).unwrap_or(OrderStatus::PendingPayment),
            currency: row.currency,
            total_cents: row.total_cents,
            items: row.items.0,
            created_at: row.created_at.to_rfc3339(),
            fulfillment: row.fulfillment_status.map(|status| Fulfillment {
                status,
                shipment_no: row.shipment_no.map(shipment_label),
                email_url: row.has_email.then(|| format!("/orders/{}/email", row.id)),
            }),
            history: row.history.0,
        }
    }
}

pub async fn find(db: &PgPool, session_id: &str, id: Uuid) -> Result<Option<Order>, sqlx::Error> {
    let row: Option<OrderRow> = sqlx::query_as(&format!(
        "{SELECT_ORDERS} WHERE o.id = $1 AND o.session_id = $2 GROUP BY o.id, f.id"
    ))
    .bind(id)
    .bind(session_id)
    .fetch_optional(db)
    .await?;
    Ok(row.map(Order::from))
}

/// The session's orders, newest first (the latest 200).
pub async fn for_session(db: &PgPool, session_id: &str) -> Result<Vec<Order>, sqlx::Error> {
    let rows: Vec<OrderRow> = sqlx::query_as(&format!(
        "{SELECT_ORDERS} WHERE o.session_id = $1 GROUP BY o.id, f.id ORDER BY o.created_at DESC, o.order_no DESC LIMIT 200"
    ))
    .bind(session_id)
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Order::from).collect())
}
