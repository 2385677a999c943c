//! An event as it travels on the bus: the outbox row, as JSON. Its id is the outbox row's
//! id, which every layer below dedups on (bus message id, `consumed_events`).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::bus::Message;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub id: Uuid,
    pub event_type: String,
    pub aggregate_type: String,
    pub aggregate_id: Uuid,
    pub payload: Value,
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
