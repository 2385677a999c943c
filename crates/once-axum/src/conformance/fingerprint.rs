//! The check that a fingerprint takes in every member of a request's body: each leaf and
//! each array changed alone, under the key of a completed request, must be refused.

use reqwest::StatusCode;
use serde_json::Value;

use super::{answer, fresh_key, Fault, On, Subject};

/// Every leaf of `value` (scalars, empty arrays and objects), with its path.
fn leaves(value: &Value, path: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) if !map.is_empty() => {
            for (k, v) in map {
                leaves(v, format!("{path}/{k}"), out);
            }
        }
        Value::Array(items) if !items.is_empty() => {
            for (i, v) in items.iter().enumerate() {
                leaves(v, format!("{path}/{i}"), out);
            }
        }
        _ => out.push(path),
    }
}

/// `body` with the leaf at `path` changed to another value of its kind.
fn changed(body: &Value, path: &str) -> Value {
    let mut body = body.clone();
    let leaf = body.pointer_mut(path).expect("a leaf of the body");
    *leaf = match leaf.take() {
        Value::Null => Value::Bool(true),
        Value::Bool(b) => Value::Bool(!b),
        Value::Number(n) => match n.as_i64() {
            Some(i) => Value::from(i + 1),
            None => Value::from(n.as_f64().unwrap_or(0.0) + 1.0),
        },
        Value::String(s) => Value::String(format!("{s}-2")),
        Value::Array(_) => Value::Array(vec![Value::Null]),
        Value::Object(_) => serde_json::json!({ "changed": true }),
    };
    body
}

/// `body`'s arrays, each grown by a copy of its first element, shrunk by its last, and
/// with its first two swapped: the changes a fingerprint of one element would miss.
fn array_changes(body: &Value) -> Vec<(String, Value)> {
    let mut paths = Vec::new();
    arrays(body, String::new(), &mut paths);
    let mut changes = Vec::new();
    for path in paths {
        let mut with = |what: &str, change: &dyn Fn(&mut Vec<Value>)| {
            let mut changed = body.clone();
            if let Some(Value::Array(items)) = changed.pointer_mut(&path) {
                change(items);
            }
            if changed != *body {
                changes.push((format!("{path} {what}"), changed));
            }
        };
        with("grown", &|items| items.push(items[0].clone()));
        with("shrunk", &|items| {
            if items.len() > 1 {
                items.pop();
            }
        });
        with("reordered", &|items| {
            if items.len() > 1 {
                items.swap(0, 1);
            }
        });
    }
    changes
}

/// The paths of `value`'s non-empty arrays.
fn arrays(value: &Value, path: String, out: &mut Vec<String>) {
    match value {
        Value::Array(items) if !items.is_empty() => {
            out.push(path.clone());
            for (i, v) in items.iter().enumerate() {
                arrays(v, format!("{path}/{i}"), out);
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                arrays(v, format!("{path}/{k}"), out);
            }
        }
        _ => {}
    }
}

/// A fingerprint that leaves out any one member of the body is found: each leaf of the
/// body is changed alone (and each array grown, shrunk and reordered), under the key of the
/// completed request, and must be refused with 422 and not answered with that request's
/// reply. A change is counted only when the same body under a fresh key is accepted (on a
/// resource of its own), so a refusal about the body itself proves nothing; at least one
/// change must count.
pub async fn every_member_of_the_body_is_fingerprinted<S: Subject>(on: &On<'_, S>) {
    let scope = on.subject.new_scope().await;
    let (key, body) = (fresh_key(), on.body(1));
    let first = on.send(&scope, Some(&key), &body, Fault::None).await;
    assert!(
        first.status().is_success(),
        "op {}: first answer {}",
        on.op,
        first.status()
    );
    let mut paths = Vec::new();
    leaves(&body, String::new(), &mut paths);
    let leaves = paths.iter().filter(|p| !p.is_empty());
    let mut changes: Vec<(String, Value)> = leaves
        .map(|path| (format!("{path} changed"), changed(&body, path)))
        .collect();
    changes.extend(array_changes(&body));
    let (mut effects, mut counted) = (1, 0);
    for (n, (what, changed)) in changes.iter().enumerate() {
        let what = format!("the body with {what}");
        let sent = on.send(&scope, Some(&key), changed, Fault::None).await;
        let (status, replayed, _) = answer(sent).await;
        assert_eq!(
            replayed, None,
            "op {}: {what} was answered with another request's reply",
            on.op
        );
        assert!(status.is_client_error(), "op {}: {what}: {status}", on.op);
        assert_eq!(
            on.effects(&scope).await,
            effects,
            "op {}: {what} did something",
            on.op
        );
        let target = 100 + n as u32;
        let control = on
            .send_to(&scope, target, Some(&fresh_key()), changed, Fault::None)
            .await;
        if control.status().is_success() {
            effects += 1;
            counted += 1;
            assert_eq!(
                status,
                StatusCode::UNPROCESSABLE_ENTITY,
                "op {}: {what}",
                on.op
            );
        }
        assert_eq!(
            on.effects(&scope).await,
            effects,
            "op {}: {what}, under a fresh key",
            on.op
        );
    }
    assert!(
        counted > 0,
        "op {}: no change of the body was accepted under a fresh key, so the check tested \
         nothing: give body() a member that can change",
        on.op
    );
}
