//! What the work decides is the answer for good: a room already booked and a booking
//! already cancelled are 409s stored with their keys and replayed, like a success.

use reqwest::{Client, Response, StatusCode};
use serde_json::{json, Value};

mod common;
use common::start;

async fn post(http: &Client, url: String, key: &str, body: Value) -> Response {
    let request = http.post(url).header("x-api-key", "hotel-1").header("idempotency-key", key);
    request.json(&body).send().await.expect("the example answers")
}

fn replayed(response: &Response) -> bool {
    response.headers().get("idempotent-replayed").is_some_and(|v| v == "true")
}

#[tokio::test]
async fn a_room_taken_and_a_second_cancel_are_answers_stored_and_replayed() {
    let (_test_db, base) = start(|executor| executor).await;
    let http = Client::new();
    let night = json!({ "room": 7, "night": "2027-03-01", "guest": "Ada" });
    let booked = post(&http, format!("{base}/bookings"), "first", night.clone()).await;
    assert_eq!(booked.status(), StatusCode::CREATED);
    let id = booked.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();

    // Another key, the same room and night: taken. The answer is stored with the key.
    let taken = post(&http, format!("{base}/bookings"), "second", night.clone()).await;
    assert_eq!(taken.status(), StatusCode::CONFLICT);
    assert!(taken.headers().get("retry-after").is_none(), "a definitive answer invites no retry");
    let problem: Value = taken.json().await.unwrap();
    assert_eq!(problem["retryable"], false, "{problem}");
    let again = post(&http, format!("{base}/bookings"), "second", night).await;
    assert_eq!(again.status(), StatusCode::CONFLICT);
    assert!(replayed(&again), "the refusal is replayed, not decided again");
    assert_eq!(again.json::<Value>().await.unwrap(), problem);

    let cancel =
        |key: &'static str| post(&http, format!("{base}/bookings/{id}/cancel"), key, json!({ "reason": "ill" }));
    assert_eq!(cancel("cancel-1").await.status(), StatusCode::OK);
    let twice = cancel("cancel-2").await;
    assert_eq!(twice.status(), StatusCode::CONFLICT);
    assert!(!replayed(&twice));
    let repeat = cancel("cancel-2").await;
    assert_eq!(repeat.status(), StatusCode::CONFLICT);
    assert!(replayed(&repeat), "a second cancel's refusal is stored");

    // A cancelled night can be booked again; someone else's booking cannot be cancelled.
    let night = json!({ "room": 7, "night": "2027-03-01", "guest": "Bea" });
    let rebooked = post(&http, format!("{base}/bookings"), "third", night).await;
    assert_eq!(rebooked.status(), StatusCode::CREATED, "the cancelled night is free again");
    let theirs = http.post(format!("{base}/bookings/{id}/cancel")).header("x-api-key", "hotel-2");
    let theirs = theirs.header("idempotency-key", "k").json(&json!({ "reason": "x" })).send().await.unwrap();
    assert_eq!(theirs.status(), StatusCode::NOT_FOUND, "another hotel's booking is no booking of theirs");

    let status = http.get(format!("{base}/idempotency-keys/second")).header("x-api-key", "hotel-1");
    let status: Value = status.send().await.unwrap().json().await.unwrap();
    assert_eq!((status["state"].as_str(), status["response_status"].as_u64()), (Some("completed"), Some(409)));
}

#[tokio::test]
async fn bad_input_books_nothing_and_shows_no_database_text() {
    let (test_db, base) = start(|executor| executor).await;
    let http = Client::new();
    let bad_date =
        post(&http, format!("{base}/bookings"), "bad", json!({ "room": 1, "night": "never", "guest": "A" })).await;
    assert_eq!(bad_date.status(), StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(bad_date.headers()["content-type"], "application/problem+json");
    let problem: Value = bad_date.json().await.unwrap();
    assert!(!problem.to_string().contains("date/time"), "no database text reaches the client: {problem}");
    let no_key = http.post(format!("{base}/bookings")).header("x-api-key", "hotel-1");
    let no_key = no_key.json(&json!({ "room": 1, "night": "2027-01-01", "guest": "A" })).send().await.unwrap();
    assert_eq!(no_key.status(), StatusCode::BAD_REQUEST);
    assert_eq!(no_key.headers()["content-type"], "application/problem+json");
    let no_scope = http.post(format!("{base}/bookings")).header("idempotency-key", "k");
    let no_scope = no_scope.json(&json!({ "room": 1, "night": "2027-01-01", "guest": "A" })).send().await.unwrap();
    assert_eq!(no_scope.status(), StatusCode::BAD_REQUEST);
    let count: i64 = sqlx::query_scalar("SELECT count(*) FROM bookings").fetch_one(&test_db.pool).await.unwrap();
    assert_eq!(count, 0);
}
