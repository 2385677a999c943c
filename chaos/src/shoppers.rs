//! Shoppers whose clients do what careless clients do: each intent opens a session of its
//! own, orders under one Idempotency-Key and pays under another, and after any error — a
//! reset connection, a timeout, a 409, a 5xx — sends the same request with the same key
//! again, to whichever entry point it picks next (a server instance, or the load balancer),
//! until it gets a definitive answer. Each shopper also times the longest stretch in which
//! nothing it sent got a useful answer.

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
    SLOW_CARD,
];
/// The provider charges this card 3 s after its first request, past the shop's provider
/// timeout (2 s here): such a payment answers 503 first, by design, and its charge is known
/// once the webhook comes or a retry finds it, so its wait is not counted as
/// unavailability.
const SLOW_CARD: &str = "4000000000000077";

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
    /// The payment the 201 named.
    pub payment_id: Option<String>,
}

/// Every answer the shoppers got, by status, and the requests that got none.
#[derive(Default)]
pub struct Tally {
    statuses: Mutex<BTreeMap<u16, u64>>,
    pub no_answer: AtomicU64,
    /// 503 answers that did not say when to come back.
    pub without_retry_after: AtomicU64,
    /// Each shopper's longest stretch without a useful answer.
    pub longest_unavailable: Mutex<Vec<Duration>>,
}

impl Tally {
    fn answer(&self, response: &reqwest::Response) {
        let status = response.status().as_u16();
        *self.statuses.lock().unwrap().entry(status).or_default() += 1;
        if status == 503 && !response.headers().contains_key("retry-after") {
            self.without_retry_after.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn statuses(&self) -> BTreeMap<u16, u64> {
        self.statuses.lock().unwrap().clone()
    }

    /// 5xx answers other than 503 with `Retry-After` (the one a server, or the load
    /// balancer, gives while the database or every instance is away).
    pub fn bad_5xx(&self) -> u64 {
        let other: u64 = self
            .statuses()
            .iter()
            .filter(|(s, _)| **s >= 500 && **s != 503)
            .map(|(_, n)| n)
            .sum();
        other + self.without_retry_after.load(Ordering::Relaxed)
    }
}

/// When shoppers stop starting intents, and when they stop retrying the ones in hand.
#[derive(Clone, Copy)]
pub struct Deadlines {
    pub last_intent: Instant,
    pub give_up: Instant,
}

impl Deadlines {
    /// Intents begun for `stretch` from now, each given up at most 30 s after.
    pub fn after(stretch: Duration) -> Self {
        let last_intent = Instant::now() + stretch;
        Self {
            last_intent,
            give_up: last_intent + Duration::from_secs(30),
        }
    }
}

/// How many times a shopper sends one request before it gives the intent up and begins
/// another, as a person would: the intent's answer is then unknown, and the checker
/// accepts either outcome for it.
const TRIES: u32 = 6;

/// How many shoppers, and how their repeats ask to wait.
#[derive(Clone, Copy)]
pub struct Clients {
    pub count: usize,
    /// The `Prefer: wait=N` every keyed request carries, in seconds (0: none): a repeat
    /// that finds its key running is answered when it ends, instead of 409 at once. Below
    /// the client's timeout, so the wait is not cut short.
    pub prefer_wait: u32,
}

/// How long a request may take before the client gives up on it.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(4);

/// Runs the shoppers against `entries` until the deadlines; returns their intents.
pub async fn run(
    clients: Clients,
    entries: &[String],
    deadlines: Deadlines,
    tally: &Tally,
) -> Vec<Intent> {
    let client = reqwest::Client::builder()
        .timeout(CLIENT_TIMEOUT)
        .build()
        .expect("http client");
    let prefer = (clients.prefer_wait > 0).then(|| {
        let wait = clients.prefer_wait.min(CLIENT_TIMEOUT.as_secs() as u32 - 1);
        format!("wait={wait}")
    });
    let each = (0..clients.count).map(|_| {
        let mut shopper = Shopper {
            client: &client,
            prefer: prefer.as_deref(),
            entries,
            deadlines,
            tally,
            unavailable_since: None,
            timed: true,
            longest_unavailable: Duration::ZERO,
        };
        async move {
            let mut intents = Vec::new();
            while Instant::now() < deadlines.last_intent {
                // No session after its tries: nothing was ordered; begin again.
                if let Some(done) = shopper.intent().await {
                    intents.push(done);
                }
            }
            shopper.finish();
            tally
                .longest_unavailable
                .lock()
                .unwrap()
                .push(shopper.longest_unavailable);
            intents
        }
    });
    futures::future::join_all(each)
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// One shopper: its client, where it sends requests, and its stretch without answers.
struct Shopper<'a> {
    client: &'a reqwest::Client,
    /// The `Prefer` header of every keyed request, if any.
    prefer: Option<&'a str>,
    entries: &'a [String],
    deadlines: Deadlines,
    tally: &'a Tally,
    /// When the first request of the current stretch without a useful answer was sent.
    unavailable_since: Option<Instant>,
    /// Whether the requests now sent count towards unavailability.
    timed: bool,
    longest_unavailable: Duration,
}

impl Shopper<'_> {
    /// One intent: a session, an order, and (if the order was placed) a payment. `None`
    /// when not even a session could be opened before the end.
    async fn intent(&mut self) -> Option<Intent> {
        let session = self.open_session().await?;
        let cookie = format!("once_session={session}");
        let order_key = uuid::Uuid::new_v4().to_string();
        let mut done = Intent {
            session,
            order_key: order_key.clone(),
            order_status: 0,
            order_id: None,
            payment_key: None,
            card: None,
            payment_status: 0,
            payment_id: None,
        };
        let Some((status, answer)) = self
            .post_until_definitive("/api/orders", &cookie, &order_key, &random_order())
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
        self.timed = card != SLOW_CARD;
        let answer = self
            .post_until_definitive(&path, &cookie, &payment_key, &body)
            .await;
        self.timed = true;
        if let Some((status, answer)) = answer {
            done.payment_status = status;
            done.payment_id = answer["id"].as_str().map(str::to_owned);
        }
        Some(done)
    }

    fn any_entry(&self) -> &str {
        self.entries.choose(&mut rand::rng()).expect("entries")
    }

    /// A request went out at `sent` and came back with something useful, or with nothing
    /// useful (no answer, a 5xx, or a 409 or 429 that only says "not yet"): the wait that
    /// began with the first request of the stretch ends or goes on. A slow answer that is
    /// useful counts its own time.
    fn served(&mut self, sent: Instant, useful: bool) {
        if !self.timed {
            return;
        }
        self.unavailable_since.get_or_insert(sent);
        if useful {
            self.finish();
        }
    }

    /// A request sent at `sent` got no answer at all (reset, refused, timed out, or its
    /// body lost on the way).
    fn no_answer(&mut self, sent: Instant) {
        self.served(sent, false);
        self.tally.no_answer.fetch_add(1, Ordering::Relaxed);
    }

    /// Ends the current stretch, counting it up to the last intent: the faults stop there,
    /// and what the shoppers still retry afterwards is not what the faults did to them.
    fn finish(&mut self) {
        if let Some(since) = self.unavailable_since.take() {
            let end = Instant::now().min(self.deadlines.last_intent);
            let waited = end.saturating_duration_since(since);
            self.longest_unavailable = self.longest_unavailable.max(waited);
        }
    }

    /// `GET /api/session` until a server answers with the session cookie.
    async fn open_session(&mut self) -> Option<String> {
        let mut attempt = 0;
        while Instant::now() < self.deadlines.give_up && attempt < TRIES {
            let sent = Instant::now();
            let url = format!("{}/api/session", self.any_entry());
            match self.client.get(url).send().await {
                Ok(response) => {
                    self.tally.answer(&response);
                    self.served(sent, useful(response.status().as_u16()));
                    if let Some(id) = session_cookie(&response) {
                        return Some(id);
                    }
                }
                Err(_) => self.no_answer(sent),
            }
            attempt += 1;
            pause_before_retry(attempt).await;
        }
        None
    }

    /// Sends the same request with the same key until the answer is definitive: a 2xx or
    /// a 4xx other than 409 (in progress) and 429. `None` if the run ended first, or after
    /// [`TRIES`] tries.
    async fn post_until_definitive(
        &mut self,
        path: &str,
        cookie: &str,
        key: &str,
        body: &serde_json::Value,
    ) -> Option<(u16, serde_json::Value)> {
        let mut attempt = 0;
        while Instant::now() < self.deadlines.give_up && attempt < TRIES {
            let sent = Instant::now();
            let mut request = self
                .client
                .post(format!("{}{path}", self.any_entry()))
                .header("cookie", cookie)
                .header("idempotency-key", key);
            if let Some(prefer) = self.prefer {
                request = request.header("prefer", prefer);
            }
            let response = request.json(body).send().await;
            match response {
                Ok(response) => {
                    let status = response.status().as_u16();
                    self.tally.answer(&response);
                    let definitive = (200..300).contains(&status)
                        || ((400..500).contains(&status) && status != 409 && status != 429);
                    // An answer whose body is lost on the way is no answer: ask again.
                    match response.json().await {
                        Ok(answer) if definitive => {
                            self.served(sent, true);
                            return Some((status, answer));
                        }
                        Ok(_) => self.served(sent, useful(status)),
                        Err(_) => self.no_answer(sent),
                    }
                }
                Err(_) => self.no_answer(sent),
            }
            attempt += 1;
            pause_before_retry(attempt).await;
        }
        None
    }
}

/// An answer that tells the client something: not a 5xx, and not a 409 (the first request
/// is still running) or 429 (come back later).
fn useful(status: u16) -> bool {
    status < 500 && status != 409 && status != 429
}

fn session_cookie(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix("once_session="))
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
}

fn random_order() -> serde_json::Value {
    let mut rng = rand::rng();
    let lines = rng.random_range(1..=2);
    let skus: Vec<&str> = SKUS.choose_multiple(&mut rng, lines).copied().collect();
    let items: Vec<_> = skus
        .iter()
        .map(|sku| serde_json::json!({ "sku": sku, "quantity": rng.random_range(1..=3) }))
        .collect();
    serde_json::json!({
        "items": items,
        "email": "shopper@example.com",
        "shipping_address": {"name": "A Shopper", "line1": "1 Main Street",
                             "postal_code": "10115", "city": "Berlin", "country": "DE"},
    })
}

async fn pause_before_retry(attempt: u32) {
    let cap = 50u64 << attempt.min(4);
    tokio::time::sleep(Duration::from_millis(
        rand::rng().random_range(cap / 2..=cap),
    ))
    .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, retry_after: bool) -> reqwest::Response {
        let mut response = http::Response::builder().status(status);
        if retry_after {
            response = response.header("retry-after", "1");
        }
        reqwest::Response::from(response.body("").expect("a response"))
    }

    /// What the checker's 5xx row counts: only a 503 that says when to come back is the
    /// answer of an outage; a bare 503 (a load balancer's own), a 502 or a 500 is not.
    #[test]
    fn only_a_503_with_retry_after_is_a_fair_5xx() {
        let tally = Tally::default();
        tally.answer(&answer(503, true));
        tally.answer(&answer(201, false));
        assert_eq!(tally.bad_5xx(), 0);
        tally.answer(&answer(503, false));
        assert_eq!(tally.bad_5xx(), 1);
        tally.answer(&answer(502, true));
        tally.answer(&answer(500, false));
        assert_eq!(tally.bad_5xx(), 3);
    }
}
