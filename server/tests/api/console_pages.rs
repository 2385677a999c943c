//! What the console's pages show: charts drawn from the samples (one per minute, whichever
//! instance takes it), words in empty tables, and a failed reconciliation run that says
//! what failed.

use server::operator::samples;

use crate::helpers::{eventually, TestApp};

use crate::operator::{operator, spawn_console};

/// The server samples as it starts (then a minute later): once it has, its sample is
/// removed, and the test takes the samples itself.
async fn samples_left_to_the_test(app: &TestApp) {
    eventually("the server's first sample", || async {
        app.count("console_samples").await == 1
    })
    .await;
    sqlx::query("DELETE FROM console_samples")
        .execute(&app.db)
        .await
        .unwrap();
}

#[tokio::test]
async fn one_sample_a_minute_whichever_instance_takes_it_and_the_overview_draws_them() {
    let app = spawn_console().await;
    let first = app.workers().await;
    let second = app.workers().await;
    samples_left_to_the_test(&app).await;
    assert!(samples::try_execute_task(&app.db, first.bus.as_ref())
        .await
        .unwrap());
    assert!(
        !samples::try_execute_task(&app.db, second.bus.as_ref())
            .await
            .unwrap(),
        "the minute's sample is taken already"
    );
    assert_eq!(app.count("console_samples").await, 1);
    let (client, _) = operator(&app).await;
    let html = app.get_text(&client, "/operator").await;
    assert_eq!(html.matches("<svg class=\"chart\"").count(), 4, "{html}");
    for title in [
        "Outbox lag (seconds)",
        "Deliveries waiting",
        "Dead letters waiting",
        "Requests per minute",
    ] {
        assert!(html.contains(title), "{title}");
    }
    // One sample: a dot on each line that has a value (JetStream has none on this bus).
    assert_eq!(html.matches("<circle").count(), 1 + 1 + 1 + 4, "{html}");
}

#[tokio::test]
async fn empty_tables_say_so_and_a_failed_run_says_what_failed() {
    let app = spawn_console().await;
    let (client, csrf) = operator(&app).await;
    let page = app.get_text(&client, "/operator/reconciliation").await;
    assert!(
        page.contains("No findings yet.") && page.contains("No runs yet."),
        "{page}"
    );
    let letters = app.get_text(&client, "/operator/dead-letters").await;
    assert!(letters.contains("No dead letters."), "{letters}");
    let emails = app.get_text(&client, "/operator/emails").await;
    assert!(emails.contains("No emails yet."), "{emails}");
    // No provider answers at the configured address: the run fails, and says where.
    let run = client
        .post(app.url("/operator/reconciliation/run"))
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(run.status(), 303);
    let page = app.get_text(&client, "/operator/reconciliation").await;
    let said = format!(
        "payment provider unreachable at {}/v1/transactions",
        app.config.provider_url.trim_end_matches('/')
    );
    assert!(page.contains(&said), "{said} in {page}");
    assert!(!page.contains("temporarily unavailable"), "{page}");
    let stored: String = sqlx::query_scalar("SELECT error FROM reconcile_runs")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(
        stored.starts_with("ledger page not read: payment provider unreachable at"),
        "{stored}"
    );
}

#[tokio::test]
async fn a_sample_counts_a_whole_minute_that_ended_with_each_folded_repeat() {
    let app = spawn_console().await;
    // The minute sampled is the last that ended 15 seconds ago or more; far from its turn,
    // so the inserts and the sample see the same one.
    let second = (chrono::Utc::now().timestamp() - 15).rem_euclid(60);
    if second >= 50 {
        tokio::time::sleep(std::time::Duration::from_secs((61 - second) as u64)).await;
    }
    // Twelve replays of one key in the minute sampled (one folded entry), a 409 in it, and
    // replays of the minute after, which belong to the next sample.
    sqlx::query(
        "INSERT INTO order_journal (kind, summary, scope_tag, idempotency_key, fold_minute, repeats, at)
         SELECT kind, 'test', 'tag', 'k', m.minute + shift, n, m.minute + shift + interval '1 second'
           FROM (SELECT date_trunc('minute', now() - interval '15 seconds') - interval '1 minute' AS minute) m,
                (VALUES ('replay', interval '0', 12), ('in_progress', interval '0', 1),
                        ('replay', interval '1 minute', 5), ('key_reused', interval '-1 minute', 3))
                    AS v (kind, shift, n)",
    )
    .execute(&app.db)
    .await
    .unwrap();
    samples_left_to_the_test(&app).await;
    let workers = app.workers().await;
    assert!(samples::try_execute_task(&app.db, workers.bus.as_ref())
        .await
        .unwrap());
    let (replays, in_progress, key_reused): (i32, i32, i32) = sqlx::query_as(
        "SELECT replays, in_progress, key_reused FROM console_samples
          WHERE at = date_trunc('minute', now() - interval '15 seconds') - interval '1 minute'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!((replays, in_progress, key_reused), (12, 1, 0));
}
