//! Reading the journal: one order's entries in order, and the search that finds an order by
//! anything an operator may be holding (a shopper's order number, a key from a client's
//! log, a payment id, the provider's charge id, a bus event id).

use sqlx::PgPool;
use uuid::Uuid;

/// The entries one page shows. A page is read through indexes from a cursor (keyset
/// paging), so it costs the same in a story of a thousand entries and of a million.
pub const PAGE: i64 = 200;

/// The kinds that say what happened to the order and its money: what no request or
/// repeat of a shopper's can bury, since the money view reads them through an index of
/// their own (`order_journal_money_idx`, migration 0014).
pub const MONEY_KINDS: &str = "('status', 'payment', 'provider_call', 'callback', 'refund', \
                                'finding', 'fulfillment', 'email', 'dead_letter')";

/// Which entries of a story a page shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Everything, requests and repeats included.
    All,
    /// The order's and its money's entries only ([`MONEY_KINDS`]).
    Money,
}

/// Where in the story a page is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// The oldest entries.
    First,
    /// The newest entries.
    Latest,
    /// The entries after this entry.
    After(i64),
    /// The entries before this entry.
    Before(i64),
    /// The entries from this one on (a search's match).
    From(i64),
}

/// One page of an order's story as the console shows it.
pub struct Journal {
    pub order: OrderHeading,
    /// Oldest first.
    pub entries: Vec<Entry>,
    /// Whether the story has entries before and after this page.
    pub earlier: bool,
    pub later: bool,
}

pub struct OrderHeading {
    pub id: Uuid,
    pub order_no: String,
    pub status: String,
    pub total_cents: i64,
    pub currency: String,
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// The shopper's email; `None` when the order has none (forgotten, or placed before the
    /// checkout asked).
    pub email: Option<String>,
    /// Where the order ships, on one line.
    pub ship_to: Option<String>,
    /// When the shop forgot the order's personal data.
    pub personal_data_forgotten_at: Option<chrono::DateTime<chrono::Utc>>,
}

#[derive(sqlx::FromRow)]
pub struct Entry {
    pub id: i64,
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

/// One page of an order's journal, oldest first: its own entries, and the requests that
/// carried the key that made it before the order was known (a 409 while it was being made).
pub async fn for_order(
    db: &PgPool,
    order_no: &str,
    view: View,
    window: Window,
) -> Result<Option<Journal>, sqlx::Error> {
    // Text PostgreSQL cannot hold, or no order number's length: no order.
    if order_no.len() > 64 || order_no.contains('\0') {
        return Ok(None);
    }
    let order_no = order_no.to_uppercase();
    // chrono, not the `time` crate sqlx would pick by default (see operator::pages).
    let order = sqlx::query_as!(
        OrderHeading,
        r#"SELECT o.id, o.order_no, o.status, o.total_cents, o.currency,
                  o.created_at AS "created_at: chrono::DateTime<chrono::Utc>",
                  r.email AS "email?",
                  concat_ws(', ', r.name, r.line1, nullif(r.line2, ''),
                            r.postal_code || ' ' || r.city, r.country) AS ship_to,
                  o.personal_data_forgotten_at AS "personal_data_forgotten_at: chrono::DateTime<chrono::Utc>"
             FROM orders o LEFT JOIN order_recipients r ON r.order_id = o.id
            WHERE o.order_no = $1"#,
        &order_no,
    )
    .fetch_optional(db)
    .await?;
    let Some(order) = order else {
        return Ok(None);
    };
    let backwards = matches!(window, Window::Latest | Window::Before(_));
    let cursor = match window {
        Window::First | Window::Latest => None,
        Window::After(id) | Window::Before(id) | Window::From(id) => Some(id),
    };
    let mut entries: Vec<Entry> = sqlx::query_as(&page_sql(view, window))
        .bind(order.id)
        .bind(PAGE + 1)
        .bind(cursor)
        .fetch_all(db)
        .await?;
    let more = entries.len() as i64 > PAGE;
    entries.truncate(PAGE as usize);
    if backwards {
        entries.reverse();
    }
    let (earlier, later) = match window {
        Window::First => (false, more),
        Window::Latest => (more, false),
        Window::Before(_) => (more, true),
        Window::After(_) => (true, more),
        Window::From(_) => (!entries.is_empty(), more),
    };
    Ok(Some(Journal {
        order,
        entries,
        earlier,
        later,
    }))
}

/// The statement of a page: `$1` the order, `$2` how many, `$3` the cursor's entry. Each
/// part reads its index in the page's direction from the cursor and stops at `$2` rows:
/// the order's own entries (`order_journal_order_page_idx`, or the money kinds' own
/// index), and the 409s of the key that made the order, written before it was known
/// (`order_journal_unlinked_idx`). Built from constants only.
fn page_sql(view: View, window: Window) -> String {
    let (cmp, dir) = match window {
        Window::First | Window::After(_) => (">", "ASC"),
        Window::From(_) => (">=", "ASC"),
        Window::Latest | Window::Before(_) => ("<", "DESC"),
    };
    let from_cursor = match window {
        Window::First | Window::Latest => String::new(),
        _ => format!("AND (j.at, j.id) {cmp} (SELECT at, id FROM order_journal WHERE id = $3)"),
    };
    let kinds = match view {
        View::All => String::new(),
        View::Money => format!("AND j.kind IN {MONEY_KINDS}"),
    };
    let order = format!("ORDER BY at {dir}, id {dir}");
    let unlinked = match view {
        // A 409 before the order existed is a request's entry: not the money's.
        View::Money => String::new(),
        View::All => format!(
            "UNION ALL
             (SELECT j.* FROM order_journal j
                JOIN (SELECT scope_tag, idempotency_key FROM order_journal
                       WHERE order_id = $1 AND kind = 'request' ORDER BY at, id LIMIT 1) k
                     USING (scope_tag, idempotency_key)
               WHERE j.order_id IS NULL {from_cursor} {order} LIMIT $2)"
        ),
    };
    format!(
        "SELECT id, at, kind, actor, summary, idempotency_key, payment_id, charge_id, event_id,
                repeats, last_at
           FROM ((SELECT j.* FROM order_journal j
                   WHERE j.order_id = $1 {kinds} {from_cursor} {order} LIMIT $2)
                 {unlinked}) e
          {order} LIMIT $2"
    )
}

/// An order a search found, what matched, and the first entry it matched (the page the
/// search opens starts there).
pub struct Found {
    pub order_no: String,
    pub matched: String,
    pub entry: Option<i64>,
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
    // Each identifier is looked up through its own index, a few rows each.
    sqlx::query_as!(
        Found,
        r#"SELECT o.order_no, string_agg(DISTINCT m.matched, ', ') AS "matched!",
                  min(m.entry) AS entry,
                  o.created_at AS "created_at: chrono::DateTime<chrono::Utc>"
             FROM (SELECT id AS order_id, 'order number' AS matched, NULL::bigint AS entry
                     FROM orders WHERE order_no = upper($1)
                   UNION ALL SELECT id, 'order id', NULL FROM orders WHERE id = $2
                   UNION ALL SELECT order_id, 'email', NULL FROM order_recipients
                              WHERE lower(email) = lower($1)
                   UNION ALL SELECT order_id, 'payment id',
                                    (SELECT min(j.id) FROM order_journal j WHERE j.payment_id = $2)
                               FROM payments WHERE id = $2
                   UNION ALL SELECT order_id, 'provider charge id',
                                    (SELECT min(j.id) FROM order_journal j WHERE j.charge_id = $1)
                               FROM payments WHERE provider_charge_id = $1
                   UNION ALL (SELECT DISTINCT ON (order_id) order_id, 'provider charge id', id
                                FROM order_journal WHERE charge_id = $1 ORDER BY order_id, id)
                   UNION ALL (SELECT DISTINCT ON (order_id) order_id, 'event id', id
                                FROM order_journal WHERE event_id = $2 ORDER BY order_id, id)
                   UNION ALL (SELECT DISTINCT ON (order_id) order_id, 'idempotency key', id
                                FROM order_journal WHERE idempotency_key = $1 AND order_id IS NOT NULL
                               ORDER BY order_id, id)) m
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
