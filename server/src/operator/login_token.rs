//! The login form's CSRF token, kept in a cookie of its own instead of a session: a visitor
//! who only opens the login page, or guesses wrong, stores nothing; an operator session is
//! written when the right password is given (docs/design.md, "The operator console"). The
//! token travels twice, in the cookie and in the form: a page on another site can make the
//! browser send the cookie, but cannot read it to write it into its form (and cross-site
//! posts are refused before this anyway, `crate::origin`).

use axum::http::{HeaderMap, HeaderValue};
use subtle::ConstantTimeEq;

use crate::credentials::random_secret;

const COOKIE: &str = "once_operator_login";
/// How long a login form may be left open before it is sent.
const KEPT_SECS: u32 = 3600;

/// The length of a token, in alphanumeric characters.
const TOKEN_LEN: usize = 32;

/// The token for a login form, and the `Set-Cookie` that keeps it (an hour more) for the
/// login: the one the browser holds already, so that a second tab's form, or one shown
/// again by the back button, stays good; else a new one.
pub fn issue(headers: &HeaderMap, https: bool) -> (String, HeaderValue) {
    let token = kept(headers)
        .filter(|kept| kept.len() == TOKEN_LEN && kept.bytes().all(|b| b.is_ascii_alphanumeric()))
        .map_or_else(|| random_secret(TOKEN_LEN), str::to_owned);
    let secure = if https { "; Secure" } else { "" };
    let cookie = format!(
        "{COOKIE}={token}; Path=/operator/login; Max-Age={KEPT_SECS}; HttpOnly; SameSite=Strict{secure}"
    );
    let cookie = HeaderValue::from_str(&cookie).expect("a token is made of URL-safe characters");
    (token, cookie)
}

/// The token the browser's cookie carries.
fn kept(headers: &HeaderMap) -> Option<&str> {
    super::cookies::value(headers, COOKIE)
}

/// Whether the form's token is the one its cookie carries.
pub fn matches(headers: &HeaderMap, given: &str) -> bool {
    match kept(headers) {
        Some(kept) if !kept.is_empty() => kept.as_bytes().ct_eq(given.as_bytes()).into(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::header;

    fn with_cookie(cookie: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::COOKIE, HeaderValue::from_str(cookie).unwrap());
        headers
    }

    #[test]
    fn only_the_token_its_cookie_carries_passes() {
        let (token, cookie) = issue(&HeaderMap::new(), true);
        let cookie = cookie.to_str().unwrap();
        assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"));
        assert!(cookie.ends_with("; Secure"));
        let sent = with_cookie(&format!("other=1; {COOKIE}={token}"));
        assert!(matches(&sent, &token));
        assert!(!matches(&sent, "forged"));
        assert!(!matches(&sent, ""));
        assert!(!matches(&HeaderMap::new(), &token), "no cookie, no login");
        assert!(!matches(&with_cookie(&format!("{COOKIE}=")), ""));
    }

    #[test]
    fn a_second_form_gets_the_token_the_browser_holds_and_a_made_up_one_is_replaced() {
        let (token, _) = issue(&HeaderMap::new(), false);
        let held = with_cookie(&format!("{COOKIE}={token}"));
        assert_eq!(issue(&held, false).0, token);
        let odd = with_cookie(&format!("{COOKIE}=short"));
        assert_ne!(issue(&odd, false).0, "short");
    }
}
