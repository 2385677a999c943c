//! The SQL of orders. Prices and totals are read from the catalog inside the transaction;
//! nothing the client sends is trusted as money. These functions speak in orders and
//! refusals; the HTTP answer is built from them by the route (`orders::reply`).

use once_events::outbox;
use serde_json::json;
use sqlx::{types::Json, PgConnection, PgPool};
use uuid::Uuid;

use domain::{
    details::{Details, ShippingAddress},
    Fulfillment, Order, OrderItem, OrderStatus, StatusChange,
};

use super::NewOrder;
use once_axum::PgTx;

use crate::{cart, fulfillment::shipment_label};

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

/// Why the shop refuses an order. Each is definitive for its request: stored with the key
/// and replayed, like an order.
#[derive(Debug, PartialEq, Eq)]
pub enum OrderRefused {
    UnknownSku(String),
    /// A line asks for more than the shop has (`stock` may be 0: sold out).
    OutOfStock {
        name: String,
        stock: i32,
    },
    MixedCurrencies,
    /// The checkout's cart changed (another tab) after its key was handed out.
    CartChanged,
}

/// What one attempt at an order came to, inside its transaction.
pub enum Outcome {
    Created(Box<Order>),
    Refused(OrderRefused),
    /// The session has as many orders waiting for payment as it may: nothing was written,
    /// and the same request may succeed once one of them is paid.
    OverQuota,
    /// The client has as many orders waiting for payment, over all its sessions, as it may:
    /// nothing was written, as for [`Outcome::OverQuota`].
    OverClientQuota,
    /// The client made as many orders in the last hour as it may, whatever became of them:
    /// nothing was written; one more may be made in `retry_after_secs`.
    OverClientHourlyQuota {
        retry_after_secs: u64,
    },
}

/// How many orders may wait for payment, how many one client may make in an hour, and
/// whose (docs/design.md, "Hostile traffic").
#[derive(Clone, Debug)]
pub struct PendingQuota {
    /// Per session (`QUOTA_PENDING_ORDERS`); 0: no quota.
    pub per_session: u32,
    /// Per client, over all its sessions (`QUOTA_PENDING_ORDERS_PER_CLIENT`); 0: no quota.
    pub per_client: u32,
    /// Orders made per client in the last hour, paid, cancelled or waiting
    /// (`QUOTA_ORDERS_PER_CLIENT_PER_HOUR`); 0: no quota.
    pub per_client_hour: u32,
    /// The client's bucket (`client_addr::ClientBucket`), kept on the order while it waits;
    /// `None` when the server does not know the peer, and then counted under no client.
    pub client: Option<String>,
}

impl PendingQuota {
    /// The client the per-client quotas count, when there is one and a quota is on.
    fn counted_client(&self) -> Option<&str> {
        self.client
            .as_deref()
            .filter(|_| self.per_client > 0 || self.per_client_hour > 0)
    }
}

/// Opens the business transaction and creates the order in it, for the idempotency
/// executor to complete and commit. The same transaction takes the ordered lines out of
/// the session's cart. A refusal (unknown product, out of stock) comes with a transaction
/// too, one that ends the cart's checkout intent, so the refusal and the end of the intent
/// are stored together.
pub async fn create_in_new_tx(
    db: PgPool,
    session_id: String,
    key: String,
    new: NewOrder,
    door: Door,
    quota: PendingQuota,
) -> Result<(PgTx, Outcome), sqlx::Error> {
    let mut tx = db.begin().await?;
    if quota.per_session > 0 {
        crate::session::hold_for_quota(&mut tx, &session_id).await?;
    }
    // The client's hold comes next, before the cart's lock, whichever quotas are on: every
    // order takes its locks in this one order, so no two orders wait for each other.
    if let Some(client) = quota.counted_client() {
        hold_client(&mut tx, client).await?;
        let max = quota.per_client;
        if max > 0 && client_pending_orders(&mut tx, client, max).await? >= i64::from(max) {
            return Ok((tx, Outcome::OverClientQuota));
        }
        let max = quota.per_client_hour;
        if max > 0 {
            if let Some(retry_after_secs) = client_hour_full(&mut tx, client, max).await? {
                return Ok((tx, Outcome::OverClientHourlyQuota { retry_after_secs }));
            }
        }
    }
    // The checkout checked the key before it read the cart; checked again here, under the
    // cart's lock and in the order's transaction, a cart changed in between (another tab)
    // cannot be ordered under its old key. The refusal is stored with the key.
    if door == Door::Checkout
        && cart::lock_key(&mut tx, &session_id).await?.as_deref() != Some(key.as_str())
    {
        return Ok((tx, Outcome::Refused(OrderRefused::CartChanged)));
    }
    let max = quota.per_session;
    if max > 0 && pending_orders(&mut tx, &session_id, max).await? >= i64::from(max) {
        return Ok((tx, Outcome::OverQuota));
    }
    match create(&mut tx, &session_id, quota.client.as_deref(), &new).await? {
        Ok(order) => {
            let quantities: Vec<i32> = new.lines.iter().map(|l| l.quantity).collect();
            cart::take_ordered(&mut tx, &session_id, &new.skus(), &quantities).await?;
            if let Some(client) = quota.counted_client().filter(|_| quota.per_client_hour > 0) {
                count_client_order(&mut tx, client).await?;
            }
            Ok((tx, Outcome::Created(Box::new(order))))
        }
        Err(refusal) => {
            tx.rollback().await?;
            let mut tx = db.begin().await?;
            cart::end_intent(&mut tx, &session_id, &key).await?;
            Ok((tx, Outcome::Refused(refusal)))
        }
    }
}

/// How many orders of the session wait for payment, counted up to `cap` (so the count
/// costs no more than the quota, however many orders the session has). The caller holds
/// the session (`session::hold_for_quota`), so concurrent orders of one session count one
/// after the other.
async fn pending_orders(
    tx: &mut PgConnection,
    session_id: &str,
    cap: u32,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM (
             SELECT 1 FROM orders WHERE session_id = $1 AND status = 'pending_payment' LIMIT $2
           ) AS capped"#,
        session_id,
        i64::from(cap)
    )
    .fetch_one(&mut *tx)
    .await
}

/// Holds the client for the rest of the caller's transaction (an advisory lock named by the
/// bucket: the client has no row of its own), so that orders of one client count one after
/// another, whichever sessions and instances they come through. Taken after the session's
/// hold and before any other lock of the order.
async fn hold_client(tx: &mut PgConnection, client: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtextextended('pending orders of ' || $1, 0))",
        client
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// How many orders of the client wait for payment, counted up to `cap`, in the caller's
/// transaction, which holds the client ([`hold_client`]).
async fn client_pending_orders(
    tx: &mut PgConnection,
    client: &str,
    cap: u32,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM (
             SELECT 1 FROM orders
              WHERE client_bucket = $1 AND status = 'pending_payment' LIMIT $2
           ) AS capped"#,
        client,
        i64::from(cap)
    )
    .fetch_one(&mut *tx)
    .await
}

/// When the client made `cap` orders in the last hour (read up to `cap`, oldest first), the
/// seconds until the oldest of them leaves the hour; `None` while it may make another. The
/// caller holds the client ([`hold_client`]).
async fn client_hour_full(
    tx: &mut PgConnection,
    client: &str,
    cap: u32,
) -> Result<Option<u64>, sqlx::Error> {
    let window = sqlx::query!(
        r#"SELECT count(*) AS "count!",
                  ceil(extract(epoch FROM min(created_at) + interval '1 hour' - now()))::bigint AS "wait"
             FROM (SELECT created_at FROM client_orders
                    WHERE client_bucket = $1 AND created_at > now() - interval '1 hour'
                    ORDER BY created_at LIMIT $2) AS capped"#,
        client,
        i64::from(cap)
    )
    .fetch_one(&mut *tx)
    .await?;
    Ok((window.count >= i64::from(cap)).then(|| window.wait.unwrap_or(1).max(1) as u64))
}

/// Counts an order the client made, in the order's transaction.
async fn count_client_order(tx: &mut PgConnection, client: &str) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO client_orders (client_bucket) VALUES ($1)",
        client
    )
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Forgets which client made an order once the order is past the hour it counts in.
pub async fn forget_client_orders(db: &PgPool) -> Result<u64, sqlx::Error> {
    let deleted =
        sqlx::query!("DELETE FROM client_orders WHERE created_at <= now() - interval '1 hour'")
            .execute(db)
            .await?;
    Ok(deleted.rows_affected())
}

/// Creates the order, its lines and its `order.created` event in the caller's transaction,
/// or says why the shop refuses it (and writes nothing). `client` is kept on the order
/// while it waits for payment (`PendingQuota::client`).
async fn create(
    tx: &mut PgConnection,
    session_id: &str,
    client: Option<&str>,
    new: &NewOrder,
) -> Result<Result<Order, OrderRefused>, sqlx::Error> {
    let skus = new.skus();
    let products = sqlx::query_as!(
        PricedProduct,
        "SELECT sku, name, price_cents, currency, stock FROM products WHERE sku = ANY($1)",
        &skus[..]
    )
    .fetch_all(&mut *tx)
    .await?;
    let items = match priced_items(new, &products) {
        Ok(items) => items,
        Err(refusal) => return Ok(Err(refusal)),
    };
    let Some(currency) = single_currency(&products) else {
        return Ok(Err(OrderRefused::MixedCurrencies));
    };
    let total: i64 = items
        .iter()
        .map(|i| i.unit_price_cents * i64::from(i.quantity))
        .sum();

    let id = Uuid::new_v4();
    let created = sqlx::query!(
        r#"INSERT INTO orders (id, session_id, currency, total_cents, client_bucket)
           VALUES ($1, $2, $3, $4, $5)
         RETURNING order_no, created_at AS "created_at: chrono::DateTime<chrono::Utc>""#,
        id,
        session_id,
        &currency,
        total,
        client
    )
    .fetch_one(&mut *tx)
    .await?;
    insert_items(tx, id, &items).await?;
    insert_recipient(tx, id, &new.details).await?;

    let created_at = created.created_at.to_rfc3339();
    let order = Order {
        id,
        order_no: created.order_no,
        status: OrderStatus::PendingPayment,
        currency,
        total_cents: total,
        items,
        created_at: created_at.clone(),
        fulfillment: None,
        // What the `orders_status_created` trigger has just written.
        history: vec![StatusChange {
            status: OrderStatus::PendingPayment,
            at: created_at,
        }],
        email: Some(new.details.email().to_owned()),
        shipping_address: Some(new.details.shipping_address().clone()),
    };
    // The shop's events carry no person: a consumer that needs one reads the order.
    let event = json!({ "order": order.without_personal_data() });
    outbox::record(tx, "order", id, "order.created", event).await?;
    Ok(Ok(order))
}

/// The order's lines at the catalog's prices, or the first line the shop cannot serve.
fn priced_items(
    new: &NewOrder,
    products: &[PricedProduct],
) -> Result<Vec<OrderItem>, OrderRefused> {
    new.lines
        .iter()
        .map(|line| {
            let product = products
                .iter()
                .find(|p| p.sku == line.sku)
                .ok_or_else(|| OrderRefused::UnknownSku(line.sku.clone()))?;
            if product.stock < line.quantity {
                return Err(OrderRefused::OutOfStock {
                    name: product.name.clone(),
                    stock: product.stock,
                });
            }
            Ok(OrderItem {
                sku: product.sku.clone(),
                name: product.name.clone(),
                quantity: line.quantity,
                unit_price_cents: product.price_cents,
            })
        })
        .collect()
}

/// The one currency of all the products, or `None` when they mix currencies.
fn single_currency(products: &[PricedProduct]) -> Option<String> {
    let first = products
        .first()
        .map(|p| p.currency.clone())
        .unwrap_or_default();
    products
        .iter()
        .all(|p| p.currency == first)
        .then_some(first)
}

async fn insert_items(
    tx: &mut PgConnection,
    order_id: Uuid,
    items: &[OrderItem],
) -> Result<(), sqlx::Error> {
    let line_nos: Vec<i32> = (1..=items.len() as i32).collect();
    let skus: Vec<String> = items.iter().map(|i| i.sku.clone()).collect();
    let names: Vec<String> = items.iter().map(|i| i.name.clone()).collect();
    let quantities: Vec<i32> = items.iter().map(|i| i.quantity).collect();
    let prices: Vec<i64> = items.iter().map(|i| i.unit_price_cents).collect();
    sqlx::query!(
        "INSERT INTO order_items (order_id, line_no, sku, name, quantity, unit_price_cents)
         SELECT $1, * FROM UNNEST($2::int[], $3::text[], $4::text[], $5::int[], $6::bigint[])",
        order_id,
        &line_nos[..],
        &skus[..],
        &names[..],
        &quantities[..],
        &prices[..]
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// The order's recipient, beside it (`order_recipients`): the row the purge of personal data
/// deletes, leaving the order's books.
async fn insert_recipient(
    tx: &mut PgConnection,
    order_id: Uuid,
    details: &Details,
) -> Result<(), sqlx::Error> {
    let a = details.shipping_address();
    sqlx::query!(
        "INSERT INTO order_recipients (order_id, email, name, line1, line2, postal_code, city, country)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        order_id,
        details.email(),
        a.name,
        a.line1,
        a.line2,
        a.postal_code,
        a.city,
        a.country,
    )
    .execute(tx)
    .await?;
    Ok(())
}

/// Whether the order was placed with `details`. An order that holds no recipient (its
/// shopper forgotten, or placed before the checkout asked) has nothing to compare, and is
/// answered as it stands.
pub async fn placed_with(
    db: &PgPool,
    order_id: Uuid,
    details: &Details,
) -> Result<bool, sqlx::Error> {
    let recipient = sqlx::query!(
        r#"SELECT email AS "email!", shipping_address AS "address!: Json<ShippingAddress>"
             FROM order_recipients_shown WHERE order_id = $1"#,
        order_id,
    )
    .fetch_optional(db)
    .await?;
    Ok(recipient
        .is_none_or(|r| r.email == details.email() && &r.address.0 == details.shipping_address()))
}

#[derive(Debug)]
struct OrderRow {
    id: Uuid,
    order_no: String,
    status: String,
    currency: String,
    total_cents: i64,
    created_at: chrono::DateTime<chrono::Utc>,
    items: Json<Vec<OrderItem>>,
    fulfillment_status: Option<String>,
    shipment_no: Option<i64>,
    has_email: bool,
    history: Json<Vec<StatusChange>>,
    email: Option<String>,
    shipping_address: Option<Json<ShippingAddress>>,
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
            email: row.email,
            shipping_address: row.shipping_address.map(|a| a.0),
        }
    }
}

/// The session's orders, newest first (the latest 200), or only the one with `id`: each
/// with its lines (aggregated as JSON), its fulfillment and its status history, in one query.
async fn select(
    db: impl sqlx::PgExecutor<'_>,
    session_id: &str,
    id: Option<Uuid>,
) -> Result<Vec<Order>, sqlx::Error> {
    let rows = sqlx::query_as!(
        OrderRow,
        r#"SELECT o.id, o.order_no, o.status, o.currency, o.total_cents,
                  o.created_at AS "created_at: chrono::DateTime<chrono::Utc>",
                  coalesce(json_agg(json_build_object('sku', i.sku, 'name', i.name, 'quantity', i.quantity,
                                                      'unit_price_cents', i.unit_price_cents) ORDER BY i.line_no)
                           FILTER (WHERE i.order_id IS NOT NULL), '[]') AS "items!: Json<Vec<OrderItem>>",
                  f.status AS "fulfillment_status?", f.shipment_no AS "shipment_no?",
                  EXISTS (SELECT 1 FROM emails e
                           WHERE e.order_id = o.id AND e.kind = 'order_confirmation') AS "has_email!",
                  (SELECT coalesce(json_agg(json_build_object('status', h.status,
                                              'at', to_char(h.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'))
                                            ORDER BY h.id), '[]')
                     FROM order_status_changes h WHERE h.order_id = o.id) AS "history!: Json<Vec<StatusChange>>",
                  r.email AS "email?", r.shipping_address AS "shipping_address?: Json<ShippingAddress>"
             FROM orders o LEFT JOIN order_items i ON i.order_id = o.id
                           LEFT JOIN fulfillments f ON f.order_id = o.id
                           LEFT JOIN order_recipients_shown r ON r.order_id = o.id
            WHERE o.session_id = $1 AND ($2::uuid IS NULL OR o.id = $2)
            GROUP BY o.id, f.id, r.order_id, r.email, r.shipping_address
            ORDER BY o.created_at DESC, o.order_no DESC
            LIMIT 200"#,
        session_id,
        (id as Option<Uuid>)
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Order::from).collect())
}

/// One order of the session; `None` when it is unknown or another session's.
pub async fn find(
    db: impl sqlx::PgExecutor<'_>,
    session_id: &str,
    id: Uuid,
) -> Result<Option<Order>, sqlx::Error> {
    Ok(select(db, session_id, Some(id)).await?.pop())
}

/// The session's orders, newest first (the latest 200).
pub async fn for_session(db: &PgPool, session_id: &str) -> Result<Vec<Order>, sqlx::Error> {
    select(db, session_id, None).await
}
