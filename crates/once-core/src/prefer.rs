//! The `Prefer: wait=N` preference (RFC 7240, section 4.3) of a keyed request: a repeat that
//! finds its key's request still running may wait up to N seconds for its answer instead of
//! being told 409 at once (docs/protocol.md, "Waiting for the original").

use std::time::Duration;

/// The longest wait a client may ask for, in seconds; a server caps it lower.
const WAIT_MAX_SECS: u64 = 3600;

/// The `wait` a request's `Prefer` header values ask for, if any: the first `wait`
/// preference among them, its name in any case, its value a decimal number of seconds
/// (bare or quoted; a larger number than an hour counts as an hour). A `wait` whose value is
/// no such number is ignored, as RFC 7240 asks of a preference a server does not understand.
///
/// ```
/// use std::time::Duration;
/// use once_core::prefer::wait;
///
/// assert_eq!(wait(["respond-async, wait=5"]), Some(Duration::from_secs(5)));
/// assert_eq!(wait(["return=minimal", "Wait=\"2\""]), Some(Duration::from_secs(2)));
/// assert_eq!(wait(["wait=soon"]), None);
/// ```
pub fn wait<'a>(values: impl IntoIterator<Item = &'a str>) -> Option<Duration> {
    let mut preferences = values.into_iter().flat_map(preferences).map(|preference| {
        // A preference's own value comes before its parameters (`;`).
        let own = preference.split(';').next().unwrap_or_default();
        match own.split_once('=') {
            Some((name, value)) => (name.trim(), value.trim()),
            None => (own.trim(), ""),
        }
    });
    // Only the first `wait` counts (RFC 7240, section 2), even one without a value.
    let (_, value) = preferences.find(|(name, _)| name.eq_ignore_ascii_case("wait"))?;
    let value = value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value);
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs = value.parse::<u64>().unwrap_or(WAIT_MAX_SECS);
    Some(Duration::from_secs(secs.min(WAIT_MAX_SECS)))
}

/// The preferences of one `Prefer` value: split at its commas, except those inside a
/// quoted string (`foo="a, wait=3"` is one preference, not a wait).
fn preferences(value: &str) -> Vec<&str> {
    let (mut parts, mut start) = (Vec::new(), 0);
    let (mut quoted, mut escaped) = (false, false);
    for (at, c) in value.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&value[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    parts.push(&value[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(values: &[&str]) -> Option<u64> {
        wait(values.iter().copied()).map(|d| d.as_secs())
    }

    #[test]
    fn the_first_wait_among_the_preferences_is_taken() {
        assert_eq!(secs(&["wait=3"]), Some(3));
        assert_eq!(secs(&[" WAIT = 4 "]), Some(4));
        assert_eq!(secs(&["handling=lenient; x=1, wait=7;foo=bar"]), Some(7));
        assert_eq!(secs(&["return=minimal", "wait=1, wait=9"]), Some(1));
        assert_eq!(secs(&["wait=\"12\""]), Some(12));
        assert_eq!(secs(&["wait=0"]), Some(0));
    }

    #[test]
    fn a_wait_that_is_no_number_or_absent_is_none() {
        for values in [
            &[][..],
            &["respond-async"],
            &["wait"],
            &["wait="],
            &["wait=-1"],
            &["wait=1.5"],
            &["wait=\"\""],
            &["wait=1e3"],
            &["waiting=3"],
            &["foo=\"x, wait=3, y\""],
            &["foo=\"a \\\" , wait=3\""],
            &["wait, wait=3"],
        ] {
            assert_eq!(secs(values), None, "{values:?}");
        }
    }

    #[test]
    fn a_huge_wait_counts_as_the_longest() {
        assert_eq!(secs(&["wait=99999999999999999999999"]), Some(3600));
        assert_eq!(secs(&["wait=7200"]), Some(3600));
    }
}
