//! What stops a reconciliation run, or one item of it, in words an operator can act on: the
//! runs table and the console's notice show them ("payment provider unreachable at …"),
//! where the shop's API error would say only that the service is unavailable.

use crate::error::ApiError;

#[derive(Debug, thiserror::Error)]
pub enum ReconcileError {
    /// The provider could not be asked, or our database could not be used: the words of
    /// the failure itself (the provider's address and what it answered, the database's
    /// error).
    #[error("{0}")]
    Unavailable(String),
    /// Another run took the lease while this one worked (it had stalled past the lease).
    #[error("the reconciliation lease was lost to another run")]
    LeaseLost,
    /// A step refused for a reason of its own.
    #[error("{0}")]
    Refused(String),
}

impl ReconcileError {
    /// The same failure, said to be the ledger's.
    pub fn reading_the_ledger(self) -> Self {
        match self {
            Self::Unavailable(what) => Self::Unavailable(format!("ledger page not read: {what}")),
            Self::Refused(what) => Self::Refused(format!("ledger page refused: {what}")),
            other => other,
        }
    }
}

impl From<ApiError> for ReconcileError {
    fn from(e: ApiError) -> Self {
        match e {
            ApiError::Unavailable(inner) | ApiError::Internal(inner) => {
                Self::Unavailable(format!("{inner:#}"))
            }
            other => Self::Refused(other.to_string()),
        }
    }
}

impl From<sqlx::Error> for ReconcileError {
    fn from(e: sqlx::Error) -> Self {
        Self::Unavailable(format!("database: {e}"))
    }
}

/// For the console's actions, which answer in the shop's terms.
impl From<ReconcileError> for ApiError {
    fn from(e: ReconcileError) -> Self {
        match e {
            ReconcileError::Unavailable(what) => ApiError::Unavailable(anyhow::anyhow!(what)),
            other => ApiError::Internal(anyhow::anyhow!(other.to_string())),
        }
    }
}
