//! The checker: after a run, reads what the shop and the provider hold and counts, for each
//! promise of "exactly once", what was lost, duplicated or unexpected. Every count must be
//! 0. It reads rows only; it never trusts the server's own view (metrics, logs).

use std::collections::{BTreeMap, HashMap, HashSet};

use sqlx::PgPool;

use crate::shoppers::Intent;

/// One promise and what the run did to it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Row {
    pub promise: &'static str,
    /// How many things the promise was checked on.
    pub checked: u64,
    pub lost: u64,
    pub duplicated: u64,
    pub unexpected: u64,
}

impl Row {
    fn new(promise: &'static str) -> Self {
        Self {
            promise,
            ..Self::default()
        }
    }

    pub fn clean(&self) -> bool {
        self.lost == 0 && self.duplicated == 0 && self.unexpected == 0
    }
}

pub const ORDERS: &str = "per intent exactly one order";
pub const FULFILLED: &str = "every paid order fulfilled exactly once";
pub const EVENTS: &str = "every order.paid event consumed once";
pub const STOCK: &str = "stock conservation (units)";
pub const CHARGES: &str = "provider charges = succeeded payments + refunds";
pub const PAYMENTS: &str = "each payment answer matches the books";
pub const WEBHOOKS: &str = "every webhook applied once";
pub const EMAILS: &str = "one confirmation email per shipment";
pub const ANSWERS: &str = "5xx answers other than 503 + Retry-After";
pub const ACKNOWLEDGED: &str = "every 2xx'd order, payment and order.paid event exists";

/// What a run leaves to check: the shop's and the provider's databases, the intents the
/// shoppers had, the stock before the run, and the answers they got.
pub struct Evidence<'a> {
    pub shop: &'a PgPool,
    pub provider: &'a PgPool,
    pub intents: &'a [Intent],
    pub stock_before: &'a BTreeMap<String, i64>,
    pub answers: u64,
    pub bad_5xx: u64,
}

pub async fn check(evidence: &Evidence<'_>) -> anyhow::Result<Vec<Row>> {
    Ok(vec![
        acknowledged(evidence).await?,
        orders(evidence).await?,
        fulfilled(evidence.shop).await?,
        events(evidence.shop).await?,
        stock(evidence.shop, evidence.stock_before).await?,
        charges(evidence.shop, evidence.provider).await?,
        payment_answers(evidence).await?,
        webhooks(evidence.shop, evidence.provider).await?,
        emails(evidence.shop).await?,
        Row {
            checked: evidence.answers,
            unexpected: evidence.bad_5xx,
            ..Row::new(ANSWERS)
        },
    ])
}

/// What a client was told was done is there after the run, whatever failed over under it:
/// the order a 201 named, the payment a 201 named (succeeded), that payment's `order.paid`
/// event, and for each, its key completed with that 201. The key is what no later repair
/// writes again: a lost payment transaction whose charge the webhook or the reconciler
/// applied anew would leave a succeeded payment and an event, but a key still processing
/// or failed. The other rows say whether anything exists twice.
async fn acknowledged(evidence: &Evidence<'_>) -> anyhow::Result<Row> {
    let completed = texts(
        evidence.shop,
        "SELECT scope || ' ' || key FROM idempotency_keys
          WHERE state = 'completed' AND response_status = 201",
    )
    .await?;
    let key_done = |intent: &Intent, key: &Option<String>| {
        let key = key.as_deref().unwrap_or_default();
        completed.contains(&format!("{} {key}", intent.session))
    };
    let orders = texts(evidence.shop, "SELECT id::text FROM orders").await?;
    let payments = texts(
        evidence.shop,
        "SELECT id::text FROM payments WHERE status = 'succeeded'",
    )
    .await?;
    let events = texts(
        evidence.shop,
        "SELECT payload->>'payment_id' FROM outbox_events WHERE event_type = 'order.paid'",
    )
    .await?;
    let mut row = Row::new(ACKNOWLEDGED);
    let mut expect = |found: bool| {
        row.checked += 1;
        row.lost += u64::from(!found);
    };
    for intent in evidence.intents {
        if intent.order_status == 201 {
            let order = intent.order_id.as_deref().unwrap_or_default();
            expect(orders.contains(order));
            expect(key_done(intent, &Some(intent.order_key.clone())));
        }
        if intent.payment_status == 201 {
            let payment = intent.payment_id.as_deref().unwrap_or_default();
            expect(payments.contains(payment));
            expect(events.contains(payment));
            expect(key_done(intent, &intent.payment_key));
        }
    }
    Ok(row)
}

/// An intent answered 201 has exactly its order; one refused definitively has none; one
/// whose answer never came (the run ended) has at most one. No order without an intent.
async fn orders(evidence: &Evidence<'_>) -> anyhow::Result<Row> {
    let rows: Vec<(String, String)> = sqlx::query_as("SELECT session_id, id::text FROM orders")
        .fetch_all(evidence.shop)
        .await?;
    let mut by_session: HashMap<String, Vec<String>> = HashMap::new();
    for (session, id) in rows {
        by_session.entry(session).or_default().push(id);
    }
    let mut row = Row::new(ORDERS);
    for intent in evidence.intents {
        row.checked += 1;
        let found = by_session.remove(&intent.session).unwrap_or_default();
        row.duplicated += (found.len() as u64).saturating_sub(1);
        match (&intent.order_id, intent.order_status) {
            (Some(id), _) if !found.contains(id) => row.lost += 1,
            (None, status) if status != 0 && !found.is_empty() => row.unexpected += 1,
            _ => {}
        }
    }
    row.unexpected += by_session.values().map(|ids| ids.len() as u64).sum::<u64>();
    Ok(row)
}

/// Orders with a succeeded payment have exactly one fulfillment; others have none.
async fn fulfilled(shop: &PgPool) -> anyhow::Result<Row> {
    let rows: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT (SELECT count(*) FROM payments p WHERE p.order_id = o.id AND p.status = 'succeeded'),
                (SELECT count(*) FROM fulfillments f WHERE f.order_id = o.id)
           FROM orders o",
    )
    .fetch_all(shop)
    .await?;
    let mut row = Row::new(FULFILLED);
    for (paid, fulfillments) in rows {
        if paid == 0 {
            row.unexpected += fulfillments as u64;
            continue;
        }
        row.checked += 1;
        row.duplicated += (paid - 1) as u64 + (fulfillments.max(1) - 1) as u64;
        row.lost += u64::from(fulfillments == 0);
    }
    Ok(row)
}

/// Each paid order wrote one `order.paid` event, and the fulfillment consumer recorded it
/// as consumed once.
async fn events(shop: &PgPool) -> anyhow::Result<Row> {
    let rows: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT (SELECT count(*) FROM outbox_events e
                  WHERE e.aggregate_id = o.id AND e.event_type = 'order.paid'),
                (SELECT count(*) FROM outbox_events e
                   JOIN consumed_events c ON c.event_id = e.id AND c.consumer = 'fulfillment'
                  WHERE e.aggregate_id = o.id AND e.event_type = 'order.paid')
           FROM orders o
          WHERE EXISTS (SELECT 1 FROM payments p WHERE p.order_id = o.id AND p.status = 'succeeded')",
    )
    .fetch_all(shop)
    .await?;
    let mut row = Row::new(EVENTS);
    for (written, consumed) in rows {
        row.checked += 1;
        row.lost += u64::from(written == 0 || consumed < written);
        row.duplicated += (written.max(1) - 1) as u64;
    }
    Ok(row)
}

/// Stock taken equals the units of shipped orders, product by product.
async fn stock(shop: &PgPool, before: &BTreeMap<String, i64>) -> anyhow::Result<Row> {
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT p.sku, p.stock::bigint,
                coalesce((SELECT sum(i.quantity) FROM order_items i
                            JOIN fulfillments f ON f.order_id = i.order_id AND f.status = 'shipped'
                           WHERE i.sku = p.sku), 0)::bigint
           FROM products p",
    )
    .fetch_all(shop)
    .await?;
    let mut row = Row::new(STOCK);
    for (sku, now, shipped) in rows {
        let taken = before.get(&sku).copied().unwrap_or(now) - now;
        row.checked += shipped as u64;
        row.duplicated += (taken - shipped).max(0) as u64;
        row.lost += (shipped - taken).max(0) as u64;
    }
    Ok(row)
}

/// Money, charge by charge. A charge the provider holds (succeeded, not refunded) is our
/// succeeded payment, at most one per order; a charge it refunded is one we hold as
/// refunded or never knew (a second charge, refunded by the reconciler); we hold no success
/// and no refund the provider does not.
async fn charges(shop: &PgPool, provider: &PgPool) -> anyhow::Result<Row> {
    let at_provider = texts(
        provider,
        "SELECT id FROM charges WHERE status = 'succeeded'",
    )
    .await?;
    let refunded = texts(provider, "SELECT charge_id FROM refunds").await?;
    let ours: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT provider_charge_id, status, order_id::text FROM payments
          WHERE provider_charge_id IS NOT NULL AND status IN ('succeeded', 'refund_due', 'refunded')",
    )
    .fetch_all(shop)
    .await?;
    let ours: HashMap<String, (String, String)> =
        ours.into_iter().map(|(c, s, o)| (c, (s, o))).collect();
    let mut row = Row::new(CHARGES);
    let mut kept_per_order: HashMap<&str, u64> = HashMap::new();
    for charge in &at_provider {
        row.checked += 1;
        let ours = ours.get(charge).map(|(s, o)| (s.as_str(), o.as_str()));
        match (refunded.contains(charge), ours) {
            (false, Some(("succeeded", order))) => *kept_per_order.entry(order).or_default() += 1,
            // Kept by the provider, not a success of ours: money taken for nothing.
            (false, _) => row.lost += 1,
            // Refunded, and we hold it as a success: an order paid with money given back.
            (true, Some(("succeeded", _))) => row.unexpected += 1,
            (true, _) => {}
        }
    }
    row.duplicated += kept_per_order.values().map(|n| n - 1).sum::<u64>();
    row.unexpected += ours
        .iter()
        .filter(|(charge, (status, _))| match status.as_str() {
            "succeeded" => !at_provider.contains(*charge),
            "refunded" => !refunded.contains(*charge),
            _ => false,
        })
        .count() as u64;
    Ok(row)
}

/// What each shopper was told about its payment is what the books say: a 201 is a
/// succeeded payment of its order, any refusal leaves the order unpaid.
async fn payment_answers(evidence: &Evidence<'_>) -> anyhow::Result<Row> {
    let paid = texts(
        evidence.shop,
        "SELECT order_id::text FROM payments WHERE status = 'succeeded'",
    )
    .await?;
    let mut row = Row::new(PAYMENTS);
    for intent in evidence.intents {
        let (Some(order), status) = (&intent.order_id, intent.payment_status) else {
            continue;
        };
        if status == 0 {
            continue; // no answer before the end: either is right
        }
        row.checked += 1;
        match (status == 201, paid.contains(order)) {
            (true, false) => row.lost += 1,
            (false, true) => row.unexpected += 1,
            _ => {}
        }
    }
    Ok(row)
}

/// Every transaction the provider sent a webhook for is in our callbacks once, and we hold
/// none it did not send.
async fn webhooks(shop: &PgPool, provider: &PgPool) -> anyhow::Result<Row> {
    let sent = texts(provider, "SELECT DISTINCT tx_no FROM webhook_deliveries").await?;
    let applied: Vec<String> = sqlx::query_scalar("SELECT provider_tx_no FROM payment_callbacks")
        .fetch_all(shop)
        .await?;
    let mut row = Row::new(WEBHOOKS);
    row.checked = sent.len() as u64;
    let applied_set: HashSet<&String> = applied.iter().collect();
    row.lost = sent.iter().filter(|tx| !applied_set.contains(tx)).count() as u64;
    row.duplicated = (applied.len() - applied_set.len()) as u64;
    row.unexpected = applied_set.iter().filter(|tx| !sent.contains(**tx)).count() as u64;
    Ok(row)
}

/// A shipped order has one confirmation email, delivered; no other order has one.
async fn emails(shop: &PgPool) -> anyhow::Result<Row> {
    let rows: Vec<(bool, i64, i64)> = sqlx::query_as(
        "SELECT EXISTS (SELECT 1 FROM fulfillments f WHERE f.order_id = o.id AND f.status = 'shipped'),
                (SELECT count(*) FROM emails e WHERE e.order_id = o.id AND e.kind = 'order_confirmation'),
                (SELECT count(*) FROM emails e WHERE e.order_id = o.id AND e.kind = 'order_confirmation'
                    AND e.status <> 'queued')
           FROM orders o",
    )
    .fetch_all(shop)
    .await?;
    let mut row = Row::new(EMAILS);
    for (shipped, emails, delivered) in rows {
        if !shipped {
            row.unexpected += emails as u64;
            continue;
        }
        row.checked += 1;
        row.lost += u64::from(delivered == 0);
        row.duplicated += (emails.max(1) - 1) as u64;
    }
    Ok(row)
}

/// The one text column of `sql`'s rows, as a set.
async fn texts(db: &PgPool, sql: &str) -> anyhow::Result<HashSet<String>> {
    let values: Vec<String> = sqlx::query_scalar(sql).fetch_all(db).await?;
    Ok(values.into_iter().collect())
}

pub fn print(rows: &[Row]) {
    println!(
        "{:<50} {:>8} {:>6} {:>11} {:>11}",
        "promise", "checked", "lost", "duplicated", "unexpected"
    );
    for r in rows {
        println!(
            "{:<50} {:>8} {:>6} {:>11} {:>11}",
            r.promise, r.checked, r.lost, r.duplicated, r.unexpected
        );
    }
}
