//! The mailer: each queued email delivered once, over SMTP when it is set up.

use crate::helpers::{smtp::MailCatcher, *};

fn relay(url: &str) -> server::config::SmtpRelay {
    server::config::SmtpRelay::parse(url).unwrap()
}

pub(crate) async fn shipped_orders(app: &TestApp, n: usize) {
    app.paid_orders(n).await;
    let context = app.workers().await;
    let mut consumer = context.fulfillment().await.unwrap();
    drain(&context, &mut consumer).await;
}

#[tokio::test]
async fn each_confirmation_is_sent_once_over_smtp_with_a_message_id_from_its_email() {
    let catcher = MailCatcher::start().await;
    let app = spawn_chain(OnBus::Postgres, |config| {
        config.events.smtp = Some(relay(&catcher.url()));
    })
    .await;
    shipped_orders(&app, 2).await;
    let mailer = app.workers().await.mailer().unwrap();
    // Two mailers at once: each email is claimed by one of them.
    let second = mailer.clone();
    let (a, b) = tokio::join!(mailer.try_execute_task(), second.try_execute_task());
    assert_eq!(a.unwrap() + b.unwrap(), 2);
    assert_eq!(
        mailer.try_execute_task().await.unwrap(),
        0,
        "nothing left to send"
    );

    let received = catcher.received();
    assert_eq!(received.len(), 2, "one message per email");
    let ids: Vec<uuid::Uuid> = sqlx::query_scalar("SELECT id FROM emails WHERE status = 'sent'")
        .fetch_all(&app.db)
        .await
        .unwrap();
    assert_eq!(ids.len(), 2);
    for id in ids {
        let header = format!("Message-ID: {}", server::mailer::message_id(id));
        assert_eq!(
            received.iter().filter(|m| m.contains(&header)).count(),
            1,
            "{header}"
        );
    }
}

#[tokio::test]
async fn a_failed_send_stays_queued_and_is_retried_later() {
    // Nothing listens on this port: every send fails.
    let app = spawn_chain(OnBus::Postgres, |config| {
        config.events.smtp = Some(relay("smtp://127.0.0.1:9"));
    })
    .await;
    shipped_orders(&app, 1).await;
    let mailer = app.workers().await.mailer().unwrap();
    assert_eq!(mailer.try_execute_task().await.unwrap(), 1);
    let (status, attempts, error, waits): (String, i32, Option<String>, bool) = sqlx::query_as(
        "SELECT status, attempts, last_error, next_attempt_at > now() + interval '5 seconds' FROM emails",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!((status.as_str(), attempts), ("queued", 1));
    assert!(
        error.is_some() && waits,
        "kept with its error, retried after a backoff"
    );
    assert_eq!(
        mailer.try_execute_task().await.unwrap(),
        0,
        "not retried at once"
    );
}

#[tokio::test]
async fn an_email_being_sent_is_not_sent_by_a_second_mailer_meanwhile() {
    let catcher = MailCatcher::start_slow(std::time::Duration::from_secs(1)).await;
    let app = spawn_chain(OnBus::Postgres, |config| {
        config.events.smtp = Some(relay(&catcher.url()));
    })
    .await;
    shipped_orders(&app, 1).await;
    let first = app.workers().await.mailer().unwrap();
    let second = app.workers().await.mailer().unwrap();
    let sending = tokio::spawn(async move { first.try_execute_task().await.unwrap() });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        second.try_execute_task().await.unwrap(),
        0,
        "the email is leased to the first mailer"
    );
    assert_eq!(sending.await.unwrap(), 1);
    assert_eq!(
        second.try_execute_task().await.unwrap(),
        0,
        "and then it is sent"
    );
    assert_eq!(catcher.received().len(), 1);
}
