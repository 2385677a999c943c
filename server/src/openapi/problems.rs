//! Every problem type the server answers with, and how the reference shows them: each
//! operation lists the types it can answer (`x-problems` in its `#[utoipa::path]`), and
//! [`add_problem_responses`] turns that list into responses with an example of each.
//! A test reads the server's source for every problem name it can send and checks it is
//! here (tests/api/openapi.rs), so this list cannot fall behind the code.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use utoipa::openapi::{
    example::ExampleBuilder,
    header::{Header, HeaderBuilder},
    path::Operation,
    schema::{Object, ObjectBuilder, Type},
    ContentBuilder, OpenApi, Ref, RefOr, Response, ResponseBuilder,
};

use once_core::outcome;

/// One problem type: `https://once.example/problems/{name}`.
pub struct ProblemType {
    pub name: &'static str,
    pub status: u16,
    /// What it means and what the client should do, as the reference shows it.
    pub meaning: &'static str,
    /// A `detail` the server may send with it.
    pub example: &'static str,
}

const fn problem(
    name: &'static str,
    status: u16,
    meaning: &'static str,
    example: &'static str,
) -> ProblemType {
    ProblemType {
        name,
        status,
        meaning,
        example,
    }
}

pub const PROBLEM_TYPES: &[ProblemType] = &[
    problem("session-required", 400,
        "The request came without a live session cookie. Open one with GET /api/session and send its cookie; nothing was stored.",
        "this request needs a session: open one with GET /api/session (or load any page) and send its cookie"),
    problem("idempotency-key-missing", 400,
        "A write needs an Idempotency-Key header. Make one per intent (a UUID) and keep it for every retry.",
        "this route requires an Idempotency-Key header"),
    problem("idempotency-key-malformed", 400,
        "The Idempotency-Key is empty, longer than 255 characters, or not visible ASCII.",
        "the Idempotency-Key may contain only visible ASCII characters"),
    problem("idempotency-key-reused", 422,
        "This key was used for a different request (another route or another body). Use a new key for a new intent.",
        "this Idempotency-Key was used for a different request"),
    problem("request-in-progress", 409,
        "A request with this key is still running. Retry the same request with the same key after Retry-After seconds, or poll GET /api/idempotency-keys/{key}.",
        "a request with this Idempotency-Key is still being processed"),
    problem("payment-in-progress", 409,
        "Another payment of this order (another key, perhaps another tab) is still running. Wait and read the order: it shows the result.",
        "A payment for this order is already in progress, perhaps in another tab. Wait a moment: the order shows the result when it is done."),
    problem("cart-changed", 422,
        "The key is not the cart's current checkout key: the cart changed since it was handed out. Read the cart again and check out with its key.",
        "Your cart changed since this page was shown (perhaps in another tab). Please check it and place the order again."),
    problem("not-found", 404,
        "There is no such resource in this session (other sessions' orders and keys are invisible).",
        "not found"),
    problem("cross-site-request", 403,
        "A browser sent this write from a page of another site (Sec-Fetch-Site or Origin says so). Nothing was done; writes come from the shop's own pages or from programs.",
        "this request was sent by a page of another site, so it was not acted on"),
    problem("card-declined", 402,
        "The provider declined the card. Nothing was charged; pay again with another card and a new key.",
        "Your card was declined. Nothing was charged; please try another card. (code: card_declined)"),
    problem("payload-too-large", 413,
        "The body is larger than the route accepts.",
        "the request body is larger than this route accepts"),
    problem("service-unavailable", 503,
        "The database or the payment provider is away. Retry the same request with the same key after Retry-After seconds.",
        "the service is temporarily unavailable"),
    problem("server-stopping", 503,
        "The server is stopping while this request waited for its key's first request (Prefer: wait). Nothing was decided for it: send the same request with the same key again after Retry-After seconds (another instance answers).",
        "the server is stopping; repeat the request"),
    problem("internal-error", 500,
        "A failure of ours, logged with the request id. The key stays open: retrying the same request with the same key is safe.",
        "internal error"),
    problem("unsupported-media-type", 400,
        "The body must be sent as application/json.",
        "send the body as application/json"),
    problem("malformed-json", 400,
        "The body is not valid JSON.",
        "Failed to parse the request body as JSON: EOF while parsing an object at line 1 column 1"),
    problem("invalid-body", 400,
        "The JSON does not have the documented shape (a missing or unknown field, a wrong type).",
        "the order body is not valid: missing field `items`"),
    problem("invalid-order", 422,
        "The order breaks a limit: 1 to 20 lines, quantities 1 to 99, each sku once.",
        "quantity of MUG-001 must be between 1 and 99"),
    problem("invalid-details", 422,
        "The shopper's email or shipping address needs fixing: `errors` names each field (`email`, `shipping_address.postal_code`, …) with what is wrong, in words to show next to it. Nothing was stored; send the fixed details with the same key.",
        "Some of your details need fixing: email: Enter an email address like name@example.com."),
    problem("unknown-sku", 422,
        "An item names a product the shop does not sell.",
        "there is no product NOPE-1"),
    problem("out-of-stock", 422,
        "There is not enough stock for an item.",
        "Only 3 of Stoneware mug are in stock. Lower the quantity in your cart, then order again."),
    problem("mixed-currencies", 422,
        "An order's items must share one currency.",
        "all items of an order must share one currency"),
    problem("invalid-card", 422,
        "A card number is 12 to 19 digits.",
        "a card number is 12 to 19 digits"),
    problem("order-not-payable", 422,
        "The order is not waiting for a payment (it was paid or cancelled).",
        "This order is paid already. Nothing more was charged."),
    problem("order-not-cancellable", 422,
        "The order is paid (or fulfilled), so it can no longer be cancelled.",
        "This order is paid, so it can no longer be cancelled."),
    problem("payment-closed", 422,
        "This payment stopped before the provider charged anything. Pay again with a new key.",
        "this payment stopped before the provider charged anything; please pay again"),
    problem("payment-not-accepted", 422,
        "The provider refused the payment request itself; nothing was charged.",
        "the payment provider did not accept this payment; nothing was charged"),
    problem("invalid-arguments", 400,
        "A server function (`/_fn/…`, the shop's own pages call them) was sent arguments that are missing, of the wrong type, or not UTF-8. Nothing was done.",
        "the call's arguments are not valid: missing field `add_key`"),
    problem("bad-request", 400,
        "The request could not be read as sent (an address that is not valid UTF-8 once decoded, a query that does not parse). Nothing was done.",
        "Invalid URL: Cannot parse `\\xFF` to a `String`"),
    problem("forbidden", 403,
        "The operator console refused an action: no operator is logged in, or the form's token is missing or wrong. Nothing was done.",
        "the form's token is missing or wrong"),
    problem("method-not-allowed", 405,
        "This route does not take that method.",
        "Method Not Allowed"),
    problem("unsupported-content-type", 415,
        "The body was sent with a content type this route does not read (a form route takes application/x-www-form-urlencoded).",
        "Form requests must have `Content-Type: application/x-www-form-urlencoded`"),
    problem("rate-limited", 429,
        "Too many requests from this client, or writes from this session, in a short time. Wait Retry-After seconds, then retry with the same Idempotency-Key; nothing was done.",
        "too many requests from this client or session; try again after Retry-After seconds"),
    problem("pending-order-quota", 429,
        "The session has as many orders waiting for payment as it may (QUOTA_PENDING_ORDERS). Pay or cancel one, then retry with the same Idempotency-Key; nothing was stored.",
        "You have as many orders waiting for payment as the shop keeps open at once. Pay or cancel one of them, then place this order again."),
    problem("client-pending-order-quota", 429,
        "The client (an IPv4 address, an IPv6 /64) has as many orders waiting for payment, over all its sessions, as it may (QUOTA_PENDING_ORDERS_PER_CLIENT). Nothing was stored; retry with the same Idempotency-Key after Retry-After seconds, once some are paid, cancelled or expired.",
        "Many orders placed from your network are waiting for payment. The shop takes more once some of them are paid, cancelled or expired: please try again later."),
    problem("client-hourly-order-quota", 429,
        "The client (an IPv4 address, an IPv6 /64) has made as many orders in the last hour, over all its sessions and whatever became of them, as it may (QUOTA_ORDERS_PER_CLIENT_PER_HOUR). Nothing was stored; retry with the same Idempotency-Key after Retry-After seconds.",
        "Many orders were placed from your network in the last hour. The shop takes more later: please try again then."),
    problem("authentication-checked-recently", 429,
        "The payment's bank step (3-D Secure) was looked up at the provider less than a second ago: the shop asks at most once a second per payment. Nothing was done; ask again after Retry-After seconds.",
        "this payment's bank step was looked up less than a second ago; nothing was done"),
    problem("key-quota", 429,
        "The session has claimed as many new Idempotency-Keys in the last hour as it may (QUOTA_KEYS_PER_HOUR). Nothing was done or stored; retry with the same key after Retry-After seconds.",
        "this session has made as many requests with new Idempotency-Keys in the last hour as it may; nothing was done"),
    problem("request-timeout", 408,
        "The request took longer than the server waits for one to arrive (a body sent too slowly). Nothing was done; send it again.",
        "the request did not arrive in time"),
    problem("invalid-callback", 400,
        "A provider callback whose body is not a charge event.",
        "the callback body is not valid: missing field `type`"),
    problem("signature-missing", 400,
        "A provider callback without its signature header.",
        "the signature header is missing"),
    problem("signature-malformed", 400,
        "A provider callback whose signature header cannot be read.",
        "the signature header is malformed"),
    problem("signature-expired", 401,
        "A provider callback signed too long ago (a replay).",
        "the signature's timestamp is more than 300 seconds away from now"),
    problem("signature-invalid", 401,
        "A provider callback whose signature matches none of the shared secrets.",
        "the signature does not match"),
    problem("metrics-token-invalid", 401,
        "GET /metrics without the header Authorization: Bearer <METRICS_TOKEN>, or with another token.",
        "/metrics needs the header Authorization: Bearer <METRICS_TOKEN>"),
];

/// Refused for the request's own form, before the executor reads the key: never stored,
/// so never a replay.
const REFUSED_BEFORE_THE_KEY: &[&str] = &[
    "cross-site-request",
    "session-required",
    "idempotency-key-missing",
    "idempotency-key-malformed",
    "unsupported-media-type",
    "malformed-json",
    "invalid-body",
    "invalid-order",
    "invalid-details",
    "invalid-card",
    "payload-too-large",
];

/// Every operation that takes an Idempotency-Key can answer these too.
const EVERY_KEYED_WRITE: &[&str] = &[
    "key-quota",
    "cross-site-request",
    "session-required",
    "idempotency-key-missing",
    "idempotency-key-malformed",
    "idempotency-key-reused",
    "request-in-progress",
    "server-stopping",
];

const REPLAYED: &str =
    "`true` when this is the stored answer of an earlier request with the same key.";

/// Every operation can meet these, whatever it lists: the limits, a request that did not
/// arrive in time or could not be read (a path that does not decode), and failures.
const EVERYWHERE: &[&str] = &[
    "rate-limited",
    "request-timeout",
    "bad-request",
    "service-unavailable",
    "internal-error",
];

/// Types that only routes outside the API reference send: a method a route does not take,
/// the shop pages' server functions (`/_fn/…`) and forms. Catalogued, shown by no operation.
pub const OUTSIDE_OPERATIONS: &[&str] = &[
    "forbidden",
    "method-not-allowed",
    "invalid-arguments",
    "unsupported-content-type",
];

pub fn find(name: &str) -> Option<&'static ProblemType> {
    PROBLEM_TYPES.iter().find(|p| p.name == name)
}

/// Replaces each operation's `x-problems` list with one response per status, each with an
/// example per problem type. Panics on a name that is not in [`PROBLEM_TYPES`]: the
/// document is built by a test, which fails first.
pub fn add_problem_responses(doc: &mut OpenApi) {
    for (path, item) in doc.paths.paths.iter_mut() {
        let operations = [
            item.get.as_mut(),
            item.post.as_mut(),
            item.put.as_mut(),
            item.patch.as_mut(),
            item.delete.as_mut(),
        ];
        for operation in operations.into_iter().flatten() {
            let keyed = takes_a_key(operation);
            let listed = operation
                .extensions
                .as_mut()
                .and_then(|e| e.remove("x-problems"))
                .unwrap_or_default();
            let keyed_names = EVERY_KEYED_WRITE.iter().copied().filter(|_| keyed);
            let names = keyed_names
                .chain(
                    listed
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|n| n.as_str()),
                )
                .chain(EVERYWHERE.iter().copied());
            let mut by_status: BTreeMap<u16, Vec<&ProblemType>> = BTreeMap::new();
            for name in names {
                let problem =
                    find(name).unwrap_or_else(|| panic!("{path}: unknown problem type {name}"));
                by_status.entry(problem.status).or_default().push(problem);
            }
            if keyed {
                mark_replays(operation);
            }
            for (status, problems) in by_status {
                operation.responses.responses.insert(
                    status.to_string(),
                    RefOr::T(response(status, &problems, keyed)),
                );
            }
        }
    }
}

/// A keyed operation's success may be a replay too.
fn mark_replays(operation: &mut Operation) {
    for (_, answer) in operation.responses.responses.iter_mut() {
        if let RefOr::T(answer) = answer {
            answer.headers.insert(
                "Idempotent-Replayed".into(),
                RefOr::T(header(string(), REPLAYED)),
            );
        }
    }
}

fn takes_a_key(operation: &Operation) -> bool {
    operation.parameters.iter().flatten().any(|p| match p {
        RefOr::T(p) => p.name == "Idempotency-Key",
        RefOr::Ref(_) => false,
    })
}

/// The answer for `problems`, which share `status`. A retryable one carries Retry-After; on
/// an operation that takes a key, a stored one may be the replay of an earlier request.
fn response(status: u16, problems: &[&ProblemType], keyed: bool) -> Response {
    let description = problems
        .iter()
        .map(|p| format!("`{}`: {}", p.name, p.meaning))
        .collect::<Vec<_>>()
        .join("\n\n");
    let examples = problems.iter().map(|p| {
        let example = ExampleBuilder::new()
            .summary(p.name)
            .value(Some(example_body(status, p)))
            .build();
        (p.name, example)
    });
    let content = ContentBuilder::new()
        .schema(Some(Ref::from_schema_name("Problem")))
        .examples_from_iter(examples)
        .build();
    let retryable = retryable(code(status));
    let mut response = ResponseBuilder::new()
        .description(description)
        .content("application/problem+json", content);
    if retryable {
        response = response.header(
            "Retry-After",
            header(
                integer(),
                "Seconds to wait before sending the same request again.",
            ),
        );
    } else if keyed
        && problems
            .iter()
            .any(|p| !REFUSED_BEFORE_THE_KEY.contains(&p.name))
    {
        response = response.header("Idempotent-Replayed", header(string(), REPLAYED));
    }
    response.build()
}

/// Whether a problem with `status` leaves the key open (see `ApiError::is_stored`).
fn retryable(status: StatusCode) -> bool {
    !outcome::is_stored(status) || crate::error::is_a_wait(status)
}

fn code(status: u16) -> StatusCode {
    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

fn header(schema: Object, description: &str) -> Header {
    HeaderBuilder::new()
        .schema(Some(schema))
        .description(Some(description))
        .build()
}

fn integer() -> Object {
    ObjectBuilder::new().schema_type(Type::Integer).build()
}

fn string() -> Object {
    ObjectBuilder::new().schema_type(Type::String).build()
}

fn example_body(status: u16, p: &ProblemType) -> serde_json::Value {
    let code = code(status);
    serde_json::json!({
        "type": format!("https://once.example/problems/{}", p.name),
        "title": code.canonical_reason().unwrap_or("Error"),
        "status": status,
        "detail": p.example,
        "retryable": retryable(code),
    })
}
