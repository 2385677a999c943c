//! The transactional outbox: an event is written in the same transaction as the change it
//! announces, so it exists exactly when the change does. The relay ([`crate::relay`])
//! publishes it to the bus afterwards, at least once.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sqlx::PgConnection;
use uuid::Uuid;

use crate::bus::Message;

/// Writes an event in `tx`, the transaction of the change it announces; returns its id.
pub async fn record(
    tx: &mut PgConnection,
    aggregate_type: &str,
    aggregate_id: Uuid,
    event_type: &str,
    payload: Value,
) -> Result<Uuid, sqlx::Error> {
    let id = Uuid::new_v4();
    sqlx::query(
        "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload)
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(id)
    .bind(aggregate_type)
    .bind(aggregate_id)
    .bind(event_type)
    .bind(payload)
    .execute(tx)
    .await?;
    Ok(id)
}

/// An event to record: what [`record`] takes, for [`record_all`].
pub struct NewEvent<'a> {
    /// What kind of thing changed (e.g. `order`).
    pub aggregate_type: &'a str,
    /// Which one.
    pub aggregate_id: Uuid,
    /// What happened to it (e.g. `order.paid`): the bus subject its consumers read.
    pub event_type: &'a str,
    /// The event's data, as JSON.
    pub payload: Value,
}

/// [`record`] for several events, in one statement; returns their ids, in order.
pub async fn record_all(
    tx: &mut PgConnection,
    events: &[NewEvent<'_>],
) -> Result<Vec<Uuid>, sqlx::Error> {
    let ids: Vec<Uuid> = events.iter().map(|_| Uuid::new_v4()).collect();
    let aggregate_types: Vec<&str> = events.iter().map(|e| e.aggregate_type).collect();
    let aggregate_ids: Vec<Uuid> = events.iter().map(|e| e.aggregate_id).collect();
    let event_types: Vec<&str> = events.iter().map(|e| e.event_type).collect();
    let payloads: Vec<Value> = events.iter().map(|e| e.payload.clone()).collect();
    sqlx::query(
        "INSERT INTO outbox_events (id, aggregate_type, aggregate_id, event_type, payload)
         SELECT * FROM unnest($1::uuid[], $2::text[], $3::uuid[], $4::text[], $5::jsonb[])",
    )
    .bind(&ids[..])
    .bind(&aggregate_types[..])
    .bind(&aggregate_ids[..])
    .bind(&event_types[..])
    .bind(&payloads[..])
    .execute(tx)
    .await?;
    Ok(ids)
}

/// An event as it travels on the bus: the outbox row, as JSON. Its id is the outbox row's
/// id, which every layer below dedups on (bus message id, `consumed_events`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The event's id, unique for good: the bus's message id and the consumers' dedup key.
    pub id: Uuid,
    /// What happened (e.g. `order.paid`): the bus subject.
    pub event_type: String,
    /// What kind of thing changed (e.g. `order`).
    pub aggregate_type: String,
    /// Which one.
    pub aggregate_id: Uuid,
    /// The event's data, as JSON.
    pub payload: Value,
    /// When it was recorded (its transaction's start).
    pub created_at: chrono::DateTime<chrono::Utc>,
}

impl Event {
    /// The bus message carrying this event: subject = event type, id = event id.
    pub fn to_message(&self) -> Message {
        Message {
            id: self.id.to_string(),
            subject: self.event_type.clone(),
            body: serde_json::to_vec(self).expect("an event serialises"),
        }
    }

    /// Reads an event back from a message; a body that is not an event, or whose id or
    /// type disagree with the message's, is refused with the reason.
    pub fn from_message(message: &Message) -> Result<Self, String> {
        let event: Event =
            serde_json::from_slice(&message.body).map_err(|e| format!("malformed event: {e}"))?;
        if event.id.to_string() != message.id {
            return Err(format!(
                "malformed event: message id {} carries event {}",
                message.id, event.id
            ));
        }
        if event.event_type != message.subject {
            return Err(format!(
                "malformed event: subject {} carries a {} event",
                message.subject, event.event_type
            ));
        }
        Ok(event)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Event {
        Event {
            id: Uuid::new_v4(),
            event_type: "order.paid".into(),
            aggregate_type: "order".into(),
            aggregate_id: Uuid::new_v4(),
            payload: serde_json::json!({ "order_id": "x" }),
            created_at: chrono::Utc::now(),
        }
    }

    #[test]
    fn an_event_survives_its_trip_as_a_message() {
        let event = event();
        assert_eq!(Event::from_message(&event.to_message()), Ok(event));
    }

    #[test]
    fn a_message_whose_id_or_subject_disagrees_with_its_event_is_refused() {
        let event = event();
        let mut other_id = event.to_message();
        other_id.id = Uuid::new_v4().to_string();
        let mut other_subject = event.to_message();
        other_subject.subject = "order.created".into();
        let junk = Message {
            body: b"{not json".to_vec(),
            ..event.to_message()
        };
        for message in [other_id, other_subject, junk] {
            let refused = Event::from_message(&message).unwrap_err();
            assert!(refused.starts_with("malformed event"), "{refused}");
        }
    }
}

/// What the relay has yet to publish: the figures an operator watches first.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[non_exhaustive]
pub struct Backlog {
    /// Events written and not yet published.
    pub unpublished: i64,
    /// How long the oldest of them has waited, in seconds (0 when none waits).
    pub oldest_secs: f64,
}

/// The outbox's backlog, in one statement.
pub async fn backlog(db: impl sqlx::PgExecutor<'_>) -> Result<Backlog, sqlx::Error> {
    let (unpublished, oldest_secs): (i64, f64) = sqlx::query_as(
        "SELECT count(*), coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8
           FROM outbox_events WHERE published_at IS NULL",
    )
    .fetch_one(db)
    .await?;
    Ok(Backlog {
        unpublished,
        oldest_secs,
    })
}
