//! The fulfillment of a batch of `order.paid` events in one transaction ends exactly as the
//! same events applied one at a time, in order.

use once_events::{apply_in_one_tx, outbox::Event, Handled};
use server::fulfillment::Fulfillment;
use uuid::Uuid;

use crate::helpers::*;

const ONE_MUG: &str = r#"{"items":[{"sku":"MUG-001","quantity":1}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#;
const TWO_MUGS: &str = r#"{"items":[{"sku":"MUG-001","quantity":2}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#;
const TWO_MUGS_AND_A_LAMP: &str = r#"{"items":[{"sku":"MUG-001","quantity":2},{"sku":"LAMP-008","quantity":1}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#;

/// The `order.paid` event the payment of `order` recorded.
async fn paid_event(app: &TestApp, order: Uuid) -> Event {
    let (id, payload): (Uuid, serde_json::Value) = sqlx::query_as(
        "SELECT id, payload FROM outbox_events WHERE event_type = 'order.paid' AND aggregate_id = $1",
    )
    .bind(order)
    .fetch_one(&app.db)
    .await
    .unwrap();
    Event {
        id,
        event_type: "order.paid".into(),
        aggregate_type: "order".into(),
        aggregate_id: order,
        payload,
        created_at: chrono::Utc::now(),
    }
}

/// Seven events in a chosen order, applied in one transaction, and on a second shop one at
/// a time: both end the same, as one at a time says they must. Order A (two mugs and a
/// lamp, no lamp left) waits whole, leaving its mugs; B takes two of the three mugs; C finds
/// one and waits; D takes the last; `order.paid` again for A and for B finds them decided;
/// B's own event a second time is a duplicate. Shipment numbers follow the events.
#[tokio::test]
async fn a_batch_ends_as_its_events_would_one_at_a_time() {
    for together in [true, false] {
        let app = spawn_chain(OnBus::Postgres, |_| {}).await;
        app.admin_db("UPDATE products SET stock = 1 WHERE sku = 'LAMP-008'")
            .await;
        let a = app.paid_order_for(TWO_MUGS_AND_A_LAMP).await;
        app.admin_db("UPDATE products SET stock = 0 WHERE sku = 'LAMP-008'")
            .await;
        let (b, c, d) = (
            app.paid_order_for(TWO_MUGS).await,
            app.paid_order_for(TWO_MUGS).await,
            app.paid_order_for(ONE_MUG).await,
        );
        app.admin_db("UPDATE products SET stock = 3 WHERE sku = 'MUG-001'")
            .await;
        let again = |event: &Event| Event {
            id: Uuid::new_v4(),
            ..event.clone()
        };
        let (pa, pb) = (paid_event(&app, a).await, paid_event(&app, b).await);
        let events = [
            pa.clone(),
            pb.clone(),
            paid_event(&app, c).await,
            paid_event(&app, d).await,
            again(&pa),
            again(&pb),
            pb.clone(),
        ];
        let refs: Vec<&Event> = events.iter().collect();
        let handled = if together {
            apply_in_one_tx(&app.db, &Fulfillment, &refs).await.unwrap()
        } else {
            let mut handled = Vec::new();
            for event in &refs {
                let one = apply_in_one_tx(&app.db, &Fulfillment, &[event]).await;
                handled.extend(one.unwrap());
            }
            handled
        };
        let mut expected = vec![Handled::Done; 6];
        expected.push(Handled::Duplicate);
        assert_eq!(handled, expected, "together: {together}");

        let mut outcomes = Vec::new();
        for event in &events[..6] {
            let outcome: String = sqlx::query_scalar(
                "SELECT outcome FROM consumed_events WHERE consumer = 'fulfillment' AND event_id = $1",
            )
            .bind(event.id)
            .fetch_one(&app.db)
            .await
            .unwrap();
            outcomes.push(outcome);
        }
        let expected = [
            "backordered",
            "shipped",
            "backordered",
            "shipped",
            "already_fulfilled",
            "not_paid",
        ];
        assert_eq!(outcomes, expected, "together: {together}");
        assert_eq!(app.stock_of("MUG-001").await, 0);
        assert_eq!(app.stock_of("LAMP-008").await, 0);
        let statuses: Vec<(Uuid, String)> =
            sqlx::query_as("SELECT id, status FROM orders WHERE id = ANY($1)")
                .bind(vec![a, b, c, d])
                .fetch_all(&app.db)
                .await
                .unwrap();
        let status = |order: Uuid| {
            statuses
                .iter()
                .find(|(id, _)| *id == order)
                .unwrap()
                .1
                .clone()
        };
        let statuses = [status(a), status(b), status(c), status(d)];
        assert_eq!(statuses, ["paid", "fulfilled", "paid", "fulfilled"]);
        assert_each_shipment_is_its_orders(&app, &[b, d]).await;
    }
}

/// The shipped orders, in the order given, have rising shipment numbers, one
/// `order.fulfilled` each naming its own shipment, and one email each showing it.
async fn assert_each_shipment_is_its_orders(app: &TestApp, shipped: &[Uuid]) {
    let mut last = 0;
    for order in shipped {
        let number: i64 =
            sqlx::query_scalar("SELECT shipment_no FROM fulfillments WHERE order_id = $1")
                .bind(order)
                .fetch_one(&app.db)
                .await
                .unwrap();
        assert!(number > last, "shipment numbers follow the events");
        last = number;
        let label = server::fulfillment::shipment_label(number);
        let announced: Vec<serde_json::Value> = sqlx::query_scalar(
            "SELECT payload FROM outbox_events WHERE event_type = 'order.fulfilled' AND aggregate_id = $1",
        )
        .bind(order)
        .fetch_all(&app.db)
        .await
        .unwrap();
        assert_eq!(announced.len(), 1);
        assert_eq!(announced[0]["shipment_no"], label.as_str());
        let emails: Vec<String> =
            sqlx::query_scalar("SELECT text_body FROM emails WHERE order_id = $1")
                .bind(order)
                .fetch_all(&app.db)
                .await
                .unwrap();
        assert_eq!(emails.len(), 1);
        assert!(emails[0].contains(&label), "{label} in {}", emails[0]);
    }
    let all_emails = app.scalar("SELECT count(*) FROM emails").await;
    assert_eq!(all_emails, shipped.len() as i64);
}
