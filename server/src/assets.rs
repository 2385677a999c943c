//! The built site's script, bundle and stylesheet under `/pkg`, sent compressed ahead of time:
//! the release build writes a brotli and a gzip copy of every file (`cargo leptos build
//! --release --precompress --split`), and the copy the browser accepts is sent as it is, so
//! no request spends CPU compressing. A file without copies (a debug build) is sent plain.
//!
//! A file whose name carries the hash of its content never changes under that name: the
//! browser keeps it for a year without asking again, and a new release is new names. That is
//! checked, file by file, when the server starts, because the build does not always keep it:
//! with a split bundle, the script and the bundle are named before the name of the split
//! parts' loader is written into them, so a release that changes only a split part changes
//! them under their old names. Such a file, and every file of a build without hashed names,
//! is sent with `no-cache`: the browser asks each time whether its copy is current.

use std::{collections::HashSet, path::Path, sync::Arc};

use app::site_files::SiteFiles;
use axum::{
    extract::Request,
    http::{header, HeaderValue, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
    Router,
};
use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use leptos::prelude::LeptosOptions;
use md5::{Digest, Md5};
use tower_http::services::ServeDir;

const IMMUTABLE: &str = "public, max-age=31536000, immutable";
const REVALIDATE: &str = "no-cache";
/// Longer than any name the build writes; a longer one is a miss, not a file system error.
/// The file system's bound is 255 bytes, and the compressed copy that is looked for adds
/// its suffix (`.br`, `.gz`) to the name asked for.
const MAX_NAME: usize = 255 - ".br".len();

/// `/pkg/*` from the site's directory, each answer marked with how long it may be kept; the
/// files the pages link (`site`) are checked for first.
pub fn router<S: Clone + Send + Sync + 'static>(
    options: &LeptosOptions,
    site: &SiteFiles,
) -> Router<S> {
    let dir = Path::new(&*options.site_root).join(&*options.site_pkg_dir);
    let kept = Arc::new(if options.hash_files {
        named_by_content(&dir)
    } else {
        HashSet::new()
    });
    report_missing(options, site);
    let files = ServeDir::new(dir).precompressed_br().precompressed_gzip();
    Router::new()
        .nest_service(&format!("/{}", options.site_pkg_dir), files)
        .layer(axum::middleware::from_fn(move |request, next| {
            caching(kept.clone(), request, next)
        }))
        .route("/card-entry.js", axum::routing::get(card_entry))
}

/// The order page's script that mounts Stripe.js's card field (with Stripe only; see
/// `public/card-entry.js`). Small, and asked about each time: a release may change it.
async fn card_entry() -> Response {
    let headers = [
        (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
        (header::CACHE_CONTROL, REVALIDATE),
    ];
    (headers, include_str!("../../public/card-entry.js")).into_response()
}

/// Whether `path` (as the request spells it) could name a file of the site: not when a part
/// of it is too long for the file system, with the compressed copy's suffix, nor when it
/// holds a NUL. Such a path is a miss without asking the file system, which would fail on it
/// (a 500, and an ERROR line in the log).
pub fn could_name_a_file(path: &str) -> bool {
    let nul = path.to_ascii_lowercase().contains("%00");
    let too_long = path.split('/').any(|part| part.len() > MAX_NAME);
    !nul && !too_long && path.len() <= 4 * MAX_NAME
}

/// A file found (or still current) may be kept as its name allows, by a cache that tells the
/// encodings apart. A miss is left to `headers::protective`, which forbids keeping it.
async fn caching(kept: Arc<HashSet<String>>, request: Request, next: Next) -> Response {
    let path = request.uri().path();
    let name = path.rsplit('/').next().unwrap_or("");
    if !could_name_a_file(path) {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    }
    let keep = if kept.contains(name) {
        IMMUTABLE
    } else {
        REVALIDATE
    };
    let mut response = next.run(request).await;
    let found = response.status().is_success() || response.status() == StatusCode::NOT_MODIFIED;
    if found {
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(keep));
        headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    response
}

/// The names in `dir` of the form `stem.HASH.ext` whose HASH is the build's hash of the
/// file's content (MD5, base64url without padding, as cargo-leptos writes it). Only files
/// whose name has a part of that shape are read; their brotli and gzip copies never are (a
/// request names the file, and the copy sent shares its name's verdict).
fn named_by_content(dir: &Path) -> HashSet<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return HashSet::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| match name.rsplitn(3, '.').collect::<Vec<_>>()[..] {
            [_ext, hash, _stem] if hash.len() == HASH_LEN => std::fs::read(dir.join(name))
                .is_ok_and(|content| hash == URL_SAFE_NO_PAD.encode(Md5::digest(&content))),
            _ => false,
        })
        .collect()
}

/// An MD5 digest in base64url without padding.
const HASH_LEN: usize = 22;

/// Says so, loudly, when the site lacks a file the pages link, or its split manifest cannot
/// be read: the pages would come without their stylesheet, or nothing on them would hydrate.
/// (Tests run without a built site.)
fn report_missing(options: &LeptosOptions, site: &SiteFiles) {
    let problems = site.problems(options);
    if !problems.is_empty() {
        tracing::error!(
            ?problems,
            "the pages link files the site does not have: build it with `cargo leptos build \
             --release --precompress --split` and keep hash.txt beside the server binary"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    /// Every file of `dir` and below, with its text.
    fn texts(dir: &Path) -> Vec<(String, String)> {
        let mut found = vec![];
        for entry in std::fs::read_dir(dir)
            .expect("a source directory")
            .flatten()
        {
            let path = entry.path();
            if path.is_dir() {
                found.extend(texts(&path));
            } else if let Ok(text) = std::fs::read_to_string(&path) {
                found.push((path.display().to_string(), text));
            }
        }
        found
    }

    /// The start-up check covers what `SiteFiles` names; so every page and template must
    /// link the site's files through it, never by an address written by hand (the console's
    /// stylesheet once was, and its hashed build answered 404).
    #[test]
    fn no_page_or_template_names_a_site_file_by_hand() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let sources = [root.join("templates"), root.join("../app/src")];
        let by_hand: Vec<String> = sources
            .iter()
            .flat_map(|dir| texts(dir))
            // The one module that names them, whose tests spell out what it names.
            .filter(|(path, _)| !path.ends_with("site_files.rs"))
            .filter(|(_, text)| {
                ["\"/pkg/", "'/pkg/", "=/pkg/"]
                    .iter()
                    .any(|a| text.contains(a))
            })
            .map(|(path, _)| path)
            .collect();
        assert!(by_hand.is_empty(), "{by_hand:?} link a /pkg file by hand");
    }
}
