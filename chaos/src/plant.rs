//! Proof that the checker sees what it counts: each fault is planted directly in a copy of
//! a finished run's database (never through a switch in the server: none exists), and the
//! checker, run on that copy, must report it in the right row.

use sqlx::{Connection, PgConnection, PgPool};

use crate::check::{
    self, Evidence, Row, ACKNOWLEDGED, CHARGES, EMAILS, EVENTS, FULFILLED, ORDERS, PAYMENTS, STOCK,
    WEBHOOKS,
};

/// Which count a plant must raise.
#[derive(Clone, Copy)]
enum Count {
    Lost,
    Duplicated,
}

struct Plant {
    name: &'static str,
    /// Statements run in order; `$1`, where a statement has it, is an order whose client
    /// was answered 201.
    sql: &'static [&'static str],
    must_raise: &'static [(&'static str, Count)],
}

const PLANTS: [Plant; 9] = [
    Plant {
        // As if a failover had lost a committed write: the order a client was told exists
        // is gone, with everything that hangs on it (foreign keys are not enforced for
        // the plant's session, as for a lost page of a table).
        name: "an acknowledged order lost",
        sql: &[
            "SET session_replication_role = replica",
            "DELETE FROM orders WHERE id = $1::uuid",
        ],
        must_raise: &[(ACKNOWLEDGED, Count::Lost), (ORDERS, Count::Lost)],
    },
    Plant {
        // As if a failover had lost the transaction of a payment's success, and the webhook
        // had applied the charge anew: payment, order and event are all there again, but
        // the key the shopper was answered under never completed.
        name: "an acknowledged payment lost, applied anew",
        sql: &["UPDATE idempotency_keys SET state = 'failed', response_status = NULL,
                       response_headers = NULL, response_body = NULL, completed_at = NULL
                 WHERE state = 'completed' AND route LIKE '%/payments'
                   AND key = (SELECT key FROM idempotency_keys
                               WHERE state = 'completed' AND response_status = 201
                                 AND route LIKE '%/payments' LIMIT 1)"],
        must_raise: &[(ACKNOWLEDGED, Count::Lost)],
    },
    Plant {
        name: "a duplicate order for one intent",
        sql: &["INSERT INTO orders (id, session_id, currency, total_cents)
                SELECT gen_random_uuid(), session_id, currency, total_cents FROM orders
                 WHERE status = 'fulfilled' LIMIT 1"],
        must_raise: &[(ORDERS, Count::Duplicated)],
    },
    Plant {
        name: "a second fulfillment of a shipped order",
        sql: &[
            "ALTER TABLE fulfillments DROP CONSTRAINT fulfillments_one_per_order",
            "INSERT INTO fulfillments (id, order_id, status)
             SELECT gen_random_uuid(), order_id, 'backordered' FROM fulfillments
              WHERE status = 'shipped' LIMIT 1",
        ],
        must_raise: &[(FULFILLED, Count::Duplicated)],
    },
    Plant {
        // As if the order.paid event had never reached the consumer: its consumption, the
        // shipment, the email and the stock it took are undone.
        name: "a lost order.paid event",
        sql: &[
            "CREATE TEMP TABLE victim AS
             SELECT e.id AS event_id, e.aggregate_id AS order_id FROM outbox_events e
               JOIN fulfillments f ON f.order_id = e.aggregate_id AND f.status = 'shipped'
              WHERE e.event_type = 'order.paid' LIMIT 1",
            "DELETE FROM consumed_events c USING victim v WHERE c.event_id = v.event_id",
            "DELETE FROM emails e USING victim v WHERE e.order_id = v.order_id",
            "UPDATE products p SET stock = p.stock + i.quantity
               FROM order_items i, victim v WHERE i.order_id = v.order_id AND i.sku = p.sku",
            "DELETE FROM fulfillments f USING victim v WHERE f.order_id = v.order_id",
        ],
        must_raise: &[(FULFILLED, Count::Lost), (EVENTS, Count::Lost)],
    },
    Plant {
        name: "a refund we record, never made",
        sql: &["UPDATE payments SET status = 'refunded'
                 WHERE id = (SELECT id FROM payments WHERE status = 'succeeded' LIMIT 1)"],
        must_raise: &[(CHARGES, Count::Lost), (PAYMENTS, Count::Lost)],
    },
    Plant {
        name: "a unit of stock taken twice",
        // A shipped product with stock left (the schema keeps stock from going below 0).
        sql: &["UPDATE products SET stock = stock - 1
                 WHERE sku = (SELECT i.sku FROM order_items i
                                JOIN fulfillments f ON f.order_id = i.order_id AND f.status = 'shipped'
                                JOIN products p ON p.sku = i.sku AND p.stock > 0
                               LIMIT 1)"],
        must_raise: &[(STOCK, Count::Duplicated)],
    },
    Plant {
        name: "a webhook never applied",
        sql: &["DELETE FROM payment_callbacks
                 WHERE provider_tx_no = (SELECT provider_tx_no FROM payment_callbacks LIMIT 1)"],
        must_raise: &[(WEBHOOKS, Count::Lost)],
    },
    Plant {
        name: "a confirmation email never sent",
        sql: &["DELETE FROM emails WHERE id = (SELECT id FROM emails LIMIT 1)"],
        must_raise: &[(EMAILS, Count::Lost)],
    },
];

/// An order whose client was answered 201.
fn acknowledged_order<'a>(evidence: &Evidence<'a>) -> anyhow::Result<&'a str> {
    evidence
        .intents
        .iter()
        .find(|i| i.order_status == 201)
        .and_then(|i| i.order_id.as_deref())
        .ok_or_else(|| anyhow::anyhow!("no order was acknowledged: nothing to plant on"))
}

fn count(rows: &[Row], promise: &str, which: Count) -> u64 {
    let row = rows
        .iter()
        .find(|r| r.promise == promise)
        .expect("a checked promise");
    match which {
        Count::Lost => row.lost,
        Count::Duplicated => row.duplicated,
    }
}

/// Plants each fault in its own copy of `shop_db` (on the server at `pg_url`) and checks
/// that the checker reports it; `clean` is what the checker said about the run itself.
/// Returns whether every plant was seen.
pub async fn prove(
    pg_url: &str,
    shop_db: &str,
    evidence: &Evidence<'_>,
    clean: &[Row],
) -> anyhow::Result<bool> {
    let mut admin = PgConnection::connect(&format!("{pg_url}/postgres")).await?;
    let mut all_seen = true;
    println!("\n{:<42} {:<60} seen", "planted", "reported as");
    for (i, plant) in PLANTS.iter().enumerate() {
        let copy = format!("{shop_db}_plant_{i}");
        sqlx::query(&format!("DROP DATABASE IF EXISTS {copy} WITH (FORCE)"))
            .execute(&mut admin)
            .await?;
        sqlx::query(&format!("CREATE DATABASE {copy} TEMPLATE {shop_db}"))
            .execute(&mut admin)
            .await?;
        let db = PgPool::connect(&format!("{pg_url}/{copy}")).await?;
        let mut conn = db.acquire().await?;
        for statement in plant.sql {
            let query = sqlx::query(statement);
            let query = if statement.contains("$1") {
                query.bind(acknowledged_order(evidence)?)
            } else {
                query
            };
            query.execute(&mut *conn).await?;
        }
        drop(conn);
        let rows = check::check(&Evidence {
            shop: &db,
            ..*evidence
        })
        .await?;
        db.close().await;
        for (promise, which) in plant.must_raise {
            let seen = count(&rows, promise, *which) > count(clean, promise, *which);
            all_seen &= seen;
            let label = match which {
                Count::Lost => "lost",
                Count::Duplicated => "duplicated",
            };
            let reported = format!("{promise}: {label}");
            let seen_text = if seen { "yes" } else { "NO" };
            println!("{:<42} {reported:<60} {seen_text}", plant.name);
        }
        sqlx::query(&format!("DROP DATABASE IF EXISTS {copy} WITH (FORCE)"))
            .execute(&mut admin)
            .await?;
    }
    Ok(all_seen)
}
