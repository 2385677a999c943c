//! The reconciler's runs: one at a time whatever the number of reconcilers, nothing missed
//! when charges commit late or carry odd timestamps, and one bad item never stopping a run.
//! The kinds of finding are in `reconcile.rs`.

use provider::settings::Chaos;
use uuid::Uuid;

use crate::{helpers::*, reconcile::*};

#[tokio::test]
async fn two_reconcilers_at_once_make_one_run_and_one_refund() {
    let (app, provider) = spawn_shop_and_provider().await;
    provider.settings.set_chaos(Chaos {
        charge_twice: true,
        drop_webhooks: true,
        ..Chaos::default()
    });
    let order_id = place_order(&app).await;
    assert_eq!(
        pay(&app, &order_id, "pay-1", CARD_OK, &[]).await.status(),
        201
    );

    let (a, b) = (reconciler(&app).await, reconciler(&app).await);
    let (ra, rb) = tokio::join!(a.try_execute_task(), b.try_execute_task());
    let ran = [ra.unwrap(), rb.unwrap()].into_iter().flatten().count();
    assert_eq!(ran, 1, "the lease lets one run");
    assert_eq!(app.count("reconcile_runs").await, 1);
    assert_eq!(provider.refunds().await, 1);
}

#[tokio::test]
async fn a_charge_that_commits_after_later_ones_were_read_is_still_reconciled() {
    let (app, provider) = spawn_shop_and_provider().await;
    provider.settings.set_chaos(Chaos {
        drop_webhooks: true,
        ..Chaos::default()
    });
    let (late_order, early_order) = (place_order(&app).await, place_order(&app).await);
    let late = pending_attempt(&app, &late_order).await;
    let early = pending_attempt(&app, &early_order).await;
    // The provider records a charge in a transaction that takes its time to commit...
    let mut slow = provider.db.begin().await.unwrap();
    sqlx::query(
        "INSERT INTO charges (id, idempotency_key, request_fingerprint, amount_cents, currency, card_last4, reference, status)
         VALUES ($1, $2, 'f', 3600, 'EUR', '4242', $3, 'succeeded')",
    )
    .bind(format!("ch_late_{}", Uuid::new_v4().simple()))
    .bind(format!("late-{late}"))
    .bind(&late)
    .execute(&mut *slow)
    .await
    .unwrap();
    // ...while a later charge commits and a run reads the ledger past it.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    provider.charge(&early, CARD_OK, 3600).await;
    let reconciler = reconciler(&app).await;
    run(&reconciler).await;
    assert_eq!(app.order_status(&early_order).await, "paid");
    assert_eq!(app.order_status(&late_order).await, "pending_payment");

    slow.commit().await.unwrap();
    run(&reconciler).await;
    assert_eq!(
        app.order_status(&late_order).await,
        "paid",
        "the late charge was not skipped"
    );
}

#[tokio::test]
async fn one_item_that_cannot_be_repaired_does_not_stop_the_run_nor_hide_the_rest() {
    let (app, provider) = spawn_shop_and_provider().await;
    provider.settings.set_chaos(Chaos {
        drop_webhooks: true,
        ..Chaos::default()
    });
    // A stranded attempt whose charge disagrees with its order (settling it fails)...
    let bad_order = place_order(&app).await;
    let bad = pending_attempt(&app, &bad_order).await;
    app.sql(
        "UPDATE payments SET amount_cents = 999 WHERE id = $1::uuid",
        &bad,
    )
    .await;
    backdate_attempt(&app, &bad, 2).await;
    provider.charge(&bad, CARD_OK, 999).await;
    // ...an attempt stranded after it, to be closed in the same run...
    let stranded_order = place_order(&app).await;
    let stranded = pending_attempt(&app, &stranded_order).await;
    backdate_attempt(&app, &stranded, 1).await;
    // ...and a missed success that must still be repaired in the same run.
    let good_order = place_order(&app).await;
    let good = pending_attempt(&app, &good_order).await;
    provider.charge(&good, CARD_OK, 3600).await;

    let reconciler = reconciler(&app).await;
    run(&reconciler).await;
    assert_eq!(app.order_status(&good_order).await, "paid");
    assert_eq!(
        payment_status(&app, &stranded).await,
        "failed",
        "closed after the bad one"
    );
    assert_eq!(
        app.count_where("reconcile_runs", "status = 'finished'")
            .await,
        1
    );
}

#[tokio::test]
async fn a_provider_timestamp_in_the_future_does_not_hide_later_charges() {
    let (app, provider) = spawn_shop_and_provider().await;
    provider.settings.set_chaos(Chaos {
        drop_webhooks: true,
        ..Chaos::default()
    });
    let (first_order, later_order) = (place_order(&app).await, place_order(&app).await);
    let first = pending_attempt(&app, &first_order).await;
    provider.charge(&first, CARD_OK, 3600).await;
    sqlx::query("UPDATE charges SET created_at = now() + interval '1 year' WHERE reference = $1")
        .bind(&first)
        .execute(&provider.db)
        .await
        .unwrap();
    let reconciler = reconciler(&app).await;
    run(&reconciler).await;

    let later = pending_attempt(&app, &later_order).await;
    provider.charge(&later, CARD_OK, 3600).await;
    run(&reconciler).await;
    assert_eq!(app.order_status(&later_order).await, "paid");
}
