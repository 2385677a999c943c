//! What became of a callback: a closed list, the same in Rust and in the database
//! (`payment_callbacks_outcome_valid`), so an operator can count each kind.

use crate::payments::apply::ApplyError;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It changed the payment (and the order).
    Applied,
    /// Its success had been applied before (by the charge answer, usually).
    AlreadyApplied,
    /// A success the order could no longer take: the payment is owed back.
    RefundDue,
    /// A kind of event this shop does not act on.
    Ignored,
    /// Its reference names no payment attempt of ours.
    UnknownPayment,
    /// Its amount or currency differs from the order's: never credited.
    AmountMismatch,
    /// The database refused to apply it (a constraint): flagged, never retried.
    Conflict,
    /// A known kind whose data does not have the shape that kind has.
    Malformed,
    /// It could change its attempt, but the provider does not list its charge for the
    /// attempt with the status it claims: never applied.
    Unconfirmed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::AlreadyApplied => "already_applied",
            Self::RefundDue => "refund_due",
            Self::Ignored => "ignored",
            Self::UnknownPayment => "unknown_payment",
            Self::AmountMismatch => "amount_mismatch",
            Self::Conflict => "conflict",
            Self::Malformed => "malformed",
            Self::Unconfirmed => "unconfirmed",
        }
    }

    /// The outcome of an application the apply step refused.
    pub fn refused(error: &ApplyError) -> Self {
        match error {
            ApplyError::AmountMismatch { .. } => Self::AmountMismatch,
            ApplyError::UnknownPayment(_) => Self::UnknownPayment,
            ApplyError::Database(_) => Self::Conflict,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name is one the database's CHECK constraint accepts.
    #[test]
    fn names_match_the_database_constraint() {
        let migration = include_str!("../../../migrations/0008_secrets_and_callbacks.sql");
        for outcome in [
            Outcome::Applied,
            Outcome::AlreadyApplied,
            Outcome::RefundDue,
            Outcome::Ignored,
            Outcome::UnknownPayment,
            Outcome::AmountMismatch,
            Outcome::Conflict,
            Outcome::Malformed,
            Outcome::Unconfirmed,
        ] {
            assert!(
                migration.contains(&format!("'{}'", outcome.as_str())),
                "{outcome:?}"
            );
        }
    }
}
