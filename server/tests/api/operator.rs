//! The operator console: nothing without the password, nothing without the form's CSRF
//! token, and the actions do what they say.

use crate::helpers::*;

pub const PASSWORD: &str = "operator-test-password";

pub(crate) async fn spawn_console() -> TestApp {
    spawn_chain(OnBus::Postgres, |config| {
        config.operator_password = Some(PASSWORD.into());
    })
    .await
}

/// The CSRF token in a console page's forms.
pub fn csrf_in(html: &str) -> String {
    let at = html
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF token")
        + 19;
    html[at..].split('"').next().unwrap().to_owned()
}

pub async fn login(app: &TestApp, client: &reqwest::Client, password: &str) -> reqwest::Response {
    let page = app.get_text(client, "/operator/login").await;
    client
        .post(app.url("/operator/login"))
        .form(&[("csrf", csrf_in(&page).as_str()), ("password", password)])
        .send()
        .await
        .unwrap()
}

/// Posts a console form (an action) with the session's CSRF token.
async fn act(app: &TestApp, client: &reqwest::Client, path: &str, csrf: &str) -> reqwest::Response {
    client
        .post(app.url(path))
        .form(&[("csrf", csrf)])
        .send()
        .await
        .unwrap()
}

/// A client logged in as the operator, and its CSRF token.
pub(crate) async fn operator(app: &TestApp) -> (reqwest::Client, String) {
    let client = shopper();
    app.open_session(&client).await;
    assert_eq!(login(app, &client, PASSWORD).await.status(), 303);
    let page = app.get_text(&client, "/operator/reconciliation").await;
    let csrf = csrf_in(&page);
    (client, csrf)
}

const PAGES: [&str; 6] = [
    "/operator",
    "/operator/reconciliation",
    "/operator/dead-letters",
    "/operator/emails",
    "/operator/search?q=ONC-1001",
    "/operator/orders/ONC-1001",
];

async fn a_dead_letter(app: &TestApp) -> uuid::Uuid {
    sqlx::query_scalar(
        "INSERT INTO dead_letters (id, consumer, message_id, subject, body, error, deliveries)
         VALUES (gen_random_uuid(), 'fulfillment', 'm1', 'order.paid', '\\x7b7d', 'boom', 3) RETURNING id",
    )
    .fetch_one(&app.db)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_shopper_reaches_no_page_and_no_action() {
    let app = spawn_console().await;
    let letter = a_dead_letter(&app).await;
    // The app's client is a shopper with a session of its own.
    for page in PAGES {
        let response = app.client.get(app.url(page)).send().await.unwrap();
        assert_eq!(response.status(), 303, "{page}");
        assert_eq!(response.headers()["location"], "/operator/login");
    }
    let actions = [
        "/operator/reconciliation/run".to_owned(),
        format!("/operator/dead-letters/{letter}/retry"),
        format!("/operator/dead-letters/{letter}/discard"),
        format!("/operator/findings/{}/resolve", uuid::Uuid::new_v4()),
        format!("/operator/findings/{}/refund", uuid::Uuid::new_v4()),
        "/operator/logout".to_owned(),
    ];
    for action in &actions {
        let response = app
            .client
            .post(app.url(action))
            .form(&[("csrf", "x")])
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 403, "{action}");
    }
    assert_eq!(app.count("reconcile_runs").await, 0);
    assert_eq!(app.count_where("dead_letters", "status = 'dead'").await, 1);
    let email = app
        .client
        .get(app.url(&format!("/operator/emails/{}", uuid::Uuid::new_v4())))
        .send()
        .await
        .unwrap();
    assert_eq!(email.status(), 303);
}

#[tokio::test]
async fn a_wrong_password_is_refused_and_the_right_one_opens_the_console_under_a_new_session() {
    let app = spawn_console().await;
    let client = shopper();
    // Looking at the login page opens no session.
    let first = client.get(app.url("/operator/login")).send().await.unwrap();
    let refused = login(&app, &client, "guess").await;
    assert_eq!(refused.status(), 401);
    assert!(refused.text().await.unwrap().contains("Wrong password"));
    assert_eq!(
        client
            .get(app.url("/operator"))
            .send()
            .await
            .unwrap()
            .status(),
        303
    );

    let session_cookie = |response: &reqwest::Response| {
        response
            .headers()
            .get_all("set-cookie")
            .iter()
            .map(|c| c.to_str().unwrap().to_owned())
            .find(|c| c.starts_with("once_operator="))
            .map(|c| c.split(';').next().unwrap().to_owned())
    };
    assert_eq!(
        session_cookie(&first),
        None,
        "no session before the password"
    );
    let accepted = login(&app, &client, PASSWORD).await;
    let after = session_cookie(&accepted).expect("a session cookie at login");
    assert_eq!(accepted.status(), 303);
    // A session this browser holds already never survives a login (no fixation).
    let again = login(&app, &client, PASSWORD).await;
    assert_ne!(
        session_cookie(&again),
        Some(after),
        "logging in issues a new session id"
    );
    assert_eq!(accepted.headers()["location"], "/operator");
    let overview = app.get_text(&client, "/operator").await;
    assert!(overview.contains("Outbox: unpublished events"));
    assert!(overview.contains("Dead letters waiting") && overview.contains("Last reconciliation"));
}

#[tokio::test]
async fn a_login_or_an_action_without_the_forms_token_is_refused() {
    let app = spawn_console().await;
    let client = shopper();
    app.open_session(&client).await;
    app.get_text(&client, "/operator/login").await;
    let forged = |accept: &'static str| {
        client
            .post(app.url("/operator/login"))
            .header("accept", accept)
            .form(&[("csrf", "forged"), ("password", PASSWORD)])
            .send()
    };
    let page = forged("text/html").await.unwrap();
    assert_eq!(page.status(), 403);
    assert!(page
        .text()
        .await
        .unwrap()
        .contains("That login form had expired"));
    // A program is told in problem+json (seen red: the form's HTML, which the property test
    // of every form route, fn_properties, found).
    assert_problem(forged("*/*").await.unwrap(), 403, "cross-site-request").await;

    let (client, _csrf) = operator(&app).await;
    let letter = a_dead_letter(&app).await;
    let actions = [
        "/operator/reconciliation/run".to_owned(),
        format!("/operator/dead-letters/{letter}/retry"),
        format!("/operator/dead-letters/{letter}/discard"),
        format!("/operator/findings/{}/resolve", uuid::Uuid::new_v4()),
        format!("/operator/findings/{}/refund", uuid::Uuid::new_v4()),
        "/operator/logout".to_owned(),
    ];
    for action in &actions {
        for form in [vec![("csrf", "forged")], vec![]] {
            let response = client
                .post(app.url(action))
                .form(&form)
                .send()
                .await
                .unwrap();
            assert!(
                matches!(response.status().as_u16(), 403 | 422),
                "{action}: {}",
                response.status()
            );
        }
    }
    assert_eq!(
        app.count_where("dead_letters", "status = 'dead'").await,
        1,
        "nothing was done"
    );
    assert_eq!(app.count("reconcile_runs").await, 0);
    assert_eq!(
        client
            .get(app.url("/operator"))
            .send()
            .await
            .unwrap()
            .status(),
        200,
        "still logged in"
    );
}

#[tokio::test]
async fn the_actions_run_the_reconciler_and_handle_dead_letters() {
    let app = spawn_console().await;
    let (client, csrf) = operator(&app).await;
    let letter = a_dead_letter(&app).await;
    let discard = client
        .post(app.url(&format!("/operator/dead-letters/{letter}/discard")))
        .form(&[("csrf", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(discard.status(), 303);
    assert_eq!(
        app.count_where("dead_letters", "status = 'discarded'")
            .await,
        1
    );

    // The provider is unreachable in this app: the run is recorded as failed, and said so.
    let run = act(&app, &client, "/operator/reconciliation/run", &csrf).await;
    assert_eq!(run.status(), 303);
    let page = app
        .get_text(&client, run.headers()["location"].to_str().unwrap())
        .await;
    assert!(page.contains("The run failed"), "{page}");
    assert_eq!(app.count("reconcile_runs").await, 1);

    assert_eq!(
        act(&app, &client, "/operator/logout", &csrf).await.status(),
        303
    );
    assert_eq!(
        client
            .get(app.url("/operator"))
            .send()
            .await
            .unwrap()
            .status(),
        303
    );
}

#[tokio::test]
async fn a_notice_in_the_address_is_never_shown() {
    let app = spawn_console().await;
    let forged = "Refunds are disabled: pay customers back at elsewhere.test";
    let query = format!("?notice={}", app::query::encode(forged));
    let login = app
        .get_text(&shopper(), &format!("/operator/login{query}"))
        .await;
    assert!(!login.contains("elsewhere.test"), "{login}");
    let (client, csrf) = operator(&app).await;
    for page in PAGES {
        let html = app.get_text(&client, &format!("{page}{query}")).await;
        assert!(!html.contains("elsewhere.test"), "{page}");
    }
    // An action's own notice still reaches its page, once.
    let run = act(&app, &client, "/operator/reconciliation/run", &csrf).await;
    assert_eq!(run.headers()["location"], "/operator/reconciliation");
    let page = app.get_text(&client, "/operator/reconciliation").await;
    assert!(
        page.contains("Run finished") || page.contains("The run failed"),
        "{page}"
    );
    let again = app.get_text(&client, "/operator/reconciliation").await;
    assert!(!again.contains("Run finished") && !again.contains("The run failed"));
}

#[tokio::test]
async fn a_logout_ends_the_session_for_every_copy_of_its_cookie() {
    let app = spawn_console().await;
    let client = shopper();
    let login = login(&app, &client, PASSWORD).await;
    let cookie = login
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|c| c.to_str().unwrap().split(';').next().unwrap().to_owned())
        .find(|c| c.starts_with("once_operator="))
        .expect("the operator's cookie");
    let copy = |path: &str| {
        reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap()
            .get(app.url(path))
            .header("cookie", cookie.clone())
            .send()
    };
    assert_eq!(copy("/operator").await.unwrap().status(), 200);
    let csrf = csrf_in(&app.get_text(&client, "/operator").await);
    assert_eq!(
        act(&app, &client, "/operator/logout", &csrf).await.status(),
        303
    );
    assert_eq!(
        copy("/operator").await.unwrap().status(),
        303,
        "a copied cookie names nothing"
    );
}

/// Looking at the login page, or guessing wrong, stores nothing: an operator session is
/// written by the right password only (seen red: every cookie-less view of the login page
/// stored a row), and the sessions whose time ran out are forgotten.
#[tokio::test]
async fn only_a_login_stores_an_operator_session_and_ended_ones_are_forgotten() {
    let app = spawn_console().await;
    let sessions = "tower_sessions.operator_session";
    for _ in 0..20 {
        let visitor = reqwest::Client::new();
        let page = visitor
            .get(app.url("/operator/login"))
            .send()
            .await
            .unwrap();
        assert_eq!(page.status(), 200);
    }
    let guesser = shopper();
    for _ in 0..2 {
        assert_eq!(login(&app, &guesser, "a guess").await.status(), 401);
    }
    assert_eq!(app.count(sessions).await, 0);

    let (operator, _) = operator(&app).await;
    assert_eq!(app.count(sessions).await, 1);
    sqlx::query(
        "INSERT INTO tower_sessions.operator_session (id, data, expiry_date)
         VALUES ('ended', '\\x80', now() - interval '1 minute')",
    )
    .execute(&app.db)
    .await
    .unwrap();
    let forgotten = server::session::forget_ended_operator_sessions(&app.db)
        .await
        .unwrap();
    assert_eq!(forgotten, 1);
    assert_eq!(app.count(sessions).await, 1);
    let overview = operator.get(app.url("/operator")).send().await.unwrap();
    assert_eq!(overview.status(), 200, "the live session stays");
}

/// Two login forms open at once (a second tab, a page the back button shows again): each is
/// good, since both carry the token the browser holds (seen red when every view made a new
/// one: the first tab's login was refused 403). A form the browser was not given gets the
/// form again, with a token that works.
#[tokio::test]
async fn a_second_login_tab_leaves_the_first_one_good() {
    let app = spawn_console().await;
    let client = shopper();
    let first_tab = app.get_text(&client, "/operator/login").await;
    let _second_tab = app.get_text(&client, "/operator/login").await;
    let login = client
        .post(app.url("/operator/login"))
        .form(&[
            ("csrf", csrf_in(&first_tab).as_str()),
            ("password", PASSWORD),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(login.status(), 303);

    // A browser's form post (it asks for a page).
    let stranger = shopper();
    let refused = stranger
        .post(app.url("/operator/login"))
        .header("accept", "text/html")
        .form(&[("csrf", "not-given"), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let again = refused.text().await.unwrap();
    assert!(again.contains("expired"), "{again}");
    let retried = stranger
        .post(app.url("/operator/login"))
        .form(&[("csrf", csrf_in(&again).as_str()), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(retried.status(), 303);
}
