//! 3-D Secure with Stripe, against localstripe: a card whose bank asks the shopper to
//! confirm the payment is answered 202 and left pending; the browser runs the bank's step
//! (here `_authenticate`, which localstripe's Stripe.js calls) and asks the shop to
//! continue, and the shop reads the intent back to learn the outcome. Exactly once holds
//! across the step: a repeat of the payment, the bank's answer arriving twice, a webhook
//! first, and a shopper who never returns (the attempt is settled, the intent cancelled).

use serde_json::Value;

use crate::helpers::*;

/// A 3-D Secure card the shopper's bank accepts or refuses as the test says.
const ASKS_FOR_AUTHENTICATION: &str = "4000002500003155";
/// Another such card (a bank that asks every time).
const ALWAYS_ASKS: &str = "4000000000003220";

/// `POST …/payments/{payment_id}/authentication` once: the status and the body.
async fn ask_once(app: &TestApp, order_id: &str, payment_id: &str) -> (u16, Value) {
    let url = format!("/api/orders/{order_id}/payments/{payment_id}/authentication");
    let response = app.client.post(app.url(&url)).send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// The same, asked again after a 429 as the page asks (the shop asks Stripe at most once
/// a second per payment).
async fn continue_authentication(app: &TestApp, order_id: &str, payment_id: &str) -> (u16, Value) {
    loop {
        match ask_once(app, order_id, payment_id).await {
            (429, _) => tokio::time::sleep(std::time::Duration::from_millis(1100)).await,
            answer => return answer,
        }
    }
}

/// The shopper's bank answers the step, as localstripe's Stripe.js asks it to: the status
/// of localstripe's answer.
async fn bank_answers(stripe: &TestStripe, client_secret: &str, success: bool) -> u16 {
    let intent = client_secret.split("_secret_").next().unwrap();
    let url = format!(
        "{}/v1/payment_intents/{intent}/_authenticate?success={success}",
        stripe.base
    );
    reqwest::Client::new()
        .post(url)
        .json(&serde_json::json!({ "key": "pk_test_once", "client_secret": client_secret }))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

/// An order paid with `card`: the pay answer's status and body.
async fn pay_with_card(
    app: &TestApp,
    stripe: &TestStripe,
    order_id: &str,
    card: &str,
) -> (u16, Value) {
    pay_again(app, order_id, &stripe.card(card).await).await
}

/// The payment sent (again) with `method`, under the same key, as a double click sends it.
async fn pay_again(app: &TestApp, order_id: &str, method: &str) -> (u16, Value) {
    let response = pay_with_method(app, order_id, "pay-3ds", method)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// An order paid with `card`, its payment at the bank: the order, the payment and the
/// client secret the browser would run the step with.
async fn at_the_bank(app: &TestApp, stripe: &TestStripe, card: &str) -> (String, String, String) {
    let order_id = place_order(app).await;
    let (status, payment) = pay_with_card(app, stripe, &order_id, card).await;
    assert_eq!(status, 202, "{payment}");
    let payment_id = payment["id"].as_str().unwrap().to_owned();
    let (_, waiting) = continue_authentication(app, &order_id, &payment_id).await;
    let secret = waiting["client_secret"].as_str().unwrap().to_owned();
    (order_id, payment_id, secret)
}

#[tokio::test]
async fn a_payment_the_bank_confirms_is_paid_once_however_often_its_steps_repeat() {
    let (app, stripe) = spawn_shop_and_stripe().await;
    let order_id = place_order(&app).await;
    let method = stripe.card(ASKS_FOR_AUTHENTICATION).await;
    let (status, payment) = pay_again(&app, &order_id, &method).await;
    assert_eq!(status, 202, "{payment}");
    assert_eq!(
        (&payment["status"], &payment["needs_authentication"]),
        (&Value::from("pending"), &Value::from(true))
    );
    let payment_id = payment["id"].as_str().unwrap().to_owned();
    // A double click: the same key replays the same answer, and no second intent is made.
    let (again, replayed) = pay_again(&app, &order_id, &method).await;
    assert_eq!((again, &replayed["id"]), (202, &payment["id"]));

    let (status, waiting) = continue_authentication(&app, &order_id, &payment_id).await;
    assert_eq!(status, 202, "{waiting}");
    let secret = waiting["client_secret"]
        .as_str()
        .expect("the client secret");
    assert_eq!(app.order_status(&order_id).await, "pending_payment");
    // Asked again at once, the shop does not ask Stripe again.
    let (status, problem) = ask_once(&app, &order_id, &payment_id).await;
    assert_eq!(status, 429, "{problem}");
    assert!(problem["type"]
        .as_str()
        .unwrap()
        .ends_with("authentication-checked-recently"));

    assert_eq!(bank_answers(&stripe, secret, true).await, 200);
    assert_ne!(
        bank_answers(&stripe, secret, true).await,
        200,
        "the bank's second answer is refused by Stripe"
    );
    for _ in 0..2 {
        let (status, paid) = continue_authentication(&app, &order_id, &payment_id).await;
        assert_eq!((status, &paid["status"]), (201, &Value::from("succeeded")));
    }
    assert_eq!(app.order_status(&order_id).await, "paid");
    assert_eq!(stripe.charged(&order_id).await, 1);
    assert_eq!(stripe.intents_of_order(&order_id).await.len(), 1);
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'order.paid'")
            .await,
        1
    );
}

#[tokio::test]
async fn a_payment_the_bank_refuses_is_declined_and_the_order_can_be_paid_again() {
    let (app, stripe) = spawn_shop_and_stripe().await;
    let (order_id, payment_id, secret) = at_the_bank(&app, &stripe, ALWAYS_ASKS).await;
    let payment_id = payment_id.as_str();
    assert_eq!(bank_answers(&stripe, &secret, false).await, 200);

    let (status, problem) = continue_authentication(&app, &order_id, payment_id).await;
    assert_eq!(status, 402, "{problem}");
    assert!(problem["type"].as_str().unwrap().ends_with("card-declined"));
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .contains("bank did not confirm"),
        "{problem}"
    );
    assert_eq!(app.order_status(&order_id).await, "pending_payment");
    assert_eq!(stripe.charged(&order_id).await, 0);
    assert_eq!(
        stripe.intents_of_order(&order_id).await[0]["status"],
        "canceled",
        "the browser's client secret can no longer confirm it with another card"
    );
    let again = pay_with_method(&app, &order_id, "pay-2", PM_VISA)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 201);
    assert_eq!(stripe.charged(&order_id).await, 1);
}

#[tokio::test]
async fn a_webhook_before_the_browser_returns_settles_it_and_the_browser_sees_the_same() {
    let (app, stripe) = spawn_shop_and_stripe().await;
    let (order_id, payment_id, secret) = at_the_bank(&app, &stripe, ASKS_FOR_AUTHENTICATION).await;
    let payment_id = payment_id.as_str();
    assert_eq!(bank_answers(&stripe, &secret, true).await, 200);
    eventually("the webhook pays the order", || async {
        app.order_status(&order_id).await == "paid"
    })
    .await;
    let (status, paid) = continue_authentication(&app, &order_id, payment_id).await;
    assert_eq!((status, &paid["status"]), (201, &Value::from("succeeded")));
    assert_eq!(stripe.charged(&order_id).await, 1);
    assert_eq!(
        app.count_where("outbox_events", "event_type = 'order.paid'")
            .await,
        1
    );
}

#[tokio::test]
async fn a_shopper_who_never_returns_is_settled_and_a_late_bank_answer_charges_nothing() {
    let (app, stripe) = spawn_shop_and_stripe().await;
    let (order_id, payment_id, secret) = at_the_bank(&app, &stripe, ASKS_FOR_AUTHENTICATION).await;
    let payment_id = payment_id.as_str();
    // Minutes at the bank, past the settle grace but within the bank's step: another card
    // does not take the shopper's step away.
    sqlx::query("UPDATE payments SET charge_requested_at = now() - interval '5 minutes', created_at = now() - interval '5 minutes'")
        .execute(&app.db)
        .await
        .unwrap();
    let meanwhile = pay_with_method(&app, &order_id, "pay-meanwhile", PM_VISA)
        .send()
        .await
        .unwrap();
    assert_problem(meanwhile, 409, "payment-in-progress").await;
    // The shopper left at the bank's page; long after, they pay with another card.
    sqlx::query("UPDATE payments SET charge_requested_at = now() - interval '1 day', created_at = now() - interval '1 day'")
        .execute(&app.db)
        .await
        .unwrap();
    let paid = pay_with_method(&app, &order_id, "pay-later", PM_VISA)
        .send()
        .await
        .unwrap();
    assert_eq!(paid.status(), 201);
    let intents = stripe.intents_of_order(&order_id).await;
    let first = intents
        .iter()
        .find(|i| secret.starts_with(i["id"].as_str().unwrap()))
        .unwrap();
    assert_eq!(first["status"], "canceled", "it can never be charged later");

    // The bank answers at last: Stripe refuses a cancelled intent, and the shop says the
    // first payment stopped.
    assert_ne!(bank_answers(&stripe, &secret, true).await, 200);
    let (status, closed) = continue_authentication(&app, &order_id, payment_id).await;
    assert_eq!(status, 422, "{closed}");
    assert!(closed["type"].as_str().unwrap().ends_with("payment-closed"));
    assert_eq!(stripe.charged(&order_id).await, 1);
}

#[tokio::test]
async fn only_the_orders_shopper_may_continue_its_payment() {
    let (app, stripe) = spawn_shop_and_stripe().await;
    let order_id = place_order(&app).await;
    let (_, payment) = pay_with_card(&app, &stripe, &order_id, ASKS_FOR_AUTHENTICATION).await;
    let url = format!(
        "/api/orders/{order_id}/payments/{}/authentication",
        payment["id"].as_str().unwrap()
    );
    let stranger = shopper();
    app.open_session(&stranger).await;
    let answer = stranger.post(app.url(&url)).send().await.unwrap();
    assert_problem(answer, 404, "not-found").await;
    for bad in ["not-a-uuid", "00000000-0000-0000-0000-000000000000"] {
        let url = format!("/api/orders/{order_id}/payments/{bad}/authentication");
        let answer = app.client.post(app.url(&url)).send().await.unwrap();
        assert_eq!(answer.status(), 404, "{bad}");
    }
}
