//! Which outcomes a key stores: the protocol's one rule for it (docs/design.md, "The
//! idempotency protocol"), read by the executor, by business code that decides whether a
//! refusal commits with the key, and by the problem's `retryable` field.
//!
//! A definitive outcome is what the same request would get again — a 2xx, or a 4xx other
//! than 408, 409 and 429 — and is stored with the key and replayed. A transient one is not: any
//! 5xx (the database or the provider away), 408 (the request ran out of time), 409 ("wait
//! for the other request") and 429 (a limit or quota, "wait a while") leave the key open for the retry, and say
//! `retryable: true`.

use http::StatusCode;

pub fn is_stored(status: StatusCode) -> bool {
    !(status.is_server_error()
        || status == StatusCode::CONFLICT
        || status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_MANY_REQUESTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successes_and_refusals_are_stored_waits_and_failures_are_not() {
        for stored in [200, 201, 400, 402, 404, 422] {
            assert!(is_stored(StatusCode::from_u16(stored).unwrap()), "{stored}");
        }
        for open in [408, 409, 429, 500, 502, 503, 504] {
            assert!(!is_stored(StatusCode::from_u16(open).unwrap()), "{open}");
        }
    }
}
