//! `IdempotencyKey`: parsed once at the boundary, so everything after it holds a valid key.

use std::fmt;

/// The longest key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 255;

/// A valid `Idempotency-Key`: 1 to 255 visible ASCII characters.
///
/// ```
/// use once_core::{IdempotencyKey, KeyError};
///
/// let bare = IdempotencyKey::parse("8e03978e-40d5").unwrap();
/// assert_eq!(IdempotencyKey::parse("\"8e03978e-40d5\"").unwrap(), bare);
/// assert_eq!(IdempotencyKey::parse("with space"), Err(KeyError::NotVisibleAscii));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdempotencyKey(String);

/// Why a request's Idempotency-Key is not a key.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// Nothing between the quotes, or an empty header.
    #[error("the Idempotency-Key is empty")]
    Empty,
    /// More than [`MAX_KEY_LEN`] bytes.
    #[error("the Idempotency-Key is longer than 255 characters")]
    TooLong,
    /// A space, a control character or a byte outside ASCII.
    #[error("the Idempotency-Key may contain only visible ASCII characters")]
    NotVisibleAscii,
    /// An opening quote without a well-formed structured-field string.
    #[error("the Idempotency-Key starts with a quote but is not a valid quoted string")]
    BadQuoting,
    /// The request names more than one key: which it meant is not for the server to guess.
    #[error("the request has more than one Idempotency-Key header")]
    Repeated,
}

impl IdempotencyKey {
    /// Accepts the IETF draft's structured-field form (a quoted string, `"abc"`, with `\"`
    /// and `\\` escapes) and Stripe's bare form (`abc`); both name the same key.
    pub fn parse(raw: &str) -> Result<Self, KeyError> {
        let key = match raw.starts_with('"') {
            true => unquote(raw).ok_or(KeyError::BadQuoting)?,
            false => raw.to_owned(),
        };
        if key.is_empty() {
            return Err(KeyError::Empty);
        }
        if key.len() > MAX_KEY_LEN {
            return Err(KeyError::TooLong);
        }
        if !key.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(KeyError::NotVisibleAscii);
        }
        Ok(Self(key))
    }

    /// The key itself (unquoted).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The content of an RFC 8941 sf-string, or `None` if `raw` is not one.
fn unquote(raw: &str) -> Option<String> {
    let inner = raw.strip_prefix('"')?.strip_suffix('"')?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.push(chars.next().filter(|n| *n == '"' || *n == '\\')?),
            '"' => return None,
            c => out.push(c),
        }
    }
    Some(out)
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_and_quoted_forms_name_the_same_key() {
        let bare = IdempotencyKey::parse("8e03978e-40d5-43e8-bc93-6894a57f9324").unwrap();
        let quoted = IdempotencyKey::parse("\"8e03978e-40d5-43e8-bc93-6894a57f9324\"").unwrap();
        assert_eq!(bare, quoted);
    }

    #[test]
    fn quoted_form_understands_escapes() {
        assert_eq!(
            IdempotencyKey::parse(r#""a\"b\\c""#).unwrap().as_str(),
            r#"a"b\c"#
        );
    }

    #[test]
    fn a_broken_quoted_string_is_rejected() {
        for bad in ["\"open", "\"", r#""a"b""#, r#""bad\escape""#] {
            assert_eq!(
                IdempotencyKey::parse(bad),
                Err(KeyError::BadQuoting),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn empty_keys_are_rejected_in_both_forms() {
        assert_eq!(IdempotencyKey::parse(""), Err(KeyError::Empty));
        assert_eq!(IdempotencyKey::parse("\"\""), Err(KeyError::Empty));
    }

    #[test]
    fn length_limit_is_255() {
        assert!(IdempotencyKey::parse(&"k".repeat(255)).is_ok());
        assert_eq!(
            IdempotencyKey::parse(&"k".repeat(256)),
            Err(KeyError::TooLong)
        );
    }

    #[test]
    fn only_visible_ascii_is_accepted() {
        for bad in ["with space", "tab\there", "nl\n", "ctl\u{1}", "é", "\u{7f}"] {
            assert_eq!(
                IdempotencyKey::parse(bad),
                Err(KeyError::NotVisibleAscii),
                "{bad:?}"
            );
        }
        assert!(IdempotencyKey::parse("A-z_0.9~!#$%&*+/=?@^`|").is_ok());
    }
}
