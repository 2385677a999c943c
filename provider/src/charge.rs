//! A charge as the provider reports it: in its answers, its ledger and its webhooks.

use serde::Serialize;

#[derive(Clone, Debug, Serialize)]
pub struct Charge {
    pub id: String,
    pub tx_no: i64,
    pub amount_cents: i64,
    pub currency: String,
    pub card_last4: String,
    pub reference: String,
    pub status: String,
    pub failure_code: Option<String>,
    pub created_at: chrono::DateTime<chrono::Utc>,
}
