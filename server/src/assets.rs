//! The built site's script, bundle and stylesheet under `/pkg`, sent compressed ahead of time:
//! the release build writes a brotli and a gzip copy of every file (`cargo leptos build
//! --release --precompress`), and the copy the browser accepts is sent as it is, so no
//! request spends CPU compressing. A file without copies (a debug build) is sent plain.
//!
//! With content hashes in the names (`hash-files`), a name never changes its content: the
//! browser keeps the files for a year without asking again, and a new release is new names.
//! Without hashes, the browser asks each time whether its copy is current.

use std::path::Path;

use axum::{
    http::{header, HeaderValue, StatusCode},
    response::Response,
    Router,
};
use leptos::prelude::LeptosOptions;
use tower_http::services::ServeDir;

const IMMUTABLE: &str = "public, max-age=31536000, immutable";
const REVALIDATE: &str = "no-cache";

/// `/pkg/*` from the site's directory, each answer marked with how long it may be kept.
pub fn router<S: Clone + Send + Sync + 'static>(options: &LeptosOptions) -> Router<S> {
    let dir = Path::new(&*options.site_root).join(&*options.site_pkg_dir);
    let files = ServeDir::new(dir).precompressed_br().precompressed_gzip();
    let keep = if options.hash_files {
        IMMUTABLE
    } else {
        REVALIDATE
    };
    Router::new()
        .nest_service(&format!("/{}", options.site_pkg_dir), files)
        .layer(axum::middleware::map_response(move |response| {
            caching(response, keep)
        }))
}

/// A file found (or still current) may be kept as `keep` says, by a cache that tells the
/// encodings apart. A miss is left to `headers::protective`, which forbids keeping it.
async fn caching(mut response: Response, keep: &'static str) -> Response {
    let found = response.status().is_success() || response.status() == StatusCode::NOT_MODIFIED;
    if found {
        let headers = response.headers_mut();
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(keep));
        headers.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    }
    response
}
