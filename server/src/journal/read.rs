//! Reading the journal: one order's entries in order, and the search that finds an order by
//! anything an operator may be holding (a shopper's order number, a key from a client's
//! log, a payment id, the provider's charge id, a bus event id).

use sqlx::PgPool;
use uuid::Uuid;

/// The most entries one page shows: the first half and the last half of a longer story,
/// so what happened last is never hidden behind what happened first.
pub const MAX_ENTRIES: i64 = 2000;

/// One order's story as the console shows it.
pub struct Journal {
    pub order: OrderHeading,
    /// Oldest first; when the story is longer than [`MAX_ENTRIES`], its beginning and its
    /// end, with `hidden` entries left out between them at `gap_at`.
    pub entries: Vec<Entry>,
    pub hidden: i64,
    pub gap_at: usize,
}

pub struct OrderHeading {
    pub id: Uuid,
    pub order_no: String,
    pub status: String,
    pub total_cents: i64,
    pub currency: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

pub struct Entry {
    pub at: chrono::DateTime<chrono::Utc>,
    pub kind: String,
    pub actor: String,
    pub summary: String,
    pub idempotency_key: Option<String>,
    pub payment_id: Option<Uuid>,
    pub charge_id: Option<String>,
    pub event_id: Option<Uuid>,
    /// How many repeats a folded entry counts (1 for every other entry), and the last one.
    pub repeats: i32,
    pub last_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl Entry {
    /// The entry's kind as an operator reads it.
    pub fn label(&self) -> &str {
        match self.kind.as_str() {
            "request" => "request",
            "replay" => "replayed",
            "in_progress" => "409 in progress",
            "key_reused" => "422 key reused",
            "status" => "order",
            "payment" => "payment",
            "provider_call" => "provider call",
            "callback" => "callback",
            "event" => "outbox",
            "published" => "published",
            "delivery" => "delivery",
            "dedup" => "dedup hit",
            "dead_letter" => "dead letter",
            "fulfillment" => "fulfillment",
            "email" => "email",
            "finding" => "finding",
            "refund" => "refund",
            other => other,
        }
    }
}

/// An order's journal, oldest first: its own entries, and the requests that carried one of
/// its keys before the order was known (a 409 while it was being made).
pub async fn for_order(db: &PgPool, order_no: &str) -> Result<Option<Journal>, sqlx::Error> {
    // Text PostgreSQL cannot hold, or no order number's length: no order.
    if order_no.len() > 64 || order_no.contains('\0') {
        return Ok(None);
    }
    let order_no = order_no.to_uppercase();
    // chrono, not the `time` crate sqlx would pick by default (see operator::pages).
    let order = sqlx::query_as!(
        OrderHeading,
        r#"SELECT id, order_no, status, total_cents, currency,
                  created_at AS "created_at: chrono::DateTime<chrono::Utc>"
             FROM orders WHERE order_no = $1"#,
        &order_no,
    )
    .fetch_optional(db)
    .await?;
    let Some(order) = order else {
        return Ok(None);
    };
    let half = MAX_ENTRIES / 2;
    let rows = sqlx::query!(
        r#"WITH keys AS (SELECT DISTINCT scope_tag, idempotency_key FROM order_journal
                          WHERE order_id = $1 AND idempotency_key IS NOT NULL),
                story AS (SELECT *, row_number() OVER (ORDER BY at, id) AS n, count(*) OVER () AS total
                            FROM (SELECT * FROM order_journal WHERE order_id = $1
                                  UNION ALL
                                  SELECT j.* FROM order_journal j JOIN keys k USING (scope_tag, idempotency_key)
                                   WHERE j.order_id IS NULL) e)
           SELECT at AS "at!: chrono::DateTime<chrono::Utc>", kind AS "kind!", actor AS "actor!",
                  summary AS "summary!", idempotency_key, payment_id, charge_id, event_id,
                  repeats AS "repeats!", last_at AS "last_at: chrono::DateTime<chrono::Utc>",
                  total AS "total!"
             FROM story WHERE n <= $2 OR n > total - $2
            ORDER BY n"#,
        order.id,
        half,
    )
    .fetch_all(db)
    .await?;
    let total = rows.first().map_or(0, |r| r.total);
    let entries: Vec<Entry> = rows
        .into_iter()
        .map(|r| Entry {
            at: r.at,
            kind: r.kind,
            actor: r.actor,
            summary: r.summary,
            idempotency_key: r.idempotency_key,
            payment_id: r.payment_id,
            charge_id: r.charge_id,
            event_id: r.event_id,
            repeats: r.repeats,
            last_at: r.last_at,
        })
        .collect();
    Ok(Some(Journal {
        order,
        hidden: total - entries.len() as i64,
        gap_at: half as usize,
        entries,
    }))
}

/// An order a search found, and what matched.
pub struct Found {
    pub order_no: String,
    pub matched: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// The orders `query` names, by order number, order id, idempotency key, payment id,
/// provider charge id or event id (exact matches only: every one is an identifier).
pub async fn search(db: &PgPool, query: &str) -> Result<Vec<Found>, sqlx::Error> {
    let query = query.trim();
    if query.is_empty() || query.len() > 255 || query.contains('\0') {
        return Ok(vec![]);
    }
    let id = Uuid::parse_str(query).ok();
    sqlx::query_as!(
        Found,
        r#"SELECT o.order_no, string_agg(DISTINCT m.matched, ', ') AS "matched!",
                  o.created_at AS "created_at: chrono::DateTime<chrono::Utc>"
             FROM (SELECT id AS order_id, 'order number' AS matched FROM orders WHERE order_no = upper($1)
                   UNION ALL SELECT id, 'order id' FROM orders WHERE id = $2
                   UNION ALL SELECT order_id, 'payment id' FROM payments WHERE id = $2
                   UNION ALL SELECT order_id, 'provider charge id' FROM payments WHERE provider_charge_id = $1
                   UNION ALL SELECT order_id, 'provider charge id' FROM order_journal WHERE charge_id = $1
                   UNION ALL SELECT order_id, 'event id' FROM order_journal WHERE event_id = $2
                   UNION ALL SELECT order_id, 'idempotency key' FROM order_journal
                              WHERE idempotency_key = $1 AND order_id IS NOT NULL) m
             JOIN orders o ON o.id = m.order_id
            GROUP BY o.order_no, o.created_at
            ORDER BY o.created_at DESC
            LIMIT 50"#,
        query,
        id,
    )
    .fetch_all(db)
    .await
}
