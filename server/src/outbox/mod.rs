//! The transactional outbox: an event is written in the same transaction as the change it
//! announces, so it exists exactly when the change does. The [`relay`] publishes it to the
//! bus afterwards, at least once. See docs/design.md, "Fulfillment".

mod event;
pub mod relay;

use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

pub use event::Event;

pub async fn record(
    tx: &mut PgConnection,
    aggregate_type: &str,
    aggregate_id: Uuid,
    event_type: &str,
    payload: Value,
) -> Result<Uuid, sqlx::Error> {
    let id = Uuid::new_v4();
    sqlx::query!(
        "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload)
         VALUES ($1, $2, $3, $4, $5)",
        id,
        aggregate_type,
        aggregate_id,
        event_type,
        payload,
    )
    .execute(tx)
    .await?;
    Ok(id)
}
