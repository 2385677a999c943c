//! An answer as it is stored with a completed key: the first answer and every replay are
//! built from it, so they are identical byte for byte (with `Idempotent-Replayed: true`
//! added to a replay).

use serde_json::{Map, Value};

/// Status, the answer's own headers (content type, location, whatever the operation set)
/// and body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredResponse {
    /// The HTTP status.
    pub status: u16,
    /// Lower-case names, in the order the answer had them.
    pub headers: Vec<(String, String)>,
    /// The body's bytes.
    pub body: Vec<u8>,
}

/// Headers never stored: they belong to one delivery of an answer, not to the answer.
const NOT_STORED: [&str; 8] = [
    "set-cookie",
    "date",
    "content-length",
    "transfer-encoding",
    "connection",
    "keep-alive",
    "upgrade",
    "trailer",
];

impl StoredResponse {
    /// `headers` as a handler's answer had them; the per-delivery ones are left out.
    pub fn new(status: u16, headers: Vec<(String, String)>, body: Vec<u8>) -> Self {
        let headers = headers
            .into_iter()
            .map(|(name, value)| (name.to_ascii_lowercase(), value))
            .filter(|(name, _)| !NOT_STORED.contains(&name.as_str()))
            .collect();
        Self {
            status,
            headers,
            body,
        }
    }

    /// The value of header `name` (any case), if the answer had it.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The headers as stored: a JSON object of name to value.
    pub fn headers_json(&self) -> Value {
        let map: Map<String, Value> = self
            .headers
            .iter()
            .map(|(n, v)| (n.clone(), Value::String(v.clone())))
            .collect();
        Value::Object(map)
    }

    /// Reads a stored answer back; entries that are not strings (a stored `null`) are no
    /// header.
    pub fn from_parts(status: i16, headers: &Value, body: Vec<u8>) -> Self {
        let headers = headers
            .as_object()
            .map(|map| {
                map.iter()
                    .filter_map(|(n, v)| Some((n.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        Self {
            status: status as u16,
            headers,
            body,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_survive_the_round_trip_through_storage() {
        let stored = StoredResponse::new(
            201,
            vec![
                ("Content-Type".into(), "application/json".into()),
                ("Location".into(), "/api/orders/1".into()),
                ("X-Request-Cost".into(), "3".into()),
            ],
            b"{}".to_vec(),
        );
        let back = StoredResponse::from_parts(201, &stored.headers_json(), b"{}".to_vec());
        assert_eq!(back, stored);
        assert_eq!(back.header("location"), Some("/api/orders/1"));
    }

    #[test]
    fn a_delivery_s_own_headers_are_not_stored() {
        let stored = StoredResponse::new(
            200,
            vec![
                ("set-cookie".into(), "id=1".into()),
                ("date".into(), "today".into()),
                ("content-type".into(), "application/json".into()),
            ],
            vec![],
        );
        assert_eq!(stored.headers.len(), 1);
    }

    #[test]
    fn rows_stored_before_headers_were_generic_read_back() {
        let old = serde_json::json!({"content-type": "application/json", "location": null});
        let back = StoredResponse::from_parts(201, &old, vec![]);
        assert_eq!(
            back.headers,
            vec![("content-type".to_owned(), "application/json".to_owned())]
        );
    }
}
