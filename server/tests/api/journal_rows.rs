//! The journal's triggers: each row change it follows writes one entry inside its own
//! transaction, none when that transaction rolls back (docs/design.md, "The order journal").

use crate::helpers::*;

/// Each statement that changes a row the journal follows, with the kind it writes.
const ROW_CHANGES: &[(&str, &str)] = &[
    ("status", "UPDATE orders SET status = 'cancelled' WHERE id = $1::uuid"),
    (
        "payment",
        "INSERT INTO payments (id, order_id, idempotency_scope, idempotency_key, amount_cents, currency)
         VALUES (gen_random_uuid(), $1::uuid, 's', 'k-new', 3600, 'EUR')",
    ),
    (
        "provider_call",
        "UPDATE payments SET charge_requested_at = now() WHERE order_id = $1::uuid",
    ),
    (
        "event",
        "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload)
         VALUES (gen_random_uuid(), 'order', $1::uuid, 'order.test', '{}')",
    ),
    (
        "published",
        "UPDATE outbox_events SET published_at = now()
          WHERE aggregate_id = $1::uuid AND event_type = 'order.test'",
    ),
    (
        "delivery",
        "INSERT INTO consumed_events (consumer, event_id, outcome)
         SELECT 'fulfillment', id, 'consumed' FROM outbox_events
          WHERE aggregate_id = $1::uuid AND event_type = 'order.test'",
    ),
    (
        "dead_letter",
        "INSERT INTO dead_letters (id, consumer, message_id, subject, body, error, deliveries)
         SELECT gen_random_uuid(), 'fulfillment', id::text, 'order.paid', '\\x7b7d', 'boom', 3
           FROM outbox_events WHERE aggregate_id = $1::uuid AND event_type = 'order.test'",
    ),
    (
        "fulfillment",
        "INSERT INTO fulfillments (id, order_id, status) VALUES (gen_random_uuid(), $1::uuid, 'backordered')",
    ),
    (
        "email",
        "INSERT INTO emails (id, order_id, kind, recipient, subject, html_body, text_body)
         VALUES (gen_random_uuid(), $1::uuid, 'confirmation', 'a@b.test', 's', 'h', 't')",
    ),
    (
        "callback",
        "INSERT INTO payment_callbacks (provider_tx_no, event_id, event_type, charge_id, payload)
         SELECT 'tx-' || id, 'evt', 'charge.failed', 'ch_test',
                jsonb_build_object('data', jsonb_build_object('reference', id::text))
           FROM payments WHERE order_id = $1::uuid;
         UPDATE payment_callbacks SET outcome = 'applied' WHERE outcome = 'received'",
    ),
    (
        "finding",
        "INSERT INTO reconcile_runs (id) VALUES ('00000000-0000-0000-0000-000000000001')
           ON CONFLICT DO NOTHING;
         INSERT INTO reconcile_findings (id, run_id, kind, subject, payment_id, status, detail)
         SELECT gen_random_uuid(), '00000000-0000-0000-0000-000000000001', 'stranded_pending',
                id::text, id, 'open', 'test' FROM payments WHERE order_id = $1::uuid",
    ),
    (
        "refund",
        "INSERT INTO provider_refunds (provider_charge_id, payment_id, provider_refund_id)
         SELECT 'ch_refund', id, 're_1' FROM payments WHERE order_id = $1::uuid",
    ),
];

#[tokio::test]
async fn every_row_kind_is_written_once_in_its_transaction_and_never_by_a_rollback() {
    let app = spawn_app().await;
    let order_id = place_order(&app).await;
    let entries = |kind: &'static str| {
        let db = app.db.clone();
        let order_id = order_id.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT count(*) FROM order_journal WHERE order_id = $1::uuid AND kind = $2",
            )
            .bind(order_id)
            .bind(kind)
            .fetch_one(&db)
            .await
            .unwrap()
        }
    };
    for (kind, sql) in ROW_CHANGES {
        let before = entries(kind).await;
        // Rolled back: no entry, even though the trigger ran inside the transaction.
        let mut tx = app.db.begin().await.unwrap();
        run_all(&mut tx, sql, &order_id).await;
        sqlx::query("SET CONSTRAINTS ALL IMMEDIATE")
            .execute(&mut *tx)
            .await
            .unwrap();
        let inside: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM order_journal WHERE order_id = $1::uuid AND kind = $2",
        )
        .bind(&order_id)
        .bind(kind)
        .fetch_one(&mut *tx)
        .await
        .unwrap();
        assert_eq!(
            inside,
            before + 1,
            "{kind}: one entry inside its transaction"
        );
        tx.rollback().await.unwrap();
        assert_eq!(
            entries(kind).await,
            before,
            "{kind}: none after the rollback"
        );
        // Committed: exactly one.
        let mut tx = app.db.begin().await.unwrap();
        run_all(&mut tx, sql, &order_id).await;
        tx.commit().await.unwrap();
        assert_eq!(
            entries(kind).await,
            before + 1,
            "{kind}: one once committed"
        );
    }
}

/// Runs each `;`-separated statement of `sql` with the order's id where it takes one.
async fn run_all(tx: &mut sqlx::PgConnection, sql: &str, order_id: &str) {
    for statement in sql.split(";\n") {
        let query = sqlx::query(statement);
        let query = if statement.contains("$1") {
            query.bind(order_id)
        } else {
            query
        };
        query.execute(&mut *tx).await.unwrap();
    }
}

#[tokio::test]
async fn who_acted_is_named_even_when_the_transaction_did_not_say() {
    let app = spawn_app().await;
    let order_id = place_order(&app).await;
    let change = |kind: &str| ROW_CHANGES.iter().find(|(k, _)| *k == kind).unwrap().1;
    let mut tx = app.db.begin().await.unwrap();
    for kind in [
        "payment",
        "event",
        "published",
        "dead_letter",
        "email",
        "finding",
    ] {
        run_all(&mut tx, change(kind), &order_id).await;
    }
    run_all(
        &mut tx,
        "UPDATE dead_letters SET status = 'discarded';
         UPDATE emails SET status = 'sent';
         UPDATE reconcile_findings SET status = 'resolved';
         SELECT set_config('once.actor', 'fulfillment', true);
         UPDATE emails SET status = 'kept'",
        &order_id,
    )
    .await;
    tx.commit().await.unwrap();
    let actors: Vec<(String, String)> = sqlx::query_as(
        "SELECT kind, actor FROM order_journal
          WHERE order_id = $1::uuid AND kind NOT IN ('request', 'status') ORDER BY id",
    )
    .bind(&order_id)
    .fetch_all(&app.db)
    .await
    .unwrap();
    let expected = [
        ("event", "shop"),
        ("payment", "shop"),
        ("event", "shop"),
        ("published", "relay"),
        ("dead_letter", "bus"),
        ("email", "shop"),
        ("finding", "reconciler"),
        ("dead_letter", "operator"),
        ("email", "mailer"),
        ("finding", "operator"),
        ("email", "fulfillment"),
    ];
    let actors: Vec<(&str, &str)> = actors
        .iter()
        .map(|(k, a)| (k.as_str(), a.as_str()))
        .collect();
    assert_eq!(actors, expected);
}

/// Every kind the journal knows (migration 0011), and which of them are repeats (0012).
const KINDS: &[&str] = &[
    "request",
    "replay",
    "in_progress",
    "key_reused",
    "status",
    "payment",
    "provider_call",
    "callback",
    "event",
    "published",
    "delivery",
    "dedup",
    "dead_letter",
    "fulfillment",
    "email",
    "finding",
    "refund",
];
const REPEATS: &[&str] = &["replay", "in_progress", "key_reused"];

#[tokio::test]
async fn the_journal_refuses_a_kind_it_does_not_know_and_a_fold_on_what_is_no_repeat() {
    let app = spawn_app().await;
    let order_id = place_order(&app).await;
    // Accepted, or refused by the named constraint (any other failure names itself).
    let write = |kind: &'static str, folded: bool| {
        let db = app.db.clone();
        let order_id = order_id.clone();
        async move {
            let written = sqlx::query(
                "INSERT INTO order_journal (order_id, kind, summary, scope_tag, idempotency_key, fold_minute)
                 VALUES ($1::uuid, $2, 'test', 's', $2,
                         CASE WHEN $3 THEN date_trunc('minute', now()) END)",
            )
            .bind(order_id)
            .bind(kind)
            .bind(folded)
            .execute(&db)
            .await;
            written.map(drop).map_err(|e| {
                e.as_database_error()
                    .and_then(|d| d.constraint())
                    .map_or_else(|| e.to_string(), str::to_owned)
            })
        }
    };
    let fold_refused = Err("order_journal_only_repeats_fold".to_owned());
    for &kind in KINDS {
        let repeat = REPEATS.contains(&kind);
        // A repeat is folded, anything else never is.
        assert_eq!(write(kind, repeat).await, Ok(()), "{kind}");
        assert_eq!(write(kind, !repeat).await, fold_refused, "{kind}");
    }
    for kind in ["refunded", "", "REQUEST"] {
        assert_eq!(
            write(kind, false).await,
            Err("order_journal_kind_valid".to_owned()),
            "{kind:?}"
        );
    }
}
