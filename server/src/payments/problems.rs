//! The HTTP answers of the payments' domain errors: the one place where a refusal of
//! [`store::begin_attempt`](super::store::begin_attempt), or an error of applying a charge's
//! outcome ([`apply`](super::apply)), becomes an API problem. The idempotency executor
//! stores or leaves open a key by the answer's status (`idempotency::outcome`): a 409 or a
//! 5xx stays open for the retry, a 404 or 422 is stored and replayed.

use super::{apply::ApplyError, store::AttemptRefused};
use crate::error::ApiError;

impl From<AttemptRefused> for ApiError {
    fn from(refused: AttemptRefused) -> Self {
        match refused {
            AttemptRefused::InProgress => ApiError::PaymentInProgress,
            AttemptRefused::UnknownOrder => ApiError::NotFound,
            AttemptRefused::NotPayable(status) => ApiError::unprocessable(
                "order-not-payable",
                match status.as_str() {
                    "cancelled" => "This order was cancelled, so it cannot be paid.",
                    _ => "This order is paid already. Nothing more was charged.",
                },
            ),
            AttemptRefused::Database(e) => e.into(),
        }
    }
}

impl From<ApplyError> for ApiError {
    fn from(e: ApplyError) -> Self {
        match e {
            ApplyError::Database(e) => e.into(),
            other => ApiError::Internal(other.into()),
        }
    }
}
