//! The console cannot be brute-forced (issue 24): failed logins lock out their address and,
//! past a cap, every client, in the database (so every instance refuses); a locked-out
//! login is not checked at all; failures and lockouts are counted on `/metrics`, which
//! answers only to its token; the password may be configured as an argon2 hash.
//!
//! Every request of a test comes from 127.0.0.1; other addresses are counted through the
//! throttle itself.

use std::time::Duration;

use server::{
    config::LoginLimits,
    operator::throttle::{self, Admission},
};

use crate::helpers::*;
use crate::operator::{login, PASSWORD};

/// Limits for a test: `max` failures per address, `global` for every client, locks of
/// `lockout` each (the first; an address's next ones double).
fn limits(max: u32, global: u32, lockout: Duration) -> LoginLimits {
    LoginLimits {
        max_failures: max,
        window: Duration::from_secs(60),
        lockout,
        lockout_cap: Duration::from_secs(60),
        global_max_failures: global,
        global_window: Duration::from_secs(60),
        global_lockout: lockout,
    }
}

async fn spawn_guarded(limits: LoginLimits) -> TestApp {
    spawn_app_with(|config| {
        config.operator_password = Some(PASSWORD.into());
        config.login_limits = limits;
    })
    .await
}

fn retry_after(response: &reqwest::Response) -> u64 {
    response.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .expect("Retry-After in seconds")
}

/// Asserts `response` is the lockout's answer, and returns its Retry-After.
async fn assert_locked_out(response: reqwest::Response) -> u64 {
    assert_eq!(response.status(), 429);
    let wait = retry_after(&response);
    assert!(wait >= 1);
    let page = response.text().await.unwrap();
    assert!(
        page.contains("Too many failed logins") && page.contains("Try again in"),
        "{page}"
    );
    wait
}

/// Whether `client` reaches the console (a logged-in session).
async fn logged_in(app: &TestApp, client: &reqwest::Client) -> bool {
    let overview = client.get(app.url("/operator")).send().await.unwrap();
    overview.status() == 200
}

async fn fail(app: &TestApp, client: &reqwest::Client, times: usize) {
    for _ in 0..times {
        assert_eq!(login(app, client, "a guess").await.status(), 401);
    }
}

async fn locked_rows(app: &TestApp) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT client FROM operator_login_failures WHERE locked_until > now() ORDER BY client",
    )
    .fetch_all(&app.db)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_locked_out_address_is_refused_unchecked_by_every_instance_until_the_lock_ends() {
    let app = spawn_guarded(limits(3, 100, Duration::from_millis(1500))).await;
    let client = shopper();
    fail(&app, &client, 3).await;

    // The right password, during the lockout: not checked, so no one is logged in.
    assert_locked_out(login(&app, &client, PASSWORD).await).await;
    assert!(!logged_in(&app, &client).await);
    assert_eq!(
        locked_rows(&app).await,
        ["127.0.0.1"],
        "the lock is in the database"
    );

    // Another instance on the same database refuses too.
    let second = start(app.config.clone(), app.db_name.clone()).await;
    let wait = assert_locked_out(login(&second, &client, PASSWORD).await).await;
    assert!(!logged_in(&second, &client).await);

    tokio::time::sleep(Duration::from_secs(wait) + Duration::from_millis(200)).await;
    assert_eq!(login(&second, &client, PASSWORD).await.status(), 303);
    assert!(logged_in(&app, &client).await);
    assert_eq!(
        app.count_where("operator_login_failures", "client <> '*'")
            .await,
        0,
        "a successful login clears its address"
    );
}

/// A dual-stack listener sees IPv4 clients as `::ffff:a.b.c.d`: the lock is still the
/// guessing address's own, named as IPv4 (seen red: every IPv4 client was `::`).
#[tokio::test]
async fn on_a_dual_stack_listener_a_lockout_is_the_guessing_address_s_alone() {
    let app = spawn_app_with(|config| {
        dual_stack(config);
        config.operator_password = Some(PASSWORD.into());
        config.login_limits = limits(3, 100, Duration::from_secs(60));
    })
    .await;
    let (guesser, operator) = (shopper_from([127, 0, 0, 2]), shopper_from([127, 0, 0, 3]));
    fail(&app, &guesser, 3).await;
    assert_locked_out(login(&app, &guesser, PASSWORD).await).await;
    assert_eq!(locked_rows(&app).await, ["127.0.0.2"]);
    assert_eq!(login(&app, &operator, PASSWORD).await.status(), 303);
    assert!(logged_in(&app, &operator).await);
}

#[tokio::test]
async fn each_lockout_of_an_address_lasts_twice_the_one_before() {
    let app = spawn_guarded(limits(2, 100, Duration::from_secs(1))).await;
    let client = shopper();
    fail(&app, &client, 2).await;
    let first = assert_locked_out(login(&app, &client, PASSWORD).await).await;
    assert_eq!(first, 1);
    tokio::time::sleep(Duration::from_millis(1200)).await;
    // After the lock, the count starts again: two more tries, then twice as long a lock.
    fail(&app, &client, 2).await;
    let second = assert_locked_out(login(&app, &client, PASSWORD).await).await;
    assert_eq!(second, 2);
}

#[tokio::test]
async fn past_the_global_cap_every_client_is_refused_unchecked() {
    let limits = limits(100, 4, Duration::from_millis(1500));
    let app = spawn_guarded(limits).await;
    // Guesses spread over three addresses, one each: no address is near its own limit.
    for address in ["192.0.2.1", "192.0.2.2", "2001:db8::1"] {
        let admitted = throttle::admit(&app.db, address, &limits).await.unwrap();
        assert!(matches!(admitted, Admission::Checked(_)), "{address}");
    }
    let client = shopper();
    fail(&app, &client, 1).await;

    let wait = assert_locked_out(login(&app, &client, PASSWORD).await).await;
    assert!(!logged_in(&app, &client).await);
    let refused = throttle::admit(&app.db, "192.0.2.9", &limits)
        .await
        .unwrap();
    assert!(
        matches!(refused, Admission::Refused { .. }),
        "a new address too"
    );
    assert_eq!(locked_rows(&app).await, ["*"], "no address is locked");
    let counted: i32 = sqlx::query_scalar(
        "SELECT failures FROM operator_login_failures WHERE client = '127.0.0.1'",
    )
    .fetch_one(&app.db)
    .await
    .unwrap();
    assert_eq!(
        counted, 1,
        "an attempt refused for everyone is not held against its address"
    );

    tokio::time::sleep(Duration::from_secs(wait) + Duration::from_millis(200)).await;
    assert_eq!(login(&app, &client, PASSWORD).await.status(), 303);
    assert!(logged_in(&app, &client).await);
}

#[tokio::test]
async fn failures_and_lockouts_are_counted_on_metrics_once_each() {
    let app = spawn_guarded(limits(3, 100, Duration::from_secs(60))).await;
    assert_eq!(app.metric("once_operator_login_failures_total").await, 0);
    let client = shopper();
    fail(&app, &client, 3).await;
    for _ in 0..5 {
        assert_locked_out(login(&app, &client, "another guess").await).await;
    }
    assert_eq!(
        app.metric("once_operator_login_failures_total").await,
        3,
        "refused attempts were not checked, so not failures"
    );
    assert_eq!(app.metric("once_operator_login_lockouts_total").await, 1);
}

#[tokio::test]
async fn a_password_hash_lets_in_its_password_only() {
    let hash = server::credentials::hash_password("the hashed password").unwrap();
    let app = spawn_app_with(|config| {
        config.operator_password = None;
        config.operator_password_hash = Some(hash);
    })
    .await;
    let client = shopper();
    for wrong in ["the hashed passwor", "", PASSWORD] {
        assert_eq!(login(&app, &client, wrong).await.status(), 401, "{wrong}");
    }
    assert!(!logged_in(&app, &client).await);
    assert_eq!(
        login(&app, &client, "the hashed password").await.status(),
        303
    );
    assert!(logged_in(&app, &client).await);
}

#[tokio::test]
async fn metrics_answer_only_to_their_token() {
    let app = spawn_app().await;
    let anonymous = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(anonymous.headers()["www-authenticate"], "Bearer");
    assert_problem(anonymous, 401, "metrics-token-invalid").await;
    for header in [
        "Bearer not-the-metrics-token".to_owned(),
        format!("Basic {TEST_METRICS_TOKEN}"),
        format!("Bearer {TEST_METRICS_TOKEN}x"),
    ] {
        let wrong = app
            .client
            .get(app.url("/metrics"))
            .header("authorization", header.as_str())
            .send()
            .await
            .unwrap();
        assert_problem(wrong, 401, "metrics-token-invalid").await;
    }
    let text = app.metrics_text().await;
    assert!(
        text.contains("once_operator_login_failures_total 0\n"),
        "{text}"
    );
}

#[tokio::test]
async fn metrics_are_not_public_when_no_token_is_configured() {
    // The server makes a token of its own and prints it; no request without it is served.
    let app = spawn_app_with(|config| config.metrics_token = None).await;
    let anonymous = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_problem(anonymous, 401, "metrics-token-invalid").await;
}

/// The login of `client` with `cookies` of its own added to the login form's: a browser
/// with whatever cookie it likes.
async fn login_with_cookie(app: &TestApp, cookie: &str) -> reqwest::Response {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    login_with_cookie_from(app, &client, cookie, PASSWORD).await
}

/// A browser the operator logged in from gets in with the right password while guesses from
/// many addresses hold every other login locked; a new browser, or one with a made-up
/// secret, is refused unchecked as before; and guessing from the known browser is still
/// counted, under that browser (seen red without the browser's own count: the operator got
/// 429 with everyone else).
#[tokio::test]
async fn a_browser_the_operator_logged_in_from_gets_in_through_the_global_lock() {
    let app = spawn_guarded(limits(2, 4, Duration::from_secs(60))).await;
    let operator = shopper();
    let first = login(&app, &operator, PASSWORD).await;
    assert_eq!(first.status(), 303);
    let first_secret = browser_cookie(&first);
    assert_eq!(app.count("operator_browsers").await, 1);

    // The operator's login counted for every client too: three guesses reach the cap of 4.
    for n in 2..=4 {
        fail(&app, &shopper_from([127, 0, 0, n]), 1).await;
    }
    assert_locked_out(login(&app, &shopper_from([127, 0, 0, 9]), PASSWORD).await).await;
    let made_up = format!("once_operator_browser={}", "x".repeat(43));
    assert_eq!(login_with_cookie(&app, &made_up).await.status(), 429);

    assert_eq!(login(&app, &operator, PASSWORD).await.status(), 303);
    assert!(logged_in(&app, &operator).await);
    assert_eq!(app.count("operator_browsers").await, 1, "known already");
    // Its secret was renewed by that login: a copy of the old cookie is no browser now.
    assert_eq!(login_with_cookie(&app, &first_secret).await.status(), 429);

    fail(&app, &operator, 2).await;
    assert_locked_out(login(&app, &operator, PASSWORD).await).await;
    assert_eq!(
        app.count_where("operator_login_failures", "client LIKE 'browser:%'")
            .await,
        1,
        "the browser's own lock"
    );
}

/// A browser the operator never used gets in through the global lock by a link made on the
/// server (`server operator-browser`); the password is still needed. A made-up link (seen
/// red when any secret was handed out: the operator's own cookie would be replaced), an
/// expired one and one a login has used hand out nothing.
#[tokio::test]
async fn a_link_made_on_the_server_lets_a_new_browser_in_through_the_global_lock() {
    let app = spawn_guarded(limits(2, 2, Duration::from_secs(60))).await;
    fail(&app, &shopper_from([127, 0, 0, 2]), 1).await;
    fail(&app, &shopper_from([127, 0, 0, 3]), 1).await;
    let operator = shopper();
    assert_locked_out(login(&app, &operator, PASSWORD).await).await;

    let link = |secret: &str| app.url(&format!("/operator/login?browser={secret}"));
    let made_up = operator.get(link(&"x".repeat(43))).send().await.unwrap();
    assert_eq!(hands_out(&made_up), None);
    let page = made_up.text().await.unwrap();
    assert!(page.contains("That link lets no browser in"), "{page}");
    let secret = server::operator::enrol_browser(&app.db, &app.config)
        .await
        .unwrap();
    let page = operator.get(link(&secret)).send().await.unwrap();
    assert_eq!(hands_out(&page), None, "fetching the page takes nothing");
    assert!(page.text().await.unwrap().contains("Let this browser in"));
    let opened = take_link(&app, &operator, &secret).await;
    assert_eq!(opened.status(), 303);
    assert_eq!(
        opened.headers()["location"],
        "/operator/login",
        "the secret leaves the address"
    );
    let own = hands_out(&opened).expect("the browser is let in");
    assert_ne!(
        own,
        format!("once_operator_browser={secret}"),
        "a secret of its own"
    );
    assert_eq!(login(&app, &operator, PASSWORD).await.status(), 303);
    assert!(logged_in(&app, &operator).await);
    assert_eq!(
        hands_out(&shopper().get(link(&secret)).send().await.unwrap()),
        None,
        "used"
    );

    let late = server::operator::enrol_browser(&app.db, &app.config)
        .await
        .unwrap();
    sqlx::query("UPDATE operator_browsers SET unused_until = now() WHERE unused_until IS NOT NULL")
        .execute(&app.db)
        .await
        .unwrap();
    let stranger = shopper();
    assert_eq!(
        hands_out(&stranger.get(link(&late)).send().await.unwrap()),
        None,
        "expired"
    );
    assert_locked_out(login(&app, &stranger, PASSWORD).await).await;
    assert_eq!(
        login(&app, &operator, PASSWORD).await.status(),
        303,
        "the browser the link let in is a browser like any other since its login"
    );
    server::operator::forget_unused_browsers(&app.db)
        .await
        .unwrap();
    assert_eq!(
        app.count("operator_browsers").await,
        1,
        "the expired link is forgotten"
    );
}

/// A link that leaked lets in one browser only. Before anyone takes it, its secret set as a
/// cookie by hand is no browser; fetching its page (a link preview) takes nothing. Taken
/// by the operator, a second browser from another address gets nothing, and its guesses
/// are its address's: they lock that address out, never the operator's browser. Taken by
/// someone else first, the operator is told so. (Seen red when the link handed out its own
/// secret: the second browser got the same cookie and its guesses counted under the
/// operator's browser.)
#[tokio::test]
async fn a_leaked_link_lets_in_one_browser_and_its_guesses_never_lock_the_operator_out() {
    let app = spawn_guarded(limits(2, 100, Duration::from_secs(60))).await;
    let secret = server::operator::enrol_browser(&app.db, &app.config)
        .await
        .unwrap();
    let link = app.url(&format!("/operator/login?browser={secret}"));
    let thief = shopper_from([127, 0, 0, 5]);
    let forged = format!("once_operator_browser={secret}");
    let early = login_with_cookie_from(&app, &thief, &forged, "a-wrong-guess").await;
    assert_eq!(early.status(), 401);
    let preview = reqwest::Client::new().get(&link).send().await.unwrap();
    assert_eq!(hands_out(&preview), None, "a preview takes nothing");

    let operator = shopper();
    assert!(hands_out(&take_link(&app, &operator, &secret).await).is_some());
    let reload = operator.get(&link).send().await.unwrap();
    assert_eq!((reload.status().as_u16(), hands_out(&reload)), (303, None));
    let pressed_again = press_link(&app, &operator, &secret).await;
    assert_eq!(
        (pressed_again.status().as_u16(), hands_out(&pressed_again)),
        (303, None)
    );

    let second = take_link(&app, &thief, &secret).await;
    assert_eq!(hands_out(&second), None, "one browser only");
    assert!(second
        .text()
        .await
        .unwrap()
        .contains("another browser took it"));
    for _ in 0..4 {
        let guess = login_with_cookie_from(&app, &thief, &forged, "a-wrong-guess").await;
        assert!(matches!(guess.status().as_u16(), 401 | 429));
    }
    assert_locked_out(login(&app, &thief, PASSWORD).await).await;
    assert_eq!(
        app.count_where("operator_login_failures", "client LIKE 'browser:%'")
            .await,
        0,
        "no browser's count was spent"
    );
    assert_eq!(login(&app, &operator, PASSWORD).await.status(), 303);
    assert!(logged_in(&app, &operator).await);
    let after_login = operator.get(&link).send().await.unwrap();
    assert_eq!(
        after_login.status(),
        303,
        "its own browser, after its login too"
    );

    let taken = server::operator::enrol_browser(&app.db, &app.config)
        .await
        .unwrap();
    assert!(hands_out(&take_link(&app, &thief, &taken).await).is_some());
    let late = shopper()
        .get(app.url(&format!("/operator/login?browser={taken}")))
        .send()
        .await
        .unwrap();
    assert_eq!(hands_out(&late), None);
    assert!(late.text().await.unwrap().contains("someone else has it"));
}

/// Opens the link of `secret` in `client` and presses its button; the answer to the press.
async fn take_link(app: &TestApp, client: &reqwest::Client, secret: &str) -> reqwest::Response {
    let page = client
        .get(app.url(&format!("/operator/login?browser={secret}")))
        .send()
        .await
        .unwrap();
    let csrf = crate::operator::csrf_in(&page.text().await.unwrap());
    press(app, client, &csrf, secret).await
}

/// Presses the link's button again, with the login form's token `client` holds.
async fn press_link(app: &TestApp, client: &reqwest::Client, secret: &str) -> reqwest::Response {
    let page = client.get(app.url("/operator/login")).send().await.unwrap();
    let csrf = crate::operator::csrf_in(&page.text().await.unwrap());
    press(app, client, &csrf, secret).await
}

async fn press(
    app: &TestApp,
    client: &reqwest::Client,
    csrf: &str,
    secret: &str,
) -> reqwest::Response {
    client
        .post(app.url("/operator/login/link"))
        .form(&[("csrf", csrf), ("browser", secret)])
        .send()
        .await
        .unwrap()
}

/// A login from `client` with `cookie` added to the login form's and `password`.
async fn login_with_cookie_from(
    app: &TestApp,
    client: &reqwest::Client,
    cookie: &str,
    password: &str,
) -> reqwest::Response {
    let page = client.get(app.url("/operator/login")).send().await.unwrap();
    let token = page.headers()["set-cookie"].to_str().unwrap().to_owned();
    let token = token.split(';').next().unwrap().to_owned();
    let html = page.text().await.unwrap();
    client
        .post(app.url("/operator/login"))
        .header("cookie", format!("{token}; {cookie}"))
        .form(&[
            ("csrf", crate::operator::csrf_in(&html).as_str()),
            ("password", password),
        ])
        .send()
        .await
        .unwrap()
}

/// The browser secret an answer hands out, as a `name=value` cookie, if any.
fn hands_out(answer: &reqwest::Response) -> Option<String> {
    answer
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|c| c.to_str().unwrap().split(';').next().unwrap().to_owned())
        .find(|c| c.starts_with("once_operator_browser="))
}

/// The browser secret a login's answer gives, as a `name=value` cookie.
fn browser_cookie(answer: &reqwest::Response) -> String {
    hands_out(answer).expect("a browser secret")
}

/// Whoever knew the password holds at most ten browsers' shares of guesses: an eleventh
/// login forgets the longest unused (seen red without the bound: twelve rows); and a new
/// password forgets every browser (seen red when the secret alone was stored).
#[tokio::test]
async fn browsers_are_bounded_and_forgotten_with_the_password() {
    let app = spawn_guarded(limits(5, 100, Duration::from_secs(60))).await;
    let mut secrets = vec![];
    for _ in 0..12 {
        let answer = login(&app, &shopper(), PASSWORD).await;
        assert_eq!(answer.status(), 303);
        secrets.push(browser_cookie(&answer));
    }
    assert_eq!(app.count("operator_browsers").await, 10);
    // With ten browsers known, a link made on the server is still the newest, and taking it
    // lets a browser in (seen red when unused links went first: it was gone at once).
    let secret = server::operator::enrol_browser(&app.db, &app.config)
        .await
        .unwrap();
    let opened = take_link(&app, &shopper(), &secret).await;
    assert!(hands_out(&opened).is_some());
    assert_eq!(app.count("operator_browsers").await, 10);

    // The same database, the password changed; the global cap reached by one guess.
    let mut config = app.config.clone();
    config.operator_password = Some("a-new-operator-password".into());
    config.login_limits = limits(5, 1, Duration::from_secs(60));
    let changed = start(config, app.db_name.clone()).await;
    fail(&changed, &shopper_from([127, 0, 0, 7]), 1).await;
    let newest = secrets.last().unwrap();
    assert_eq!(login_with_cookie(&changed, newest).await.status(), 429);
}
