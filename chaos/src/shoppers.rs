//! Shoppers whose clients do what careless clients do: each intent opens a session of its
//! own, orders under one Idempotency-Key and pays under another, and after any error — a
//! reset connection, a timeout, a 409, a 5xx — sends the same request with the same key
//! again, to whichever server instance it picks next, until it gets a definitive answer.

use std::{
    collections::BTreeMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Mutex,
    },
    time::Duration,
};

use rand::{seq::IndexedRandom, Rng};
use serde::Serialize;
use tokio::time::Instant;

use crate::deployment::server_urls;

const SKUS: [&str; 8] = [
    "MUG-001", "TEE-002", "NOTE-003", "BAG-004", "PEN-005", "TEA-006", "CAP-007", "LAMP-008",
];
/// Test cards of the sandbox provider, weighted: mostly successes, some declines, some
/// whose answer is lost after the charge, some slow.
const CARDS: [&str; 10] = [
    "4242424242424242",
    "4242424242424242",
    "4242424242424242",
    "4242424242424242",
    "4242424242424242",
    "4242424242424242",
    "4242424242424242",
    "4000000000000002",
    "4000000000000259",
    "4000000000000077",
];

/// One shopper's intent and the answers it finally got (0: none before the end).
#[derive(Clone, Debug, Serialize)]
pub struct Intent {
    pub session: String,
    pub order_key: String,
    pub order_status: u16,
    pub order_id: Option<String>,
    pub payment_key: Option<String>,
    pub card: Option<String>,
    pub payment_status: u16,
}

/// Every answer the shoppers got, by status, and the requests that got none.
#[derive(Default)]
pub struct Tally {
    statuses: Mutex<BTreeMap<u16, u64>>,
    pub no_answer: AtomicU64,
}

impl Tally {
    fn answer(&self, status: u16) {
        *self.statuses.lock().unwrap().entry(status).or_default() += 1;
    }

    pub fn statuses(&self) -> BTreeMap<u16, u64> {
        self.statuses.lock().unwrap().clone()
    }

    /// 5xx answers other than 503 (the one a server gives while the database is away).
    pub fn bad_5xx(&self) -> u64 {
        self.statuses()
            .iter()
            .filter(|(s, _)| **s >= 500 && **s != 503)
            .map(|(_, n)| n)
            .sum()
    }
}

/// When shoppers stop starting intents, and when they stop retrying the ones in hand.
#[derive(Clone, Copy)]
pub struct Deadlines {
    pub last_intent: Instant,
    pub give_up: Instant,
}

pub async fn run(shoppers: usize, deadlines: Deadlines, tally: &Tally) -> Vec<Intent> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(4))
        .build()
        .expect("http client");
    let each = (0..shoppers).map(|_| async {
        let mut intents = Vec::new();
        while Instant::now() < deadlines.last_intent {
            match intent(&client, deadlines, tally).await {
                Some(done) => intents.push(done),
                None => break,
            }
        }
        intents
    });
    futures::future::join_all(each)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// One intent: a session, an order, and (if the order was placed) a payment. `None` when
/// not even a session could be opened before the end.
async fn intent(client: &reqwest::Client, deadlines: Deadlines, tally: &Tally) -> Option<Intent> {
    let session = open_session(client, deadlines.give_up, tally).await?;
    let cookie = format!("once_session={session}");
    let order_key = uuid::Uuid::new_v4().to_string();
    let body = random_order();
    let mut done = Intent {
        session,
        order_key: order_key.clone(),
        order_status: 0,
        order_id: None,
        payment_key: None,
        card: None,
        payment_status: 0,
    };
    let Some((status, answer)) = post_until_definitive(
        client,
        "/api/orders",
        &cookie,
        &order_key,
        &body,
        deadlines,
        tally,
    )
    .await
    else {
        return Some(done);
    };
    done.order_status = status;
    let Some(order_id) = answer["id"].as_str().filter(|_| status == 201) else {
        return Some(done);
    };
    done.order_id = Some(order_id.to_owned());
    let payment_key = uuid::Uuid::new_v4().to_string();
    let card = *CARDS.choose(&mut rand::rng()).expect("cards");
    done.payment_key = Some(payment_key.clone());
    done.card = Some(card.to_owned());
    let path = format!("/api/orders/{order_id}/payments");
    let body = serde_json::json!({ "card_number": card });
    if let Some((status, _)) = post_until_definitive(
        client,
        &path,
        &cookie,
        &payment_key,
        &body,
        deadlines,
        tally,
    )
    .await
    {
        done.payment_status = status;
    }
    Some(done)
}

fn random_order() -> serde_json::Value {
    let mut rng = rand::rng();
    let lines = rng.random_range(1..=2);
    let skus: Vec<&str> = SKUS.choose_multiple(&mut rng, lines).copied().collect();
    let items: Vec<_> = skus
        .iter()
        .map(|sku| serde_json::json!({ "sku": sku, "quantity": rng.random_range(1..=3) }))
        .collect();
    serde_json::json!({ "items": items })
}

fn any_server() -> String {
    server_urls()
        .choose(&mut rand::rng())
        .expect("servers")
        .clone()
}

async fn pause_before_retry(attempt: u32) {
    let cap = 50u64 << attempt.min(4);
    tokio::time::sleep(Duration::from_millis(
        rand::rng().random_range(cap / 2..=cap),
    ))
    .await;
}

/// `GET /api/session` until a server answers with the session cookie.
async fn open_session(client: &reqwest::Client, give_up: Instant, tally: &Tally) -> Option<String> {
    let mut attempt = 0;
    while Instant::now() < give_up {
        match client
            .get(format!("{}/api/session", any_server()))
            .send()
            .await
        {
            Ok(response) => {
                tally.answer(response.status().as_u16());
                let cookie = response
                    .headers()
                    .get_all("set-cookie")
                    .iter()
                    .filter_map(|v| v.to_str().ok())
                    .find_map(|v| v.strip_prefix("once_session="))
                    .and_then(|v| v.split(';').next())
                    .map(str::to_owned);
                if let Some(id) = cookie {
                    return Some(id);
                }
            }
            Err(_) => {
                tally.no_answer.fetch_add(1, Ordering::Relaxed);
            }
        }
        attempt += 1;
        pause_before_retry(attempt).await;
    }
    None
}

/// Sends the same request with the same key until the answer is definitive: a 2xx or a
/// 4xx other than 409 (in progress) and 429. `None` if the run ended first.
async fn post_until_definitive(
    client: &reqwest::Client,
    path: &str,
    cookie: &str,
    key: &str,
    body: &serde_json::Value,
    deadlines: Deadlines,
    tally: &Tally,
) -> Option<(u16, serde_json::Value)> {
    let mut attempt = 0;
    while Instant::now() < deadlines.give_up {
        let sent = client
            .post(format!("{}{path}", any_server()))
            .header("cookie", cookie)
            .header("idempotency-key", key)
            .json(body)
            .send()
            .await;
        match sent {
            Ok(response) => {
                let status = response.status().as_u16();
                tally.answer(status);
                let definitive = (200..300).contains(&status)
                    || ((400..500).contains(&status) && status != 409 && status != 429);
                // An answer whose body is lost on the way is no answer: ask again.
                match response.json().await {
                    Ok(answer) if definitive => return Some((status, answer)),
                    Ok(_) => {}
                    Err(_) => {
                        tally.no_answer.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            Err(_) => {
                tally.no_answer.fetch_add(1, Ordering::Relaxed);
            }
        }
        attempt += 1;
        pause_before_retry(attempt).await;
    }
    None
}
