//! A long story, read a page at a time (docs/design.md, "The order journal"): the pages
//! reach every entry once, in order, ties in time included; the money view finds a payment
//! buried under a shopper's requests; a search by its charge opens the page it is on.

use crate::{helpers::*, operator::operator};

/// Entries on a page, in the order shown.
fn entry_ids(html: &str) -> Vec<i64> {
    html.split("<tr id=\"e")
        .skip(1)
        .map(|rest| rest[..rest.find('"').unwrap()].parse().unwrap())
        .collect()
}

/// The `href` of the link marked `data-testid="{testid}"`, if the page has it.
fn link(html: &str, testid: &str) -> Option<String> {
    let at = html.find(&format!("data-testid=\"{testid}\""))?;
    let before = &html[..at];
    let href = &before[before.rfind("href=\"")? + 6..];
    Some(
        href[..href.find('"')?]
            .replace("&#38;", "&")
            .replace("&amp;", "&"),
    )
}

/// An order whose story is `requests` requests, one payment that succeeded and `requests`
/// more requests, a hundred of them at each instant (ties a cursor must step past).
async fn buried_payment(app: &TestApp, requests: i64) -> (String, String, i64) {
    let order_id = place_order(app).await;
    let order_no: String = sqlx::query_scalar("SELECT order_no FROM orders WHERE id = $1::uuid")
        .bind(&order_id)
        .fetch_one(&app.db)
        .await
        .unwrap();
    let requests_sql =
        "INSERT INTO order_journal (order_id, at, kind, summary, scope_tag, idempotency_key)
         SELECT $1::uuid, now() + (($2 + n / 100) * interval '1 second'), 'request',
                'POST /api/orders/{id}/payments answered 409 order-already-paid: executed',
                'tag', 'key-' || ($2 + n)
           FROM generate_series(0, $3 - 1) AS n";
    let add = |from: i64| {
        sqlx::query(requests_sql)
            .bind(&order_id)
            .bind(from)
            .bind(requests)
            .execute(&app.db)
    };
    add(0).await.unwrap();
    let paid: i64 = sqlx::query_scalar(
        "INSERT INTO order_journal (order_id, at, kind, summary, charge_id)
         VALUES ($1::uuid, now() + ($2 / 100) * interval '1 second', 'payment',
                 'payment pending → succeeded, charge ch_buried', 'ch_buried')
         RETURNING id",
    )
    .bind(&order_id)
    .bind(requests)
    .fetch_one(&app.db)
    .await
    .unwrap();
    add(requests).await.unwrap();
    (order_id, order_no, paid)
}

#[tokio::test]
async fn the_pages_reach_every_entry_once_in_order_and_the_money_view_finds_the_payment() {
    let app =
        spawn_app_with(|c| c.operator_password = Some(crate::operator::PASSWORD.into())).await;
    let (order_id, order_no, paid) = buried_payment(&app, 450).await;
    let (client, _) = operator(&app).await;
    let all: Vec<i64> = sqlx::query_scalar(
        "SELECT id FROM order_journal WHERE order_id = $1::uuid ORDER BY at, id",
    )
    .bind(&order_id)
    .fetch_all(&app.db)
    .await
    .unwrap();
    assert!(all.len() > 900);

    // Forwards from the first page, then backwards from the latest.
    let journal = format!("/operator/orders/{order_no}");
    let mut seen = vec![];
    let mut page = app.get_text(&client, &journal).await;
    assert!(
        link(&page, "earlier").is_none(),
        "the first page has nothing before it"
    );
    loop {
        let ids = entry_ids(&page);
        assert!(ids.len() <= 200, "a page is bounded: {}", ids.len());
        seen.extend(ids);
        let Some(next) = link(&page, "later") else {
            break;
        };
        page = app.get_text(&client, &next).await;
    }
    assert_eq!(seen, all, "forwards: every entry once, in order");

    let mut seen = vec![];
    let mut page = app.get_text(&client, &format!("{journal}?latest=1")).await;
    assert!(
        link(&page, "later").is_none(),
        "the latest page has nothing after it"
    );
    loop {
        let mut ids = entry_ids(&page);
        ids.extend(seen);
        seen = ids;
        let Some(previous) = link(&page, "earlier") else {
            break;
        };
        page = app.get_text(&client, &previous).await;
    }
    assert_eq!(seen, all, "backwards: every entry once, in order");

    // The money view: the payment on its first page, with the order's own entries.
    let money = app
        .get_text(&client, &format!("{journal}?only=money"))
        .await;
    let ids = entry_ids(&money);
    assert!(ids.contains(&paid), "the buried payment: {ids:?}");
    assert!(money.contains("payment pending → succeeded, charge ch_buried"));
    assert!(money.contains(&format!("order {order_no} placed")));
    assert!(
        !money.contains("order-already-paid"),
        "no request in the money view"
    );
    assert!(
        link(&money, "later").is_none(),
        "nothing more to show there"
    );
    // Its links keep the view.
    let before_paid = app
        .get_text(&client, &format!("{journal}?only=money&before={paid}"))
        .await;
    let later = link(&before_paid, "later").unwrap_or_else(|| panic!("{before_paid}"));
    assert!(
        later.starts_with(&format!("{journal}?only=money&after=")),
        "{later}"
    );

    // A search by the charge opens the page that starts at its entry, marked.
    let found = client
        .get(app.url("/operator/search"))
        .query(&[("q", "ch_buried")])
        .send()
        .await
        .unwrap();
    assert_eq!(found.status(), 303);
    assert_eq!(
        found.headers()["location"],
        format!("{journal}?from={paid}#e{paid}").as_str()
    );
    let page = app
        .get_text(&client, &format!("{journal}?from={paid}"))
        .await;
    assert_eq!(entry_ids(&page).first(), Some(&paid));
    assert!(page.contains(&format!(
        "<tr id=\"e{paid}\" data-kind=\"payment\" class=\"matched\""
    )));
    assert!(link(&page, "earlier").is_some() && link(&page, "later").is_some());
}

#[tokio::test]
async fn a_page_query_no_page_has_is_the_first_page_not_an_error() {
    let app =
        spawn_app_with(|c| c.operator_password = Some(crate::operator::PASSWORD.into())).await;
    let (_, order_no, _) = buried_payment(&app, 10).await;
    let (client, _) = operator(&app).await;
    for query in [
        "after=abc",
        "before=-1",
        "from=99999999999",
        "only=everything",
        "after=1e400",
    ] {
        let response = client
            .get(app.url(&format!("/operator/orders/{order_no}?{query}")))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{query}");
    }
}
