//! Which client sent a request, for the limits that count per client. The peer of the TCP
//! connection is the client, unless that peer is one of the configured trusted proxies
//! (`TRUSTED_PROXIES`): then the client is the address that proxy appended to
//! `X-Forwarded-For` (its rightmost entry that is not itself a trusted proxy). The header
//! is never read from anyone else, since any client can write one (docs/design.md,
//! "Hostile traffic").

use std::net::{IpAddr, SocketAddr};

use axum::{
    extract::ConnectInfo,
    http::{Extensions, HeaderMap},
};

const FORWARDED_FOR: &str = "x-forwarded-for";

/// The proxies whose `X-Forwarded-For` is believed; none unless configured.
#[derive(Clone, Debug, Default)]
pub struct TrustedProxies(pub Vec<IpAddr>);

impl TrustedProxies {
    /// Parses `TRUSTED_PROXIES`: addresses separated by commas.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.parse::<IpAddr>()
                    .map_err(|_| anyhow::anyhow!("TRUSTED_PROXIES: {s:?} is not an IP address"))
            })
            .collect::<anyhow::Result<_>>()
            .map(Self)
    }

    fn trusts(&self, addr: &IpAddr) -> bool {
        self.0.contains(addr)
    }
}

/// The client's address; `None` when the server was started without connection info (a
/// test's router called directly), so that nothing is counted for an unknown peer.
pub fn client_addr(
    headers: &HeaderMap,
    extensions: &Extensions,
    trusted: &TrustedProxies,
) -> Option<IpAddr> {
    let peer = extensions.get::<ConnectInfo<SocketAddr>>()?.0.ip();
    if !trusted.trusts(&peer) {
        return Some(peer);
    }
    let forwarded = headers
        .get_all(FORWARDED_FOR)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect::<Vec<_>>();
    let client = forwarded
        .iter()
        .rev()
        .map(|entry| parse_entry(entry))
        .find(|addr| addr.is_none_or(|a| !trusted.trusts(&a)));
    // An entry that does not parse ends the walk: what lies left of it is the client's own
    // writing. The proxy itself stands for such a request.
    Some(client.flatten().unwrap_or(peer))
}

/// An `X-Forwarded-For` entry: an address, possibly with a port (`192.0.2.1:4711`,
/// `[2001:db8::1]:4711`) or in brackets, as some proxies write them.
fn parse_entry(entry: &str) -> Option<IpAddr> {
    entry
        .parse::<IpAddr>()
        .ok()
        .or_else(|| entry.parse::<SocketAddr>().ok().map(|s| s.ip()))
        .or_else(|| entry.strip_prefix('[')?.strip_suffix(']')?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn request_from(peer: &str, forwarded: Option<&str>) -> (HeaderMap, Extensions) {
        let mut headers = HeaderMap::new();
        if let Some(f) = forwarded {
            headers.insert(FORWARDED_FOR, HeaderValue::from_str(f).unwrap());
        }
        let mut extensions = Extensions::new();
        extensions.insert(ConnectInfo(SocketAddr::new(peer.parse().unwrap(), 4000)));
        (headers, extensions)
    }

    fn addr(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn a_client_cannot_name_itself_without_a_trusted_proxy() {
        let (h, e) = request_from("203.0.113.9", Some("10.0.0.1"));
        assert_eq!(
            client_addr(&h, &e, &TrustedProxies::default()),
            addr("203.0.113.9")
        );
    }

    #[test]
    fn behind_a_trusted_proxy_the_rightmost_untrusted_entry_is_the_client() {
        let trusted = TrustedProxies::parse("127.0.0.1, 10.0.0.2").unwrap();
        // The client wrote "1.1.1.1" itself; the proxies appended the rest.
        let (h, e) = request_from("127.0.0.1", Some("1.1.1.1, 198.51.100.7, 10.0.0.2"));
        assert_eq!(client_addr(&h, &e, &trusted), addr("198.51.100.7"));
        let (h, e) = request_from("127.0.0.1", None);
        assert_eq!(client_addr(&h, &e, &trusted), addr("127.0.0.1"));
        let (h, e) = request_from("127.0.0.1", Some("not-an-address"));
        assert_eq!(client_addr(&h, &e, &trusted), addr("127.0.0.1"));
        let (h, e) = request_from("127.0.0.1", Some("198.51.100.7:4711"));
        assert_eq!(client_addr(&h, &e, &trusted), addr("198.51.100.7"));
        let (h, e) = request_from("127.0.0.1", Some("[2001:db8::1]:4711"));
        assert_eq!(client_addr(&h, &e, &trusted), addr("2001:db8::1"));
        let (h, e) = request_from("127.0.0.1", Some("[2001:db8::2]"));
        assert_eq!(client_addr(&h, &e, &trusted), addr("2001:db8::2"));
    }

    #[test]
    fn without_connection_info_there_is_no_client_address() {
        let headers = HeaderMap::new();
        let none = client_addr(&headers, &Extensions::new(), &TrustedProxies::default());
        assert_eq!(none, None);
        assert!(TrustedProxies::parse("127.0.0.1,nonsense").is_err());
    }
}
