//! The exactly-once part of consuming: the bus delivers at least once, so each consumer
//! records each event it applies in `consumed_events`, in the transaction that applies it.
//! The consumer runtime calls it for every event ([`crate::apply_in_one_tx`]).

use sqlx::PgConnection;
use uuid::Uuid;

/// Records that `consumer` consumes `event_id`, in `tx`. True: the first time, so apply the
/// event's effects in this same transaction and commit them with this record. False: it was
/// consumed before (by this process or any other, or by an earlier delivery): do nothing.
///
/// Called outside a transaction, the record would commit before the effects exist, and a
/// crash in between would lose the event: always call it in the effects' transaction. A
/// concurrent consumer of the same event waits on this row until the first commits or
/// rolls back, so the two never both see true.
///
/// The row's `outcome` says `consumed`; a consumer that keeps how each event ended
/// overwrites it in the same transaction (the shop's fulfillment does).
pub async fn consume_once(
    tx: &mut PgConnection,
    consumer: &str,
    event_id: Uuid,
) -> Result<bool, sqlx::Error> {
    let inserted = sqlx::query!(
        "INSERT INTO consumed_events (consumer, event_id, outcome) VALUES ($1, $2, 'consumed')
         ON CONFLICT ON CONSTRAINT consumed_events_pkey DO NOTHING",
        consumer,
        event_id,
    )
    .execute(tx)
    .await?
    .rows_affected();
    Ok(inserted == 1)
}
