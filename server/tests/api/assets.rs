//! The built site's `/pkg` files: the copy compressed ahead of time that the browser accepts,
//! kept for a year when its name is its content's hash, revalidated when it is not (or names
//! carry no hashes), and a miss never kept.

use std::path::PathBuf;

use crate::helpers::{post_order, spawn_app_with, TestApp};

/// Named by its content, "raw bundle" (MD5, base64url without padding, as the build names).
const BUNDLE: &str = "once.H27bkvM0B3LMhnD2J2r3GQ.wasm";
/// Named like a hashed file, but the hash is not its content's: a file the build changed
/// after naming it.
const RENAMED: &str = "once.0123456789abcdefABCDEF.js";

/// A site directory with a bundle and its two copies, each with contents of its own, so an
/// answer's body tells which file was sent, and a file whose name lies.
fn site() -> PathBuf {
    let root = std::env::temp_dir().join(format!("once_site_{}", uuid::Uuid::new_v4().simple()));
    let pkg = root.join("pkg");
    std::fs::create_dir_all(&pkg).expect("site directory");
    for (suffix, contents) in [
        ("", "raw bundle"),
        (".br", "brotli copy"),
        (".gz", "gzip copy"),
    ] {
        std::fs::write(pkg.join(format!("{BUNDLE}{suffix}")), contents).expect("site file");
    }
    std::fs::write(pkg.join(RENAMED), "changed after it was named").expect("site file");
    root
}

/// The shop serving [`site`], with hashed names or not.
async fn serving_site(hashed_names: bool) -> (TestApp, PathBuf) {
    let root = site();
    let app = spawn_app_with(|config| {
        config.leptos.site_root = root.to_string_lossy().into();
        config.leptos.hash_files = hashed_names;
    })
    .await;
    (app, root)
}

async fn get(
    address: &str,
    path: &str,
    encodings: Option<&str>,
) -> (reqwest::StatusCode, reqwest::header::HeaderMap, String) {
    let mut request = reqwest::Client::new().get(format!("{address}{path}"));
    if let Some(accepted) = encodings {
        request = request.header("accept-encoding", accepted);
    }
    let response = request.send().await.expect("answer");
    let status = response.status();
    let headers = response.headers().clone();
    (status, headers, response.text().await.expect("body"))
}

fn header<'a>(headers: &'a reqwest::header::HeaderMap, name: &str) -> &'a str {
    headers.get(name).map_or("", |v| v.to_str().unwrap_or(""))
}

#[tokio::test]
async fn the_copy_the_browser_accepts_is_sent_and_kept_for_a_year_when_names_are_hashed() {
    let (app, root) = serving_site(true).await;
    let path = format!("/pkg/{BUNDLE}");
    for (accepted, encoding, body) in [
        (Some("gzip, deflate, br"), "br", "brotli copy"),
        (Some("gzip"), "gzip", "gzip copy"),
        (None, "", "raw bundle"),
    ] {
        let (status, headers, sent) = get(&app.address, &path, accepted).await;
        assert_eq!(status, 200, "{accepted:?}");
        assert_eq!(sent, body, "{accepted:?}");
        assert_eq!(
            header(&headers, "content-encoding"),
            encoding,
            "{accepted:?}"
        );
        assert_eq!(header(&headers, "content-type"), "application/wasm");
        assert_eq!(
            header(&headers, "cache-control"),
            "public, max-age=31536000, immutable"
        );
        assert_eq!(header(&headers, "vary"), "accept-encoding");
        // A file any cache may keep carries no cookie, and opens no session.
        assert!(headers.get("set-cookie").is_none(), "{accepted:?}");
    }
    // A file whose name is not its content's hash may change under it: asked again each time.
    let (status, headers, _) = get(&app.address, &format!("/pkg/{RENAMED}"), None).await;
    assert_eq!(status, 200);
    assert_eq!(header(&headers, "cache-control"), "no-cache");
    // A miss is not kept, or a release's file requested early would stay missing for a year;
    // nor is a name longer than any file's, which is a miss too, not a failure of ours.
    // A name the file system takes, but not with the compressed copy's suffix; a NUL.
    let long = format!("/pkg/{}.wasm", "a".repeat(300));
    let almost = format!("/pkg/{}", "a".repeat(253));
    let long_folder = format!("/pkg/{}/x.js", "a".repeat(300));
    for missing in [
        "/pkg/once.gone.wasm",
        &long,
        &long_folder,
        &almost,
        "/pkg/%00",
        "/pkg/a%00.js",
    ] {
        for encoding in ["br", "gzip"] {
            let (status, headers, _) = get(&app.address, missing, Some(encoding)).await;
            assert_eq!(status, 404, "{missing} {encoding}");
            assert_eq!(header(&headers, "cache-control"), "private, no-store");
            let head = reqwest::Client::new()
                .head(format!("{}{missing}", app.address))
                .header("accept-encoding", encoding)
                .send()
                .await
                .unwrap();
            assert_eq!(head.status(), 404, "HEAD {missing} {encoding}");
        }
    }
    std::fs::remove_dir_all(root).ok();
}

#[tokio::test]
async fn without_hashed_names_the_browser_asks_each_time() {
    let (app, root) = serving_site(false).await;
    let (status, headers, sent) = get(&app.address, &format!("/pkg/{BUNDLE}"), Some("br")).await;
    assert_eq!((status.as_u16(), sent.as_str()), (200, "brotli copy"));
    assert_eq!(header(&headers, "cache-control"), "no-cache");
    std::fs::remove_dir_all(root).ok();
}

/// A stylesheet named by its content's hash, as the release build names it.
const STYLESHEET: &str = "once.8OSgbXVGBOup6urZajJ5TQ.css";

/// The shop serving a hashed build whose `hash.txt` names [`STYLESHEET`], a script and a
/// bundle (all in the site), with the console on; one failed login locks its address.
async fn serving_hashed_build() -> (TestApp, PathBuf) {
    let root = site();
    let pkg = root.join("pkg");
    std::fs::write(pkg.join(STYLESHEET), "body { font-family: serif }").expect("stylesheet");
    std::fs::write(pkg.join("once.JS.js"), "// script").expect("script");
    std::fs::write(pkg.join("once.WASM.wasm"), "bundle").expect("bundle");
    let css = STYLESHEET.split('.').nth(1).unwrap();
    let hashes = root.join("hash.txt");
    std::fs::write(&hashes, format!("js: JS\nwasm: WASM\ncss: {css}\n")).expect("hash.txt");
    let app = spawn_app_with(|config| {
        config.leptos.site_root = root.to_string_lossy().into();
        config.leptos.hash_files = true;
        // An absolute name is read where it is, not beside the test binary.
        config.leptos.hash_file = hashes.to_string_lossy().into();
        config.operator_password = Some(crate::operator::PASSWORD.into());
        config.login_limits.max_failures = 1;
    })
    .await;
    (app, root)
}

/// Every address under /pkg a page's HTML names in an `href` or a `src`.
fn site_files_of(html: &str) -> Vec<String> {
    ["href=\"/pkg/", "src=\"/pkg/"]
        .iter()
        .flat_map(|attribute| html.split(attribute).skip(1))
        .map(|rest| format!("/pkg/{}", rest.split('"').next().unwrap()))
        .collect()
}

/// The page at `path` links the built stylesheet, and every file under /pkg it links is there.
async fn assert_links_resolve(app: &TestApp, client: &reqwest::Client, path: &str) {
    let html = app.get_text(client, path).await;
    assert_page_links_resolve(app, path, &html).await;
}

async fn assert_page_links_resolve(app: &TestApp, page: &str, html: &str) {
    let linked = site_files_of(html);
    let stylesheet = format!("/pkg/{STYLESHEET}");
    assert!(linked.contains(&stylesheet), "{page} links {linked:?}");
    for file in linked {
        let (status, _, _) = get(&app.address, &file, None).await;
        assert_eq!(status, 200, "{file}, linked by {page}");
    }
}

/// Every page of the shop and of the console links the stylesheet the build named, by one
/// source (seen red when the console wrote `/pkg/once.css` by hand), and every site file
/// each links is in the site.
#[tokio::test]
async fn every_shop_and_console_page_links_the_files_the_build_named() {
    let (app, root) = serving_hashed_build().await;
    let shopper = crate::helpers::shopper();
    app.open_session(&shopper).await;
    let order = post_order(
        &shopper,
        &app,
        Some("links-order"),
        r#"{"items":[{"sku":"MUG-001","quantity":1}],"email":"ada@example.com","shipping_address":{"name":"Ada Lovelace","line1":"1 Main Street","postal_code":"SW1Y 4JH","city":"London","country":"GB"}}"#,
    )
    .await;
    assert_eq!(order.status(), 201);
    let order: serde_json::Value = order.json().await.unwrap();
    let (id, number) = (
        order["id"].as_str().unwrap(),
        order["order_no"].as_str().unwrap(),
    );
    for page in [
        "/",
        "/checkout",
        "/orders",
        &format!("/orders/{id}"),
        "/no-such-page",
    ] {
        assert_links_resolve(&app, &shopper, page).await;
    }

    // The console before the login: the form, a wrong password (401), the lock (429).
    let guesser = crate::helpers::shopper_from([127, 0, 0, 5]);
    assert_links_resolve(&app, &guesser, "/operator/login").await;
    for expected in [401, 429] {
        let answer = crate::operator::login(&app, &guesser, "a guess").await;
        assert_eq!(answer.status(), expected);
        let html = answer.text().await.unwrap();
        assert_page_links_resolve(&app, &format!("the login's {expected}"), &html).await;
    }

    let (operator, _) = crate::operator::operator(&app).await;
    for page in [
        "/operator",
        "/operator/reconciliation",
        "/operator/dead-letters",
        "/operator/emails",
        "/operator/search?q=nothing",
        &format!("/operator/orders/{number}"),
        "/operator/orders/NO-SUCH-ORDER",
    ] {
        assert_links_resolve(&app, &operator, page).await;
    }
    std::fs::remove_dir_all(root).ok();
}

/// A path no file of the site could have (a part too long for the file system) is the 404
/// page, never looked up: no ERROR line in the log (seen red: the site's file lookup logged
/// "Failed to read file" for each such request).
#[tokio::test]
async fn a_path_no_file_could_have_is_the_404_page_and_logs_no_error() {
    let (app, root) = serving_site(false).await;
    // From here: the start-up check's line about this made-up site is not what is asked.
    let (logs, _hearing) = crate::helpers::Logs::capture();
    let long = format!("/{}", "a".repeat(300));
    let long_folder = format!("/{}/x.svg", "b".repeat(300));
    for path in [long, long_folder] {
        let (status, _, page) = get(&app.address, &path, Some("br")).await;
        assert_eq!(status, 404, "{path}");
        assert!(page.contains("Page not found"), "{page}");
    }
    assert_eq!(logs.at(tracing::Level::ERROR), Vec::<String>::new());
    std::fs::remove_dir_all(root).ok();
}
