//! The recovery points an adapter passes through while it charges one attempt
//! ([`CallGate`]): every charging call first stamps the attempt (on a pending one only, see
//! `settle`), and a provider's object made before the charge is recorded before it is
//! confirmed.

use async_trait::async_trait;
use sqlx::PgPool;
use uuid::Uuid;

use super::store;
use crate::{error::ApiError, payment_provider::CallGate};

/// The gate of one attempt's charge.
pub struct AttemptGate {
    pub db: PgPool,
    pub payment_id: Uuid,
    /// The attempt was recorded by this request with its first call stamped: that call
    /// needs no stamp of its own.
    pub first_stamped: bool,
}

#[async_trait]
impl CallGate for AttemptGate {
    async fn may_call(&mut self) -> Result<bool, ApiError> {
        if std::mem::take(&mut self.first_stamped) {
            return Ok(true);
        }
        Ok(store::stamp_charge_call(&self.db, self.payment_id).await?)
    }

    async fn record_intent(&mut self, intent_id: &str) -> Result<String, ApiError> {
        Ok(store::record_intent(&self.db, self.payment_id, intent_id).await?)
    }
}
