//! Which client sent a request, for the limits that count per client. The peer of the TCP
//! connection is the client, unless that peer is one of the configured trusted proxies
//! (`TRUSTED_PROXIES`): then the client is the address that proxy appended to
//! `X-Forwarded-For` (its rightmost entry that is not itself a trusted proxy). The header
//! is never read from anyone else, since any client can write one (docs/design.md,
//! "Hostile traffic").
//!
//! An address is always taken in its canonical form: a dual-stack listener (`[::]:3000`)
//! sees an IPv4 peer as `::ffff:a.b.c.d`, which is that IPv4 address, not an IPv6 client
//! (whose /64 would put every IPv4 client in one bucket).

use std::net::{IpAddr, SocketAddr};

use axum::{
    extract::{ConnectInfo, FromRef, FromRequestParts},
    http::{request::Parts, Extensions, HeaderMap},
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
                    .map(|addr| addr.to_canonical())
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
    let peer = extensions
        .get::<ConnectInfo<SocketAddr>>()?
        .0
        .ip()
        .to_canonical();
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
        .map(|addr| addr.to_canonical())
}

/// The bucket a client address counts in, for every per-client limit (requests, logins,
/// connections): an IPv4 address, or an IPv6 address's /64 (one subscriber's network; its
/// 2^64 addresses are not 2^64 clients).
pub fn bucket_of(client: IpAddr) -> IpAddr {
    match client.to_canonical() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & (u128::MAX << 64);
            IpAddr::V6(prefix.into())
        }
    }
}

/// The bucket of the request's client, written out (`203.0.113.7`, `2001:db8:1:2::`), for
/// the limits the database counts per client; `None` when the server has no connection
/// info (a test's router called directly).
pub struct ClientBucket(pub Option<String>);

impl<S> FromRequestParts<S> for ClientBucket
where
    S: Send + Sync,
    TrustedProxies: FromRef<S>,
{
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let trusted = TrustedProxies::from_ref(state);
        let client = client_addr(&parts.headers, &parts.extensions, &trusted);
        Ok(Self(client.map(|ip| bucket_of(ip).to_string())))
    }
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
    fn an_ipv4_peer_of_a_dual_stack_listener_is_that_ipv4_client() {
        // Five IPv4 clients, as `[::]:3000` sees them: five buckets, not `::`.
        let buckets: std::collections::HashSet<IpAddr> = (1..=5)
            .map(|n| {
                let (h, e) = request_from(&format!("::ffff:192.0.2.{n}"), None);
                bucket_of(client_addr(&h, &e, &TrustedProxies::default()).unwrap())
            })
            .collect();
        assert_eq!(buckets.len(), 5);
        assert!(buckets.contains(&addr("192.0.2.1").unwrap()));
        // A proxy configured either way is recognised on either listener, and the client it
        // names in either spelling is the same client.
        for configured in ["127.0.0.1", "::ffff:127.0.0.1"] {
            let trusted = TrustedProxies::parse(configured).unwrap();
            for peer in ["127.0.0.1", "::ffff:127.0.0.1"] {
                for named in ["198.51.100.7", "::ffff:198.51.100.7"] {
                    let (h, e) = request_from(peer, Some(named));
                    assert_eq!(client_addr(&h, &e, &trusted), addr("198.51.100.7"));
                }
            }
        }
    }

    #[test]
    fn an_ipv6_client_counts_by_its_64() {
        assert_eq!(
            bucket_of("2001:db8:1:2:aaaa::1".parse().unwrap()),
            "2001:db8:1:2::".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            bucket_of("::ffff:203.0.113.5".parse().unwrap()),
            "203.0.113.5".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn without_connection_info_there_is_no_client_address() {
        let headers = HeaderMap::new();
        let none = client_addr(&headers, &Extensions::new(), &TrustedProxies::default());
        assert_eq!(none, None);
        assert!(TrustedProxies::parse("127.0.0.1,nonsense").is_err());
    }
}
