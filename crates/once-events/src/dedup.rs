//! The exactly-once part of consuming: the bus delivers at least once, so each consumer
//! records each event it applies in `consumed_events`, in the transaction that applies it.
//! The consumer runtime calls it for every event ([`crate::apply_in_one_tx`]).

use std::collections::HashSet;

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
/// overwrites it in the same transaction ([`record_outcomes`]).
pub async fn consume_once(
    tx: &mut PgConnection,
    consumer: &str,
    event_id: Uuid,
) -> Result<bool, sqlx::Error> {
    Ok(consume_all(tx, consumer, &[event_id]).await?[0])
}

/// [`consume_once`] for a batch, in one statement: for each id, in order, whether this is
/// its first consumption (an id given twice is first only once). The rows are written in
/// id order, so two consumers recording overlapping batches wait for each other rather
/// than deadlock.
pub async fn consume_all(
    tx: &mut PgConnection,
    consumer: &str,
    event_ids: &[Uuid],
) -> Result<Vec<bool>, sqlx::Error> {
    let mut sorted = event_ids.to_vec();
    sorted.sort();
    sorted.dedup();
    let inserted: Vec<Uuid> = sqlx::query_scalar(
        "INSERT INTO consumed_events (consumer, event_id, outcome)
         SELECT $1, id, 'consumed' FROM unnest($2::uuid[]) WITH ORDINALITY AS u (id, n)
          ORDER BY n
         ON CONFLICT ON CONSTRAINT consumed_events_pkey DO NOTHING
         RETURNING event_id",
    )
    .bind(consumer)
    .bind(&sorted[..])
    .fetch_all(tx)
    .await?;
    let mut first: HashSet<Uuid> = inserted.into_iter().collect();
    Ok(event_ids.iter().map(|id| first.remove(id)).collect())
}

/// Keeps how each of `consumer`'s events ended (`outcomes`: event id and a word of the
/// consumer's, `fulfilled`, `skipped`…) on its record, in `tx`: the transaction that
/// recorded and applied them, so the word commits with the effects.
pub async fn record_outcomes(
    tx: &mut PgConnection,
    consumer: &str,
    outcomes: &[(Uuid, &str)],
) -> Result<(), sqlx::Error> {
    let events: Vec<Uuid> = outcomes.iter().map(|(event, _)| *event).collect();
    let words: Vec<&str> = outcomes.iter().map(|(_, word)| *word).collect();
    sqlx::query(
        "UPDATE consumed_events c SET outcome = o.outcome
           FROM unnest($2::uuid[], $3::text[]) AS o (event_id, outcome)
          WHERE c.consumer = $1 AND c.event_id = o.event_id",
    )
    .bind(consumer)
    .bind(&events[..])
    .bind(&words[..])
    .execute(tx)
    .await?;
    Ok(())
}
