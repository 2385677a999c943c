//! Reading the console's own cookies (the login form's token, a known browser's secret),
//! which live outside the session.

use axum::http::{header, HeaderMap};

/// The value of the first cookie named `name` that the request carries.
pub(super) fn value<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find_map(|(cookie, value)| (cookie == name).then_some(value))
}
