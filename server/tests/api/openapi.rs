//! The API reference (server/src/openapi/): the document is valid OpenAPI 3.1, lists every
//! route the server declares and every problem type it can answer, each documented
//! operation exists, and the reference page works without the internet.
//!
//! `openapi-3.1-schema.json` is the OpenAPI Initiative's schema for 3.1 documents
//! (https://spec.openapis.org/oas/3.1/schema/2022-10-07, Apache-2.0), kept here so the
//! check runs offline.

use std::{collections::BTreeSet, path::Path};

use regex::Regex;
use serde_json::Value;
use server::openapi::problems::{OUTSIDE_OPERATIONS, PROBLEM_TYPES};
use server::payment_provider::InstrumentKind;

use crate::helpers::*;

/// Routes outside the shop API, and why the reference leaves them out. Any other route the
/// source declares must be in the document.
const NOT_IN_THE_REFERENCE: &[(&str, &str)] = &[
    ("/", "the page-deadline layer's test router"),
    (
        "/checkout",
        "the no-wasm form's POST: answers with redirects to pages",
    ),
    (
        "/orders/{id}/email",
        "an HTML page: the order's confirmation email",
    ),
    ("/healthz", "for load balancers"),
    (
        "/webhooks/stripe",
        "Stripe's webhooks: routed and documented only when the shop pays through Stripe",
    ),
    (
        "/card-entry.js",
        "the order page's script that mounts Stripe.js's card field",
    ),
];

/// Whole trees outside it.
const TREES_NOT_IN_THE_REFERENCE: &[(&str, &str)] = &[
    (
        "/operator",
        "the operator console: HTML pages behind their own login",
    ),
    (
        "/_test/",
        "fault injection, served only when it is switched on (tests)",
    ),
];

fn outside_the_reference(path: &str) -> bool {
    NOT_IN_THE_REFERENCE.iter().any(|(p, _)| path == *p)
        || TREES_NOT_IN_THE_REFERENCE
            .iter()
            .any(|(p, _)| path.starts_with(p))
}

async fn fetch_document(app: &TestApp) -> Value {
    let response = app
        .client
        .get(app.url("/api/openapi.json"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

fn operations(doc: &Value) -> Vec<(String, String, &Value)> {
    let mut found = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().unwrap() {
            found.push((method.clone(), path.clone(), operation));
        }
    }
    found
}

#[tokio::test]
async fn the_document_is_valid_openapi_3_1() {
    let app = spawn_app().await;
    let doc = fetch_document(&app).await;
    assert_eq!(doc["openapi"], "3.1.0");
    let schema: Value =
        serde_json::from_str(include_str!("openapi-3.1-schema.json")).expect("the schema");
    let validator = jsonschema::validator_for(&schema).expect("the schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(&doc)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "invalid OpenAPI 3.1: {errors:#?}");
    // What the schema cannot see: every reference resolves, and every path parameter
    // is declared.
    let text = doc.to_string();
    for reference in Regex::new(r##""\$ref":"#/components/schemas/([^"]+)""##)
        .unwrap()
        .captures_iter(&text)
    {
        assert!(
            doc["components"]["schemas"][&reference[1]].is_object(),
            "dangling $ref {}",
            &reference[1]
        );
    }
    let parameter = Regex::new(r"\{([^}]+)\}").unwrap();
    for (method, path, operation) in operations(&doc) {
        for name in parameter.captures_iter(&path) {
            let declared = operation["parameters"].as_array().is_some_and(|params| {
                params
                    .iter()
                    .any(|p| p["in"] == "path" && p["name"] == name[1])
            });
            assert!(
                declared,
                "{method} {path}: path parameter {} is undeclared",
                &name[1]
            );
        }
    }
}

/// Every method and path the server's source routes: each `.route("…", get(…).post(…))`
/// (and `nest`, `route_service`, `nest_service`, whose methods are "any"), and each
/// `#[utoipa::path(method, path = "…")]`.
fn declared_routes() -> BTreeSet<(String, String)> {
    let route = Regex::new(r#"\.(route|route_service|nest|nest_service)\(\s*"([^"]*)""#).unwrap();
    let method = Regex::new(r"\b(get|post|put|patch|delete|any)\(").unwrap();
    let documented =
        Regex::new(r#"#\[utoipa::path\(\s*(get|post|put|patch|delete),\s*path = "([^"]+)""#)
            .unwrap();
    let mut found = BTreeSet::new();
    for (_, text) in source_files() {
        for c in route.captures_iter(&text) {
            // The method router: up to the next call chained on the router, or the end.
            let rest = &text[c.get(0).unwrap().end()..];
            let end = [rest.find("\n        ."), rest.find(';'), Some(rest.len())]
                .into_iter()
                .flatten()
                .min()
                .unwrap();
            let methods: Vec<String> = method
                .captures_iter(&rest[..end])
                .map(|m| m[1].to_owned())
                .collect();
            if methods.is_empty() || &c[1] != "route" {
                found.insert(("any".to_owned(), c[2].to_owned()));
            }
            for m in methods {
                found.insert((m, c[2].to_owned()));
            }
        }
        for c in documented.captures_iter(&text) {
            found.insert((c[1].to_owned(), c[2].to_owned()));
        }
    }
    found
}

fn source_files() -> Vec<(String, String)> {
    fn walk(dir: &Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                out.push((path.display().to_string(), text));
            }
        }
    }
    let mut files = Vec::new();
    walk(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut files,
    );
    files
}

#[tokio::test]
async fn every_route_the_server_declares_is_in_the_document() {
    let app = spawn_app().await;
    let doc = fetch_document(&app).await;
    let documented: BTreeSet<(String, String)> = operations(&doc)
        .into_iter()
        .map(|(m, p, _)| (m, p))
        .collect();
    let declared = declared_routes();
    for (method, path) in [("get", "/orders"), ("post", "/orders"), ("get", "/healthz")] {
        let expected = (method.to_owned(), path.to_owned());
        assert!(
            declared.contains(&expected),
            "the scan finds {expected:?}: {declared:?}"
        );
    }
    for (method, path) in &declared {
        let known = documented.contains(&(method.clone(), path.clone()))
            || documented.contains(&(method.clone(), format!("/api{path}")))
            || path == "/api"
            || outside_the_reference(path);
        assert!(
            known,
            "the route {method} {path} is not in the API reference"
        );
    }
    // And the other way: each documented operation is served, not the API's 404.
    let client = shopper();
    app.open_session(&client).await;
    let order = post_order(&client, &app, Some("doc-order"), MUG_ORDER).await;
    assert_eq!(order.status(), 201);
    let order: Value = order.json().await.unwrap();
    // An attempt of the order's, for the paths that name one.
    let payment_id = uuid::Uuid::new_v4().to_string();
    sqlx::query(
        "INSERT INTO payments (id, order_id, idempotency_scope, idempotency_key, amount_cents, currency)
         SELECT $1::uuid, id, 'doc', 'doc-payment', total_cents, currency FROM orders WHERE id = $2::uuid",
    )
    .bind(&payment_id)
    .bind(order["id"].as_str().unwrap())
    .execute(&app.db)
    .await
    .unwrap();
    for (method, path, _) in operations(&doc) {
        let url = app.url(
            &path
                .replace("{id}", order["id"].as_str().unwrap())
                .replace("{payment_id}", &payment_id)
                .replace("{key}", "doc-order"),
        );
        let request = match method.as_str() {
            "get" => client.get(url),
            "post" => client.post(url).json(&serde_json::json!({})),
            other => panic!("{other} {path}: a method the probe does not know"),
        };
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let body = response.text().await.unwrap();
        assert!(
            status != 404 && status != 405 && status < 500,
            "{method} {path} is documented but answers {status}: {body}"
        );
    }
}

/// Every problem name the source can send: each `bad_request("…")`, `unprocessable("…")`
/// and `problem: "…"`, and the fixed names of `ApiError::problem_name`.
fn problem_names_in_source() -> BTreeSet<String> {
    let named = Regex::new(r#"(?:bad_request\(|unprocessable\(|problem: )\s*"([^"]*)""#).unwrap();
    let fixed = Regex::new(r#"=> "([^"]*)""#).unwrap();
    let mut names = BTreeSet::new();
    for (file, text) in source_files() {
        if file.contains("openapi") {
            continue;
        }
        for c in named.captures_iter(&text) {
            names.insert(c[1].to_owned());
        }
        if file.ends_with("error.rs") {
            let start = text
                .find("fn problem_name")
                .expect("ApiError::problem_name");
            let body = &text[start..];
            let body = &body[..body[1..].find("\n    pub fn ").unwrap_or(body.len())];
            for c in fixed.captures_iter(body) {
                names.insert(c[1].to_owned());
            }
        }
    }
    names
}

#[tokio::test]
async fn every_problem_type_is_documented_with_an_example() {
    let app = spawn_app().await;
    let doc = fetch_document(&app).await;
    let in_source = problem_names_in_source();
    for fixed in [
        "session-required",
        "request-in-progress",
        "invalid-body",
        "signature-invalid",
    ] {
        assert!(
            in_source.contains(fixed),
            "the scan finds {fixed}: {in_source:?}"
        );
    }
    let kebab = Regex::new(r"^[a-z0-9]+(-[a-z0-9]+)*$").unwrap();
    for name in &in_source {
        assert!(
            kebab.is_match(name),
            "a problem name is kebab-case: {name:?}"
        );
    }
    let catalogued: BTreeSet<String> = PROBLEM_TYPES.iter().map(|p| p.name.to_owned()).collect();
    let missing: Vec<_> = in_source.difference(&catalogued).collect();
    assert!(
        missing.is_empty(),
        "problem types the reference lacks: {missing:?}"
    );
    let stale: Vec<_> = catalogued.difference(&in_source).collect();
    assert!(stale.is_empty(), "problem types nothing sends: {stale:?}");

    let mut shown = BTreeSet::new();
    for (method, path, operation) in operations(&doc) {
        for (status, response) in operation["responses"].as_object().unwrap() {
            let Some(content) = response["content"].get("application/problem+json") else {
                continue;
            };
            assert_eq!(content["schema"]["$ref"], "#/components/schemas/Problem");
            for (name, example) in content["examples"].as_object().unwrap() {
                let value = &example["value"];
                assert_eq!(
                    value["type"],
                    format!("https://once.example/problems/{name}")
                );
                assert_eq!(
                    value["status"].to_string(),
                    *status,
                    "{method} {path} {name}"
                );
                shown.insert(name.clone());
            }
        }
    }
    let unshown: Vec<_> = catalogued
        .difference(&shown)
        .filter(|name| !OUTSIDE_OPERATIONS.contains(&name.as_str()))
        .collect();
    assert!(
        unshown.is_empty(),
        "problem types no operation shows: {unshown:?}"
    );
}

#[tokio::test]
async fn every_write_documents_its_idempotency_key() {
    let app = spawn_app().await;
    let doc = fetch_document(&app).await;
    // Continuing a payment past the shopper's bank takes no key: it reads the outcome from
    // the provider and applies it forward only, so a repeat answers the same.
    let continues = |path: &str| path.ends_with("/authentication");
    let writes: Vec<_> = operations(&doc)
        .into_iter()
        .filter(|(method, path, _)| method == "post" && path.starts_with("/api/"))
        .filter(|(_, path, _)| !continues(path))
        .collect();
    assert_eq!(writes.len(), 4, "orders, checkout, payments, cancel");
    for (_, path, operation) in writes {
        let header = operation["parameters"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["name"] == "Idempotency-Key"))
            .unwrap_or_else(|| panic!("POST {path} lacks the Idempotency-Key header"));
        assert_eq!(header["in"], "header");
        assert_eq!(header["required"], true);
        let answers = operation["responses"].as_object().unwrap();
        // A cancel changes an order that exists: 200; the others make something: 201.
        let done = if path.ends_with("/cancel") {
            "200"
        } else {
            "201"
        };
        for status in [done, "409", "422"] {
            assert!(answers.contains_key(status), "POST {path} lacks {status}");
        }
        for (status, header) in [
            ("409", "Retry-After"),
            ("503", "Retry-After"),
            (done, "Idempotent-Replayed"),
            ("422", "Idempotent-Replayed"),
        ] {
            assert!(
                answers[status]["headers"][header].is_object(),
                "POST {path} {status} lacks {header}"
            );
        }
        assert_eq!(operation["security"][0]["session"], serde_json::json!([]));
    }
}

#[tokio::test]
async fn the_reference_page_loads_everything_from_the_server() {
    let app = spawn_app().await;
    let page = app.client.get(app.url("/api/docs/")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let html = page.text().await.unwrap();
    assert!(html.contains("swagger-ui"), "{html}");
    let assets: Vec<String> = Regex::new(r#"(?:src|href)="([^"]+)""#)
        .unwrap()
        .captures_iter(&html)
        .map(|c| c[1].to_owned())
        .collect();
    assert!(
        assets.len() >= 3,
        "the page's scripts and styles: {assets:?}"
    );
    for asset in &assets {
        assert!(
            !asset.contains("//"),
            "{asset} would be fetched from elsewhere"
        );
        let url = app.url(&format!("/api/docs/{}", asset.trim_start_matches("./")));
        let response = app.client.get(&url).send().await.unwrap();
        assert_eq!(response.status(), 200, "{url}");
        let body = response.text().await.unwrap();
        if asset.contains("initializer") {
            assert!(body.contains("/api/openapi.json"), "{body}");
            assert!(body.contains(r#""validatorUrl": "none""#), "{body}");
        }
    }
    assert!(
        assets.iter().any(|a| a.contains("initializer")),
        "the page is configured: {assets:?}"
    );
    // Reading the reference opens no session (nothing is stored for a reader).
    for path in ["/api/docs/", "/api/openapi.json"] {
        let response = shopper().get(app.url(path)).send().await.unwrap();
        assert!(response.headers().get("set-cookie").is_none(), "{path}");
    }
}

/// The Idempotency-Key's pattern in the reference is the rule the server parses by: a key
/// it matches is accepted, one it does not is refused (and so schemathesis, which generates
/// keys from the pattern, finds the document and the server in agreement).
#[tokio::test]
async fn the_documented_key_pattern_is_the_rule_the_server_parses_by() {
    let app = spawn_app().await;
    let doc = fetch_document(&app).await;
    let header = doc["paths"]["/api/orders"]["post"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "Idempotency-Key")
        .unwrap()
        .clone();
    let pattern = Regex::new(header["schema"]["pattern"].as_str().unwrap()).unwrap();
    let long = "k".repeat(255);
    let too_long = "k".repeat(256);
    let quoted_long = format!("\"{long}\"");
    for key in [
        "8e03978e-40d5-43e8-bc93-6894a57f9324",
        "\"quoted\"",
        r#""with \" and \\""#,
        "a",
        long.as_str(),
        quoted_long.as_str(),
        "\"\"",
        "\"unclosed",
        "\"bad \\x\"",
        "with space",
        "",
        too_long.as_str(),
        "\u{e9}t\u{e9}",
    ] {
        let parsed = once_core::IdempotencyKey::parse(key).is_ok();
        assert_eq!(pattern.is_match(key), parsed, "{key:?}");
    }
}

/// Every operation has an id of its own, which links name.
fn operation_by_id<'a>(doc: &'a Value, id: &str) -> (String, String, &'a Value) {
    let mut matching = operations(doc)
        .into_iter()
        .filter(|(_, _, op)| op["operationId"] == id);
    let found = matching
        .next()
        .unwrap_or_else(|| panic!("no operation {id}"));
    assert!(matching.next().is_none(), "two operations named {id}");
    (found.0, found.1, found.2)
}

/// The links the document gives from an answer (OpenAPI `links`) lead somewhere real: each
/// names an operation by a unique id, and followed from a real answer (its `id` read by the
/// link's expression) each is answered as the operation documents. They are what turns
/// schemathesis's stateful phase on (`scripts/api-fuzz`).
#[tokio::test]
async fn the_links_from_an_order_lead_to_its_payment_its_page_and_back() {
    let (app, _provider) = spawn_shop_and_provider().await;
    let doc = fetch_document(&app).await;
    for (_, _, operation) in operations(&doc) {
        let id = operation["operationId"].as_str().expect("an operationId");
        operation_by_id(&doc, id);
    }
    let created = post_order(&app.client, &app, Some("linked"), MUG_ORDER).await;
    assert_eq!(created.status(), 201);
    let order: Value = created.json().await.unwrap();
    let (_, _, create) = operation_by_id(&doc, "create_order");
    let links = create["responses"]["201"]["links"]
        .as_object()
        .expect("links");
    let names: BTreeSet<_> = links.keys().map(String::as_str).collect();
    assert_eq!(names, BTreeSet::from(["cancel", "pay", "payments", "read"]));

    let paid = follow(&app, &doc, &links["pay"], &order).await;
    assert_eq!(paid.status(), 201);
    let payment: Value = paid.json().await.unwrap();
    for name in ["read", "payments"] {
        assert_eq!(follow(&app, &doc, &links[name], &order).await.status(), 200);
    }
    let (_, _, pay) = operation_by_id(&doc, "pay_order");
    let back = follow(
        &app,
        &doc,
        &pay["responses"]["201"]["links"]["order"],
        &payment,
    )
    .await;
    let read_back: Value = back.json().await.unwrap();
    assert_eq!(
        (read_back["id"].clone(), read_back["status"].as_str()),
        (order["id"].clone(), Some("paid"))
    );
}

/// Sends the request `link` describes, its `id` read from `answer` by the link's expression
/// (`$response.body#/<pointer>`); a write carries a fresh key, a payment a good card.
async fn follow(app: &TestApp, doc: &Value, link: &Value, answer: &Value) -> reqwest::Response {
    let expression = link["parameters"]["id"].as_str().expect("an id parameter");
    let pointer = expression
        .strip_prefix("$response.body#")
        .expect("a body pointer");
    let id = answer
        .pointer(pointer)
        .and_then(Value::as_str)
        .expect("the id in the answer");
    let (method, path, _) = operation_by_id(doc, link["operationId"].as_str().unwrap());
    let url = app.url(&path.replace("{id}", id));
    match method.as_str() {
        "get" => app.client.get(url),
        "post" => app
            .client
            .post(url)
            .header("idempotency-key", uuid::Uuid::new_v4().to_string())
            .json(&serde_json::json!({ "card_number": CARD_OK })),
        other => panic!("a link to a {other}"),
    }
    .send()
    .await
    .unwrap()
}

/// The patterns the document gives a line's sku and a card number are the rules the server
/// refuses by, so the values a generator draws from them are the ones the server takes.
#[tokio::test]
async fn the_documented_sku_and_card_patterns_are_the_rules_the_server_parses_by() {
    let app = spawn_app().await;
    let doc = fetch_document(&app).await;
    let schemas = &doc["components"]["schemas"];
    let pattern_of = |schema: &str, field: &str| {
        let pattern = schemas[schema]["properties"][field]["pattern"]
            .as_str()
            .unwrap_or_else(|| panic!("{schema}.{field} has a pattern"));
        Regex::new(pattern).unwrap()
    };
    let sku = pattern_of("NewOrderLine", "sku");
    for text in [
        "MUG-001",
        "a-Z-9",
        "-",
        "with space",
        "nul\0",
        "caf\u{e9}",
        "x.y",
        "",
    ] {
        let plausible = server::catalog::is_plausible_sku(text);
        assert_eq!(sku.is_match(text), plausible, "{text:?}");
    }
    let card = pattern_of("CardNumberBody", "card_number");
    for text in [
        "4242424242424242",
        "4242 4242 4242 4242",
        "  4242 4242 4242 4242  ",
        "424242424242",
        "42424242424",
        "4242424242424242424",
        "42424242424242424242",
        "4242-4242-4242-4242",
        "4242\t4242424242424",
        "",
    ] {
        let parsed = server::payments::instrument::parse(
            &serde_json::json!({ "card_number": text }),
            InstrumentKind::CardNumber,
        );
        assert_eq!(card.is_match(text), parsed.is_ok(), "{text:?}");
    }
    let method = pattern_of("PaymentMethodBody", "payment_method");
    let long = format!("pm_{}", "a".repeat(253));
    for text in [
        "pm_card_visa",
        "pm_1",
        "card_1AbC",
        "pm_",
        "pm_1/../x",
        "pm 1",
        "",
        long.as_str(),
    ] {
        let parsed = server::payments::instrument::parse(
            &serde_json::json!({ "payment_method": text }),
            InstrumentKind::PaymentMethod,
        );
        assert_eq!(method.is_match(text), parsed.is_ok(), "{text:?}");
    }
}
