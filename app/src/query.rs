//! Query strings, shared by the server's redirects and the pages.

/// Percent-encodes `text` for a query string value (RFC 3986 unreserved bytes pass).
pub fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn reserved_and_non_ascii_bytes_are_escaped() {
        assert_eq!(super::encode("a b;é~"), "a%20b%3B%C3%A9~");
    }
}
