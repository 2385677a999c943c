//! The submit-once hook's rules, as plain functions: which answers end an intent, which are
//! retried under the same key and after how long. No browser in here, so they run and are
//! tested natively, and a page can pass its own [`RetryPolicy`].

/// How patiently an intent is delivered.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Retries of a network error or a retryable status before giving up (the key is kept).
    pub max_retries: u32,
    /// The first retry waits up to this long; each later one up to twice as long...
    pub base_delay_ms: u32,
    /// ...but never more than this.
    pub max_delay_ms: u32,
    /// The longest `Retry-After` we honour; a longer one gives up (the key is kept).
    pub max_retry_after_ms: u32,
    /// How long a `request-in-progress` answer is waited on before telling the shopper
    /// that the shop is slow (the server's lease: a first attempt that lives longer is
    /// being retried by the server itself).
    pub slow_after_ms: u32,
    /// How long a `request-in-progress` answer is waited on at all.
    pub in_progress_limit_ms: u32,
    /// How long each request asks the server to wait for its key's running first request
    /// (`Prefer: wait=N`, in seconds; the server grants at most its own longest wait): the
    /// answer then comes when the first request ends, instead of a 409 to poll after.
    /// 0: never ask.
    pub prefer_wait_s: u32,
    /// How old a stored intent may be and still be resumed after a reload: the server
    /// forgets a key after its retention, so an older one would be a new request.
    pub resume_within_ms: f64,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 8,
            base_delay_ms: 400,
            max_delay_ms: 5_000,
            max_retry_after_ms: 30_000,
            slow_after_ms: 30_000,
            in_progress_limit_ms: 120_000,
            prefer_wait_s: 10,
            resume_within_ms: 86_400_000.0,
        }
    }
}

/// What the server said, as far as the rules care.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Answer<'a> {
    /// The HTTP status; 0 when no answer arrived (network error, offline, aborted).
    pub status: u16,
    /// The last segment of the problem `type` (`request-in-progress`, …), if any.
    pub problem: Option<&'a str>,
    /// `Retry-After` in seconds, if the server sent one.
    pub retry_after_s: Option<u32>,
    /// Whether the server waited as asked before answering (`Preference-Applied: wait`).
    pub waited: bool,
}

/// What to do next with an intent.
#[derive(Clone, Copy, Debug, PartialEq)]
#[non_exhaustive]
pub enum Next {
    /// A 2xx: the intent succeeded (first execution or replay); its key ends.
    Done,
    /// A definitive refusal: shown; the key ends, the next click is a new intent.
    Refused,
    /// Not an answer about this request: send it again under the same key after `wait_ms`.
    Retry {
        /// How long to wait before sending it again, in milliseconds.
        wait_ms: u32,
    },
    /// The first submit of this key is still running: ask again after `wait_ms` (only
    /// [`AFTER_A_WAIT_MS`] when the server has just waited for it: the next ask waits on
    /// the server again).
    AwaitFirst {
        /// How long to wait before asking again, in milliseconds.
        wait_ms: u32,
    },
    /// Out of patience or a server error: shown; the key stays, so the next click is the
    /// same intent (and cannot be a second order).
    GiveUp,
}

/// How long to pause before asking again after the server waited as asked and the first
/// try still runs: the next ask waits on the server again, so only a floor, in case a
/// server says it waited and answers at once.
pub const AFTER_A_WAIT_MS: u32 = 250;

/// Statuses that say nothing about whether the request may be applied: sent again as is.
pub fn is_retryable(status: u16) -> bool {
    matches!(status, 0 | 408 | 425 | 429 | 502 | 503 | 504)
}

/// Whether an answer ends the intent's key. Success and definitive refusals do; so does
/// "another payment of this order is in progress", which makes this intent moot. Waiting,
/// retryable and server errors do not: the same key must be sent again.
///
/// A 409 is a wait only when it says so: the protocol's `request-in-progress`, or a 409 that
/// names a `Retry-After`. Any other 409 is the work's answer for good ("room taken"), stored
/// with the key and replayed to every repeat: asking again would only replay it.
pub fn ends_key(answer: &Answer) -> bool {
    match answer.status {
        200..=299 => true,
        409 => match answer.problem {
            Some("request-in-progress") => false,
            Some("payment-in-progress") => true,
            _ => answer.retry_after_s.is_none(),
        },
        400..=499 => !is_retryable(answer.status),
        _ => false,
    }
}

/// Full jitter: a uniformly random wait in `[0, bound]`, where the bound starts at the base
/// delay for the first retry (`retry` = 1) and doubles up to the cap. `random` is in [0, 1).
pub fn backoff_ms(policy: &RetryPolicy, retry: u32, random: f64) -> u32 {
    let doublings = retry.saturating_sub(1).min(31);
    let bound = u64::from(policy.base_delay_ms)
        .saturating_mul(1 << doublings)
        .min(u64::from(policy.max_delay_ms));
    (random.clamp(0.0, 1.0) * bound as f64) as u32
}

/// The next step after `answer`, the `retry`-th retry so far (0 before any), `waited_ms`
/// since the first `request-in-progress`, and a random number in [0, 1) for the jitter.
pub fn next(
    policy: &RetryPolicy,
    answer: &Answer,
    retry: u32,
    waited_ms: u32,
    random: f64,
) -> Next {
    let retry_after_ms = answer.retry_after_s.map(|s| s.saturating_mul(1000));
    if ends_key(answer) {
        return if (200..=299).contains(&answer.status) {
            Next::Done
        } else {
            Next::Refused
        };
    }
    match answer.status {
        409 if waited_ms < policy.in_progress_limit_ms => Next::AwaitFirst {
            wait_ms: match answer.waited {
                true => AFTER_A_WAIT_MS,
                false => retry_after_ms
                    .unwrap_or(1_000)
                    .min(policy.max_retry_after_ms),
            },
        },
        status if is_retryable(status) && retry < policy.max_retries => {
            let jitter = backoff_ms(policy, retry + 1, random);
            match retry_after_ms {
                Some(ms) if ms > policy.max_retry_after_ms => Next::GiveUp,
                Some(ms) => Next::Retry {
                    wait_ms: ms.max(jitter),
                },
                None => Next::Retry { wait_ms: jitter },
            }
        }
        _ => Next::GiveUp,
    }
}

/// A version 4 UUID from 16 random bytes (RFC 9562): what `crypto.randomUUID()` returns,
/// built from `crypto.getRandomValues()`, which works where `randomUUID` does not (plain
/// http to a LAN address is not a secure context).
pub fn uuid_v4(mut bytes: [u8; 16]) -> String {
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The last segment of a problem `type` URI: `https://…/problems/cart-changed` → `cart-changed`.
pub fn problem_name(problem_type: &str) -> &str {
    problem_type
        .rsplit(['/', '#'])
        .next()
        .unwrap_or(problem_type)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16) -> Answer<'static> {
        Answer {
            status,
            problem: None,
            retry_after_s: None,
            waited: false,
        }
    }

    #[test]
    fn the_first_retry_waits_at_most_the_base_delay_and_later_ones_double_up_to_the_cap() {
        let p = RetryPolicy::default();
        assert_eq!(backoff_ms(&p, 1, 0.999_999), 399);
        assert_eq!(backoff_ms(&p, 2, 0.999_999), 799);
        assert_eq!(backoff_ms(&p, 3, 0.999_999), 1599);
        assert_eq!(backoff_ms(&p, 10, 0.999_999), 4999);
        assert_eq!(
            backoff_ms(&p, 1_000, 1.0),
            5000,
            "no overflow on a huge retry count"
        );
        assert_eq!(backoff_ms(&p, 1, 0.0), 0, "full jitter starts at zero");
    }

    #[test]
    fn network_errors_and_only_the_transient_statuses_are_retried() {
        let p = RetryPolicy::default();
        for status in [0, 408, 425, 429, 502, 503, 504] {
            assert!(
                matches!(next(&p, &answer(status), 0, 0, 0.5), Next::Retry { .. }),
                "{status}"
            );
        }
        for status in [400, 401, 402, 404, 413, 422] {
            assert_eq!(
                next(&p, &answer(status), 0, 0, 0.5),
                Next::Refused,
                "{status}"
            );
        }
        for status in [500, 501] {
            assert_eq!(
                next(&p, &answer(status), 0, 0, 0.5),
                Next::GiveUp,
                "{status}"
            );
        }
        assert_eq!(next(&p, &answer(201), 0, 0, 0.5), Next::Done);
    }

    #[test]
    fn retries_stop_after_the_limit_and_keep_the_key() {
        let p = RetryPolicy::default();
        assert_eq!(next(&p, &answer(503), p.max_retries, 0, 0.5), Next::GiveUp);
        assert!(!ends_key(&answer(503)));
        assert!(!ends_key(&answer(0)));
    }

    #[test]
    fn retry_after_is_honoured_and_an_absurd_one_gives_up() {
        let p = RetryPolicy::default();
        let busy = Answer {
            status: 503,
            problem: None,
            retry_after_s: Some(7),
            waited: false,
        };
        assert_eq!(next(&p, &busy, 0, 0, 0.0), Next::Retry { wait_ms: 7_000 });
        let limited = Answer {
            status: 429,
            problem: None,
            retry_after_s: Some(2),
            waited: false,
        };
        assert_eq!(
            next(&p, &limited, 3, 0, 0.0),
            Next::Retry { wait_ms: 2_000 }
        );
        let absurd = Answer {
            status: 429,
            problem: None,
            retry_after_s: Some(3_600),
            waited: false,
        };
        assert_eq!(next(&p, &absurd, 0, 0, 0.0), Next::GiveUp);
    }

    #[test]
    fn a_request_in_progress_is_awaited_until_the_limit() {
        let p = RetryPolicy::default();
        let running = Answer {
            status: 409,
            problem: Some("request-in-progress"),
            retry_after_s: Some(1),
            waited: false,
        };
        assert_eq!(
            next(&p, &running, 0, 0, 0.5),
            Next::AwaitFirst { wait_ms: 1_000 }
        );
        assert_eq!(
            next(&p, &running, 0, p.in_progress_limit_ms, 0.5),
            Next::GiveUp
        );
        assert!(!ends_key(&running), "the same key must be asked again");
    }

    #[test]
    fn a_request_in_progress_the_server_waited_for_is_asked_again_at_once() {
        let p = RetryPolicy::default();
        let waited = Answer {
            status: 409,
            problem: Some("request-in-progress"),
            retry_after_s: Some(1),
            waited: true,
        };
        assert_eq!(
            next(&p, &waited, 0, 0, 0.5),
            Next::AwaitFirst {
                wait_ms: AFTER_A_WAIT_MS
            }
        );
        assert_eq!(
            next(&p, &waited, 0, p.in_progress_limit_ms, 0.5),
            Next::GiveUp
        );
    }

    #[test]
    fn a_conflict_the_work_decided_ends_the_intent_and_a_wait_does_not() {
        let p = RetryPolicy::default();
        let taken = Answer {
            status: 409,
            problem: Some("room-taken"),
            retry_after_s: None,
            waited: false,
        };
        assert!(
            ends_key(&taken),
            "a stored 409 is replayed: asking again changes nothing"
        );
        assert_eq!(next(&p, &taken, 0, 0, 0.5), Next::Refused);
        let busy = Answer {
            status: 409,
            problem: Some("resource-busy"),
            retry_after_s: Some(2),
            waited: false,
        };
        assert_eq!(
            next(&p, &busy, 0, 0, 0.5),
            Next::AwaitFirst { wait_ms: 2_000 }
        );
    }

    #[test]
    fn another_payment_in_progress_ends_this_intent() {
        let p = RetryPolicy::default();
        let other = Answer {
            status: 409,
            problem: Some("payment-in-progress"),
            retry_after_s: Some(1),
            waited: false,
        };
        assert!(ends_key(&other));
        assert_eq!(next(&p, &other, 0, 0, 0.5), Next::Refused);
    }

    #[test]
    fn keys_are_version_4_uuids() {
        let key = uuid_v4([0xff; 16]);
        assert_eq!(key, "ffffffff-ffff-4fff-bfff-ffffffffffff");
        assert_eq!(uuid_v4([0; 16]), "00000000-0000-4000-8000-000000000000");
    }

    #[test]
    fn problem_names_are_the_last_segment_of_the_type() {
        assert_eq!(
            problem_name("https://once.example/problems/cart-changed"),
            "cart-changed"
        );
        assert_eq!(problem_name("about:blank"), "about:blank");
        assert_eq!(
            problem_name("https://docs.rs/once-axum/latest/once_axum/problem/index.html#key-quota"),
            "key-quota",
            "once-axum's problems name themselves in the fragment"
        );
    }
}
