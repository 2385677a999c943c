//! The request fingerprint: HMAC-SHA256, under a server secret, of method, operation, the
//! operation's parameters (the resource a path names: `/bookings/{id}/cancel`'s `id`) and
//! the canonical JSON body. Key order and whitespace do not change it; any change of a value
//! does, and so does another resource: one key sent to two bookings is two requests, and
//! the second is refused (422) instead of replaying the first booking's answer.
//!
//! Keyed, because a body can hold a secret of the shopper's: a payment's card number. A
//! plain hash of a body drawn from a small space (card numbers are 16 digits with a check
//! digit and known prefixes) is reversed by trying them all, so the key table would hold
//! the card in all but name. Without the server's secret (`IDEMPOTENCY_FINGERPRINT_SECRETS`)
//! a stored fingerprint tells nothing about the body. Secrets rotate like the webhook
//! secrets: the first one keys new requests, and a stored fingerprint made under any of
//! them still matches its own request.
//!
//! ```
//! use http::Method;
//! use once_core::FingerprintKeys;
//! use serde_json::json;
//!
//! let keys = FingerprintKeys::new(&["a server secret".to_owned()]).unwrap();
//! let cancel = |booking: &str| {
//!     keys.of_operation(&Method::POST, "POST /bookings/{id}/cancel", &[("id", booking)], &json!({}))
//! };
//! assert_eq!(cancel("b-1"), cancel("b-1"));
//! assert_ne!(cancel("b-1"), cancel("b-2"));
//! assert!(FingerprintKeys::new(&[]).is_err());
//! ```

use std::sync::Arc;

use hmac::{Hmac, Mac};
use http::Method;
use serde_json::Value;
use sha2::Sha256;

/// The secrets fingerprints are keyed with, newest first.
#[derive(Clone)]
pub struct FingerprintKeys(Arc<[String]>);

impl std::fmt::Debug for FingerprintKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FingerprintKeys({} secrets)", self.0.len())
    }
}

/// [`FingerprintKeys::new`] was given no secret, or an empty one: a fingerprint keyed with
/// nothing would tell a card number to anyone who tries them all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("fingerprints need at least one secret, and no secret may be empty")]
pub struct NoSecret;

impl FingerprintKeys {
    /// The secrets, newest first: the first keys new requests, every one of them still
    /// matches a fingerprint stored under it. Refuses an empty list and an empty secret.
    pub fn new(secrets: &[String]) -> Result<Self, NoSecret> {
        if secrets.is_empty() || secrets.iter().any(String::is_empty) {
            return Err(NoSecret);
        }
        Ok(Self(secrets.into()))
    }

    /// The fingerprint of a request to `operation` with `body` and no parameters.
    pub fn of(&self, method: &Method, operation: &str, body: &Value) -> Fingerprint {
        self.of_operation(method, operation, &[], body)
    }

    /// The fingerprint of a request to `operation` on the resource its `params` name (path
    /// parameters, or any other part of the request that the body does not carry), with
    /// `body`. Without parameters it is exactly [`FingerprintKeys::of`]'s, so keys stored
    /// before an operation named its parameters still match.
    ///
    /// `operation` is the application's constant (`POST /bookings/{id}/cancel`), never text
    /// from the request, and holds no line feed: the parts are separated by line feeds,
    /// which JSON text never holds raw. A request's own values go into `params`, whose names
    /// are distinct.
    pub fn of_operation(
        &self,
        method: &Method,
        operation: &str,
        params: &[(&str, &str)],
        body: &Value,
    ) -> Fingerprint {
        debug_assert!(!operation.contains('\n'), "an operation holds no line feed");
        let body = canonical_json(body);
        // JSON text never holds a raw line feed, so the parts cannot run into each other.
        let params = (!params.is_empty()).then(|| {
            let map = params
                .iter()
                .map(|(name, value)| ((*name).to_owned(), Value::String((*value).to_owned())));
            canonical_json(&Value::Object(map.collect())) + "\n"
        });
        let macs = self.0.iter().map(|secret| {
            let mut mac =
                Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC takes any key");
            for part in [method.as_str(), "\n", operation, "\n"] {
                mac.update(part.as_bytes());
            }
            if let Some(params) = &params {
                mac.update(params.as_bytes());
            }
            mac.update(body.as_bytes());
            hex::encode(mac.finalize().into_bytes())
        });
        Fingerprint(macs.collect())
    }
}

/// A request's fingerprint under each secret; the first is the one stored with a new key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint(Vec<String>);

impl Fingerprint {
    /// The fingerprint a new key is stored with.
    pub fn as_str(&self) -> &str {
        &self.0[0]
    }

    /// Every form it may have been stored in (one per secret).
    pub fn accepted(&self) -> &[String] {
        &self.0
    }

    /// Whether a stored fingerprint is this request's, under any of the secrets.
    pub fn matches(&self, stored: &str) -> bool {
        self.0.iter().any(|f| f == stored)
    }
}

/// JSON with object keys sorted and no insignificant whitespace. Written by hand rather than
/// relying on serde_json's map order, which a feature flag elsewhere in the build can change.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn keys() -> FingerprintKeys {
        FingerprintKeys::new(&["a secret for the unit tests".into()]).unwrap()
    }

    fn post(body: &Value) -> Fingerprint {
        keys().of(&Method::POST, "/api/orders", body)
    }

    #[test]
    fn without_the_secret_the_fingerprint_tells_nothing_of_the_body() {
        let body = json!({ "card_number": "4242424242424242" });
        let plain = {
            use sha2::Digest;
            let text = format!("POST\n/api/orders\n{}", canonical_json(&body));
            hex::encode(Sha256::digest(text.as_bytes()))
        };
        assert_ne!(post(&body).as_str(), plain);
        let other = FingerprintKeys::new(&["another secret entirely".into()]).unwrap();
        assert_ne!(post(&body), other.of(&Method::POST, "/api/orders", &body));
    }

    #[test]
    fn a_fingerprint_stored_under_a_retired_secret_still_matches() {
        let old = FingerprintKeys::new(&["the secret of last month".into()]).unwrap();
        let rotated = FingerprintKeys::new(&[
            "the secret of this month".into(),
            "the secret of last month".into(),
        ])
        .unwrap();
        let body = json!({ "items": [] });
        let stored = old.of(&Method::POST, "/api/orders", &body);
        let now = rotated.of(&Method::POST, "/api/orders", &body);
        assert_ne!(now.as_str(), stored.as_str(), "new keys use the new secret");
        assert!(now.matches(stored.as_str()));
        assert!(!post(&body).matches(stored.as_str()));
    }

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a: Value =
            serde_json::from_str(r#"{"items":[{"sku":"MUG-001","quantity":2}]}"#).unwrap();
        let b: Value = serde_json::from_str(
            "{ \"items\" : [ { \"quantity\" : 2,\n \"sku\" : \"MUG-001\" } ] }",
        )
        .unwrap();
        assert_eq!(post(&a), post(&b));
        assert_eq!(
            canonical_json(&b),
            r#"{"items":[{"quantity":2,"sku":"MUG-001"}]}"#
        );
    }

    #[test]
    fn method_and_route_are_part_of_the_fingerprint() {
        let body = json!({});
        assert_ne!(post(&body), keys().of(&Method::PUT, "/api/orders", &body));
        assert_ne!(
            post(&body),
            keys().of(&Method::POST, "/api/orders/1/payments", &body)
        );
    }

    #[test]
    fn no_secret_or_an_empty_one_is_refused() {
        assert_eq!(FingerprintKeys::new(&[]).unwrap_err(), NoSecret);
        assert_eq!(
            FingerprintKeys::new(&["ok".into(), String::new()]).unwrap_err(),
            NoSecret
        );
    }

    #[test]
    fn parameters_name_the_resource_and_none_is_the_bodys_own_fingerprint() {
        let (body, cancel) = (json!({ "reason": "ill" }), "POST /bookings/{id}/cancel");
        let on = |id: &str| keys().of_operation(&Method::POST, cancel, &[("id", id)], &body);
        assert_eq!(on("b-1"), on("b-1"));
        assert_ne!(on("b-1"), on("b-2"));
        assert_eq!(
            keys().of_operation(&Method::POST, cancel, &[], &body),
            keys().of(&Method::POST, cancel, &body)
        );
        assert_ne!(on("b-1"), keys().of(&Method::POST, cancel, &body));
        // A parameter is not a body member of the same name.
        let folded = json!({ "reason": "ill", "id": "b-1" });
        assert_ne!(on("b-1"), keys().of(&Method::POST, cancel, &folded));
    }

    /// Arbitrary JSON values, a few levels deep.
    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z0-9 \"\\\\é]{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{1,4}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Serializes `value` with object members in reverse order and extra whitespace.
    fn reordered_text(value: &Value) -> String {
        match value {
            Value::Object(map) => {
                let members: Vec<String> = map
                    .iter()
                    .rev()
                    .map(|(k, v)| {
                        format!(" {} :\n {} ", Value::String(k.clone()), reordered_text(v))
                    })
                    .collect();
                format!("{{ {} }}", members.join(" , "))
            }
            Value::Array(items) => {
                format!(
                    "[ {} ]",
                    items
                        .iter()
                        .map(reordered_text)
                        .collect::<Vec<_>>()
                        .join(" ,\t")
                )
            }
            scalar => scalar.to_string(),
        }
    }

    /// Every scalar, empty array and empty object inside `value`.
    fn leaves_mut(value: &mut Value) -> Vec<&mut Value> {
        let is_leaf = match &*value {
            Value::Array(a) => a.is_empty(),
            Value::Object(o) => o.is_empty(),
            _ => true,
        };
        if is_leaf {
            return vec![value];
        }
        match value {
            Value::Array(items) => items.iter_mut().flat_map(leaves_mut).collect(),
            Value::Object(map) => map.values_mut().flat_map(leaves_mut).collect(),
            _ => unreachable!(),
        }
    }

    fn change(leaf: &mut Value) {
        *leaf = match leaf.take() {
            Value::Null => json!(false),
            Value::Bool(b) => json!(!b),
            Value::Number(n) => json!(n.as_i64().unwrap().wrapping_add(1)),
            Value::String(s) => json!(format!("{s}!")),
            Value::Array(_) => json!([null]),
            Value::Object(_) => json!({ "k": null }),
        };
    }

    proptest! {
        #[test]
        fn any_key_order_and_whitespace_give_the_same_fingerprint(value in json_value()) {
            let reparsed: Value = serde_json::from_str(&reordered_text(&value)).unwrap();
            prop_assert_eq!(post(&value), post(&reparsed));
        }

        #[test]
        fn any_value_change_gives_a_different_fingerprint(value in json_value(), pick in any::<prop::sample::Index>()) {
            let mut changed = value.clone();
            let mut leaves = leaves_mut(&mut changed);
            let leaf = pick.index(leaves.len());
            change(leaves.swap_remove(leaf));
            prop_assert_ne!(post(&value), post(&changed));
        }
    }
}
