//! Which answers of the work a key stores: the protocol's one rule for it, read by the
//! executor, by business code that decides whether a refusal commits with the key, and by a
//! problem's `retryable` field.
//!
//! Once the work of a request has begun, what it answers is the request's answer, as
//! Stripe's API does: a 2xx, and any 4xx the work decided (a card declined, a booking
//! already cancelled, a room taken: 409 included), is *definitive*: stored with the key and
//! replayed to every repeat. Only three kinds of answer say "not now" rather than "no", and
//! leave the key open for the retry: any 5xx (the database or another service away), 408
//! (the request ran out of time) and 429 (a limit or quota: wait a while).
//!
//! The protocol's own "still in flight" 409 is an answer to a *repeat*, never the work's
//! answer, so no rule is needed for it: nothing a repeat is answered is ever stored. Work
//! that wants a 4xx of its own left open anyway (the shop's "a payment is already running
//! for this order") says so through its error type (`ProtocolError::is_stored` in
//! `once-axum`).
//!
//! ```
//! use http::StatusCode;
//! use once_core::is_stored;
//!
//! assert!(is_stored(StatusCode::CREATED));
//! assert!(is_stored(StatusCode::CONFLICT)); // "room taken": the answer, for good
//! assert!(!is_stored(StatusCode::SERVICE_UNAVAILABLE)); // "not now": retry the key
//! ```

use http::StatusCode;

/// Whether an answer with `status`, given by the work, is stored with its key (definitive)
/// or leaves the key open for a retry (transient: any 5xx, 408 and 429).
pub fn is_stored(status: StatusCode) -> bool {
    !(status.is_server_error()
        || status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_MANY_REQUESTS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn successes_and_refusals_are_stored_waits_and_failures_are_not() {
        for stored in [200, 201, 400, 402, 404, 409, 410, 422] {
            assert!(is_stored(StatusCode::from_u16(stored).unwrap()), "{stored}");
        }
        for open in [408, 429, 500, 502, 503, 504] {
            assert!(!is_stored(StatusCode::from_u16(open).unwrap()), "{open}");
        }
    }
}
